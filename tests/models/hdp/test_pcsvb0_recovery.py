"""PCSVB0 on generated data: planted topics and the number in use; alpha and gamma from the HDP.

Statistical tests with fixed seeds (no retries); each bound states what was measured and why it holds.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma

from tests.reference.corpora import lda_block
from topicflow.metrics.recovery import match_topics
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.hdp import pcsvb0
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.models.hdp.sticks import gamma_update, stick_params
from topicflow.models.lda.synth import block_topic_word, draw_mixture_counts


@pytest.fixture(scope="module")
def planted():
    """K = 10 well-separated block topics over 100 terms; 1000 documents of 80 tokens, alpha = 0.05 per topic."""
    truth = block_topic_word(10, 100, background=1e-3)
    return truth, lda_block(1000, truth, 0.05, seed=1, doc_len=80)


def topics_of(state):
    lam = state.topic_word_counts() + state.beta
    return lam / lam.sum(axis=1, keepdims=True)


def test_word_by_word_finds_the_planted_topics_and_about_ten_in_use(planted):
    """T = 30, 10 passes, burn-in 1 and a zero document start (spec P8's choices); paper step sizes.

    Measured: 12 topics hold >= 1% of the expected tokens (the 10 planted ones hold 8-11% each, the rest
    are small duplicates left by the stochastic updates), worst matched Hellinger 0.09. Topics with a
    share >= 1e-3 (``topics_in_use()``'s default) number 19: the duplicates decay slowly, so the
    [8, 14] check uses the 1% share. With Algorithm 1's literal settings (no burn-in, random start)
    the same data gives 26 topics >= 1% and worst 0.46 after 5 passes (docs/hdp.md).
    """
    truth, corpus = planted
    params = HDPParams(truncation=30, seed=1, burn_in=1, doc_start="zero")
    state = HDPState.initial(params, n_terms=100, n_tokens=corpus.n_tokens, n_docs=corpus.n_docs)
    for _ in range(10):
        pcsvb0.run_word_by_word(state, corpus, params)
    assert 8 <= state.topics_in_use(1e-2) <= 14
    assert match_topics(topics_of(state), truth).worst < 0.15
    assert state.stick_weights().sum() == pytest.approx(1.0)


def test_minibatch_finds_the_planted_topics(planted):
    """Minibatches of 20 documents, paper step sizes (rho^c per minibatch), 5 passes: measured worst 0.12."""
    truth, corpus = planted
    params = HDPParams(truncation=30, seed=1, burn_in=1, doc_start="zero")
    state = HDPState.initial(params, n_terms=100, n_tokens=corpus.n_tokens, n_docs=corpus.n_docs)
    for _ in range(5):
        for a in range(0, corpus.n_docs, 20):
            part = corpus.slice(a, a + 20)
            pcsvb0.apply_minibatch(state, pcsvb0.local_minibatch(pcsvb0.global_view(state), part, params), params)
    assert match_topics(topics_of(state), truth).worst < 0.2
    assert state.t_topic_word == 5 * 50 and state.t_hyper == 5 * 50


def crf_tables(alpha, gamma, *, n_topics, n_docs, doc_len, seed):
    """Table counts m_dk of the HDP's Chinese restaurant franchise: pi ~ GEM(gamma) truncated at n_topics;
    in each document, token i opens a table with probability alpha / (i + alpha); a table's dish ~ pi."""
    rng = np.random.default_rng(seed)
    bars = rng.beta(1.0, gamma, size=n_topics)
    bars[-1] = 1.0
    pi = bars * np.concatenate(([1.0], np.cumprod(1.0 - bars[:-1])))
    tables = np.zeros((n_docs, n_topics))
    for d in range(n_docs):
        opened = rng.random(doc_len) < alpha / (np.arange(doc_len) + alpha)
        np.add.at(tables[d], rng.choice(n_topics, size=int(opened.sum()), p=pi), 1.0)
    return pi, tables


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hyperparameter_updates_recover_alpha_and_gamma_from_table_statistics(seed):
    """Eqs. 10-12 and 6, fed per document with the exact table counts of HDP-generated documents
    (alpha = 1, gamma = 2, 1000 documents of 80 tokens, T = 30) for 20 passes.

    alpha: eq. 12's fixed point is the maximum-likelihood alpha of the table counts (E[m_d] = alpha
    (psi(alpha + n_d) - psi(alpha))), from ~5000 tables: within 5% (measured 1-2%). gamma: eq. 6 is the
    EM update of the stick concentration from the 11-21 sticks one GEM draw puts to use, whose own
    sampling error is ~1/sqrt(#sticks) ~ 25%: within 45% (the batch estimate over seeds 0-9 ranged
    1.12-2.35, tracking the number of dishes drawn; seeds 0-2 give 1.37, 1.82, 2.14). The streamed values equal the batch
    fixed points of eqs. 5-6 on the same statistics to 2% (the stochastic steps converge).
    """
    alpha_true, gamma_true, n_topics, n_docs, doc_len = 1.0, 2.0, 30, 1000, 80
    _, tables = crf_tables(alpha_true, gamma_true, n_topics=n_topics, n_docs=n_docs, doc_len=doc_len, seed=seed)
    params = HDPParams(truncation=n_topics)
    state = HDPState.initial(params, n_terms=2, n_tokens=n_docs * doc_len, n_docs=n_docs)
    for _ in range(20):
        for d in range(n_docs):
            gap = float(digamma(doc_len + state.alpha) - digamma(state.alpha))
            pcsvb0.hyper_step(state, tables[d], batch_docs=1, digamma_sum=gap, params=params)
    assert state.alpha == pytest.approx(alpha_true, rel=0.05)
    assert state.gamma == pytest.approx(gamma_true, rel=0.45)
    alpha_batch, gamma_batch = alpha_true, gamma_true
    for _ in range(300):
        alpha_batch = tables.sum() / (n_docs * float(digamma(doc_len + alpha_batch) - digamma(alpha_batch)))
        gamma_batch = gamma_update(*stick_params(tables.sum(axis=0), gamma_batch))
    assert state.alpha == pytest.approx(alpha_batch, rel=0.02)
    assert state.gamma == pytest.approx(gamma_batch, rel=0.02)


def test_end_to_end_hyperparameters_on_hdp_documents_are_finite_and_biased_up_as_measured():
    """The whole method on words drawn from the HDP (alpha = 1, gamma = 2, 20 block topics): the fit's
    expected tables per document (Sato et al.'s E[1(n_dk >= 1)]) are ~10 where the documents use 2.7
    topics, because the stochastic updates leave duplicated topics that share a document's words (with the
    planted topics held fixed the same local step gives 2.6 tables per document and alpha's target 0.52,
    the indicator-count estimate of alpha = 1). So alpha and gamma come out high: measured alpha 2.9,
    gamma 4.6 after 3 passes. Asserted: both finite, alpha within a factor 4 of the truth and gamma within
    a factor 3 (a regression bound, not a recovery claim; docs/hdp.md reports it as a limitation)."""
    n_topics, width, n_docs, doc_len = 20, 10, 1000, 80
    rng = np.random.default_rng(0)
    bars = rng.beta(1.0, 2.0, size=n_topics)
    bars[-1] = 1.0
    pi = bars * np.concatenate(([1.0], np.cumprod(1.0 - bars[:-1])))
    truth = block_topic_word(n_topics, n_topics * width, background=1e-4)
    dense = np.zeros((n_docs, n_topics * width), dtype=np.int64)
    for d in range(n_docs):
        theta = rng.dirichlet(1.0 * pi + 1e-12)
        dense[d] = draw_mixture_counts(rng, theta[None, :], truth, np.array([doc_len]))[0]
    corpus = block_from_csr(sp.csr_matrix(dense))
    params = HDPParams(truncation=30, seed=1, burn_in=1, doc_start="zero")
    state = HDPState.initial(params, n_terms=corpus.n_terms, n_tokens=corpus.n_tokens, n_docs=n_docs)
    for _ in range(3):
        pcsvb0.run_word_by_word(state, corpus, params)
    assert np.isfinite(state.alpha) and np.isfinite(state.gamma)
    assert 0.25 <= state.alpha <= 4.0
    assert 2.0 / 3.0 <= state.gamma <= 6.0
