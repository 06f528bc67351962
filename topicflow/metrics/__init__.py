"""Evaluation math shared by every model family: held-out likelihood, clustering scores, topic coherence.

``topicflow.metrics.coherence`` is the public coherence function (:mod:`topicflow.metrics.topic_coherence`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topicflow.metrics.topic_coherence import CoherenceResult, coherence

__all__ = ["CoherenceResult", "coherence"]


def __getattr__(name: str) -> Any:
    """``coherence`` and ``CoherenceResult``, imported on first use.

    Any metric module imports this package first; the coherence measures (and the co-occurrence counts
    with them) are not loaded until asked for, so e.g. a fit that imports the classification metrics'
    constants does not pay for them (issue 22: start-up).
    """
    if name in __all__:
        from topicflow.metrics import topic_coherence

        return getattr(topic_coherence, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
