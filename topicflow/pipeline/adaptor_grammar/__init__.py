"""Driver of online adaptor grammars (Zhai 2014, ch. 8) on Dask: minibatches, parallel E-steps, the update."""
from __future__ import annotations

from topicflow.pipeline.adaptor_grammar.fit import (
    GrammarFitConfig,
    GrammarFitResult,
    Sentences,
    bind_grammar,
    fit_grammar,
    grammar_text,
    read_sentences,
    token_sentences,
)

__all__ = ["GrammarFitConfig", "GrammarFitResult", "Sentences", "bind_grammar", "fit_grammar", "grammar_text",
           "read_sentences", "token_sentences"]
