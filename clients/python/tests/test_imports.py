"""The package's modules import each other one way: no circle, not even through an
import inside a function (the usual way to hide one). Reads this checkout's sources
with ``ast``; needs no daemon."""

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

PKG = "treefork"
SRC = Path(__file__).resolve().parents[1] / "src" / PKG


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> Dict[str, Set[str]]:
    """Every package module -> the package modules it imports, anywhere in its body
    (module level, functions, classes, ``if TYPE_CHECKING:`` blocks)."""
    files = {module_name(p): p for p in SRC.rglob("*.py")}
    mods = set(files)

    def resolve(name: str) -> Optional[str]:
        # The deepest package module that ``name`` names (``treefork.types.Change``
        # -> ``treefork.types``).
        while name:
            if name in mods:
                return name
            name = name.rpartition(".")[0]
        return None

    graph: Dict[str, Set[str]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        deps: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    # A module's ``.`` is its package; a package's ``.`` is itself.
                    drop = node.level - 1 if is_pkg else node.level
                    base = base[: len(base) - drop] if drop else base
                    prefix = ".".join(base)
                else:
                    prefix = ""
                src = ".".join(p for p in (prefix, node.module or "") if p)
                # ``from X import y``: y may be a submodule of X, else a name in X.
                targets = [f"{src}.{a.name}" for a in node.names]
            for t in targets:
                r = resolve(t)
                if r is not None and r != mod:
                    deps.add(r)
        graph[mod] = deps
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    WHITE, GREY, BLACK = 0, 1, 2
    color = {m: WHITE for m in graph}
    stack: List[str] = []

    def visit(m: str) -> Optional[List[str]]:
        color[m] = GREY
        stack.append(m)
        for d in sorted(graph[m]):
            if color[d] == GREY:
                return stack[stack.index(d):] + [d]
            if color[d] == WHITE:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        color[m] = BLACK
        return None

    for m in sorted(graph):
        if color[m] == WHITE:
            c = visit(m)
            if c:
                return c
    return None


def test_the_graph_is_read() -> None:
    g = import_graph()
    # Known edges, so an empty or misread graph cannot pass the circle check.
    assert "treefork.types" in g["treefork.session"]
    assert "treefork.runner" in g["treefork.execution"]  # ``from . import runner``
    assert "treefork.errors" in g["treefork._base"]
    assert "treefork.session" in g["treefork"]


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_among_package_modules() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_types_imports_no_session_module() -> None:
    # The result dataclasses sit below the session and its method groups.
    deps = import_graph()["treefork.types"]
    assert not deps & {"treefork.session", "treefork._base", "treefork.execution", "treefork.messages", "treefork.bisect"}, deps
