"""Evaluation drivers: coherence, held-out likelihood, topics as features, reports and exports.

Every saved model, whatever its family or how it was made, is evaluated through these functions; the
math lives in :mod:`topicflow.metrics`, the per-partition graphs in :mod:`topicflow.tasks`.

Importing this package registers what :func:`topicflow.metrics.coherence` looks up (saved models and
corpus stores, :mod:`topicflow.pipeline.evaluation.coherence`).
"""
from __future__ import annotations

from topicflow.pipeline.evaluation import coherence as coherence
from topicflow.pipeline.evaluation.features import (
    CollectedFeatures,
    FeaturesResult,
    collect_topic_features,
    topic_features_scores,
)
from topicflow.pipeline.evaluation.matching import document_matching, language_doc_topics
from topicflow.pipeline.evaluation.heldout import (
    PROTOCOLS,
    HeldoutOptions,
    HeldoutResult,
    heldout_likelihood,
)
from topicflow.pipeline.evaluation.pyldavis import export_pyldavis, pyldavis_data
from topicflow.pipeline.evaluation.report import (
    ReportOptions,
    build_report,
    coherence_summary,
    write_model_report,
)

__all__ = ["PROTOCOLS", "CollectedFeatures", "FeaturesResult", "collect_topic_features", "HeldoutOptions", "HeldoutResult", "ReportOptions", "build_report",
           "coherence_summary", "document_matching", "export_pyldavis", "heldout_likelihood", "language_doc_topics", "pyldavis_data", "topic_features_scores",
           "write_model_report"]
