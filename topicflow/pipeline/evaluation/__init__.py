"""Evaluation drivers: coherence, held-out likelihood, topics as features, reports and exports.

Every saved model, whatever its family or how it was made, is evaluated through these functions; the
math lives in :mod:`topicflow.metrics`, the per-partition graphs in :mod:`topicflow.tasks`.
"""
from __future__ import annotations
