"""Drivers of variational LDA: batch, online, streaming (svb), nightly continuation, inference.

Importing this package registers the continuation of variational models with ``topicflow update``
(:mod:`topicflow.pipeline.vb.nightly`); other pipeline packages use it through the names below.
"""
from __future__ import annotations

from topicflow.pipeline.vb import nightly as _nightly  # noqa: F401  (registers "vb_lda" continuations)
from topicflow.pipeline.vb.batch import (
    FitResult,
    IterationRecord,
    VBConfig,
    fit_batch_vb,
    share,
)
from topicflow.pipeline.vb.infer import (
    fold_in_params,
    model_blocks,
    model_token,
    oov_token_count,
    term_maps,
)
from topicflow.pipeline.vb.online import (
    Minibatch,
    MinibatchPlan,
    MinibatchRecord,
    OnlineConfig,
    plan_minibatches,
    resumed_minibatches,
)
from topicflow.pipeline.vb.svb import SVBConfig, fit_svb

__all__ = ["FitResult", "IterationRecord", "Minibatch", "MinibatchPlan", "MinibatchRecord", "OnlineConfig", "SVBConfig", "VBConfig", "fit_batch_vb", "fit_svb",
           "fold_in_params", "model_blocks", "model_token", "oov_token_count", "plan_minibatches", "resumed_minibatches", "share", "term_maps"]
