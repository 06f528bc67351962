"""Driver of infinite-vocabulary online LDA (Zhai 2014, ch. 7) on Dask: the stream, the model file, updates."""
from __future__ import annotations

from topicflow.pipeline.infvoc_lda import nightly as _nightly  # noqa: F401  (registers the "infvoc" continuation)
from topicflow.pipeline.infvoc_lda.config import InfVocPlan
from topicflow.pipeline.infvoc_lda.driver import (
    G0Choice,
    InfVocRecord,
    InfVocResult,
    fit_infvoc,
    ordered_language,
    resolve_g0,
)
from topicflow.pipeline.infvoc_lda.model import (
    INFVOC_KIND,
    InfVocPosition,
    infvoc_model,
    is_infvoc_model,
    lda_view,
    saved_g0,
    saved_infvoc,
)
from topicflow.pipeline.infvoc_lda.nightly import (
    continue_infvoc,
    infvoc_result_model,
    tracked_words,
)
from topicflow.pipeline.infvoc_lda.word_index import WordIndex

__all__ = [
    "INFVOC_KIND", "G0Choice", "InfVocPlan", "InfVocPosition", "InfVocRecord", "InfVocResult", "WordIndex",
    "continue_infvoc", "fit_infvoc", "infvoc_model", "infvoc_result_model", "is_infvoc_model", "lda_view",
    "ordered_language", "resolve_g0", "saved_g0", "saved_infvoc", "tracked_words",
]
