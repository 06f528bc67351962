"""The variational LDA family against the shared conformance suites (topicflow/testing/conformance.py).

E-step statistics are a monoid (MergeableTests); the dense E-step matches tests/reference/vb_lda_numpy.py
and the hybrid (Gibbs within VB) E-step matches tests/reference/hybrid_numpy.py (EStepTests), for one
language and for a polylingual corpus.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from hypothesis import strategies as st

from tests.reference import hybrid_numpy as hybrid_ref
from tests.reference import vb_lda_numpy as vb_ref
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.dirichlet import exp_dirichlet_expectation_rows
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats
from topicflow.testing import strategies
from topicflow.testing.conformance import Draw, EStepTests, MergeableTests


@dataclass(frozen=True)
class VBModel:
    """What the dense E-step needs besides the documents."""

    exp_elog: dict[str, np.ndarray]  #: per language, (n_topics, n_terms)
    alpha: np.ndarray  #: (n_topics,)
    params: VBParams


@dataclass(frozen=True)
class HybridModel:
    """What the hybrid E-step needs besides the documents."""

    exp_elog: dict[str, np.ndarray]  #: per language, (n_topics, n_terms)
    alpha: np.ndarray  #: (n_topics,)
    params: HybridParams
    epoch: int


def draw_exp_elog(draw: Draw, n_topics: int, n_terms: Mapping[str, int]) -> dict[str, np.ndarray]:
    """exp(E[log beta]) of random Dirichlet parameters lambda, per language."""
    return {lang: exp_dirichlet_expectation_rows(draw(strategies.positive_arrays((n_topics, n))))
            for lang, n in n_terms.items()}


def draw_vb_model(draw: Draw, n_topics: int, n_terms: Mapping[str, int]) -> VBModel:
    # A cap of 3 sweeps leaves most documents unconverged, so n_capped is compared too.
    params = VBParams(n_topics=n_topics, max_doc_iter=draw(st.sampled_from([3, 100])), doc_tol=1e-6)
    return VBModel(draw_exp_elog(draw, n_topics, n_terms), draw(strategies.positive_vectors(n_topics)), params)


def stats_from_reference(blocks: Mapping[str, DocBlock], dense: Mapping[str, np.ndarray], *, alpha_suff: np.ndarray,
                         doc_elbo: float, n_capped: int) -> EStepStats:
    """The reference's dense per-language statistics in the sparse form of EStepStats (the block's terms)."""
    topic_terms = {}
    for lang, block in blocks.items():
        present = np.unique(block.term_ids).astype(np.int64)
        topic_terms[lang] = TopicTermStats(present, np.ascontiguousarray(dense[lang][:, present]))
    first = next(iter(blocks.values()))
    return EStepStats(topic_terms=topic_terms, alpha_suff=np.asarray(alpha_suff, dtype=np.float64),
                      doc_elbo=float(doc_elbo), n_docs=first.n_docs,
                      n_tokens=sum(block.n_tokens for block in blocks.values()), n_capped=int(n_capped),
                      n_doc_iter=0)  # the reference does not count sweeps (reference_ignore)


def docs_of(blocks: Mapping[str, DocBlock]) -> dict[str, list[dict[int, int]]]:
    return {lang: vb_ref.docs_from_block(block) for lang, block in blocks.items()}


# ------------------------------------------------------------------------------------ mergeable


@dataclass(frozen=True)
class StatsShape:
    """What the statistics of one example share: topics, languages, and a model for the E-step."""

    n_topics: int
    languages: tuple[str, ...]
    model: VBModel


class TestVBStatsMergeable(MergeableTests):
    """EStepStats: random values for the monoid laws, dense E-step statistics for the corpus split."""

    def make_shape(self, draw: Draw) -> StatsShape:
        n_topics = draw(st.integers(1, 4))
        languages = draw(st.sampled_from([("default",), ("de", "en")]))
        n_terms = {lang: draw(st.integers(1, 10)) for lang in languages}
        return StatsShape(n_topics, languages, draw_vb_model(draw, n_topics, n_terms))

    def make_stats(self, draw: Draw, shape: StatsShape) -> EStepStats:
        return draw(strategies.estep_stats(shape.n_topics, shape.languages))

    def zeros(self, shape: StatsShape) -> EStepStats:
        return EStepStats.zeros(shape.n_topics, shape.languages)

    def make_corpus(self, draw: Draw, shape: StatsShape) -> dict[str, DocBlock]:
        n_terms = {lang: e.shape[1] for lang, e in shape.model.exp_elog.items()}
        return draw(strategies.multilingual_blocks(shape.languages, st.integers(0, 8), n_terms))

    def stats_of(self, shape: StatsShape, corpus: Mapping[str, DocBlock]) -> EStepStats:
        model = shape.model
        return estep_block(corpus, model.exp_elog, model.alpha, model.params)[0]


# --------------------------------------------------------------------------------------- E-step


class TestVBEStep(EStepTests):
    """Dense E-step (Blei et al. 2003, figure 6) against vb_lda_numpy.estep_reference."""

    reference_ignore = frozenset({"n_doc_iter"})

    def make_model(self, draw: Draw, n_topics: int, n_terms: Mapping[str, int]) -> VBModel:
        return draw_vb_model(draw, n_topics, n_terms)

    def estep(self, model: VBModel, blocks: Mapping[str, DocBlock]) -> tuple[EStepStats, Any]:
        return estep_block(blocks, model.exp_elog, model.alpha, model.params, return_gamma=True)

    def reference(self, model: VBModel, blocks: Mapping[str, DocBlock]) -> tuple[EStepStats, np.ndarray]:
        out = vb_ref.estep_reference(docs_of(blocks), model.exp_elog, model.alpha, model.params.max_doc_iter,
                                     model.params.doc_tol)
        stats = stats_from_reference(blocks, out["stats"], alpha_suff=out["alpha_suff"], doc_elbo=out["doc_elbo"],
                                     n_capped=out["n_capped"])
        return stats, out["gamma"]


class TestVBEStepPolylingual(TestVBEStep):
    """The same with two languages: theta shared, each word's phi from its own language's topics."""

    languages = ("de", "en")


class TestHybridEStep(EStepTests):
    """Hybrid E-step (Mimno et al. 2012) against hybrid_numpy.hybrid_estep_reference: the same draws."""

    reference_rtol = 1e-12
    reference_atol = 1e-12
    reference_ignore = frozenset({"n_doc_iter"})

    def make_model(self, draw: Draw, n_topics: int, n_terms: Mapping[str, int]) -> HybridModel:
        params = HybridParams(n_topics=n_topics, burn_in=draw(st.integers(0, 3)), samples=draw(st.integers(1, 3)),
                              seed=draw(st.integers(0, 2**63 - 1)))
        return HybridModel(draw_exp_elog(draw, n_topics, n_terms), draw(strategies.positive_vectors(n_topics)),
                           params, draw(st.integers(0, 5)))

    def estep(self, model: HybridModel, blocks: Mapping[str, DocBlock]) -> tuple[EStepStats, Any]:
        return hybrid_estep_block(blocks, model.exp_elog, model.alpha, model.params, epoch=model.epoch,
                                  return_gamma=True)

    def reference(self, model: HybridModel, blocks: Mapping[str, DocBlock]) -> tuple[EStepStats, np.ndarray]:
        params = model.params
        out = hybrid_ref.hybrid_estep_reference(docs_of(blocks), model.exp_elog, model.alpha, params.burn_in,
                                                params.samples, seed=params.seed, epoch=model.epoch,
                                                first_doc=next(iter(blocks.values())).first_doc)
        # The sampled E-step runs a fixed number of sweeps, so no document is ever capped.
        stats = stats_from_reference(blocks, out["stats"], alpha_suff=out["alpha_suff"], doc_elbo=out["doc_elbo"],
                                     n_capped=0)
        return stats, out["gamma"]


class TestHybridEStepPolylingual(TestHybridEStep):
    """The hybrid E-step with two languages (tokens of each language in turn, topics' language order)."""

    languages = ("de", "en")
