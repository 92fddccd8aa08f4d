"""P6: one error tree; every code is unique and listed in docs/api.md."""

from __future__ import annotations

from pathlib import Path

from evacore import errors


def _all(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_all(sub))
    return out


def test_every_error_code_is_unique_and_documented() -> None:
    import importlib
    import pkgutil

    import evacore

    for mod in pkgutil.walk_packages(evacore.__path__, "evacore."):
        if mod.name.endswith("__main__") or ".migrations" in mod.name:
            continue
        importlib.import_module(mod.name)  # subclasses defined anywhere register themselves
    classes = _all(errors.EvacoreError)
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), codes
    doc = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    missing = [c for c in codes if f"`{c}`" not in doc]
    assert not missing, f"undocumented error codes: {missing}"


def test_errors_render_with_code_and_status() -> None:
    exc = errors.ContextOverflow("too big", budget=10)
    assert exc.to_dict() == {"code": "context_overflow", "message": "too big",
                             "details": {"budget": 10}}
    assert exc.status == 422 and errors.ProviderTimeout().status == 504
