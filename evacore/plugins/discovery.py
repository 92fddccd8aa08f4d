"""Find plugins: built-ins, entry points of group `evacore.plugins`, and `<data dir>/plugins/`.

Must not: let a plugin that fails to import take the host down (any exception, SystemExit
included, becomes a BrokenPlugin), or run hooks; importing a module does run its top level.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from evacore.plugins.manifest import Plugin

ENTRY_POINT_GROUP = "evacore.plugins"
BUILTIN_MODULES: tuple[str, ...] = ("evacore.plugins.builtin.regex_scripts",)
"""Plugins shipped with evacore; they load first, so no other plugin can take their names."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    name: str
    plugin: Plugin
    origin: str
    """Where it came from: `builtin:<module>`, `entry point <name> (<value>)` or a file path."""
    builtin: bool = False


@dataclass(frozen=True, slots=True)
class BrokenPlugin:
    name: str
    error: str
    origin: str
    builtin: bool = False


Discovered = LoadedPlugin | BrokenPlugin


def discover(plugins_dir: Path | None, *, entry_points: bool = True,
             builtins: bool = True) -> list[Discovered]:
    """Import every plugin and return them in load order; the first of a name wins."""
    found: list[Discovered] = []
    if builtins:
        for modname in BUILTIN_MODULES:
            found.append(_from_import(modname.rsplit(".", 1)[-1], f"builtin:{modname}",
                                      lambda m=modname: importlib.import_module(m), builtin=True))
    if entry_points:
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            found.append(_from_import(ep.name, f"entry point {ep.name} ({ep.value})", ep.load))
    if plugins_dir is not None and plugins_dir.is_dir():
        for path in _plugin_paths(plugins_dir):
            found.append(_from_import(path.stem if path.suffix == ".py" else path.name, str(path),
                                      lambda p=path: _import_file(p)))
    return _dedupe(found)


def _plugin_paths(folder: Path) -> list[Path]:
    """`*.py` files and package folders (with `__init__.py`), by name; `_`/`.` names are skipped."""
    out: list[Path] = []
    for p in sorted(folder.iterdir(), key=lambda p: p.name):
        if p.name.startswith(("_", ".")):
            continue
        if (p.is_file() and p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").is_file()):
            out.append(p)
    return out


def _import_file(path: Path) -> ModuleType:
    """Import a plugin file or package under a private module name (never shadows a real one)."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    modname = f"_evacore_plugin_{digest}_{''.join(c if c.isalnum() else '_' for c in path.stem)}"
    init = path / "__init__.py" if path.is_dir() else path
    spec = importlib.util.spec_from_file_location(
        modname, init, submodule_search_locations=[str(path)] if path.is_dir() else None
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module  # pydantic and dataclasses look the module up while it runs
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    return module


def _from_import(label: str, origin: str, load: Any, *, builtin: bool = False) -> Discovered:
    try:
        obj = load()
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: never crash the host
        _log.warning("plugin failed to import", extra={"plugin": label, "origin": origin},
                     exc_info=(type(exc), exc, exc.__traceback__))
        return BrokenPlugin(label, f"import failed: {_describe(exc)}", origin, builtin)
    plugin = obj if isinstance(obj, Plugin) else getattr(obj, "plugin", None)
    if not isinstance(plugin, Plugin):
        return BrokenPlugin(
            label, "no `plugin = evacore.plugins.Plugin(name=..., version=...)` found", origin, builtin
        )
    return LoadedPlugin(plugin.name, plugin, origin, builtin)


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
    text = str(exc)
    return f"{type(exc).__name__}: {text}{where}" if text else f"{type(exc).__name__}{where}"


def _dedupe(found: Iterable[Discovered]) -> list[Discovered]:
    seen: dict[str, str] = {}
    out: list[Discovered] = []
    for item in found:
        if item.name in seen:
            out.append(BrokenPlugin(
                item.name,
                f"duplicate plugin name {item.name!r}: already loaded from {seen[item.name]}",
                item.origin, item.builtin,
            ))
            continue
        seen[item.name] = item.origin
        out.append(item)
    return out
