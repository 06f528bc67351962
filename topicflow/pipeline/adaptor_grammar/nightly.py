"""Adaptor-grammar models in the model store, and their continuation by ``topicflow update``.

:func:`grammar_store_model` turns a fit on a store into a :class:`~topicflow.io.models.store.SavedModel`
(:mod:`topicflow.io.models.adaptor_grammar`), recording every shard processed and the number of sentences
seen. ``topicflow update MODEL STORE`` then continues it (:func:`continue_grammar`): the shards the model has
not seen are streamed as more online minibatches with the model's own settings (batch size, tau, kappa,
u, seed; ``passes`` may be given), the step-size counter l, the pruning schedule and the random numbers'
sentence numbers going on from where the fit stopped, and |X| set to the sentences in the store now.
Fitting the first shards and updating with the rest gives the model of one fit over all of them, bit for
bit, when the first fit's sentences fill whole minibatches, it was given the final |X| (``corpus_size``),
neither run shuffles and one pass is made (tested). New characters join the grammar's terminals, and a
model of the ``infvoc-lda`` grammar (one pseudo-word ``'_j'`` per document) grows its D by the new
documents, numbered on from the model's (:func:`~topicflow.pipeline.adaptor_grammar.fit.grow_terminals`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.adaptor_grammar import (
    KIND,
    grammar_from_saved,
    grammar_saved_model,
)
from topicflow.io.models.info import corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.pipeline.adaptor_grammar.fit import (
    GrammarFitConfig,
    GrammarStoreResult,
    fit_grammar_store,
    require_order,
    scan_store,
)
from topicflow.pipeline.continuation import Continuation, Continuer, register_continuer
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter


def minibatch_trace(result: GrammarStoreResult, first_minibatch: int) -> list[dict[str, Any]]:
    """One record per minibatch of a run: its counter l and the mean log p(x | G') before the update.

    Parameters
    ----------
    result : GrammarStoreResult
    first_minibatch : int
        The counter l of the run's first minibatch.

    Returns
    -------
    list of dict
    """
    return [{"minibatch": first_minibatch + i, "log_likelihood": float(v)} for i, v in enumerate(result.log_likelihood)]


def grammar_store_model(corpus: Corpus, result: GrammarStoreResult, config: GrammarFitConfig, *,
                        shards: Sequence[int] | None = None, seen: Sequence[dict[str, str]] = (),
                        sentences_seen: int = 0, language: str | None = None,
                        earlier_trace: Sequence[Mapping[str, Any]] = (),
                        estimator: Mapping[str, Any] | None = None) -> SavedModel:
    """The saved model of a fit (or continuation) on a store.

    Parameters
    ----------
    corpus : Corpus
        The store.
    result : GrammarStoreResult
        What the run returned.
    config : GrammarFitConfig
        Its settings (saved; ``topicflow update`` continues with them).
    shards : sequence of int, optional
        Store positions read by this run (default all).
    seen : sequence of dict
        Shards processed before this run.
    sentences_seen : int
        Sentences processed before this run.
    language : str, optional
        The language read.
    earlier_trace : sequence of dict
        Minibatch records of earlier runs.
    estimator : mapping, optional
        The estimator's parameters (``AdaptorGrammar.get_params()``), kept so ``load`` restores them.

    Returns
    -------
    SavedModel
    """
    shards = list(range(corpus.n_shards)) if shards is None else list(shards)
    first = result.state.minibatch - len(result.log_likelihood) + 1
    settings: dict[str, Any] = {**config.to_dict(), "grammar_params": dict(result.grammar_params)}
    if estimator is not None:
        settings["estimator"] = dict(estimator)
    return grammar_saved_model(
        result.state, result.params, grammar_text=result.grammar_text, grammar_params=result.grammar_params,
        truncations=dict(config.truncations), settings=settings,
        corpus=corpus_provenance(corpus, shards, seen), sentences_seen=sentences_seen + result.n_sentences,
        source={"language": corpus.resolve_language(language), "mode": config.mode},
        trace=[dict(r) for r in earlier_trace] + minibatch_trace(result, first))


def continue_grammar(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, passes: int | None = None,
                     client: Any = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
                     model_path: str = "the model") -> tuple[SavedModel, GrammarStoreResult]:
    """Stream ``shards`` of ``corpus`` on from the saved state (module docstring).

    Parameters
    ----------
    model : SavedModel
        An adaptor-grammar model fitted on ``corpus`` (before it grew).
    corpus : Corpus
        The store, grown by ``topicflow append``.
    shards : sequence of int
        Store positions of the shards to read.
    passes : int, optional
        Passes over the new sentences (default 1).
    client : distributed.Client, optional
    split_every : int, optional
        Fan-in of the merge tree (default: the model's).
    progress : ProgressReporter
    model_path : str
        How messages name the model.

    Returns
    -------
    model : SavedModel
        The continued model.
    result : GrammarStoreResult

    Raises
    ------
    InvalidParameterError
        The model was fitted on sentences given in memory.
    """
    state, _, payload = grammar_from_saved(model, where=model_path)
    source = payload.get("source") or {}
    if not source:
        raise InvalidParameterError(f"{model_path} was fitted on sentences given in memory, not on a store; "
                                    "`topicflow update` continues models fitted on a store "
                                    "(AdaptorGrammar.partial_fit continues this one)", path=model_path)
    config = GrammarFitConfig.from_dict(model.info.settings)
    changes: dict[str, Any] = {"passes": passes or 1}
    if "optimize_hyper" not in model.info.settings:  # saved before the option: its PY a, b stay fixed
        changes["optimize_hyper"] = "none"
    if split_every is not None:
        changes["split_every"] = split_every
    config = replace(config, **changes)
    seen = int(payload.get("sentences_seen", 0))
    language = source.get("language") if corpus.is_multilingual else None
    # |X|: the sentences the store holds now (those seen plus the new ones, counted by the scan).
    # The infvoc-lda grammar's new documents are numbered on from the model's D ('_j', Doc_j).
    first_document = int(config.grammar_params.get("D", 0)) + 1 if config.mode == "tokens" else 1
    index = scan_store(corpus, mode=config.mode, language=language, shards=shards, first_document=first_document)
    result = fit_grammar_store(corpus, config, client=client, state=state,
                               grammar_text_=str(payload["grammar"]["text"]), shards=shards, first_sentence=seen,
                               first_document=first_document,
                               corpus_size=seen + len(index), language=language, index=index, progress=progress)
    estimator = model.info.settings.get("estimator")
    updated = grammar_store_model(corpus, result, config, shards=shards, seen=model.info.corpus.get("shards", []),
                                  sentences_seen=seen, language=language, earlier_trace=model.info.trace,
                                  estimator=estimator if isinstance(estimator, dict) else None)
    return updated, result


def _check(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """Refuse a store without token order; there are no new vocabulary terms to report."""
    require_order(corpus)
    return {}


def _continue(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: Any, client: Any,
              split_every: int | None, progress: ProgressReporter, model_path: Path) -> Continuation:
    """The registered run: only ``options.passes`` is read; the schedule is the model's."""
    passes = getattr(options, "passes", None) if options is not None else None
    updated, result = continue_grammar(model, corpus, shards, passes=passes, client=client, split_every=split_every,
                                       progress=progress, model_path=str(model_path))
    summary = {"minibatch": result.state.minibatch, "sentences": result.n_sentences,
               "inside_calls": result.n_inside_calls}
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), {}, len(result.log_likelihood),
                        summary)


register_continuer(KIND, Continuer(check=_check, run=_continue))
