"""Plain NumPy reference of one AD-LDA sweep over fixed blocks (Newman et al. 2009).

Everything AD-LDA adds to the sequential sampler is written out here with dense arrays: each block
recounts its own n_wk from its z, sees the other blocks' counts frozen at the start of the sweep
(N = n_wk(all) - n_wk(block)), runs one sequential sweep of its tokens in document order, and the
driver adds every block's change of n_wk. The within-block draw is the sequential sparse sampler's,
:func:`topicflow.models.lda.gibbs.chain.run_sweeps` (its distribution is checked against enumeration
in tests/models/lda/gibbs/test_gibbs.py), called on global term ids with the block's tokens and the
counts N + n_wk(block) = n_wk(all, start of sweep) as its count table, so the reference shares no code
with the kernel's block bookkeeping (renumbered terms, sparse deltas, histograms).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tests.reference.gibbs_numpy import counts_from_topics
from topicflow.models.lda.gibbs.chain import run_sweeps
from topicflow.models.lda.gibbs.state import GibbsParams, state_from_topics


def adlda_sweep(blocks, term_topic, alpha, beta, *, seed, sweep):
    """One sweep. ``blocks``: list of (token_indptr, token_terms, topics, first_doc). Returns the new
    topics of every block, the new n_wk, and every block's n_dk after the sweep."""
    n_terms, n_topics = term_topic.shape
    params = GibbsParams(n_topics=n_topics, doc_topic_prior=np.asarray(alpha), topic_word_prior=beta, seed=seed)
    delta = np.zeros_like(term_topic, dtype=np.int64)
    new_topics, doc_topics = [], []
    for token_indptr, token_terms, topics, first_doc in blocks:
        _, own, own_totals = counts_from_topics(token_indptr, token_terms, topics, n_terms, n_topics)
        rest = term_topic - own  # the other blocks' counts, frozen
        assert rest.min() >= 0 and (term_topic.sum(axis=0) - own_totals).min() >= 0
        state = state_from_topics(token_indptr, token_terms, topics, n_terms, params, first_doc=first_doc,
                                  sweeps_done=sweep - 1)
        seen = rest + own  # what the block samples against: the others' counts and its own, kept current
        state = dataclasses.replace(state, term_topic_counts=seen.astype(np.int32),
                                    topic_counts=seen.sum(axis=0).astype(np.int64))
        out = run_sweeps(state, params, 1)
        doc_topic, after, _ = counts_from_topics(token_indptr, token_terms, out.topics, n_terms, n_topics)
        delta += after - own
        new_topics.append(np.array(out.topics))
        doc_topics.append(doc_topic)
    return new_topics, term_topic + delta, doc_topics
