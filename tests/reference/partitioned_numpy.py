"""Plain NumPy reference of one partitioned sweep (Yan et al. 2009), by enumeration.

Written from the scheme, not from the kernel: documents in contiguous parts, words in parts; in epoch l
the task of document part j samples, document by document, the tokens of word part (j + l) mod P in
their original order, each from the collapsed conditional (:func:`gibbs_numpy.conditional`) with the
current n_dk and n_wk and the topic totals the task sees: n_k at the start of the epoch plus the task's
own changes (the other tasks of the epoch run at the same time). :func:`sweep_transition` multiplies
those conditionals along every sequence of draws.
"""
from __future__ import annotations

import itertools

import numpy as np

from tests.reference.gibbs_numpy import conditional


def schedule(token_indptr, token_terms, doc_bounds, word_part):
    """The tokens of every task of every epoch: a list (epochs) of lists (tasks) of token indices."""
    n_parts = len(doc_bounds) - 1
    epochs = []
    for epoch in range(n_parts):
        tasks = []
        for j in range(n_parts):
            part = (j + epoch) % n_parts
            tokens = [t for d in range(doc_bounds[j], doc_bounds[j + 1])
                      for t in range(token_indptr[d], token_indptr[d + 1]) if word_part[token_terms[t]] == part]
            tasks.append(tokens)
        epochs.append(tasks)
    return epochs


def sweep_transition(token_indptr, token_terms, topics, n_terms, alpha, beta, doc_bounds, word_part):
    """Exact distribution of the assignments after one partitioned sweep from ``topics`` (dict: tuple -> p)."""
    n_topics = len(alpha)
    n_tokens = len(token_terms)
    doc_of = np.repeat(np.arange(len(token_indptr) - 1), np.diff(token_indptr))
    epochs = schedule(token_indptr, token_terms, doc_bounds, word_part)
    out = {}
    for new in itertools.product(range(n_topics), repeat=n_tokens):
        current = np.array(topics, dtype=np.int64)
        prob = 1.0
        for tasks in epochs:
            start_totals = np.bincount(current, minlength=n_topics)
            for tokens in tasks:
                own = np.zeros(n_topics, dtype=np.int64)  # this task's changes of n_k so far
                for t in tokens:
                    old = current[t]
                    current[t] = -1
                    own[old] -= 1
                    kept = current >= 0
                    doc_row = np.bincount(current[kept & (doc_of == doc_of[t])], minlength=n_topics)
                    term_row = np.bincount(current[kept & (token_terms == token_terms[t])], minlength=n_topics)
                    prob *= conditional(doc_row, term_row, start_totals + own, alpha, beta, n_terms)[new[t]]
                    current[t] = new[t]
                    own[new[t]] += 1
        out[new] = prob
    return out
