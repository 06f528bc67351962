"""Driver of streaming variational Bayes for LDA on Dask (Broderick et al. 2013).

Documents stream from the store in minibatches planned exactly as online VB plans them
(:func:`topicflow.pipeline.vb.online.plan_minibatches`, cut into pieces that run on the E-step servers,
threads or tasks of :class:`~topicflow.pipeline.vb.online.MinibatchRunner`). Each minibatch is fitted
by batch VB with the posterior of the minibatches before it as its prior (primitive A; the math is
:mod:`topicflow.models.lda.vb.streaming`), and its posterior becomes the next prior:

    for each minibatch C_b:                       prior = lambda_{b-1}  (eta for the first)
        repeat up to max_iter times:
            stats  = E-step of C_b under lambda   (distributed, merged in a fixed tree)
            lambda = prior + stats;  alpha -> its minibatch optimum (unless fixed)
        until the minibatch's ELBO changes by less than tol (relative)

No step size, no corpus size. The model after a stream continues with the next documents as they
arrive (``topicflow update``): their statistics are added to lambda in the same way. The plan and
every E-step depend only on the shards, the settings and the seed, so the model does not depend on
the number of workers or on the executor.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from topicflow import config as tf_config
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb import streaming as svb_math
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.pipeline.cluster import current_client
from topicflow.pipeline.policies import CheckpointPolicy, has_converged
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb.batch import VBConfig, initial_state
from topicflow.pipeline.vb.online import (
    EXECUTORS,
    Minibatch,
    MinibatchRunner,
    OnlineConfig,
    plan_minibatches,
    with_next,
)
from topicflow.tasks.estep import graph_token

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SVBConfig:
    """How streaming VB walks the corpus (the hyperparameters stay in :class:`VBConfig`).

    ``VBConfig.max_iter`` and ``VBConfig.tol`` bound the local iterations of each minibatch.

    Attributes
    ----------
    batch_size : int, default 256
        Documents per minibatch.
    shuffle_window : int, default 0
        Visit documents in a random order within windows of this many documents (0: store order).
    pieces, min_piece_docs : int, default 8 and 64
        How a minibatch is cut for the workers (see :class:`OnlineConfig`); fixed, so results do not
        depend on the cluster.
    executor : {"auto", "servers", "threads", "tasks"}, default "auto"
        Where the E-steps of a minibatch run (see :class:`OnlineConfig`); the model is the same.
    """

    batch_size: int = 256
    shuffle_window: int = 0
    pieces: int = 8
    min_piece_docs: int = 64
    executor: str = "auto"

    def __post_init__(self) -> None:
        self.walk()  # validates every field the way online VB does

    def walk(self) -> OnlineConfig:
        """The one-pass minibatch plan and executor settings in online VB's terms (its step sizes unused)."""
        if self.executor not in EXECUTORS:
            raise InvalidParameterError(f"executor must be one of {', '.join(EXECUTORS)} (got {self!r})")
        return OnlineConfig(batch_size=self.batch_size, passes=1, shuffle_window=self.shuffle_window,
                            pieces=self.pieces, min_piece_docs=self.min_piece_docs, executor=self.executor,
                            eval_every=0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (kept as ``online["config"]`` in a model file)."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> SVBConfig:
        """Inverse of :meth:`to_dict`; other keys (an online config's step sizes) are ignored."""
        return cls(**{name: payload[name] for name in cls.__slots__ if name in payload})

    @classmethod
    def from_online(cls, online: OnlineConfig) -> SVBConfig:
        """The minibatch settings of ``online`` (what ``topicflow update`` passes every continuer).

        Raises
        ------
        InvalidParameterError
            ``passes`` is not 1 or ``total_docs`` is given: neither has a meaning in streaming VB.
        """
        if online.passes != 1:
            raise InvalidParameterError(
                f"passes={online.passes!r}: streaming VB (svb) sees each document once (a second pass would "
                "count its words twice in the posterior); leave passes at 1 or use the online method")
        if online.total_docs is not None:
            raise InvalidParameterError(
                f"total_docs={online.total_docs!r}: streaming VB (svb) needs no corpus size; leave it unset")
        return cls(batch_size=online.batch_size, shuffle_window=online.shuffle_window, pieces=online.pieces,
                   min_piece_docs=online.min_piece_docs, executor=online.executor)


def check_svb_settings(config: VBConfig) -> None:
    """Refuse the settings streaming VB cannot honour, naming the method.

    Parameters
    ----------
    config : VBConfig
        The model's hyperparameters.

    Raises
    ------
    InvalidParameterError
        ``optimize_topic_word_prior`` (eta is the prior of the first minibatch only; later ones use
        the posterior so far) or ``warm_start`` (the gamma warm start of batch VB keeps gamma of a
        whole corpus between iterations).
    """
    if config.optimize_topic_word_prior:
        raise InvalidParameterError(
            "optimize_topic_word_prior cannot be used with method 'svb': in streaming VB eta is the prior of the "
            "first minibatch only (each later one has the posterior so far as its prior); give a fixed "
            "topic_word_prior, or use method 'batch' or 'online' to learn eta")
    if config.warm_start:
        raise InvalidParameterError(
            "warm_start applies to method 'batch' only; streaming VB (svb) starts each minibatch's E-steps afresh")


@dataclass(frozen=True, slots=True)
class SVBRecord:
    """One line of the streaming-VB trace: a minibatch and its local iterations."""

    t: int
    minibatch: int
    docs: int
    tokens: int
    iterations: int
    converged: bool
    docs_seen: int
    alpha_sum: float
    #: ELBO of the minibatch under its prior at the last local iteration, per token of the minibatch.
    elbo_per_token: float
    seconds: float
    docs_per_second: float
    tokens_per_second: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the model file's ``trace``)."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class SVBResult:
    """The model after the stream and where the stream stands.

    Attributes
    ----------
    state : LDAState
        lambda is the posterior after the last minibatch.
    t : int
        Minibatches absorbed (over all runs of this model).
    docs_seen : int
        Documents absorbed.
    iterations : int
        Local iterations run (it keys the E-steps' random draws).
    trace : tuple of SVBRecord
        This run's minibatches.
    unknown_seed_words : dict of str to list of str
        Seed words missing from the vocabulary.
    """

    state: LDAState
    t: int
    docs_seen: int
    iterations: int
    trace: tuple[SVBRecord, ...]
    unknown_seed_words: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Absorbed:
    """One minibatch through primitive A."""

    state: LDAState
    stats: EStepStats
    elbos: tuple[float, ...]
    converged: bool


def absorb_minibatch(
    runner: MinibatchRunner, minibatch: Minibatch, upcoming: Minibatch | None, state: LDAState, config: VBConfig,
    *, t: int, iterations: int, token: str, split_every: int,
) -> _Absorbed:
    """Primitive A on one minibatch: batch VB with the posterior so far as the prior.

    Parameters
    ----------
    runner : MinibatchRunner
        Runs the E-steps of the minibatch's pieces.
    minibatch, upcoming : Minibatch
        This minibatch and the next (None at the end; its shards are read ahead).
    state : LDAState
        The model after ``t`` minibatches.
    config : VBConfig
        ``max_iter`` and ``tol`` bound the local iterations.
    t : int
        Minibatches absorbed before this one (0: the prior is eta).
    iterations : int
        Local iterations run before this minibatch (the E-steps' ``epoch``).
    token : str
        Prefix of the graph keys.
    split_every : int
        Fan-in of the statistics merge.

    Returns
    -------
    _Absorbed
        The state whose lambda is this minibatch's posterior, the last statistics and the ELBO trace.
    """
    prior = svb_math.minibatch_prior(state, t)
    params = config.estep_params()
    elbos: list[float] = []
    changed = None
    stats = None
    for j in range(config.max_iter):
        stats = runner.estep(minibatch, state, params, t=iterations + j, token=f"{token}-{j}",
                             split_every=split_every, upcoming=upcoming)
        elbos.append(svb_math.minibatch_elbo(stats, state, prior))
        updated, step = svb_math.svb_iteration(state, prior, stats, doc_topic_prior_mode=config.doc_topic_prior_mode,
                                               changed=changed, reset=(t == 0 and j == 0))
        runner.advance(state, step, updated)
        state, changed = updated, step.term_ids
        if has_converged(elbos, config.tol):
            break
    assert stats is not None  # max_iter >= 1 (VBConfig checks it)
    return _Absorbed(state, stats, tuple(elbos), has_converged(elbos, config.tol))


def fit_svb(
    corpus: Corpus,
    config: VBConfig,
    svb: SVBConfig,
    *,
    state: LDAState | None = None,
    t: int = 0,
    docs_seen: int = 0,
    iterations: int = 0,
    shards: Sequence[int] | None = None,
    client: Any = None,
    split_every: int | None = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_minibatch: Callable[[SVBRecord, LDAState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
) -> SVBResult:
    """Streaming VB over ``shards`` of ``corpus`` (all by default), continuing from ``state`` after ``t`` minibatches.

    Parameters
    ----------
    corpus : Corpus
        The store.
    config : VBConfig
        Hyperparameters, the E-step, and ``max_iter``/``tol`` of the local iterations.
    svb : SVBConfig
        Minibatch size, order and executor.
    state : LDAState, optional
        Model to continue (e.g. a saved SVB model during a nightly update); a fresh random one by default.
    t, docs_seen, iterations : int
        Minibatches, documents and local iterations already absorbed into ``state``.
    shards : sequence of int, optional
        Store indices of the shards to stream, in store order.
    client : distributed.Client, optional
        Cluster to run on; by default the current client, else local threads.
    split_every : int, optional
        Fan-in of the statistics merge (default from ``topicflow.split-every``).
    progress : ProgressReporter, optional
        Receives per-minibatch progress.
    on_minibatch : callable, optional
        ``on_minibatch(record, state)`` after every minibatch, for monitoring.
    checkpoint : CheckpointPolicy, optional
        Write the driver state every ``every`` minibatches; with ``resume``, continue from it.

    Returns
    -------
    SVBResult

    Raises
    ------
    InvalidParameterError
        Settings streaming VB cannot honour (:func:`check_svb_settings`).
    NumericalError
        A minibatch's ELBO became non-finite.
    """
    check_svb_settings(config)
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    unknown: dict[str, list[str]] = {}
    if state is None:
        state, unknown = initial_state(corpus, config)
    shards = list(range(corpus.n_shards)) if shards is None else list(shards)
    walk = svb.walk()
    shard_sizes = [s.n_docs for s in corpus.shards]
    run_token = graph_token(corpus.token(), config.to_dict(), svb.to_dict(), shards, split_every, t, "svb")
    fingerprint = {
        "method": "svb", "settings": config.to_dict(),
        "svb": {k: v for k, v in svb.to_dict().items() if k != "executor"}, "corpus": corpus.token(),
        "shards": shards, "split_every": split_every, "t0": t,
    }
    trace: list[SVBRecord] = []
    done = -1  # index of the last minibatch processed
    if checkpoint is not None and checkpoint.resume:
        found = read_checkpoint(checkpoint.path, fingerprint)
        if found is not None:
            state = found.state
            t, docs_seen = int(found.position["t"]), int(found.position["docs_seen"])
            iterations, done = int(found.position["iterations"]), int(found.position["minibatch"])
            trace = [SVBRecord(**record) for record in found.trace]
            log.info("resuming from %s after minibatch %d", checkpoint.path, done)
    runner = MinibatchRunner(corpus, walk, client)
    n_docs = sum(shard_sizes[s] for s in shards)
    plan = (mb for mb in plan_minibatches(shard_sizes, shards, walk, seed=config.seed, epoch=0) if mb.index > done)
    remaining = math.ceil(n_docs / svb.batch_size) - (done + 1)
    try:
        for minibatch, upcoming in progress.track(with_next(plan), total=remaining, desc="svb", unit="batch"):
            started = time.perf_counter()
            absorbed = absorb_minibatch(runner, minibatch, upcoming, state, config, t=t, iterations=iterations,
                                        token=f"{run_token}-{minibatch.index}", split_every=split_every)
            state, stats = absorbed.state, absorbed.stats
            t, iterations, docs_seen = t + 1, iterations + len(absorbed.elbos), docs_seen + stats.n_docs
            seconds = time.perf_counter() - started
            record = SVBRecord(
                t=t, minibatch=minibatch.index, docs=stats.n_docs, tokens=stats.n_tokens,
                iterations=len(absorbed.elbos), converged=absorbed.converged, docs_seen=docs_seen,
                alpha_sum=float(state.doc_topic_prior.sum()),
                elbo_per_token=absorbed.elbos[-1] / max(stats.n_tokens, 1), seconds=seconds,
                docs_per_second=stats.n_docs / max(seconds, 1e-9), tokens_per_second=stats.n_tokens / max(seconds, 1e-9),
            )
            trace.append(record)
            log.debug("minibatch %d: %d local iterations, %d docs, %.3f s", t, record.iterations, stats.n_docs, seconds)
            if on_minibatch is not None:
                on_minibatch(record, state)
            if checkpoint is not None and checkpoint.due(len(trace)):
                position = {"minibatch": minibatch.index, "t": t, "docs_seen": docs_seen, "iterations": iterations}
                write_checkpoint(checkpoint.path, Checkpoint(state, position, [r.to_dict() for r in trace], fingerprint),
                                 {lang: corpus.vocabulary(lang) for lang in state.languages})
    finally:
        runner.close()
    return SVBResult(state=state, t=t, docs_seen=docs_seen, iterations=iterations, trace=tuple(trace),
                     unknown_seed_words=unknown)


def svb_info(corpus: Corpus, config: VBConfig, svb: SVBConfig, result: SVBResult, *,
             seen: Sequence[dict[str, str]], shards: Sequence[int] | None = None) -> ModelInfo:
    """The record of a streaming-VB model: settings, stream position, trace and provenance.

    Parameters
    ----------
    corpus : Corpus
        The store streamed.
    config : VBConfig
        Hyperparameters.
    svb : SVBConfig
        Minibatch settings.
    result : SVBResult
        The run.
    seen : sequence of dict
        Shards the model had processed before this run (provenance entries).
    shards : sequence of int, optional
        Store indices of the shards this run streamed (default: all).

    Returns
    -------
    ModelInfo
        ``method="svb"``; ``online`` holds ``config``, ``t``, ``docs_seen`` and ``iterations``.
    """
    shards = range(corpus.n_shards) if shards is None else shards
    return ModelInfo(
        kind="vb_lda",
        method="svb",
        settings=config.to_dict(),
        online={"config": svb.to_dict(), "t": result.t, "docs_seen": result.docs_seen,
                "iterations": result.iterations},
        trace=[r.to_dict() for r in result.trace],
        converged=False,
        unknown_seed_words=result.unknown_seed_words,
        corpus=corpus_provenance(corpus, shards, seen),
    )
