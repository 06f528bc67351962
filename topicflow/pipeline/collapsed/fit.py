"""``fit_collapsed``: fit PCSVB0 or PCVB0 (the HDP family) or SCVB0 (LDA) on a corpus store.

The method and the walk come from :class:`~topicflow.pipeline.collapsed.config.CollapsedConfig`:

* ``pcsvb0`` / ``scvb0`` with ``batch_size`` None: word by word (Bleier's Algorithm 1 exactly), in one
  actor (:mod:`topicflow.pipeline.collapsed.word_by_word`);
* ``pcsvb0`` / ``scvb0`` with ``batch_size``: by minibatch, the local steps in parallel and the global
  step on the driver (:mod:`topicflow.pipeline.collapsed.stochastic`);
* ``pcvb0``: Sato et al.'s batch PCVB0 (:func:`topicflow.pipeline.collapsed.batch.run_pcvb0`).

Every form returns the state, the trace and the saved model (:mod:`topicflow.pipeline.collapsed.model`).
With a held-out ``test`` store the trace scores it with Bleier's protocol (sec. 4: 70% of each held-out
document's tokens estimate its proportions, the other 30% are scored) every ``config.eval_every``
documents seen and at the end.

The training totals n (tokens) and D (documents) that scale the stochastic targets (eqs. 9-11; spec
P10) are the store's by default; ``n_docs`` / ``n_tokens`` fix them for a stream whose size is known
in advance (the model records them, and ``topicflow update`` then keeps them instead of growing them
to the store's new totals).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from topicflow import config as tf_config
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.store import SavedModel
from topicflow.models.hdp.state import HDPState
from topicflow.pipeline.cluster import current_client
from topicflow.pipeline.collapsed.batch import run_pcvb0
from topicflow.pipeline.collapsed.config import CollapsedConfig
from topicflow.pipeline.collapsed.model import (
    OPS,
    collapsed_model,
    lda_view,
    topics_in_use,
    training_language,
)
from topicflow.pipeline.collapsed.stochastic import (
    PASS_ENDS,
    Checkpointer,
    HeldoutScorer,
    Recorder,
    StreamRun,
    as_policy,
    run_minibatches,
    state_summary,
)
from topicflow.pipeline.collapsed.word_by_word import run_word_by_word
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollapsedResult:
    """What :func:`fit_collapsed` returns.

    Attributes
    ----------
    state : HDPState
        The fitted collapsed state (n_kw, n_k., tables, alpha, gamma, counters).
    trace : tuple of dict
        Records ``docs_seen``, ``tokens_seen``, ``pass``, ``seconds``, ``alpha``, ``gamma``,
        ``topics_in_use``, ``heldout_perplexity`` (None where not scored); pcvb0's also carry its
        per-iteration fields (``iteration``, ``log_likelihood``, ``q_change``, ...).
    saved_model : SavedModel
        Ready for :func:`topicflow.io.models.store.save_model`.
    topics_in_use : int
        Topics holding at least ``config.topics_in_use_share`` of the expected tokens (never T).
    converged : bool
        pcvb0 met its stopping rule (always False for the stochastic methods).
    """

    state: HDPState
    trace: tuple[dict[str, Any], ...]
    saved_model: SavedModel
    topics_in_use: int
    converged: bool = False


def stream_run(run: StreamRun, state: HDPState) -> HDPState:
    """Run the stochastic method of ``run.config`` in its form: word by word, or by minibatch.

    Parameters
    ----------
    run : StreamRun
    state : HDPState
        The start.

    Returns
    -------
    HDPState
    """
    if not OPS[run.config.method].stochastic:
        raise InvalidParameterError(f"method {run.config.method!r} is not a stochastic method (pcsvb0, scvb0)")
    if run.config.batch_size is None:
        return run_word_by_word(run, state)
    if run.config.params.keep_doc_state:
        raise InvalidParameterError(
            "keep_doc_state (each document's n_dk kept between passes) runs word by word only: drop batch_size, "
            "or drop keep_doc_state (the minibatch form starts every document afresh, as Foulds et al.)")
    return run_minibatches(run, state)


def fit_collapsed(
    corpus: Corpus | str | Path,
    config: CollapsedConfig,
    *,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
    checkpoint: CheckpointPolicy | str | Path | None = None,
    resume: bool = False,
    test: Corpus | str | Path | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    split_every: int | None = None,
    n_docs: int | None = None,
    n_tokens: int | None = None,
) -> CollapsedResult:
    """Fit ``config.method`` (pcsvb0, pcvb0 or scvb0) on every shard of ``corpus``.

    Parameters
    ----------
    corpus : Corpus or path
        The training store (one language).
    config : CollapsedConfig
        Method, model settings (``params``), passes, minibatch size (None: word by word), shuffle,
        evaluation interval.
    client : distributed.Client, optional
        Cluster to run on (by default the current client, else local threads / in process).
    progress : ProgressReporter, optional
        Tracks the loop over minibatches (``desc`` = the method, unit ``batch``), feeds of the
        word-by-word actor (unit ``feed``) or pcvb0 iterations.
    checkpoint : CheckpointPolicy or path, optional
        Write the run's state there at every pass end (and every ``policy.every`` units).
    resume : bool, default False
        Continue from the checkpoint found there (same store and settings), if any.
    test : Corpus or path, optional
        Held-out documents scored every ``config.eval_every`` documents seen and at the end.
    on_record : callable, optional
        ``on_record(record)`` after every trace record.
    split_every : int, optional
        Fan-in of the statistics tree reduction (default ``topicflow.split-every``).
    n_docs, n_tokens : int, optional
        D and n (spec P10) when not the store's: a stream of known total size. Recorded with the model.

    Returns
    -------
    CollapsedResult

    Raises
    ------
    InvalidParameterError
        A multilingual store, ``resume`` without a checkpoint, bad totals.
    CorpusFormatError
        A shard failed validation (the message names it).

    Examples
    --------
    >>> from topicflow.pipeline.collapsed import CollapsedConfig, fit_collapsed   # doctest: +SKIP
    >>> from topicflow.models.hdp.params import HDPParams                          # doctest: +SKIP
    >>> result = fit_collapsed("train.zarr", CollapsedConfig(params=HDPParams(truncation=50), passes=2,
    ...                        batch_size=64), test="test.zarr")                   # doctest: +SKIP
    >>> result.topics_in_use, result.trace[-1]["heldout_perplexity"]               # doctest: +SKIP
    """
    corpus = as_corpus(corpus)
    client = current_client(client)
    split_every = int(split_every or tf_config.get("split-every", 8))
    language = training_language(corpus)
    scorer = None
    if test is not None:
        scorer = HeldoutScorer(as_corpus(test), corpus.vocabulary(language), language, client=client,
                               seed=int(config.extra.get("heldout_seed", 0)))
    policy = as_policy(checkpoint, resume)
    shards = list(range(corpus.n_shards))
    totals = {"n_docs": int(n_docs or len(corpus)), "n_tokens": int(n_tokens or corpus.n_tokens)}
    if totals["n_docs"] < 1 or totals["n_tokens"] < 1:
        raise InvalidParameterError(f"the training totals must be positive, got {totals}; is store "
                                    f"{str(corpus.path)!r} empty?", path=str(corpus.path))
    facts = {"fixed_totals": n_docs is not None or n_tokens is not None, "split_every": split_every}
    if config.method == "pcvb0":
        return _fit_pcvb0(corpus, config, client=client, progress=progress, policy=policy, scorer=scorer,
                          on_record=on_record, split_every=split_every, facts=facts)
    checkpointer = None if policy is None else Checkpointer(policy, corpus, config, shards, split_every)
    resumed = None if checkpointer is None else checkpointer.read()
    if resumed is not None:
        state, trace, done, doc_state = resumed.state, resumed.trace, resumed.done, resumed.doc_state
    else:
        state = OPS[config.method].initial(config.params, n_terms=len(corpus.vocabulary(language)), **totals)
        trace, done, doc_state = [], (0, -1), None
    recorder = Recorder(config, scorer, trace, on_record)
    run = StreamRun(corpus, config, shards, config.passes, client, split_every, progress, recorder, checkpointer,
                    done, doc_state)
    state = stream_run(run, state)
    model = collapsed_model(corpus, state, config, trace=recorder.trace, shards=shards, run=facts)
    log.info("%s: %d topics in use (of T = %d) after %d documents", config.method, model.info.topics_in_use,
             config.params.truncation, state.docs_seen)
    return CollapsedResult(state, tuple(recorder.trace), model, int(model.info.topics_in_use or 0))


def _fit_pcvb0(corpus: Corpus, config: CollapsedConfig, *, client: Any, progress: ProgressReporter,
               policy: CheckpointPolicy | None, scorer: HeldoutScorer | None,
               on_record: Callable[[dict[str, Any]], None] | None, split_every: int,
               facts: dict[str, Any]) -> CollapsedResult:
    """Batch PCVB0 by hdp-batch's driver; its records joined with the common trace fields.

    An iteration is a pass over the D documents: the held-out set is scored after the iterations that
    reach an evaluation point (every ``eval_every`` documents) and after the last one (added to its
    record after ``on_record`` saw it). A resumed fit's trace starts at the checkpoint.
    """
    language = training_language(corpus)
    recorder = Recorder(config, scorer, [], None)
    joined: list[dict[str, Any]] = []

    def on_iteration(record: Any, state: HDPState) -> None:
        own = record.to_dict()
        own["iteration_seconds"] = own.pop("seconds", 0.0)
        recorder.tick(float(own["iteration_seconds"]))
        summary = state_summary(state, config)
        due = recorder.due(summary["docs_seen"] - state.n_docs, summary["docs_seen"])
        common = recorder.add(summary, lambda: lda_view(state, config, language),
                              pass_index=int(own.get("iteration", len(joined))), evaluate=due)
        joined.append({**own, **common})
        if on_record is not None:
            on_record(dict(joined[-1]))

    if policy is not None and policy.every == PASS_ENDS:  # a path: every pcvb0 iteration is a pass
        policy = CheckpointPolicy(policy.path, every=1, resume=policy.resume)
    result = run_pcvb0(corpus, config, client=client, progress=progress, on_iteration=on_iteration,
                       checkpoint=policy, resume=bool(policy is not None and policy.resume), split_every=split_every)
    if scorer is not None and joined and joined[-1]["heldout_perplexity"] is None:  # scored at the end too
        joined[-1]["heldout_perplexity"] = scorer.perplexity(lda_view(result.state, config, language))
    model = collapsed_model(corpus, result.state, config, trace=joined or [r.to_dict() for r in result.trace],
                            shards=list(range(corpus.n_shards)), run={**facts, **dict(result.settings)},
                            converged=bool(result.converged))
    return CollapsedResult(result.state, tuple(model.info.trace), model, topics_in_use(result.state, config),
                           converged=bool(result.converged))
