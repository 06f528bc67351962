"""Plain single-process loop over the pure infvoc functions: what the Dask driver must equal bit for bit."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from topicflow.io.corpus.reader import Corpus
from topicflow.models.infvoc_lda import (
    InfVocParams,
    InfVocState,
    InfVocStats,
    empty_state,
    estep_documents,
    prepare_weights,
    update_minibatch,
)
from topicflow.models.infvoc_lda.g0 import CharNgramG0, log_g0
from topicflow.pipeline.infvoc_lda import InfVocPlan, WordIndex
from topicflow.pipeline.vb import plan_minibatches


def reference_fit(corpus: Corpus, params: InfVocParams, plan: InfVocPlan, *, g0: CharNgramG0 | None,
                  shards: Sequence[int] | None = None, state: InfVocState | None = None,
                  index: WordIndex | None = None) -> tuple[InfVocState, WordIndex, list[np.ndarray]]:
    """Per document: strings from the store's texts, ids in first-seen order, one estep call per document."""
    shards = list(range(corpus.n_shards)) if shards is None else list(shards)
    vocab = corpus.vocabulary()
    texts = {s: corpus.read_ordered(s).texts(vocab) for s in shards}
    first = np.concatenate([[0], np.cumsum([s.n_docs for s in corpus.shards])])
    state = empty_state(params.n_topics) if state is None else state
    index = WordIndex() if index is None else index.copy()
    gammas = []
    for epoch in range(plan.passes):
        for minibatch in plan_minibatches([s.n_docs for s in corpus.shards], shards, plan, seed=params.seed,
                                          epoch=epoch):
            docs = [(int(first[s] + row), texts[s][row]) for s, a, b in minibatch.pieces for row in range(a, b)]
            ids = [index.add(words) for _, words in docs]
            word_g0 = None if g0 is None else log_g0(g0, list(index.words))
            weights = prepare_weights(state, np.concatenate(ids), params, log_g0=word_g0)
            stats = InfVocStats.zeros(params.n_topics, params.samples)
            i = state.n_updates + 1
            for (g, _), word_ids in zip(docs, ids):
                one, gamma = estep_documents(np.array([0, word_ids.shape[0]]), word_ids, weights, params, first_doc=g,
                                             minibatch=i)
                stats = stats.merge(one)
                gammas.append(gamma[0])
            state = update_minibatch(state, stats, params, n_docs_total=plan.total_docs or len(corpus),
                                     log_g0=word_g0)
    return state, index, gammas


def same_state(a: InfVocState, b: InfVocState) -> bool:
    """Bit-for-bit equality of two states."""
    arrays_a, scalars_a = a.to_arrays()
    arrays_b, scalars_b = b.to_arrays()
    return scalars_a == scalars_b and all(
        arrays_a[k].dtype == arrays_b[k].dtype and np.array_equal(arrays_a[k], arrays_b[k]) for k in arrays_a)
