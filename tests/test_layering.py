"""Module boundaries: the layer order, no import cycles, and what each layer may import.

Every ``import`` and ``from ... import`` statement of the package counts, including the ones inside
functions and under ``if TYPE_CHECKING``: a function-level import is still a dependency, and hiding
one there is how cycles were papered over before. Importing a submodule does not count as importing
its parent packages' ``__init__`` (Python runs them, but they are registries at the top of their
package: see docs/architecture.md).

Layers, lowest first (a module may import its own layer and the ones below):

====  ==========================================================================
0     ``_typing``, ``_version``, ``errors``, ``config``
1     ``models.common``: math every family shares
2     ``models.<family>``: one folder per model family
3     ``metrics``: evaluation math over any family
4     ``io``: store and model formats
5     ``tasks`` (Dask graph builders) and ``testing`` (test support)
6     ``pipeline``: drivers, actors, checkpoints
7     ``api``: estimators
8     ``cli``: commands
9     the package root and ``__main__``
====  ==========================================================================
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topicflow"

LAYERS: tuple[tuple[str, int], ...] = (
    ("topicflow._typing", 0), ("topicflow._version", 0), ("topicflow.errors", 0), ("topicflow.config", 0),
    ("topicflow._numba_cache", 0), ("topicflow._registries", 0),
    ("topicflow.models.common", 1), ("topicflow.models", 2), ("topicflow.metrics", 3), ("topicflow.io", 4),
    ("topicflow.tasks", 5), ("topicflow.testing", 5), ("topicflow.pipeline", 6), ("topicflow.api", 7),
    ("topicflow.cli", 8), ("topicflow.__main__", 9), ("topicflow", 9),
)
PURE = {"dask", "distributed", "zarr", "pyarrow", "logging", "tqdm", "click"}
FORBIDDEN: dict[str, set[str]] = {
    "topicflow.models": PURE,
    "topicflow.metrics": PURE,
    "topicflow.tasks": {"distributed", "click", "tqdm"},
}


@dataclass(frozen=True)
class Import:
    """One imported module (after resolving ``from pkg import submodule``) and where it is imported."""

    target: str
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> list[Import]:
    """Every import statement of the module (any depth), as module names."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                found.append(Import(candidate if candidate in MODULES else source, node.lineno))
    return found


def layer_of(module: str) -> int:
    for prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def internal_edges() -> dict[str, set[str]]:
    return {module: {i.target for i in imports_of(path) if i.target in MODULES and i.target != module}
            for module, path in MODULES.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_no_import_cycles() -> None:
    cycles = strongly_connected(internal_edges())
    assert cycles == [], "import cycles (function-level imports included):\n" + "\n".join(map(str, cycles))


def test_cycle_check_finds_a_cycle() -> None:
    """The checker itself: a three-module ring and a two-module loop are both reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d", "e"]]


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_imports_respect_the_layer_order(module: str) -> None:
    rank = layer_of(module)
    upward = [f"line {i.line}: {i.target} (layer {layer_of(i.target)})" for i in imports_of(MODULES[module])
              if i.target in MODULES and layer_of(i.target) > rank]
    assert upward == [], f"{module} (layer {rank}) imports upward:\n" + "\n".join(upward)


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_no_infrastructure_in_pure_layers(module: str) -> None:
    roots = {i.target.split(".")[0] for i in imports_of(MODULES[module])}
    for prefix, forbidden in FORBIDDEN.items():
        if module.startswith(prefix):
            assert not roots & forbidden, f"{module} imports {sorted(roots & forbidden)}"
    if not module.startswith("topicflow.cli"):
        assert "click" not in roots, f"{module} imports click: command-line code lives in topicflow.cli"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("topicflow.pipeline.")), ids=str)
def test_pipeline_packages_meet_only_through_their_init(module: str) -> None:
    """pipeline/vb, pipeline/streaming and pipeline/ingest use each other through their registries."""
    own = module.split(".")[2]
    reached = [i for i in imports_of(MODULES[module])
               if i.target.startswith("topicflow.pipeline.") and len(i.target.split(".")) > 3
               and i.target.split(".")[2] != own]
    assert reached == [], f"{module} reaches into another pipeline package: {reached}"


def calls_compute(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"compute", "persist", "gather", "scatter"}:
                found.append(f"line {node.lineno}: .{node.func.attr}()")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"compute", "persist"}:
            found.append(f"line {node.lineno}: {node.func.id}()")
    return found


@pytest.mark.parametrize("path", sorted((PACKAGE / "tasks").glob("*.py")), ids=lambda p: p.name)
def test_tasks_only_build_graphs(path: Path) -> None:
    assert calls_compute(path) == [], f"{path.name} computes: {calls_compute(path)}"


def test_every_module_has_a_layer() -> None:
    assert all(isinstance(layer_of(module), int) for module in MODULES)


def test_the_worker_list_is_asked_of_the_scheduler_not_read_from_scheduler_info() -> None:
    """Client.scheduler_info() can return the client's totals-only copy (see cluster.worker_addresses)."""
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Attribute) and node.attr == "scheduler_info"]
    assert found == [], f"use topicflow.pipeline.cluster.worker_addresses instead of scheduler_info(): {found}"
