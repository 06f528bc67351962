"""Adaptor grammars (Johnson et al. 2007) with online hybrid inference (Zhai et al. 2014; Zhai 2014, ch. 8).

Pure math, no Dask and no I/O. :mod:`.grammar` reads and validates grammar files and compiles them to
integer arrays; :mod:`.inside` builds the derived PCFG G' (eqs. 8.5-8.7), runs the inside algorithm as a
numba kernel and samples parse trees from the chart (eq. 8.4); :mod:`.online` holds the TNGs, the
expected counts f, g, h of sampled trees and the online updates (eqs. 8.8-8.12, section 8.3.1).

A serial fit is a loop of :func:`fit_minibatch`; a distributed one maps :func:`estep_sentences` over
partitions with the same :func:`prepare`-d G', merges the :class:`AGStats` (exact integer counts) and calls
:func:`update_minibatch` once. :mod:`.readout` reads each adapted nonterminal's ranked yields (the
topics of the ``infvoc-lda`` grammar).
"""
from __future__ import annotations

from topicflow.models.adaptor_grammar.grammar import (
    ANY_TERMINAL,
    SHIPPED_GRAMMARS,
    UNQUOTED_TERMINAL,
    Adaptor,
    Grammar,
    GrammarSpec,
    Rule,
    is_terminal,
    load_grammar,
    parse_grammar,
)
from topicflow.models.adaptor_grammar.inside import (
    KIND_BINARY,
    KIND_CACHED,
    KIND_LEXICAL,
    KIND_UNARY,
    Chart,
    DerivedPCFG,
    SampledTrees,
    derived_pcfg,
    expected_log_sticks,
    expected_log_theta,
    inside_chart,
    sample_trees,
)
from topicflow.models.adaptor_grammar.online import (
    BIAS_CHOICES,
    HYPER_CHOICES,
    SEED_EPOCH,
    TNG,
    AGState,
    AGStats,
    Atom,
    OnlineParams,
    atom_from_key,
    estep_sentences,
    fit_minibatch,
    initial_state,
    optimize_hyperparameters,
    prepare,
    prune,
    rebind_state,
    resample_table_labels,
    sample_segmentations,
    seed_state,
    seed_update,
    segment,
    spans_of,
    tree_log_weight,
    update_minibatch,
    variational_parameters,
)
from topicflow.models.adaptor_grammar.readout import (
    RANKINGS,
    Ranking,
    atom_weights,
    expected_sticks,
    top_yields,
    topic_words,
)

__all__ = [
    "ANY_TERMINAL", "UNQUOTED_TERMINAL", "SHIPPED_GRAMMARS", "Adaptor", "Grammar", "GrammarSpec", "Rule", "is_terminal",
    "load_grammar", "parse_grammar",
    "KIND_BINARY", "KIND_CACHED", "KIND_LEXICAL", "KIND_UNARY", "Chart", "DerivedPCFG", "SampledTrees",
    "derived_pcfg", "expected_log_sticks", "expected_log_theta", "inside_chart", "sample_trees",
    "BIAS_CHOICES", "HYPER_CHOICES", "AGState", "AGStats", "Atom", "OnlineParams", "TNG", "atom_from_key",
    "estep_sentences", "fit_minibatch", "initial_state", "optimize_hyperparameters", "prepare", "prune",
    "rebind_state", "resample_table_labels", "sample_segmentations", "SEED_EPOCH", "seed_state", "seed_update",
    "segment",
    "spans_of", "tree_log_weight",
    "update_minibatch", "variational_parameters",
    "RANKINGS", "Ranking", "atom_weights", "expected_sticks", "top_yields", "topic_words",
]
