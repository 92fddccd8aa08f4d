"""Base for SillyTavern preset models that read and write ST JSON without losing anything.

Must not: know any preset's fields (the subclasses in instruct.py declare them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from evacore.errors import ImportInvalid


class STPreset(BaseModel):
    """A preset whose fields carry SillyTavern's key names; unknown keys live in `extra`."""

    model_config = ConfigDict(extra="forbid")

    kind: ClassVar[str] = "preset"

    extra: dict[str, Any] = Field(default_factory=dict)
    """Keys SillyTavern (or another tool) wrote that this model has no field for."""

    _st_keys: list[str] | None = PrivateAttr(default=None)

    @classmethod
    def st_fields(cls) -> tuple[str, ...]:
        return tuple(name for name in cls.model_fields if name != "extra")

    @classmethod
    def _migrate(cls, data: dict[str, Any], keys: list[str]) -> None:
        """Rewrite legacy keys in place (data and key order); subclasses override."""

    @classmethod
    def from_st(cls, data: Mapping[str, Any]) -> Self:
        """Read a SillyTavern preset dict (any known shape); unknown keys go to `extra`."""
        if not isinstance(data, Mapping):
            raise ImportInvalid(f"a {cls.kind} preset must be a JSON object")
        work = dict(data)
        keys = list(work)
        cls._migrate(work, keys)
        fields = set(cls.st_fields())
        known = {k: v for k, v in work.items() if k in fields and v is not None}
        extra = {k: v for k, v in work.items() if k not in fields}
        try:
            preset = cls(**known, extra=extra)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise ImportInvalid(f"invalid {cls.kind} preset: {problems}") from exc
        preset._st_keys = keys
        return preset

    def to_st(self) -> dict[str, Any]:
        """The preset as SillyTavern JSON: the imported keys in their order, then changes."""
        fields = self.st_fields()
        if self._st_keys is None:
            out = {name: getattr(self, name) for name in fields}
            out.update(self.extra)
            return out
        out: dict[str, Any] = {}
        for key in self._st_keys:
            if key in fields:
                out[key] = getattr(self, key)
            elif key in self.extra:
                out[key] = self.extra[key]
        for name in fields:
            if name not in out and getattr(self, name) != type(self).model_fields[name].default:
                out[name] = getattr(self, name)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out
