"""Distributed collapsed Gibbs sampling for LDA (AD-LDA over fixed blocks, z on disk): see docs/gibbs.md."""
from __future__ import annotations

from topicflow.pipeline.gibbs.fit import (
    GIBBS_KIND,
    GibbsConfig,
    GibbsFitResult,
    GibbsSweepRecord,
    fit_gibbs,
    lda_view,
)

__all__ = ["GIBBS_KIND", "GibbsConfig", "GibbsFitResult", "GibbsSweepRecord", "fit_gibbs", "lda_view"]
