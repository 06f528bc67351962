"""Module boundaries: models is pure math, tasks only builds graphs, pipeline does the running."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topicflow"
FORBIDDEN_IN_MODELS = {"dask", "distributed", "zarr", "pyarrow", "logging", "tqdm", "click"}
FORBIDDEN_IN_TASKS = {"distributed", "click", "tqdm"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
            if node.module.startswith("topicflow."):
                roots.add(node.module)
    return roots


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


@pytest.mark.parametrize("path", sorted((PACKAGE / "models").glob("*.py")), ids=lambda p: p.name)
def test_models_import_no_infrastructure(path: Path) -> None:
    roots = imported_roots(path)
    assert not roots & FORBIDDEN_IN_MODELS, f"{path.name} imports {sorted(roots & FORBIDDEN_IN_MODELS)}"
    upward = {r for r in roots if r.startswith(("topicflow.tasks", "topicflow.pipeline", "topicflow.io"))}
    assert not upward, f"{path.name} imports {sorted(upward)}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "tasks").glob("*.py")), ids=lambda p: p.name)
def test_tasks_only_build_graphs(path: Path) -> None:
    roots = imported_roots(path)
    assert not roots & FORBIDDEN_IN_TASKS, f"{path.name} imports {sorted(roots & FORBIDDEN_IN_TASKS)}"
    assert not {r for r in roots if r.startswith("topicflow.pipeline")}, f"{path.name} imports pipeline"
    assert calls_compute(path) == [], f"{path.name} computes: {calls_compute(path)}"
