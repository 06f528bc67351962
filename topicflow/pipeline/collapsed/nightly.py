"""Nightly continuation (``topicflow update``) of the collapsed stochastic models: hdp (pcsvb0) and scvb0.

A PCSVB0 or SCVB0 model saves its exact state and its step-size counters (``t_topic_word``,
``t_hyper``, documents and tokens seen), so ``topicflow update MODEL STORE`` continues it over the
store's unseen shards with the form it was fitted with (word by word, or by minibatch of its
``batch_size``, with its shuffle window), one pass by default, from where its schedules stand.

* **Vocabulary**: terms ``topicflow append --promote-min-df`` added to the store get zero expected
  counts (their column of lambda starts at the prior beta: no data seen yet).
* **Training totals** (n and D, which scale the targets of eqs. 9-11; spec P10) grow to the store's
  new totals, because the model now stands for the grown corpus. A model fitted with fixed totals
  (``fit_collapsed(..., n_docs=, n_tokens=)``: a stream of known size) keeps them, so fitting on the
  first shards and updating with the rest gives the model of one run over all of them (equal to
  rounding: the saved model folds the lazy scale of n_kw).
* **pcvb0** (batch) models are refused with what to do: a batch method has no step-size schedule to
  continue; refit with ``topicflow fit``, or fit with ``--method pcsvb0``, which ``update`` continues.

Importing this module registers the continuers under the model kinds ``"hdp"`` and ``"scvb0"``.
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel
from topicflow.models.hdp.state import HDPState
from topicflow.models.lda.vocab_growth import check_vocabulary_prefix
from topicflow.pipeline.collapsed.actor import doc_state_rows
from topicflow.pipeline.collapsed.fit import stream_run
from topicflow.pipeline.collapsed.model import (
    collapsed_model,
    saved_config,
    saved_state,
)
from topicflow.pipeline.collapsed.stochastic import Recorder, StreamRun
from topicflow.pipeline.collapsed.word_by_word import FEED_DOCS
from topicflow.pipeline.continuation import Continuation, Continuer, register_continuer
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter


def refuse_batch_model(model: SavedModel, model_path: Path) -> None:
    """Raise for a pcvb0 model, saying what to do instead.

    Parameters
    ----------
    model : SavedModel
    model_path : Path

    Raises
    ------
    InvalidParameterError
        ``model`` was fitted by batch PCVB0.
    """
    if model.info.method == "pcvb0":
        raise InvalidParameterError(
            f"model {str(model_path)!r} was fitted by batch PCVB0 (--method pcvb0), which `topicflow update` does "
            "not continue: a batch method has no step-size schedule to continue from. Refit it on the grown store "
            f"with `topicflow fit STORE --model {model_path} --family hdp --method pcvb0 --overwrite`, or fit it with "
            "--method pcsvb0, whose models `topicflow update` continues.",
            path=str(model_path),
        )


def new_terms(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """New store terms past the model's vocabulary; refuses a store that does not extend it.

    Parameters
    ----------
    model : SavedModel
    corpus : Corpus
    model_path : Path

    Returns
    -------
    dict of str to int
        The model's one language and its number of new terms.

    Raises
    ------
    VocabularyMismatchError
        The store lacks the model's language, or its vocabulary does not extend the model's.
    """
    (language,) = model.state.languages
    if language not in corpus.languages:
        raise VocabularyMismatchError(
            f"the model has language {language!r} but store {str(corpus.path)!r} has {list(corpus.languages)}; "
            "update a model only with the store it was fitted on.", path=str(corpus.path))
    grown = check_vocabulary_prefix(model.vocabularies[language].terms, corpus.vocabulary(language).terms,
                                    language=language, model_path=str(model_path), store_path=str(corpus.path))
    return {language: grown}


def grown_state(model: SavedModel, corpus: Corpus) -> HDPState:
    """The model's exact state with zero counts for new terms and, unless fixed, the store's totals.

    Parameters
    ----------
    model : SavedModel
    corpus : Corpus

    Returns
    -------
    HDPState
    """
    state = saved_state(model)
    (language,) = model.state.languages
    extra = len(corpus.vocabulary(language)) - state.n_terms
    if extra > 0:
        state.topic_word = np.hstack([state.topic_word, np.zeros((state.truncation, extra))])
    if not (model.info.extra.get("run") or {}).get("fixed_totals", False):
        state.n_docs, state.n_tokens = len(corpus), int(corpus.n_tokens)
    return state


def continue_collapsed(
    model: SavedModel, corpus: Corpus, shards: Sequence[int], *, passes: int = 1, client: Any = None,
    split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
) -> tuple[SavedModel, int]:
    """Continue a pcsvb0 or scvb0 model over ``shards`` from its saved state and counters.

    Parameters
    ----------
    model : SavedModel
        Saved by :func:`topicflow.pipeline.collapsed.fit_collapsed` (method pcsvb0 or scvb0).
    corpus : Corpus
        Its store, grown since.
    shards : sequence of int
        Store indices to process, in store order (the unseen ones).
    passes : int, default 1
    client : distributed.Client, optional
    split_every : int, optional
    progress : ProgressReporter, optional

    Returns
    -------
    model : SavedModel
        The continued model (its trace extends the old one).
    units : int
        Minibatches (or actor feeds, word by word) run.
    """
    config = replace(saved_config(model), passes=passes)
    run_facts = dict(model.info.extra.get("run") or {})
    split_every = int(split_every or run_facts.get("split_every", 8))
    state = grown_state(model, corpus)
    recorder = Recorder(config, None, [dict(r) for r in model.info.trace])
    run = StreamRun(corpus, config, list(shards), passes, client, split_every, progress, recorder,
                    doc_state=doc_state_rows(config, len(corpus)))
    state = stream_run(run, state)
    updated = collapsed_model(corpus, state, config, trace=recorder.trace, shards=shards,
                              seen=model.info.corpus.get("shards", []), run=run_facts)
    per_unit = config.batch_size or FEED_DOCS
    return updated, passes * math.ceil(run.n_docs / per_unit)


def _check(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    refuse_batch_model(model, model_path)
    return new_terms(model, corpus, model_path)


def _continue(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: Any, client: Any,
              split_every: int | None, progress: ProgressReporter, model_path: Path) -> Continuation:
    """The continuer ``topicflow update`` calls: only ``options.passes`` is taken from ``options``.

    The minibatch size, shuffle and step sizes are the model's own (they are part of its schedule).
    """
    grown = _check(model, corpus, model_path)
    passes = int(getattr(options, "passes", 1) or 1)
    updated, units = continue_collapsed(model, corpus, shards, passes=passes, client=client,
                                        split_every=split_every, progress=progress)
    scalars = updated.info.collapsed_state or {}
    summary: dict[str, Any] = {key: scalars[key] for key in ("docs_seen", "tokens_seen", "t_topic_word", "t_hyper", "n_docs",
                                             "n_tokens") if key in scalars}
    summary["topics_in_use"] = updated.info.topics_in_use
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), grown, units, summary)


register_continuer("hdp", Continuer(check=_check, run=_continue))
register_continuer("scvb0", Continuer(check=_check, run=_continue))
