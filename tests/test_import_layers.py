"""R14.0 / DESIGN: imports go one way. Lower packages never import the core, the pipeline or a
channel, no package imports one above its layer, and no two packages import each other
(directly or around a loop). Walks every module's imports with `ast`, lazy ones included."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import evacore

ROOT = Path(evacore.__file__).parent

LAYERS: list[set[str]] = [
    {"evacore", "errors", "redact", "logs", "eager", "ticks", "domain"},
    {"prompt", "render", "tokenize", "providers", "shift", "macros", "lore", "rules", "formats"},
    {"store"},
    {"memory", "services"},
    {"agent"},
    {"plugins"},
    {"pipeline"},
    {"config", "core"},
    {"importing"},
    {"channels", "server", "cli", "__main__", "web"},
]
LAYER = {pkg: n for n, pkgs in enumerate(LAYERS) for pkg in pkgs}
STRICT = {"store", "lore", "memory", "rules", "render", "tokenize", "providers", "formats",
          "macros", "shift", "prompt", "domain", "errors", "redact", "logs", "eager", "ticks"}
"""Packages that may not even name an upper package for type checking."""
UPPER = {"core", "pipeline", "channels", "server", "cli"}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "evacore"


def _is_module(name: str) -> bool:
    return (ROOT / name).is_dir() or (ROOT / f"{name}.py").is_file()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(n) for n in ast.walk(node))
    return ids


def imports() -> list[tuple[str, str, str, bool]]:
    """(from package, to package, file, type-checking only) for every evacore import."""
    out = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        src = rel.parts[0] if len(rel.parts) > 1 else (
            "evacore" if rel.stem == "__init__" else rel.stem)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "evacore":
                    names = [f"evacore.{a.name}" if _is_module(a.name) else "evacore"
                             for a in node.names]
                elif node.module.startswith("evacore."):
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("evacore")]
            for name in names:
                dst = _package(name)
                if dst != src:
                    out.append((src, dst, str(rel), id(node) in typing_only))
    return out


def test_every_package_has_a_layer() -> None:
    packages = {src for src, _, _, _ in imports()} | {dst for _, dst, _, _ in imports()}
    assert packages <= set(LAYER), f"packages without a layer: {packages - set(LAYER)}"


def test_r14_0_no_package_imports_upwards() -> None:
    wrong = [
        f"{file}: {src} (layer {LAYER[src]}) imports {dst} (layer {LAYER[dst]})"
        for src, dst, file, typing_only in imports()
        if LAYER[dst] > LAYER[src] and not (typing_only and src not in STRICT)
    ]
    assert not wrong, "\n".join(wrong)


def test_r14_0_lower_packages_never_name_the_core_the_pipeline_or_a_channel() -> None:
    wrong = [f"{file}: {src} imports {dst}" for src, dst, file, _ in imports()
             if src in STRICT and dst in UPPER]
    assert not wrong, "\n".join(wrong)


def test_r14_0_no_import_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _, typing_only in imports():
        if not typing_only:
            graph[src].add(dst)
    cycles = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in graph[node]:
            if nxt in path:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif len(path) < len(LAYER):
                walk(nxt, [*path, nxt])

    for start in list(graph):
        walk(start, [start])
    assert not cycles, "\n".join(sorted(set(cycles)))


def test_the_walk_sees_imports() -> None:
    """The checks above would pass vacuously if the walk found nothing."""
    found = {(src, dst) for src, dst, _, _ in imports()}
    assert ("core", "pipeline") in found and ("pipeline", "store") in found
