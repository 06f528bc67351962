"""The registry of model continuations behind ``topicflow update``.

A saved model is continued night after night by the driver of the method that made it: online VB
for variational models (:mod:`topicflow.pipeline.vb.nightly`), the streaming-Gibbs runs for SGS and
DSGS models (:mod:`topicflow.pipeline.streaming.sgs_runs`), the collapsed stochastic methods for the
HDP family's pcsvb0 models and SCVB0's LDA models (kinds ``hdp`` and ``scvb0``,
:mod:`topicflow.pipeline.collapsed.nightly`). Each of those modules registers a
:class:`Continuer` here under the key :func:`continuation_key` gives its models, as xarray's backends
register themselves; :mod:`topicflow.pipeline.update` imports them and looks the key up, so a new
model family adds one module and one import line, never a branch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel


@dataclass(frozen=True, slots=True)
class Continuation:
    """What one continuation did: the new model and what the version summary records."""

    #: The continued model, ready to commit as a new version.
    model: SavedModel
    #: Documents processed.
    new_docs: int
    #: New vocabulary terms per language.
    new_terms: dict[str, int]
    #: Minibatches run.
    minibatches: int
    #: Method-specific entries of the version summary (schedule position, documents seen, ...).
    summary: dict[str, Any] = field(default_factory=dict)


#: ``check(model, corpus, model_path) -> new terms per language``: refuses a store the model cannot
#: continue with (raises), also when there is nothing new to process.
CheckFn = Callable[[SavedModel, Corpus, Path], dict[str, int]]


@dataclass(frozen=True, slots=True)
class Continuer:
    """How models of one kind are continued by ``topicflow update``."""

    #: See :data:`CheckFn`.
    check: CheckFn
    #: ``run(model, corpus, shards, *, options, client, split_every, progress, model_path)``: continue
    #: ``model`` with the store positions ``shards``; ``options`` are the method's own settings (an
    #: ``OnlineConfig`` for online VB) or None for the model's saved ones.
    run: Callable[..., Continuation]


#: Continuers by :func:`continuation_key`, filled by the modules that implement them.
CONTINUERS: dict[str, Continuer] = {}


def register_continuer(key: str, continuer: Continuer) -> Continuer:
    """Register ``continuer`` for models whose :func:`continuation_key` is ``key``.

    Parameters
    ----------
    key : str
        ``"vb_lda"`` for variational models, the streaming algorithm's name for a streamed model.
    continuer : Continuer
        Its check and run functions.

    Returns
    -------
    Continuer
        ``continuer`` itself.
    """
    CONTINUERS[key] = continuer
    return continuer


def continuation_key(info: ModelInfo) -> str:
    """The registry key of a saved model: its kind, or the algorithm of a streamed model.

    Parameters
    ----------
    info : ModelInfo
        The model's record.

    Returns
    -------
    str
        ``"vb_lda"``, ``"hdp"``, ``"scvb0"``, or ``info["algorithm"]`` for ``kind == "stream"``.
    """
    return str(info.algorithm) if info.kind == "stream" and info.algorithm else info.kind
