"""Evaluation math shared by every model family: held-out likelihood, clustering scores, topic coherence.

``topicflow.metrics.coherence`` is the public coherence function (:mod:`topicflow.metrics.topic_coherence`).
"""
from topicflow.metrics.topic_coherence import CoherenceResult, coherence

__all__ = ["CoherenceResult", "coherence"]
