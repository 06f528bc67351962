"""Small random corpora as DocBlocks for the model tests (deterministic from a seed)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.lda.synth import draw_mixture_counts


def random_counts(n_docs, n_terms, *, seed, mean_len=12, empty_rows=(), max_count=4):
    """A dense (n_docs, n_terms) int count matrix with Poisson-ish sparse rows."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((n_docs, n_terms), dtype=np.int64)
    for d in range(n_docs):
        if d in empty_rows:
            continue
        n_unique = int(min(n_terms, max(1, rng.poisson(mean_len))))
        terms = rng.choice(n_terms, size=n_unique, replace=False)
        dense[d, terms] = rng.integers(1, max_count + 1, size=n_unique)
    return dense


def random_block(n_docs, n_terms, *, seed, language="default", first_doc=0, **kwargs) -> DocBlock:
    """A DocBlock of ``random_counts``."""
    dense = random_counts(n_docs, n_terms, seed=seed, **kwargs)
    return block_from_csr(sp.csr_matrix(dense), first_doc=first_doc, language=language)


def lda_block(n_docs, topic_word, alpha, *, seed, doc_len=40, language="default") -> DocBlock:
    """Documents sampled from LDA with known topics (n_topics, n_terms) and prior alpha.

    The generative process is topicflow.models.lda.synth's (test data, not a reference of it); each
    document draws its theta and then its words, in turn, from one generator.
    """
    rng = np.random.default_rng(seed)
    n_topics, n_terms = topic_word.shape
    dense = np.zeros((n_docs, n_terms), dtype=np.int64)
    for d in range(n_docs):
        theta = rng.dirichlet(np.broadcast_to(alpha, (n_topics,)))
        dense[d] = draw_mixture_counts(rng, theta[None, :], topic_word, np.array([doc_len]))[0]
    return block_from_csr(sp.csr_matrix(dense), language=language)
