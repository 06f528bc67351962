"""Adaptor grammars (Johnson et al. 2007) with online hybrid inference (Zhai et al. 2014; Zhai 2014, ch. 8).

Pure math, no Dask and no I/O. :mod:`.grammar` reads and validates grammar files and compiles them to
integer arrays; :mod:`.inside` builds the derived PCFG G' (eqs. 8.5-8.7), runs the inside algorithm as a
numba kernel and samples parse trees from the chart (eq. 8.4); :mod:`.online` holds the TNGs, the
expected counts f, g, h of sampled trees and the online updates (eqs. 8.8-8.12, section 8.3.1).
"""
from __future__ import annotations

from topicflow.models.adaptor_grammar.grammar import (
    ANY_TERMINAL,
    SHIPPED_GRAMMARS,
    Adaptor,
    Grammar,
    GrammarSpec,
    Rule,
    is_terminal,
    load_grammar,
    parse_grammar,
)

__all__ = [
    "ANY_TERMINAL", "SHIPPED_GRAMMARS", "Adaptor", "Grammar", "GrammarSpec", "Rule", "is_terminal",
    "load_grammar", "parse_grammar",
]
