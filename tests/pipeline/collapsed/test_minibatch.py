"""The minibatch driver of PCSVB0 and SCVB0: the serial loop bit for bit, any workers, any pieces, the plan."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.collapsed.helpers import (
    assert_same_state,
    config,
    folded,
    planted_store,
    reference_minibatch,
)
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.collapsed import fit_collapsed
from topicflow.pipeline.collapsed.stochastic import Plan
from topicflow.pipeline.vb import plan_minibatches


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_store(tmp_path_factory.mktemp("collapsed-mb") / "c.zarr")


@pytest.mark.parametrize("method", ["pcsvb0", "scvb0"])
def test_driver_equals_the_serial_loop_bit_for_bit(store: Path, method: str, client: object) -> None:
    corpus = Corpus.open(store)
    cfg = config(method, batch_size=20, extra={"pieces": 3, "min_piece_docs": 1})
    result = fit_collapsed(corpus, cfg, client=client, split_every=2)
    assert_same_state(result.state, reference_minibatch(corpus, cfg, split_every=2))
    assert result.state.docs_seen == 2 * 96
    # One record per pass end (no evaluation interval), each after its pass.
    assert [(r["pass"], r["docs_seen"]) for r in result.trace] == [(0, 96), (1, 192)]
    assert all(r["heldout_perplexity"] is None for r in result.trace)


def test_same_model_on_one_two_and_four_workers(store: Path, local_cluster: object) -> None:
    from distributed import Client, LocalCluster

    corpus = Corpus.open(store)
    cfg = config(batch_size=24, extra={"pieces": 4, "min_piece_docs": 1}, passes=1)
    states = {}
    with Client(local_cluster) as two:  # type: ignore[arg-type]
        states[2] = fit_collapsed(corpus, cfg, client=two).state
    for n_workers in (1, 4):
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=":0") as lc, \
                Client(lc) as connected:
            states[n_workers] = fit_collapsed(corpus, cfg, client=connected).state
    assert_same_state(states[1], states[2])
    assert_same_state(states[4], states[2])


def test_any_number_of_pieces_gives_the_model_to_rounding(store: Path) -> None:
    """Pieces regroup the same floating-point sums (the merge tree changes), so agreement is to rounding.

    The tolerance covers a few ulps per sum grown over 8 stochastic steps; a wrong piece (a document
    lost, counted twice, or run with the wrong view) moves the counts by whole tokens.
    """
    corpus = Corpus.open(store)
    states = [fit_collapsed(corpus, config(batch_size=24, extra={"pieces": p, "min_piece_docs": 1})).state
              for p in (1, 2, 4)]
    reference, _ = folded(states[0])
    for other in states[1:]:
        arrays, scalars = folded(other)
        for name in reference:
            np.testing.assert_allclose(arrays[name], reference[name], rtol=1e-12, atol=1e-12, err_msg=name)
        assert scalars["docs_seen"] == 192 and scalars["t_topic_word"] == states[0].t_topic_word


def members(minibatch: object, starts: list[int]) -> list[int]:
    return [starts[s] + r for s, lo, hi in minibatch.pieces for r in range(lo, hi)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("window", [0, 60])
def test_plan_visits_every_document_once_per_pass_in_pieces_of_one_shard(window: int) -> None:
    sizes = [50, 30, 70, 10, 40]
    starts = list(np.cumsum([0] + sizes[:-1]))
    plan = Plan(batch_size=37, piece_docs=10, shuffle_window=window)
    minibatches = list(plan_minibatches(sizes, range(5), plan, seed=3, epoch=0))
    seen = [d for mb in minibatches for d in members(mb, starts)]
    assert sorted(seen) == list(range(200))
    assert [mb.n_docs for mb in minibatches] == [37] * 5 + [15]
    assert all(0 <= lo < hi <= sizes[s] and hi - lo <= 10 for mb in minibatches for s, lo, hi in mb.pieces)
    if window:
        assert seen != sorted(seen)
        for lo in range(0, 200, window):
            assert sorted(seen[lo:lo + window]) == list(range(lo, min(200, lo + window)))
        again = [d for mb in plan_minibatches(sizes, range(5), plan, seed=3, epoch=1) for d in members(mb, starts)]
        assert again != seen
    else:
        assert seen == list(range(200))


def test_shuffled_driver_is_deterministic_and_differs_from_store_order(store: Path) -> None:
    corpus = Corpus.open(store)
    shuffled = config(batch_size=16, shuffle_window=48, passes=1)
    first = fit_collapsed(corpus, shuffled).state
    assert_same_state(fit_collapsed(corpus, shuffled).state, first)
    assert_same_state(first, reference_minibatch(corpus, shuffled))
    plain = fit_collapsed(corpus, replace(shuffled, shuffle_window=0)).state
    assert not np.array_equal(plain.topic_word_counts(), first.topic_word_counts())
