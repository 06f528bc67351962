"""Graph builders of topicflow.tasks.estep and topicflow.tasks.evaluate: shape, keys, laziness, results.

One task per block keyed ``<step>-<token>-<block>``; a merge tree whose shape depends only on the number
of blocks and the fan-in; the same inputs give the same keys; building a graph computes nothing (no
scheduler call, no model call, no file written); and computing the graph gives exactly what the
models/ functions give when called directly.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest
from dask.core import get_dependencies

from tests.reference.corpora import random_block
from topicflow.io.outputs import gamma_scratch
from topicflow.metrics.heldout import completion_log_likelihood, split_doc_tokens
from topicflow.models.common.blocks import DocBlock, concat_blocks
from topicflow.models.lda.vb.estep import estep_block, fold_in_block
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.layout import prepare_topics, prepare_topics_from_var
from topicflow.models.lda.vb.objective import initial_topic_word_var
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.tasks import estep as tasks_estep
from topicflow.tasks import evaluate as tasks_evaluate
from topicflow.tasks.estep import graph_token, map_estep, map_estep_warm, map_piece_estep, merge_stats, tree_merge
from topicflow.tasks.evaluate import map_completion, map_fold_in
from topicflow.tasks.reduce import tree_reduce_now
from topicflow.testing.conformance import assert_close, assert_identical

N_TOPICS, N_TERMS, DOCS_PER_BLOCK = 3, 20, 4
LAMBDA = {"default": initial_topic_word_var(N_TOPICS, N_TERMS, seed=1, shape=2.0)}
TOPICS = prepare_topics_from_var(LAMBDA)
TOPIC_WORD = prepare_topics({lang: lam / lam.sum(axis=1, keepdims=True) for lang, lam in LAMBDA.items()})
ALPHA = np.array([0.1, 0.2, 0.3])
PARAMS = VBParams(N_TOPICS, max_doc_iter=200, doc_tol=1e-8)


def corpus_blocks(n_blocks: int, *, seed: int = 0) -> list[dict[str, DocBlock]]:
    """``n_blocks`` consecutive blocks of a random corpus (document 1 empty), as the readers give them."""
    block = random_block(n_blocks * DOCS_PER_BLOCK, N_TERMS, seed=seed, empty_rows=(1,))
    return [{"default": block.slice(i * DOCS_PER_BLOCK, (i + 1) * DOCS_PER_BLOCK)} for i in range(n_blocks)]


def delayed_blocks(blocks: list[dict[str, DocBlock]], name: str = "block") -> list[Any]:
    return [dask.delayed(b, name=f"{name}-{i}", traverse=False) for i, b in enumerate(blocks)]


def delayed_value(value: Any, name: str) -> Any:
    return dask.delayed(value, name=name, traverse=False)


def graph_of(*collections: Any) -> dict[Any, Any]:
    graph: dict[Any, Any] = {}
    for collection in collections:
        graph.update(dict(collection.__dask_graph__()))
    return graph


def step_of(key: str, token: str) -> str:
    """The step a key names: the part before ``-<token>`` (keys without the token are inputs)."""
    return key.split(f"-{token}-")[0] if f"-{token}-" in key else "input"


def refuse_to_compute(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"a graph builder computed the keys {keys!r}")


# ---------------------------------------------------------------------------------------- shape


def test_map_estep_has_one_task_per_block_on_that_block_and_the_topics() -> None:
    blocks = delayed_blocks(corpus_blocks(5))
    parts = map_estep(blocks, delayed_value(TOPICS, "topics"), ALPHA, PARAMS, token="tok", epoch=3)
    assert [part.key for part in parts] == [f"estep-tok-{i}" for i in range(5)]
    graph = graph_of(*parts)
    assert sorted(k for k in graph if step_of(k, "tok") == "estep") == sorted(p.key for p in parts)
    for i, part in enumerate(parts):
        assert get_dependencies(graph, part.key) == {f"block-{i}", "topics"}


def merge_tree(graph: dict[Any, Any], token: str) -> dict[tuple[int, int], list[Any]]:
    """Each merge node (depth, index) with its children as ("part", i) or (depth, index), in order."""
    def label(key: str) -> Any:
        kind, *numbers = key.removeprefix(f"merge-{token}-").removeprefix(f"estep-{token}-").split("-")
        return ("part", int(kind)) if key.startswith("estep-") else (int(kind), int(numbers[0]))

    tree = {}
    for key in graph:
        if isinstance(key, str) and key.startswith(f"merge-{token}-"):
            tree[label(key)] = sorted((label(child) for child in get_dependencies(graph, key)),
                                      key=lambda c: (str(c[0]), c[1]))
    return tree


@pytest.mark.parametrize("n_blocks,split_every,level_sizes", [
    (1, 2, []), (2, 2, [1]), (5, 2, [3, 2, 1]), (8, 3, [3, 1]), (9, 3, [3, 1]), (10, 3, [4, 2, 1]), (17, 8, [3, 1]),
])
def test_merge_tree_shape_depends_only_on_the_block_count(n_blocks: int, split_every: int,
                                                          level_sizes: list[int]) -> None:
    trees = []
    for seed, token in ((0, "aaa"), (5, "bbb")):
        blocks = delayed_blocks(corpus_blocks(n_blocks, seed=seed), name=f"block{seed}")
        root = tree_merge(map_estep(blocks, delayed_value(TOPICS, "topics"), ALPHA, PARAMS, token=token),
                          split_every=split_every, token=token)
        tree = merge_tree(graph_of(root), token)
        depth = len(level_sizes)
        assert root.key == (f"merge-{token}-{depth - 1}-0" if depth else f"estep-{token}-0")
        assert [sum(1 for node in tree if node[0] == d) for d in range(depth)] == level_sizes
        leaves = [child for children in tree.values() for child in children if child[0] == "part"]
        # every block enters the tree once, at depth 0 (a single block is the root itself: no merge node)
        assert sorted(leaves, key=lambda c: c[1]) == ([("part", i) for i in range(n_blocks)] if depth else [])
        for children in tree.values():
            assert 1 <= len(children) <= split_every
            assert [c[1] for c in children] == list(range(children[0][1], children[0][1] + len(children)))
        trees.append(tree)
    assert trees[0] == trees[1]  # other documents, other token: the same tree


def test_map_piece_estep_reads_each_shard_once_per_minibatch() -> None:
    shards = {7: delayed_value(corpus_blocks(1, seed=1)[0], "shard-7"),
              9: delayed_value(corpus_blocks(1, seed=2)[0], "shard-9")}
    pieces = [(7, 0, 2), (7, 2, 4), (9, 1, 3)]
    parts = map_piece_estep(shards, pieces, delayed_value(TOPICS, "topics"), ALPHA, PARAMS, epoch=0, token="tok")
    graph = graph_of(*parts)
    assert [part.key for part in parts] == ["estep-tok-0", "estep-tok-1", "estep-tok-2"]
    assert [get_dependencies(graph, part.key) for part in parts] == [
        {"shard-7", "topics"}, {"shard-7", "topics"}, {"shard-9", "topics"}]
    assert sorted(step_of(k, "tok") for k in graph) == ["estep"] * 3 + ["input"] * 3


# ----------------------------------------------------------------------------------------- keys


def build_all(blocks: list[dict[str, DocBlock]], token: str, scratch: str) -> list[Any]:
    """Every builder of tasks/estep.py and tasks/evaluate.py on one corpus."""
    delayed = delayed_blocks(blocks)
    topics = delayed_value(TOPICS, "topics")
    shard_ids = [f"{i:06d}" for i in range(len(blocks))]
    return [
        tree_merge(map_estep(delayed, topics, ALPHA, PARAMS, token=token), split_every=2, token=token),
        tree_merge(map_estep(delayed, topics, ALPHA, HybridParams(N_TOPICS, 1, 2, seed=4), token=f"{token}h",
                             epoch=1), split_every=2, token=f"{token}h"),
        *map_piece_estep(dict(enumerate(delayed)), [(0, 0, 2), (1, 1, 4)], topics, ALPHA, PARAMS, epoch=2,
                         token=f"{token}p"),
        *map_estep_warm(delayed, topics, ALPHA, PARAMS, scratch=scratch, shard_ids=shard_ids, iteration=1,
                        token=f"{token}w"),
        *map_fold_in(delayed, topics, ALPHA, PARAMS, token=token),
        map_completion(delayed, delayed_value(TOPIC_WORD, "topic-word"), ALPHA, PARAMS, seed=3, split_every=2,
                       token=token),
    ]


def test_same_inputs_give_the_same_keys_and_keys_name_their_step(tmp_path: Path) -> None:
    token = graph_token("corpus", LAMBDA, ALPHA, PARAMS, 0)
    assert token == graph_token("corpus", LAMBDA, ALPHA, PARAMS, 0)
    assert re.fullmatch(r"[0-9a-f]{16}", token)
    assert graph_token("corpus", LAMBDA, ALPHA, PARAMS, 1) != token
    first = graph_of(*build_all(corpus_blocks(3), token, str(tmp_path)))
    again = graph_of(*build_all(corpus_blocks(3), token, str(tmp_path)))
    assert sorted(first) == sorted(again)
    steps = {key.split(f"-{token}")[0] for key in first if token in key}
    assert steps == {"estep", "merge", "fold-in", "completion", "sum"}
    for key in first:
        if token in key:
            assert re.fullmatch(rf"(estep|merge|fold-in|completion|sum)-{token}[hpw]?(-\d+)+", key), key
    other = graph_of(*build_all(corpus_blocks(3), graph_token("another corpus"), str(tmp_path)))
    assert not {k for k in first if token in k} & set(other)


# ------------------------------------------------------------------------------------- laziness


def test_building_graphs_computes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def recorder(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} ran while a graph was being built")
        return record

    for module, names in ((tasks_estep, ("estep_block", "hybrid_estep_block", "read_gamma", "write_gamma")),
                          (tasks_evaluate, ("fold_in_block",)),
                          (tasks_evaluate.evaluation, ("split_doc_tokens", "completion_log_likelihood"))):
        for name in names:
            monkeypatch.setattr(module, name, recorder(f"{module.__name__}.{name}"))
    with dask.config.set(scheduler=refuse_to_compute):
        graphs = build_all(corpus_blocks(4), "lazy", str(tmp_path))
        with pytest.raises(AssertionError, match="a graph builder computed"):
            dask.compute(graphs[0])  # the guard is live: computing is refused
    assert calls == []
    assert list(tmp_path.iterdir()) == []  # the warm-start builder wrote no gamma
    assert sum(1 for key in graph_of(*graphs) if key.startswith("estep-lazy-")) == 4


# -------------------------------------------------------------------------------------- results


def test_computed_estep_graph_equals_the_direct_model_calls(client: object) -> None:
    blocks = corpus_blocks(7)
    parts = map_estep(delayed_blocks(blocks), delayed_value(TOPICS, "topics"), ALPHA, PARAMS, token="r")
    root = tree_merge(parts, split_every=3, token="r")
    hybrid = HybridParams(N_TOPICS, burn_in=2, samples=3, seed=9)
    hybrid_parts = map_estep(delayed_blocks(blocks), delayed_value(TOPICS, "topics"), ALPHA, hybrid, token="h",
                             epoch=4)
    merged, *computed = dask.compute(root, *parts, *hybrid_parts)
    direct = [estep_block(block, TOPICS, ALPHA, PARAMS)[0] for block in blocks]
    direct_hybrid = [hybrid_estep_block(block, TOPICS, ALPHA, hybrid, epoch=4)[0] for block in blocks]
    assert_identical(computed, direct + direct_hybrid, path="computed E-step tasks")
    assert_identical(merged, tree_reduce_now(direct, merge_stats, split_every=3), path="tree_merge")
    whole = estep_block({"default": concat_blocks([b["default"] for b in blocks])}, TOPICS, ALPHA, PARAMS)[0]
    assert_close(merged, whole, rtol=1e-12, atol=1e-10, path="merged blocks vs one block")


def test_computed_piece_estep_equals_the_model_call_on_the_slices() -> None:
    shards = corpus_blocks(2, seed=3)
    pieces = [(0, 0, 3), (0, 3, 4), (1, 0, 4)]
    parts = map_piece_estep({i: delayed_value(s, f"shard-{i}") for i, s in enumerate(shards)}, pieces,
                            delayed_value(TOPICS, "topics"), ALPHA, PARAMS, epoch=0, token="p")
    direct = [estep_block({"default": shards[s]["default"].slice(a, b)}, TOPICS, ALPHA, PARAMS)[0]
              for s, a, b in pieces]
    assert_identical(list(dask.compute(*parts, scheduler="sync")), direct, path="piece E-steps")


def test_warm_estep_reads_the_previous_iteration_and_writes_its_own(tmp_path: Path) -> None:
    blocks = corpus_blocks(2, seed=4)
    shard_ids = ["000000", "000001"]

    def run(iteration: int) -> list[EStepStats]:
        parts = map_estep_warm(delayed_blocks(blocks), delayed_value(TOPICS, "topics"), ALPHA, PARAMS,
                               scratch=str(tmp_path), shard_ids=shard_ids, iteration=iteration, token=f"w{iteration}")
        assert [p.key for p in parts] == [f"estep-w{iteration}-0", f"estep-w{iteration}-1"]
        return list(dask.compute(*parts, scheduler="sync"))

    cold = [estep_block(block, TOPICS, ALPHA, PARAMS, return_gamma=True) for block in blocks]
    assert_identical(run(1), [stats for stats, _ in cold], path="first warm iteration (no previous gamma)")
    for shard_id, (_, gamma) in zip(shard_ids, cold):
        np.testing.assert_array_equal(gamma_scratch.read_gamma(str(tmp_path), 1, shard_id), gamma)
    warm = [estep_block(block, TOPICS, ALPHA, PARAMS, gamma_init=gamma)[0] for block, (_, gamma) in zip(blocks, cold)]
    assert_identical(run(2), warm, path="second iteration, started from the first's gamma")


def test_computed_fold_in_equals_fold_in_block() -> None:
    blocks = corpus_blocks(3, seed=5)
    thetas = map_fold_in(delayed_blocks(blocks), delayed_value(TOPICS, "topics"), ALPHA, PARAMS, token="f")
    assert [t.key for t in thetas] == ["fold-in-f-0", "fold-in-f-1", "fold-in-f-2"]
    direct = [fold_in_block(block, TOPICS, ALPHA, PARAMS) for block in blocks]
    assert_identical(list(dask.compute(*thetas, scheduler="sync")), direct, path="fold-in")


def test_computed_completion_equals_the_merge_of_direct_completions() -> None:
    blocks = corpus_blocks(5, seed=6)
    root = map_completion(delayed_blocks(blocks), delayed_value(TOPIC_WORD, "topic-word"), ALPHA, PARAMS, seed=3,
                          split_every=2, token="c")
    graph = graph_of(root)
    assert sorted(k for k in graph if step_of(k, "c") == "completion") == [f"completion-c-{i}" for i in range(5)]
    assert root.key == "sum-c-2-0"
    direct = []
    for block in blocks:
        observed, heldout = split_doc_tokens(block["default"], seed=3)
        direct.append(completion_log_likelihood({"default": observed}, {"default": heldout}, TOPIC_WORD, ALPHA,
                                                PARAMS))
    computed = dask.compute(root, scheduler="sync")[0]
    # The merged statistics hold an exact sum: equal to the exactly rounded sum of the per-block sums
    # up to the rounding of those (each block's sum is rounded once), and the token counts add up.
    assert computed.n_tokens == sum(n for _, n in direct)
    assert computed.log_lik == pytest.approx(math.fsum(ll for ll, _ in direct), rel=1e-14)
    whole = concat_blocks([b["default"] for b in blocks])
    observed, heldout = split_doc_tokens(whole, seed=3)
    assert computed.log_lik == completion_log_likelihood(observed, heldout, TOPIC_WORD, ALPHA, PARAMS)[0]
