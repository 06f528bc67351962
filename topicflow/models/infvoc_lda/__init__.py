"""Online LDA with an infinite vocabulary (Zhai and Boyd-Graber 2013; Zhai 2014, ch. 7): the pure math.

Each topic is a Dirichlet process over all strings, truncated to an ordered set of words (TOS) that
grows with every minibatch (expansion), is re-sorted by a ranking score every U minibatches and cut to
T words (contraction). The E-step is hybrid Gibbs sampling per document (:mod:`.estep`, eq. 7.2); the
global update is a stochastic natural-gradient step on the sticks' Beta parameters and an interpolation
of the ranking scores (:mod:`.update`, eqs. 7.6-7.8); the state, its stick expectations (eqs. 7.3-7.4)
and read-outs live in :mod:`.tos`, the settings in :mod:`.params`. No Dask, no I/O: a driver maps
:func:`estep_documents` over partitions, merges :class:`InfVocStats` in a tree and calls
:func:`update_minibatch`. The base distribution G0 over strings lives in :mod:`.g0`.
"""
from __future__ import annotations

from topicflow.models.infvoc_lda.estep import (
    InfVocStats,
    estep_documents,
    fold_in,
    words_from_ordered_block,
)
from topicflow.models.infvoc_lda.params import InfVocParams, NewWordNu, UnseenWeight
from topicflow.models.infvoc_lda.tos import (
    InfVocState,
    PreparedWeights,
    empty_state,
    expected_log_sticks,
    expected_topic_words,
    prepare_weights,
    top_words,
    tos_positions,
)
from topicflow.models.infvoc_lda.update import (
    expand_tos,
    reorder_and_contract,
    restate_tails,
    update_minibatch,
    update_ranks,
    update_sticks,
)

__all__ = [
    "InfVocParams", "NewWordNu", "UnseenWeight", "InfVocState", "PreparedWeights", "InfVocStats",
    "empty_state", "expected_log_sticks", "expected_topic_words", "prepare_weights", "top_words", "tos_positions",
    "estep_documents", "fold_in", "words_from_ordered_block",
    "expand_tos", "update_sticks", "update_ranks", "reorder_and_contract", "restate_tails",
    "update_minibatch",
]
