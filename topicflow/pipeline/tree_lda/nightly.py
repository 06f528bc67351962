"""Nightly continuation of a tree-LDA model (``topicflow update``): online tree VB over the unseen shards.

Whatever method fitted the model, ``update`` continues it by online variational inference
(:func:`~topicflow.pipeline.tree_lda.online.fit_online_tree`) from its saved edge parameters lambda
and alpha, with the model's prior tree (kept in the model) and settings:

* ``online``: from its step-size schedule position (``info.online``: t, documents seen) and, unless
  the caller gives others, its own minibatch and step-size settings;
* ``batch``: as if its corpus had been streamed once in minibatches of ``batch_size`` (t =
  ceil(n_docs / batch_size)), as online LDA continues a batch model, so the first update does not
  overwrite it; its E-step (``vb`` or ``hybrid``) is kept;
* ``gibbs`` (or an E-step other than ``vb``/``hybrid``): the same position rule, with the hybrid E-step (Gibbs sampling within VB, eq. 5.6: the
  nearest variational relative of a collapsed Gibbs sampler), from the lambda the model saved;
* any other method: as a batch model, with its saved E-step.

The continued model is saved with ``method="online"``. ``executor`` ``servers`` or ``threads``
(an update's option, or online LDA's default) runs as ``tasks``: the model is the same. New vocabulary terms (``topicflow append
--promote-min-df``) become leaves directly under the root with the tree's per-leaf root prior
(:func:`~topicflow.models.tree_lda.tree.root_leaf_beta`), their lambda columns start at that prior
(as online LDA's new columns start at eta). Such a word stays uncorrelated (in no concept) until the
tree is rebuilt from the dictionary and the model refitted.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import unseen_shards
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.vocab_growth import check_vocabulary_prefix
from topicflow.models.tree_lda.tree import PriorTree, root_leaf_beta
from topicflow.pipeline.continuation import Continuation, Continuer, register_continuer
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.tree_lda.batch import TreeLDAState, TreeVBConfig
from topicflow.pipeline.tree_lda.model import TREE_KIND, saved_tree, saved_tree_state
from topicflow.pipeline.tree_lda.online import (
    TreeOnlineResult,
    fit_online_tree,
    online_tree_model,
)
from topicflow.pipeline.vb import OnlineConfig

#: What a new term stays until the tree is rebuilt (said in messages and the docs).
NEW_TERMS_NOTE = ("new terms hang directly from the root of the prior tree (uncorrelated with any other word) "
                  "until the tree is rebuilt (`topicflow tree build`) and the model refitted")


def continued_config(model: SavedModel) -> TreeVBConfig:
    """The settings an update continues ``model`` with: its own, with the hybrid E-step for a Gibbs model.

    Parameters
    ----------
    model : SavedModel
        A tree model.

    Returns
    -------
    TreeVBConfig
    """
    settings = {**(model.info.settings or {}), "n_topics": model.state.n_topics}
    if model.info.method == "gibbs" or settings.get("estep") not in ("vb", "hybrid"):
        settings["estep"] = "hybrid"
    return TreeVBConfig.from_dict(settings)


def tree_schedule_position(model: SavedModel, online: OnlineConfig) -> tuple[int, int]:
    """(t, documents seen) the step-size schedule continues from (module docstring).

    Parameters
    ----------
    model : SavedModel
    online : OnlineConfig
        The update's settings (its ``batch_size`` places a non-online model).

    Returns
    -------
    tuple of int
    """
    if model.info.method == "online" and model.info.online is not None:
        return int(model.info.online["t"]), int(model.info.online["docs_seen"])
    n_docs = int(model.info.corpus.get("n_docs", 0))
    return math.ceil(n_docs / online.batch_size), n_docs


def tree_new_terms(model: SavedModel, corpus: Corpus, *, model_path: str = "the model") -> dict[str, int]:
    """New store terms per language; refuses a store whose vocabularies do not extend the model's.

    Parameters
    ----------
    model : SavedModel
    corpus : Corpus
    model_path : str
        How messages name the model.

    Returns
    -------
    dict of str to int

    Raises
    ------
    VocabularyMismatchError
        Other languages, or a vocabulary that is not an extension of the model's.
    """
    tree = saved_tree(model)
    if tuple(corpus.languages) != tuple(tree.languages):
        raise VocabularyMismatchError(
            f"the tree model {model_path} has languages {list(tree.languages)} but store {str(corpus.path)!r} has "
            f"{list(corpus.languages)}; update a model only with the store it was fitted on.", path=str(corpus.path))
    return {lang: check_vocabulary_prefix(model.vocabularies[lang].terms, corpus.vocabulary(lang).terms,
                                          language=lang, model_path=model_path, store_path=str(corpus.path))
            for lang in tree.languages}


def grown_tree_state(model: SavedModel, corpus: Corpus, *,
                     model_path: str = "the model") -> tuple[PriorTree, TreeLDAState, dict[str, int]]:
    """The model's tree and state over the store's vocabularies (new terms: leaves under the root).

    Parameters
    ----------
    model : SavedModel
    corpus : Corpus
    model_path : str

    Returns
    -------
    tree : PriorTree
        :meth:`~topicflow.models.tree_lda.tree.PriorTree.with_new_terms` of the saved tree, with its
        :func:`~topicflow.models.tree_lda.tree.root_leaf_beta`.
    state : TreeLDAState
        Saved lambda with the new edges' columns at their prior, and alpha.
    new_terms : dict of str to int
    """
    new_terms = tree_new_terms(model, corpus, model_path=model_path)
    tree = saved_tree(model)
    state, _ = saved_tree_state(model)
    if not any(new_terms.values()):
        return tree, state, new_terms
    grown = tree.with_new_terms([len(corpus.vocabulary(lang)) for lang in tree.languages], root_leaf_beta(tree))
    new_columns = np.broadcast_to(grown.edge_prior[tree.n_edges:], (state.edge_var.shape[0], grown.n_edges - tree.n_edges))
    return grown, replace(state, edge_var=np.hstack([state.edge_var, new_columns])), new_terms


def continue_tree_online(
    model: SavedModel, corpus: Corpus, online: OnlineConfig, *, shards: Sequence[int] | None = None,
    client: Any = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
    model_path: str = "the model",
) -> tuple[SavedModel, TreeOnlineResult, dict[str, int]]:
    """Online tree VB over ``shards`` (default: the unseen ones), continuing ``model`` (module docstring).

    Parameters
    ----------
    model : SavedModel
        A tree model (any method).
    corpus : Corpus
        Its store, grown since.
    online : OnlineConfig
        Minibatch and step-size settings (``total_docs`` default: the store's size).
    shards : sequence of int, optional
    client : distributed.Client, optional
    split_every : int, optional
    progress : ProgressReporter
    model_path : str

    Returns
    -------
    model : SavedModel
        The continued model (``method="online"``), its shards those seen before plus ``shards``.
    result : TreeOnlineResult
    new_terms : dict of str to int
    """
    tree, state, new_terms = grown_tree_state(model, corpus, model_path=model_path)
    config = continued_config(model)
    shards = unseen_shards(model, corpus) if shards is None else list(shards)
    t, docs_seen = tree_schedule_position(model, online)
    result = fit_online_tree(corpus, tree, config, online, state=state, t=t, docs_seen=docs_seen, shards=shards,
                             client=client, split_every=split_every, progress=progress)
    recorded = model.info.extra.get("tree")
    source = recorded.get("source") if isinstance(recorded, dict) else None
    updated = online_tree_model(corpus, result, config, online, tree_source=source, shards=shards,
                                seen=model.info.corpus.get("shards", []))
    extra = {**model.info.extra, **updated.info.extra}
    if any(new_terms.values()):
        extra["tree_growth"] = list(model.info.extra.get("tree_growth", [])) + [
            {"new_terms": dict(new_terms), "root_beta": root_leaf_beta(saved_tree(model))}]
    return replace(updated, info=updated.info.with_changes(extra=extra)), result, new_terms


def _check_tree(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """New terms per language; refuses a store the tree model cannot continue with."""
    return tree_new_terms(model, corpus, model_path=str(model_path))


def _continue_tree(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: Any,
                   client: Any, split_every: int | None, progress: ProgressReporter,
                   model_path: Path) -> Continuation:
    """Online tree VB over ``shards`` with ``options`` (an OnlineConfig) or the model's own settings."""
    online = options if isinstance(options, OnlineConfig) else None
    if online is None:
        stored = (model.info.online or {}).get("config") if model.info.method == "online" else None
        online = OnlineConfig.from_dict(stored) if stored else OnlineConfig()
    if online.executor not in ("auto", "tasks"):
        online = replace(online, executor="tasks")  # tree E-steps run as tasks only; the model is the same
    updated, result, new_terms = continue_tree_online(model, corpus, online, shards=shards, client=client,
                                                      split_every=split_every, progress=progress,
                                                      model_path=str(model_path))
    summary: dict[str, Any] = {"t": result.t, "docs_seen": result.docs_seen, "continued_from": model.info.method,
                               "estep": continued_config(model).estep}
    if any(new_terms.values()):
        summary["note"] = NEW_TERMS_NOTE
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), new_terms, len(result.trace), summary)


register_continuer(TREE_KIND, Continuer(check=_check_tree, run=_continue_tree))
