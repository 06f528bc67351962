"""Saved tree-LDA models: the LDA view every reader understands, plus the exact tree state.

* ``state`` is the LDA view (:func:`topicflow.models.tree_lda.view.lda_view`): per-language lambda
  whose rows have the tree's posterior-mean word distributions, so ``topicflow topics``, ``infer``,
  ``evaluate`` and ``export`` read a tree model as a (polylingual) LDA model.
* ``sampler_state`` holds the exact tree state: ``edge_var`` (lambda per topic and edge) and the prior
  tree's arrays (``tree/<field>``), so the model reloads bit for bit without its tree file.
* ``info`` records family ``"tree_lda"``, kind ``"tree_lda"``, the method (``"batch"``, ``"online"``, ``"gibbs"``), the settings
  (:meth:`~topicflow.pipeline.tree_lda.TreeVBConfig.to_dict`) and, under ``tree``, the tree's
  languages, vocabulary sizes, node names and the file it was read from.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from topicflow.errors import ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.state import LDAState
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import TreeVBLayout, tree_vb_layout
from topicflow.models.tree_lda.view import lda_view
from topicflow.pipeline.tree_lda.batch import TreeFitResult, TreeLDAState, TreeVBConfig

TREE_KIND = "tree_lda"
#: PriorTree array fields kept in the model's sampler state as ``tree/<field>``.
TREE_ARRAYS = ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges", "path_language", "path_term")


def tree_model(corpus: Corpus, result: TreeFitResult, config: TreeVBConfig, *,
               tree_source: str | None = None, method: str = "batch", online: dict[str, Any] | None = None,
               shards: Sequence[int] | None = None) -> SavedModel:
    """The saved model of a tree fit (see the module docstring for what goes where).

    Parameters
    ----------
    corpus : Corpus
        The training store.
    result : TreeFitResult
    config : TreeVBConfig
    tree_source : str, optional
        Path of the prior-tree file, recorded for provenance.
    method : str, default "batch"
        How the model was fitted (``"batch"``, ``"online"``, ``"gibbs"``), recorded as ``info.method``.
    online : dict, optional
        The online position (``info.online``: config, t, docs_seen) of an online fit, for ``update``.
    shards : sequence of int, optional
        Store positions of the shards the model has seen (default: all of them).

    Returns
    -------
    SavedModel
    """
    tree = result.layout.tree
    view, priors = lda_view(result.state.edge_var, result.layout)
    state = LDAState(view, np.asarray(result.state.doc_topic_prior, dtype=np.float64),
                     {lang: float(value) for lang, value in priors.items()})
    arrays: dict[str, np.ndarray] = {"edge_var": np.array(result.state.edge_var, dtype=np.float64)}
    for name in TREE_ARRAYS:
        arrays[f"tree/{name}"] = np.array(getattr(tree, name))
    info = ModelInfo(
        family="tree_lda", kind=TREE_KIND, method=method, settings=config.to_dict(), online=online,
        trace=[record.to_dict() for record in result.trace], converged=result.converged,
        corpus=corpus_provenance(corpus, range(corpus.n_shards) if shards is None else shards),
        extra={"tree": {"languages": list(tree.languages), "n_terms": [int(n) for n in tree.n_terms],
                        "node_names": list(tree.node_names), "source": tree_source}},
    )
    return SavedModel(state, {lang: corpus.vocabulary(lang) for lang in tree.languages}, info, sampler_state=arrays)


def is_tree_model(model: SavedModel) -> bool:
    """Whether ``model`` was saved by :func:`tree_model`.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    bool
    """
    return model.info.family == "tree_lda"


def _require(model: SavedModel) -> dict[str, Any]:
    missing = [name for name in ("edge_var", *(f"tree/{n}" for n in TREE_ARRAYS)) if name not in model.sampler_state]
    recorded = model.info.extra.get("tree")
    if not is_tree_model(model) or missing or not isinstance(recorded, dict):
        what = f"sampler arrays {missing}" if missing else "the 'tree' record of model.json"
        raise ModelFormatError(
            f"model (family {model.info.family!r}) has no tree-LDA state (it lacks {what}); fit it again with "
            "`topicflow fit --prior-tree TREE`.", field="sampler_state")
    return recorded


def saved_tree(model: SavedModel) -> PriorTree:
    """The prior tree a saved tree model was fitted with (bit for bit).

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    PriorTree

    Raises
    ------
    ModelFormatError
        Not a tree model, or its tree arrays are missing.
    """
    recorded = _require(model)
    arrays = {name: np.asarray(model.sampler_state[f"tree/{name}"]) for name in TREE_ARRAYS}
    return PriorTree(languages=tuple(recorded["languages"]), n_terms=tuple(int(n) for n in recorded["n_terms"]),
                     node_names=tuple(recorded["node_names"]),
                     edge_parent=arrays["edge_parent"].astype(np.int64), edge_child=arrays["edge_child"].astype(np.int64),
                     edge_prior=arrays["edge_prior"].astype(np.float64),
                     path_indptr=arrays["path_indptr"].astype(np.int64), path_edges=arrays["path_edges"].astype(np.int64),
                     path_language=arrays["path_language"].astype(np.int64),
                     path_term=arrays["path_term"].astype(np.int64))


def saved_tree_config(model: SavedModel) -> TreeVBConfig:
    """The settings a tree model was fitted with.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    TreeVBConfig
    """
    return TreeVBConfig.from_dict(model.info.settings)


def saved_tree_state(model: SavedModel) -> tuple[TreeLDAState, TreeVBLayout]:
    """The exact variational state of a saved tree model and the layout it lives in.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    state : TreeLDAState
    layout : TreeVBLayout

    Raises
    ------
    ModelFormatError
        Not a tree model, or its arrays are missing.
    """
    tree = saved_tree(model)
    layout = tree_vb_layout(tree, saved_tree_config(model).normalization)
    edge_var = np.asarray(model.sampler_state["edge_var"], dtype=np.float64)
    if edge_var.shape != (model.state.n_topics, tree.n_edges):
        raise ModelFormatError(f"sampler_state/edge_var has shape {edge_var.shape}, expected "
                               f"{(model.state.n_topics, tree.n_edges)}", field="sampler_state/edge_var")
    return TreeLDAState(edge_var, np.asarray(model.state.doc_topic_prior, dtype=np.float64)), layout
