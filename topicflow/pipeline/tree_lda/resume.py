"""Checkpoints of the tree-LDA drivers (batch and online VB) and the store/tree check they share.

A tree checkpoint is an ordinary driver checkpoint (:mod:`topicflow.io.models.checkpoint`: two
slots and ``latest.json``, arrays in zarr, everything else JSON, never pickle) whose model is the LDA
view of the tree state (:func:`~topicflow.models.tree_lda.view.lda_view`, so it reads as any model)
and whose ``sampler_state`` holds the exact edge parameters lambda as ``edge_var``. alpha is the view's
``doc_topic_prior``. The fingerprint names the prior tree and the starting lambda by a digest, so a
resume with another tree or start is refused by name.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.storage import StoragePath
from topicflow.models.lda.state import LDAState
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import TreeVBLayout, check_edge_var
from topicflow.models.tree_lda.view import lda_view
from topicflow.tasks.estep import graph_token

#: Arrays of a tree that fix the model (their digest goes into checkpoint fingerprints).
_TREE_ARRAYS = ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges", "path_language", "path_term")


def check_store_matches_tree(corpus: Corpus, tree: PriorTree) -> None:
    """Refuse a store whose languages or vocabulary sizes are not the tree's.

    Parameters
    ----------
    corpus : Corpus
    tree : PriorTree

    Raises
    ------
    InvalidParameterError
        Other languages (or order), or another vocabulary size; the message says to rebuild the tree.
    """
    if tuple(corpus.languages) != tuple(tree.languages):
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has languages {list(corpus.languages)}, the prior tree "
            f"{list(tree.languages)}; build the tree for this store (`topicflow tree build`)")
    for lang, n_terms in zip(tree.languages, tree.n_terms):
        if len(corpus.vocabulary(lang)) != n_terms:
            raise InvalidParameterError(
                f"language {lang!r}: store {str(corpus.path)!r} has {len(corpus.vocabulary(lang))} terms, the "
                f"prior tree {n_terms}; rebuild the tree for this store (`topicflow tree build`)")


def tree_digest(tree: PriorTree, *starts: FloatArray) -> str:
    """A short digest of the tree's arrays and the given starting arrays (for fingerprints and Dask keys).

    Parameters
    ----------
    tree : PriorTree
    *starts : ndarray
        Starting lambda, alpha, ...

    Returns
    -------
    str
    """
    parts: list[Any] = [tree.languages, tree.n_terms]
    parts += [np.ascontiguousarray(getattr(tree, name)).tobytes() for name in _TREE_ARRAYS]
    parts += [np.ascontiguousarray(start, dtype=np.float64).tobytes() for start in starts]
    return graph_token(*parts)


def write_tree_checkpoint(path: Path | StoragePath, corpus: Corpus, layout: TreeVBLayout, edge_var: FloatArray,
                          doc_topic_prior: FloatArray, position: dict[str, Any], trace: list[dict[str, Any]],
                          fingerprint: dict[str, Any]) -> None:
    """Write the tree state atomically as a driver checkpoint (module docstring).

    Parameters
    ----------
    path : Path or StoragePath
        The checkpoint directory.
    corpus : Corpus
        The store (its vocabularies name the view's columns).
    layout : TreeVBLayout
    edge_var : ndarray of shape (n_topics, n_edges)
    doc_topic_prior : ndarray of shape (n_topics,)
    position : dict
        Where the loop stands.
    trace : list of dict
        Records so far.
    fingerprint : dict
        Settings, corpus and tree identity.
    """
    view, priors = lda_view(edge_var, layout)
    state = LDAState(view, np.asarray(doc_topic_prior, dtype=np.float64), dict(priors))
    write_checkpoint(path, Checkpoint(state, position, trace, fingerprint,
                                            {"edge_var": np.array(edge_var, dtype=np.float64)}),
                     {lang: corpus.vocabulary(lang) for lang in layout.tree.languages})


def read_tree_checkpoint(path: Path | StoragePath, fingerprint: dict[str, Any],
                         layout: TreeVBLayout) -> tuple[FloatArray, FloatArray, Checkpoint] | None:
    """The edge parameters, alpha and checkpoint at ``path``, or None when there is none.

    Parameters
    ----------
    path : Path or StoragePath
    fingerprint : dict
        Of the fit that would resume (a checkpoint of other settings is refused by name).
    layout : TreeVBLayout

    Returns
    -------
    tuple of (edge_var, doc_topic_prior, Checkpoint) or None

    Raises
    ------
    InvalidParameterError
        The checkpoint belongs to other settings, another store or another tree.
    ModelFormatError
        The checkpoint is damaged or lacks the tree state.
    """
    found = read_checkpoint(path, fingerprint)
    if found is None:
        return None
    if "edge_var" not in found.sampler_state:
        raise ModelFormatError(
            f"checkpoint {str(path)!r} holds no tree state (sampler_state/edge_var); delete it, or run the fit "
            "without --resume.", path=str(path), field="sampler_state/edge_var")
    edge_var = check_edge_var(np.array(found.sampler_state["edge_var"], dtype=np.float64), layout)
    return edge_var, np.array(found.state.doc_topic_prior, dtype=np.float64), found
