"""The shared tree reduction: shape fixed by the part count, left-to-right order, laziness."""
from __future__ import annotations

import operator

import dask
import pytest

from topicflow.tasks.reduce import tree_reduce


def concat(*parts: str) -> str:
    return "(" + "".join(parts) + ")"


@pytest.mark.parametrize("n_parts,split_every,levels", [(1, 2, 0), (2, 2, 1), (8, 2, 3), (9, 3, 2), (20, 4, 3)])
def test_shape_depends_only_on_part_count(n_parts: int, split_every: int, levels: int) -> None:
    parts = [dask.delayed(str, pure=True)(i, dask_key_name=f"p-{i}") for i in range(n_parts)]
    root = tree_reduce(parts, concat, split_every=split_every, name="t")
    node_keys = [str(k) for k in root.__dask_graph__() if str(k).startswith("t-")]
    assert len({k.split("-")[1] for k in node_keys}) == levels
    text = root.compute(scheduler="sync")
    # Children are combined left to right in part order, so the digits appear in order.
    assert "".join(c for c in text if c.isdigit()) == "".join(str(i) for i in range(n_parts))


def test_same_result_on_every_scheduler() -> None:
    parts = [dask.delayed(float, pure=True)(0.1 * (i + 1), dask_key_name=f"f-{i}") for i in range(37)]
    root = tree_reduce(parts, lambda *xs: sum(xs), split_every=4, name="sum")
    results = {root.compute(scheduler=s) for s in ("sync", "threads")}
    assert len(results) == 1


def test_rejects_empty_and_bad_fan_in() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        tree_reduce([], operator.add, split_every=2, name="x")
    with pytest.raises(ValueError, match="split_every"):
        tree_reduce([dask.delayed(1)], operator.add, split_every=1, name="x")
