"""Drivers of tree-prior LDA (tLDA / ptLDA): batch variational and hybrid inference on Dask."""
from __future__ import annotations

from topicflow.pipeline.tree_lda.batch import (
    TreeFitResult,
    TreeLDAState,
    TreeVBConfig,
    fit_batch_tree_vb,
    tree_mstep,
)

__all__ = ["TreeFitResult", "TreeLDAState", "TreeVBConfig", "fit_batch_tree_vb", "tree_mstep"]
