"""Driver of online adaptor grammars (Zhai 2014, ch. 8) on Dask: minibatches, parallel E-steps, the update.

Importing it registers the ``adaptor_grammar`` continuation of ``topicflow update`` (:mod:`.nightly`).
"""
from __future__ import annotations

from topicflow.pipeline.adaptor_grammar.fit import (
    INIT_CHOICES,
    GrammarFitConfig,
    GrammarFitResult,
    GrammarStoreResult,
    SentenceIndex,
    Sentences,
    bind_alphabet,
    bind_grammar,
    fit_grammar,
    fit_grammar_store,
    grammar_text,
    read_sentences,
    scan_store,
    seed_blocks,
    store_sentences,
    token_sentences,
)
from topicflow.pipeline.adaptor_grammar.nightly import (
    continue_grammar,
    grammar_store_model,
)

__all__ = ["INIT_CHOICES", "GrammarFitConfig", "GrammarFitResult", "GrammarStoreResult", "SentenceIndex",
           "Sentences", "bind_alphabet", "bind_grammar", "continue_grammar", "fit_grammar", "fit_grammar_store",
           "grammar_store_model", "grammar_text", "read_sentences", "scan_store", "seed_blocks",
           "store_sentences", "token_sentences"]
