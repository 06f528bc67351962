"""topicflow: out-of-core topic models on Dask."""
from __future__ import annotations

from topicflow import config as _config  # noqa: F401  (registers dask.config defaults)
from topicflow._version import __version__
from topicflow.api.hdp import HDP
from topicflow.api.infvoc import InfVocLDA
from topicflow.api.lda import LDA
from topicflow.api.streaming import StreamingLDA
from topicflow.api.tree_lda import TreeLDA
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline import evaluation as _evaluation  # noqa: F401  (fills the registries of topicflow.metrics.coherence)

__all__ = ["HDP", "InfVocLDA", "LDA", "Corpus", "StreamingLDA", "TreeLDA", "__version__"]
