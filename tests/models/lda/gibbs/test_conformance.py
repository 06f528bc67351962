"""Collapsed Gibbs state snapshots against the shared conformance suites (topicflow/testing/conformance.py).

``to_arrays`` splits a chain's state into arrays and JSON scalars (the Gibbs actor saves them under a
``gibbs/`` namespace) and ``from_arrays`` rebuilds it: the snapshot holds numbers and JSON only,
round-trips bit for bit, and a chain restored after some sweeps (hyperparameter optimization included)
continues exactly as the uninterrupted chain.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.state import GibbsParams, GibbsState, from_arrays, to_arrays
from topicflow.testing import strategies
from topicflow.testing.conformance import Draw, SamplerStream, SamplerTests, SnapshotTests


def draw_gibbs_chain(draw: Draw) -> SamplerStream:
    """A chain over up to 8 documents; steps are sweep counts; params (GibbsParams, optimize_every, burn_in)."""
    n_topics = draw(st.integers(1, 4))
    alpha = draw(st.one_of(st.floats(0.05, 1.0), strategies.positive_vectors(n_topics, min_value=0.05)))
    params = GibbsParams(n_topics=n_topics, doc_topic_prior=alpha, topic_word_prior=draw(st.floats(0.01, 0.5)),
                         seed=draw(st.integers(0, 2**63 - 1)))
    block = draw(strategies.doc_blocks(st.integers(1, 8), st.integers(1, 10)))
    init = draw(st.sampled_from(["random", "sequential"]))
    optimize_every, burn_in = draw(st.sampled_from([0, 1, 2])), draw(st.integers(0, 3))
    sweeps = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    return SamplerStream(start=lambda: initial_state(block, params, init=init), steps=sweeps,
                         params=(params, optimize_every, burn_in))


class GibbsHooks:
    """The snapshot form: the arrays of ``to_arrays``, its scalars as JSON."""

    def to_snapshot(self, state: GibbsState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return to_arrays(state)

    def from_snapshot(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> GibbsState:
        return from_arrays(arrays, meta)

    def observe(self, state: GibbsState, n_sweeps: int, params: tuple[GibbsParams, int, int]) -> GibbsState:
        gibbs_params, optimize_every, burn_in = params
        return run_sweeps(state, gibbs_params, n_sweeps, optimize_every=optimize_every, burn_in=burn_in)


class TestGibbsStateSnapshot(GibbsHooks, SnapshotTests):
    def make_state(self, draw: Draw) -> GibbsState:
        chain = draw_gibbs_chain(draw)
        state = chain.start()
        for n_sweeps in chain.steps:
            state = self.observe(state, n_sweeps, chain.params)
        return state


class TestGibbsChainSampler(GibbsHooks, SamplerTests):
    def make_stream(self, draw: Draw) -> SamplerStream:
        return draw_gibbs_chain(draw)
