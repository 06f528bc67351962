"""topicflow: out-of-core topic models on Dask.

The estimators and :class:`Corpus` are imported on first use (``topicflow.LDA``,
``from topicflow import LDA``), so ``import topicflow`` and the command line's ``--help`` load no
Dask, numba or zarr. Before anything imports numba, :func:`topicflow._numba_cache.ensure_cache_dir`
points its on-disk kernel cache at a writable directory (worker processes import this package
first too, so they share the cache).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from topicflow._numba_cache import ensure_cache_dir as _ensure_cache_dir
from topicflow._version import __version__

if TYPE_CHECKING:
    from topicflow.api.adaptor_grammar import AdaptorGrammar
    from topicflow.api.hdp import HDP
    from topicflow.api.infvoc import InfVocLDA
    from topicflow.api.lda import LDA
    from topicflow.api.streaming import StreamingLDA
    from topicflow.api.tree_lda import TreeLDA
    from topicflow.io.corpus.reader import Corpus

__all__ = ["AdaptorGrammar", "HDP", "InfVocLDA", "LDA", "Corpus", "StreamingLDA", "TreeLDA", "__version__"]

#: Where each public name lives; imported by :func:`__getattr__` on first access.
_PUBLIC = {
    "AdaptorGrammar": "topicflow.api.adaptor_grammar",
    "HDP": "topicflow.api.hdp",
    "InfVocLDA": "topicflow.api.infvoc",
    "LDA": "topicflow.api.lda",
    "StreamingLDA": "topicflow.api.streaming",
    "TreeLDA": "topicflow.api.tree_lda",
    "Corpus": "topicflow.io.corpus.reader",
}

_ensure_cache_dir()


def __getattr__(name: str) -> Any:
    """Import a public name on first access (PEP 562), with the registries the estimators rely on.

    The dask.config defaults (:mod:`topicflow.config`) are registered first, as the eager imports
    of this module did before.
    """
    if name not in _PUBLIC:
        raise AttributeError(f"module 'topicflow' has no attribute {name!r}")
    importlib.import_module("topicflow.config")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
