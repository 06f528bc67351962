"""Initialization trials of the streaming samplers (May et al. 2014): seeds, scores, the choice."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import block_from_csr
from topicflow.metrics.clustering import nmi
from topicflow.metrics.heldout import particle_learning_log_likelihood
from topicflow.models.lda.gibbs.state import GibbsParams
from topicflow.models.lda.gibbs.scores import topic_word_distribution
from topicflow.pipeline.streaming.init_trials import (
    HELD_OUT_FRACTION,
    best_trial,
    fitted_prefix_size,
    run_initialization_trial,
    trial_seed,
)
from topicflow.testing.corpora import draw_planted_corpus


@pytest.fixture(scope="module")
def prefix() -> object:
    planted = draw_planted_corpus(n_docs=50, n_topics=3, n_terms=30, doc_length=20, alpha=0.1, seed=8)
    labels = np.array([f"t{k}" for k in np.argmax(planted.doc_topic, axis=1)], dtype=object)
    block = block_from_csr(sp.csr_matrix(planted.counts["default"]), first_doc=0)
    return block.__class__(block.indptr, block.term_ids, block.counts, block.doc_ids, 0, block.n_terms,
                           block.language, labels, None)


def test_trial_seeds_start_at_the_run_seed_and_differ() -> None:
    assert trial_seed(5, 0) == 5
    seeds = {trial_seed(5, t) for t in range(20)}
    assert len(seeds) == 20 and all(0 <= s < 2**31 for s in seeds)
    assert trial_seed(5, 3) == trial_seed(5, 3) != trial_seed(6, 3)


def test_prefix_share_fitted() -> None:
    assert fitted_prefix_size(100, "perplexity", 5) == 80
    assert fitted_prefix_size(100, "perplexity", 1) == 100  # a single trial is not scored
    assert fitted_prefix_size(100, "nmi", 5) == 100
    assert fitted_prefix_size(1, "perplexity", 2) == 1
    assert HELD_OUT_FRACTION == 0.2


def test_nmi_trial_scores_its_fit(prefix: object) -> None:
    trial = run_initialization_trial(prefix, GibbsParams(3, 0.1, 0.05, seed=4), sweeps=20, select="nmi",  # type: ignore[arg-type]
                                     n_trials=3)
    assert trial.n_fitted_docs == 50 and trial.seed == 4
    expected = nmi(prefix.labels, np.argmax(trial.state.doc_topic_counts, axis=1))  # type: ignore[attr-defined]
    assert trial.score == expected and trial.score > 0.5


def test_perplexity_trial_scores_the_held_out_fifth(prefix: object) -> None:
    trial = run_initialization_trial(prefix, GibbsParams(3, 0.1, 0.05, seed=4), sweeps=20, select="perplexity",  # type: ignore[arg-type]
                                     n_trials=3)
    assert trial.n_fitted_docs == 40 and trial.state.doc_topic_counts.shape[0] == 40
    held_out = prefix.slice(40, 50)  # type: ignore[attr-defined]
    log_lik, n_tokens = particle_learning_log_likelihood(held_out, topic_word_distribution(trial.state),
                                                         trial.state.doc_topic_prior)
    assert trial.score == pytest.approx(log_lik / n_tokens)
    assert -math.log(30) < trial.score < 0  # better than uniform over the 30 terms


def test_single_trial_is_not_scored_and_unlabeled_nmi_is_refused(prefix: object) -> None:
    trial = run_initialization_trial(prefix, GibbsParams(3, seed=1), sweeps=2, select="nmi", n_trials=1)  # type: ignore[arg-type]
    assert math.isnan(trial.score)
    unlabeled = prefix.__class__(prefix.indptr, prefix.term_ids, prefix.counts, prefix.doc_ids, 0,  # type: ignore[attr-defined]
                                 prefix.n_terms, prefix.language, None, None)  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match="labels"):
        run_initialization_trial(unlabeled, GibbsParams(3, seed=1), sweeps=2, select="nmi", n_trials=2)


def test_best_trial_prefers_the_first_maximum_and_ignores_nan() -> None:
    assert best_trial([0.1, 0.3, 0.3]) == 1
    assert best_trial([float("nan"), 0.2]) == 1
    assert best_trial([float("nan"), float("nan")]) == 0
