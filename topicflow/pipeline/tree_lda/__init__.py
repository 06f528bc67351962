"""Drivers of tree-prior LDA (tLDA / ptLDA) on Dask: batch variational, hybrid and collapsed Gibbs inference."""
from __future__ import annotations

from topicflow.pipeline.tree_lda.batch import (
    TREE_INFERENCE,
    TreeFitResult,
    TreeLDAState,
    TreeVBConfig,
    fit_batch_tree_vb,
    tree_mstep,
)
from topicflow.pipeline.tree_lda.gibbs import (
    TreeGibbsFit,
    fit_gibbs_tree,
    fit_tree_gibbs,
    gibbs_fit_result,
    gibbs_params,
)
from topicflow.pipeline.tree_lda.model import (
    is_tree_model,
    saved_tree,
    saved_tree_config,
    saved_tree_state,
    tree_model,
)
from topicflow.pipeline.tree_lda.online import (
    TreeMinibatchRecord,
    TreeOnlineResult,
    fit_online_tree,
    online_tree_model,
    tree_online_position,
)

__all__ = [
    "TREE_INFERENCE",
    "TreeFitResult",
    "TreeGibbsFit",
    "TreeLDAState",
    "TreeVBConfig",
    "fit_batch_tree_vb",
    "fit_gibbs_tree",
    "fit_tree_gibbs",
    "gibbs_fit_result",
    "gibbs_params",
    "is_tree_model",
    "saved_tree",
    "saved_tree_config",
    "saved_tree_state",
    "tree_model",
    "tree_mstep",
    # online VB and checkpoints (tree-online)
    "TreeMinibatchRecord",
    "TreeOnlineResult",
    "fit_online_tree",
    "online_tree_model",
    "tree_online_position",
]
