"""Nightly continuation of an infvoc model (``topicflow update``): the stream goes on over the unseen shards.

The saved state, word index, G0 and position (minibatches applied i, documents seen) are loaded and
:func:`~topicflow.pipeline.infvoc_lda.driver.fit_infvoc` streams the store's shards the model has not seen,
with the model's own settings (:class:`InfVocParams`: K, priors, T, U and the step schedule epsilon_i,
which simply continues at i + 1) and minibatch plan, unless the caller gives another plan (an
``OnlineConfig``'s batch_size, passes, shuffle_window, pieces, min_piece_docs and total_docs are read;
its tau0 and kappa are not: the schedule is the model's). D is the store's current size. The store's
vocabulary may have grown (``topicflow append``): irrelevant here, block codes are mapped through their
strings. Fitting shards 0-1 and updating with 2-3 gives the model of one pass over 0-3, bit for bit,
when the first fit's documents fill whole minibatches and both use the same D. The words whose TOS ranks
the model's records track (Figure 7.1) go on being tracked, unless the caller names others.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import unseen_shards
from topicflow.io.models.store import SavedModel
from topicflow.models.infvoc_lda import InfVocParams
from topicflow.pipeline.continuation import Continuation, Continuer, register_continuer
from topicflow.pipeline.infvoc_lda.config import InfVocPlan
from topicflow.pipeline.infvoc_lda.driver import (
    InfVocResult,
    fit_infvoc,
    ordered_language,
)
from topicflow.pipeline.infvoc_lda.model import (
    INFVOC_KIND,
    infvoc_model,
    saved_g0,
    saved_infvoc,
)
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter


def infvoc_result_model(corpus: Corpus, result: InfVocResult, params: InfVocParams, plan: InfVocPlan, *,
                        shards: Sequence[int] | None = None, seen: Sequence[dict[str, str]] = (),
                        language: str | None = None, earlier_trace: Sequence[dict[str, Any]] = ()) -> SavedModel:
    """The saved model of a driver result (:func:`~topicflow.pipeline.infvoc_lda.model.infvoc_model`).

    Parameters
    ----------
    corpus : Corpus
    result : InfVocResult
    params : InfVocParams
    plan : InfVocPlan
    shards : sequence of int, optional
        Store positions streamed by this run (default all).
    seen : sequence of dict
        Shards processed before this run.
    language : str, optional
    earlier_trace : sequence of dict
        Records of earlier runs (an update keeps the model's whole history).

    Returns
    -------
    SavedModel
    """
    trace = list(earlier_trace) + [r.to_dict() for r in result.trace]
    return infvoc_model(corpus, result.state, result.word_index, params, plan, i=result.i, docs_seen=result.docs_seen,
                        trace=trace, g0=result.g0, g0_source=result.g0_source, shards=shards, seen=seen,
                        language=language or ordered_language(corpus))


def tracked_words(model: SavedModel) -> tuple[str, ...]:
    """The words the model's latest record tracks (``word_ranks``), in their order; () when none.

    Parameters
    ----------
    model : SavedModel
        An infvoc model.

    Returns
    -------
    tuple of str
    """
    for record in reversed(model.info.trace):
        if record.get("word_ranks"):
            return tuple(record["word_ranks"])
    return ()


def _language(model: SavedModel) -> str | None:
    payload = model.info.extra.get("infvoc")
    return payload.get("language") if isinstance(payload, dict) else None


def continue_infvoc(model: SavedModel, corpus: Corpus, *, plan: InfVocPlan | None = None,
                    shards: Sequence[int] | None = None, client: Any = None, split_every: int | None = None,
                    progress: ProgressReporter = NO_PROGRESS, model_path: str = "the model",
                    track_words: Sequence[str] | None = None) -> tuple[SavedModel, InfVocResult]:
    """Stream ``shards`` (default: the unseen ones) on from ``model``'s saved state (module docstring).

    Parameters
    ----------
    model : SavedModel
        An infvoc model.
    corpus : Corpus
        Its store, grown since.
    plan : InfVocPlan, optional
        Default: the model's plan with D = the store's size.
    shards : sequence of int, optional
    client : distributed.Client, optional
    split_every : int, optional
    progress : ProgressReporter
    model_path : str
        How messages name the model.
    track_words : sequence of str, optional
        Words whose TOS ranks this run's records keep; default the words the model's records track
        (:func:`tracked_words`), so Figure 7.1's ranks continue across nights.

    Returns
    -------
    model : SavedModel
        The continued model, its shards those seen before plus ``shards``, its trace the old one plus this run's.
    result : InfVocResult
    """
    params, state, index, position = saved_infvoc(model, where=model_path)
    g0, _ = saved_g0(model, where=model_path)
    language = ordered_language(corpus, _language(model) if corpus.is_multilingual else None)
    plan = replace(position.plan, total_docs=None) if plan is None else plan
    shards = unseen_shards(model, corpus) if shards is None else list(shards)
    result = fit_infvoc(corpus, params, plan, state=state, word_index=index, docs_seen=position.docs_seen,
                        shards=shards, client=client, split_every=split_every, progress=progress,
                        g0=g0, language=language,
                        track_words=tracked_words(model) if track_words is None else tuple(track_words))
    source = (model.info.extra.get("infvoc") or {}).get("g0_source")
    result = replace(result, g0_source=source)
    updated = infvoc_result_model(corpus, result, params, plan, shards=shards, seen=model.info.corpus.get("shards", []),
                                  language=language, earlier_trace=model.info.trace)
    return updated, result


def _check_infvoc(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """Refuse a store the model cannot read (no token order, ambiguous language); no new terms to report."""
    ordered_language(corpus, _language(model) if corpus.is_multilingual else None)
    return {}


def _continue_infvoc(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: Any, client: Any,
                     split_every: int | None, progress: ProgressReporter, model_path: Path) -> Continuation:
    """The registered run: options (an OnlineConfig or InfVocPlan) give the plan, else the model's."""
    plan = None
    if options is not None and hasattr(options, "to_dict"):
        plan = InfVocPlan.from_dict({**options.to_dict(), "total_docs": getattr(options, "total_docs", None)})
    updated, result = continue_infvoc(model, corpus, plan=plan, shards=shards, client=client, split_every=split_every,
                                      progress=progress, model_path=str(model_path))
    before = len(saved_infvoc(model, where=str(model_path))[2])
    summary = {"i": result.i, "docs_seen": result.docs_seen, "new_words": len(result.word_index) - before,
               "n_words": len(result.word_index)}
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), {}, len(result.trace), summary)


register_continuer(INFVOC_KIND, Continuer(check=_check_infvoc, run=_continue_infvoc))
