"""The streaming LDA samplers against the shared conformance suites (topicflow/testing/conformance.py).

Particle filter, o-LDA and incremental Gibbs (one ParticleCloud, cloud_to_arrays/cloud_from_arrays) and
streaming Gibbs sampling (SGSState, to_arrays/from_arrays): snapshots hold numbers and JSON only and
round-trip bit for bit, and a sampler restored from a snapshot continues exactly as the uninterrupted
one. The particle filter's state also does not depend on how the stream is cut into blocks.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import strategies as st

from topicflow.models.common.blocks import DocBlock
from topicflow.models.lda.streaming import particle_filter as pf
from topicflow.models.lda.streaming import sgs
from topicflow.testing import strategies
from topicflow.testing.conformance import (
    Draw,
    SamplerStream,
    SnapshotTests,
    SplitInvariantSamplerTests,
    SamplerTests,
    assert_identical,
)

# ------------------------------------------------------------------------------ particle filter


def draw_pf_params(draw: Draw, n_topics: int, n_terms: int) -> pf.PFParams:
    """Settings of o-LDA, incremental Gibbs or the particle filter, with any rejuvenation source."""
    source = draw(st.sampled_from(["history", "window", "reservoir"]))
    size = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**63 - 1))
    algorithm = draw(st.sampled_from(["olda", "incgibbs", "pf"]))
    common: dict[str, Any] = {"rejuvenation_source": source, "source_size": size, "seed": seed}
    if algorithm == "olda":
        return pf.PFParams.olda(n_topics, n_terms, **common)
    if algorithm == "incgibbs":
        return pf.PFParams.incremental_gibbs(n_topics, n_terms, rejuvenation_steps=draw(st.integers(1, 3)), **common)
    return pf.PFParams.particle_filter(
        n_topics, n_terms, n_particles=draw(st.integers(2, 5)), rejuvenation_steps=draw(st.integers(0, 3)),
        ess_threshold=draw(st.sampled_from([0.3, 0.8, 1.0])),
        resampling=draw(st.sampled_from(["multinomial", "residual", "stratified", "systematic"])), **common)


def draw_pf_stream(draw: Draw) -> SamplerStream:
    """A prefix of up to 15 initialized tokens in 3 documents, then up to 10 documents in up to 4 blocks."""
    n_topics, n_terms = draw(st.integers(1, 4)), draw(st.integers(1, 10))
    params = draw_pf_params(draw, n_topics, n_terms)
    n_prefix = draw(st.integers(0, 15))
    prefix = (np.array(draw(st.lists(st.integers(0, n_terms - 1), min_size=n_prefix, max_size=n_prefix)), np.int32),
              np.sort(np.array(draw(st.lists(st.integers(0, 2), min_size=n_prefix, max_size=n_prefix)), np.int64)),
              np.array(draw(st.lists(st.integers(0, n_topics - 1), min_size=n_prefix, max_size=n_prefix)), np.int32))
    block = draw(strategies.doc_blocks(st.integers(1, 10), n_terms, first_doc=3))
    steps = strategies.cut_documents(block, draw(strategies.document_cuts(block.n_docs)))
    return SamplerStream(start=lambda: pf.initial_cloud(params, *prefix, next_doc=3), steps=steps, params=params)


class PFHooks:
    """Snapshot hooks of the particle cloud."""

    def to_snapshot(self, cloud: pf.ParticleCloud) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return pf.cloud_to_arrays(cloud)

    def from_snapshot(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> pf.ParticleCloud:
        return pf.cloud_from_arrays(arrays, meta)

    def observe(self, cloud: pf.ParticleCloud, block: DocBlock, params: pf.PFParams) -> pf.ParticleCloud:
        return pf.observe(cloud, block, params)[0]

    def assert_same_state(self, actual: pf.ParticleCloud, expected: pf.ParticleCloud) -> None:
        # Spare capacity is not state: a "history" source is saved at its filled length and regrown on
        # restore (cloud_to_arrays), so compare what is saved: every filled slot, weight and store array.
        assert_identical(pf.cloud_to_arrays(actual), pf.cloud_to_arrays(expected), path="cloud_to_arrays(cloud)")


class TestParticleCloudSnapshot(PFHooks, SnapshotTests):
    def make_state(self, draw: Draw) -> pf.ParticleCloud:
        stream = draw_pf_stream(draw)
        cloud = stream.start()
        for block in stream.steps:
            cloud = self.observe(cloud, block, stream.params)
        return cloud


class TestParticleFilterSampler(PFHooks, SplitInvariantSamplerTests):
    def make_stream(self, draw: Draw) -> SamplerStream:
        return draw_pf_stream(draw)


# ------------------------------------------------------------------------------- streaming Gibbs


def draw_sgs_stream(draw: Draw) -> SamplerStream:
    """Up to 4 minibatches of up to 10 documents; the vocabulary may grow from one minibatch to the next."""
    n_topics, n_terms = draw(st.integers(1, 4)), draw(st.integers(1, 8))
    alpha = draw(st.one_of(st.floats(0.05, 1.0), strategies.positive_vectors(n_topics, min_value=0.05)))
    params = sgs.SGSParams(n_topics=n_topics, doc_topic_prior=alpha, topic_word_prior=draw(st.floats(0.01, 0.5)),
                           decay=draw(st.sampled_from([1.0, 0.9, 0.5])), max_iter=draw(st.integers(1, 4)),
                           patience=draw(st.integers(1, 3)), init=draw(st.sampled_from(["posterior", "random"])),
                           seed=draw(st.integers(0, 2**63 - 1)))
    block = draw(strategies.doc_blocks(st.integers(1, 10), n_terms, first_doc=draw(st.integers(0, 50))))
    steps = []
    for piece in strategies.cut_documents(block, draw(strategies.document_cuts(block.n_docs))):
        n_terms += draw(st.integers(0, 2))  # new terms appended to the vocabulary (never used before)
        steps.append(dataclasses.replace(piece, n_terms=n_terms))
    first_terms = steps[0].n_terms
    return SamplerStream(start=lambda: sgs.empty_state(first_terms, params), steps=steps, params=params)


class SGSHooks:
    """Snapshot hooks of the streaming-Gibbs state."""

    def to_snapshot(self, state: sgs.SGSState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return sgs.to_arrays(state)

    def from_snapshot(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> sgs.SGSState:
        return sgs.from_arrays(arrays, meta)

    def observe(self, state: sgs.SGSState, block: DocBlock, params: sgs.SGSParams) -> sgs.SGSState:
        return sgs.observe_minibatch(state, block, params)[0]


class TestSGSStateSnapshot(SGSHooks, SnapshotTests):
    def make_state(self, draw: Draw) -> sgs.SGSState:
        stream = draw_sgs_stream(draw)
        state = stream.start()
        for block in stream.steps:
            state = self.observe(state, block, stream.params)
        return state


class TestSGSSampler(SGSHooks, SamplerTests):
    def make_stream(self, draw: Draw) -> SamplerStream:
        return draw_sgs_stream(draw)
