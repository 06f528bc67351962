"""Driver of online variational LDA on Dask (Hoffman et al. 2010), and the minibatch plan.

Documents stream from the store in minibatches of ``batch_size``. Each minibatch is cut into
pieces (contiguous rows of one shard, at most ``ceil(batch_size / pieces)`` documents), the pieces'
E-steps run on the workers and are tree-merged in a fixed order, and the driver moves lambda,
alpha and eta a step rho_t towards the minibatch's batch M-step (:mod:`topicflow.models.lda.vb.online`).

The plan depends only on the shard sizes, the settings and the seed, never on the cluster: the
same seed gives the same model on any number of workers. With ``shuffle_window`` documents are
visited in a random order within consecutive windows of that many documents, one pass at a time:
the window's documents are cut into runs of a piece's length and the runs are permuted, so every
minibatch draws from the whole window while every piece stays one contiguous read.
"""
from __future__ import annotations

import bisect
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, Sequence, cast

import numpy as np

from topicflow import config as tf_config
from topicflow._typing import Executor, choices
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.models.common.rng import STREAM_SHUFFLE, doc_generator
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb import online as online_vb
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb.batch import (
    MAX_ATTEMPTS,
    VBConfig,
    initial_state,
    rerun_when_lost,
    share,
)
from topicflow.pipeline.vb.estep_servers import ActorPool, LocalPool
from topicflow.tasks.estep import graph_token, map_piece_estep, tree_merge

log = logging.getLogger(__name__)


#: Where the pieces of a minibatch can run (see :class:`OnlineConfig`).
EXECUTORS = choices(Executor)


@dataclass(frozen=True, slots=True)
class OnlineConfig:
    """How online VB walks the corpus (the model's hyperparameters stay in :class:`VBConfig`).

    Attributes
    ----------
    batch_size : int, default 256
        Documents per minibatch, S.
    tau0, kappa : float, default 10.0 and 0.7
        Step sizes rho_t = (tau0 + t) ** -kappa (scikit-learn's defaults; Hoffman et al. use
        tau0 = 1024 on millions of documents).
    passes : int, default 1
        Passes over the documents.
    shuffle_window : int, default 0
        Visit documents in a random order within windows of this many documents (0: store order).
    pieces : int, default 8
        Most pieces per minibatch (more at shard boundaries) ...
    min_piece_docs : int, default 64
        ... but no piece smaller than this (or the minibatch). Both are fixed, so results do not
        depend on the cluster.
    executor : {"auto", "servers", "threads", "tasks"}, default "auto"
        Where pieces run: ``servers`` keeps one E-step actor per worker, called directly by the driver
        (see :mod:`topicflow.pipeline.vb.estep_servers`); ``threads`` runs them on a thread pool of the
        driver's process, even when a cluster is there (no round trips: the fastest on one machine for
        small minibatches); ``tasks`` builds a task graph per minibatch (several scheduler round trips,
        which cost more than a small minibatch's E-step); ``auto`` is ``servers`` on a cluster and
        ``threads`` without one. The model is the same.
    total_docs : int or None
        D in the D/S scaling; default the number of documents in the store.
    eval_every : int, default 10
        Estimate the per-word bound every this many minibatches (0: never; it costs one pass over lambda).
    """

    batch_size: int = 256
    tau0: float = 10.0
    kappa: float = 0.7
    passes: int = 1
    shuffle_window: int = 0
    pieces: int = 8
    min_piece_docs: int = 64
    executor: str = "auto"
    total_docs: int | None = None
    eval_every: int = 10

    def __post_init__(self) -> None:
        checks = [
            (self.batch_size >= 1, "batch_size must be at least 1"),
            (self.passes >= 1, "passes must be at least 1"),
            (self.shuffle_window >= 0, "shuffle_window must be >= 0"),
            (self.pieces >= 1 and self.min_piece_docs >= 1, "pieces and min_piece_docs must be at least 1"),
            (self.total_docs is None or self.total_docs >= 1, "total_docs must be positive"),
            (self.eval_every >= 0, "eval_every must be >= 0"),
            (self.executor in EXECUTORS, f"executor must be one of {', '.join(EXECUTORS)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidParameterError(f"{message} (got {self!r})")
        self.schedule()  # validates tau0 and kappa

    def schedule(self) -> online_vb.StepSchedule:
        return online_vb.StepSchedule(tau0=self.tau0, kappa=self.kappa)

    @property
    def piece_docs(self) -> int:
        return max(math.ceil(self.batch_size / self.pieces), min(self.batch_size, self.min_piece_docs))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> OnlineConfig:
        return cls(**{name: payload[name] for name in cls.__slots__ if name in payload})


@dataclass(frozen=True, slots=True)
class Minibatch:
    """One minibatch of the plan: ``pieces`` are ``(shard index, first row, stop row)`` in merge order."""

    epoch: int
    index: int
    pieces: tuple[tuple[int, int, int], ...]

    @property
    def n_docs(self) -> int:
        return sum(stop - start for _, start, stop in self.pieces)

    @property
    def shards(self) -> tuple[int, ...]:
        return tuple(sorted({shard for shard, _, _ in self.pieces}))


class MinibatchPlan(Protocol):
    """What :func:`plan_minibatches` reads of a configuration (OnlineConfig, or another driver's plan)."""

    @property
    def batch_size(self) -> int: ...

    @property
    def piece_docs(self) -> int: ...

    @property
    def shuffle_window(self) -> int: ...


def plan_minibatches(
    shard_sizes: Sequence[int], shards: Sequence[int], config: MinibatchPlan, *, seed: int, epoch: int,
) -> Iterator[Minibatch]:
    """The minibatches of one pass over ``shards`` (store indices, in store order).

    Parameters
    ----------
    shard_sizes : sequence of int
        Documents of every shard of the store.
    shards : sequence of int
        The shards to visit (all of them for a fit; the new ones for an update).
    config : MinibatchPlan
        ``batch_size``, ``piece_docs`` and ``shuffle_window`` (an :class:`OnlineConfig`, or the plan of
        the collapsed drivers).
    seed, epoch : int
        The shuffle of pass ``epoch`` is drawn from ``seed``.

    Yields
    ------
    Minibatch
        ``batch_size`` documents each (the last may be shorter).
    """
    sizes = [int(shard_sizes[s]) for s in shards]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()
    n_docs = bounds[-1]
    window = config.shuffle_window if config.shuffle_window else 0
    run = config.piece_docs
    if window:
        ranges = _shuffled_runs(n_docs, window, run, seed=seed, epoch=epoch)
    else:
        ranges = ((lo, min(n_docs, lo + config.batch_size)) for lo in range(0, n_docs, config.batch_size))
    pending: list[tuple[int, int]] = []
    taken = 0
    index = 0
    for lo, hi in ranges:
        while lo < hi:
            take = min(hi - lo, config.batch_size - taken)
            pending.append((lo, lo + take))
            taken += take
            lo += take
            if taken == config.batch_size:
                yield Minibatch(epoch, index, _pieces(pending, bounds, shards, run))
                pending, taken, index = [], 0, index + 1
    if pending:
        yield Minibatch(epoch, index, _pieces(pending, bounds, shards, run))


def resumed_minibatches(
    shard_sizes: Sequence[int], shards: Sequence[int], config: MinibatchPlan, *, seed: int, passes: int,
    done: tuple[int, int] = (0, -1),
) -> tuple[Iterator[Minibatch], int]:
    """The minibatches of ``passes`` passes over ``shards`` after the last one done, and how many they are.

    Every driver that streams minibatches (online VB, tree online VB, infvoc, the collapsed methods)
    resumes a checkpoint through this one plan.

    Parameters
    ----------
    shard_sizes : sequence of int
        Documents of every shard of the store.
    shards : sequence of int
        Store indices to visit, in store order.
    config : MinibatchPlan
    seed : int
        Seed of the shuffles (pass ``epoch`` draws its own).
    passes : int
    done : (int, int), default (0, -1)
        ``(pass, minibatch index)`` of the last minibatch already processed; ``(0, -1)`` for none.

    Returns
    -------
    minibatches : iterator of Minibatch
    remaining : int
        How many the iterator yields (for progress bars).
    """
    n_docs = sum(int(shard_sizes[s]) for s in shards)
    per_pass = math.ceil(n_docs / config.batch_size)
    remaining = passes * per_pass - (done[0] * per_pass + done[1] + 1)
    minibatches = (
        minibatch
        for epoch in range(passes)
        for minibatch in plan_minibatches(shard_sizes, shards, config, seed=seed, epoch=epoch)
        if (epoch, minibatch.index) > done
    )
    return minibatches, remaining


def _shuffled_runs(n_docs: int, window: int, run: int, *, seed: int, epoch: int) -> Iterator[tuple[int, int]]:
    for w, lo in enumerate(range(0, n_docs, window)):
        hi = min(n_docs, lo + window)
        starts = np.arange(lo, hi, run)
        for i in doc_generator(seed, STREAM_SHUFFLE, epoch, w).permutation(len(starts)):
            start = int(starts[i])
            yield start, min(hi, start + run)


def _pieces(
    ranges: Sequence[tuple[int, int]], bounds: Sequence[int], shards: Sequence[int], run: int
) -> tuple[tuple[int, int, int], ...]:
    """Cut domain ranges at shard boundaries and into at most ``run`` documents each."""
    out = []
    for lo, hi in ranges:
        while lo < hi:
            k = bisect.bisect_right(bounds, lo) - 1
            stop = min(hi, bounds[k + 1], lo + run)
            out.append((int(shards[k]), lo - bounds[k], stop - bounds[k]))
            lo = stop
    return tuple(out)


@dataclass(frozen=True, slots=True)
class MinibatchRecord:
    """One line of the online trace."""

    t: int
    epoch: int
    minibatch: int
    docs: int
    tokens: int
    rho: float
    docs_seen: int
    alpha_sum: float
    bound_per_token: float
    seconds: float
    docs_per_second: float
    tokens_per_second: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class OnlineResult:
    """The model after the stream, how far the schedule got and the trace of this run."""

    state: LDAState
    t: int
    docs_seen: int
    trace: tuple[MinibatchRecord, ...]
    unknown_seed_words: dict[str, list[str]] = field(default_factory=dict)


class MinibatchRunner:
    """Runs the E-step of each minibatch with the executor the config asks for (see :class:`OnlineConfig`)."""

    def __init__(self, corpus: Corpus, online: OnlineConfig, client: Any) -> None:
        kind = online.executor
        if kind == "auto" or (kind == "servers" and client is None):
            kind = "servers" if client is not None else "threads"
        self.kind = kind
        self.client = client
        if kind == "tasks":
            self.blocks = corpus.to_delayed_multi()
        elif kind == "servers":
            self.pool: ActorPool | LocalPool = ActorPool(client, str(corpus.path), corpus.shards, corpus.vocab_sizes())
        else:
            self.pool = LocalPool(str(corpus.path), corpus.shards, corpus.vocab_sizes())

    def estep(self, minibatch: Minibatch, state: LDAState, params: Any, *, t: int, token: str,
              split_every: int, upcoming: Minibatch | None = None) -> EStepStats:
        """Statistics of ``minibatch`` under ``state``, merged in the fixed tree order.

        Servers and threads start reading the shards of the ``upcoming`` minibatch when done.
        """
        if self.kind == "tasks":
            return self._estep_tasks(minibatch, state, params, t=t, token=token, split_every=split_every)
        pieces = [(i, *piece) for i, piece in enumerate(minibatch.pieces)]
        following = [] if upcoming is None else [(i, *piece) for i, piece in enumerate(upcoming.pieces)]
        return self.pool.estep(pieces, state, params, t, split_every=split_every, upcoming=following)

    def _estep_tasks(self, minibatch: Minibatch, state: LDAState, params: Any, *, t: int, token: str,
                     split_every: int) -> EStepStats:
        """The task-graph E-step. A worker that dies under it takes the topics scattered to it: when no
        other worker holds a copy (a worker that joined after the scatter has none), the tasks are
        cancelled, and the minibatch is rerun from a new scatter under new keys, as batch VB reruns an
        iteration (:func:`~topicflow.pipeline.vb.batch.rerun_when_lost`); the E-step is pure, so the
        statistics are the undisturbed ones."""
        blocks = {s: self.blocks[s] for s in minibatch.shards}

        def attempt(key: str) -> EStepStats:
            topics = share(state.prepared_topics(), self.client, name=f"topics-{key}")
            parts = map_piece_estep(blocks, minibatch.pieces, topics, state.doc_topic_prior, params, epoch=t, token=key)
            (stats,) = compute(tree_merge(parts, split_every=split_every, token=key), client=self.client)
            return cast(EStepStats, stats)

        return rerun_when_lost(
            attempt, token=token, client=self.client, what=f"minibatch t={t}",
            lost_message=lambda exc: (f"online VB: the workers lost the topics or tasks of minibatch t={t} in all "
                                      f"{MAX_ATTEMPTS} attempts ({type(exc).__name__}: {exc}); see docs/cluster.md, "
                                      "\"Worker memory\""))

    def advance(self, before: LDAState, step: online_vb.ReplicaStep, after: LDAState) -> None:
        """Tell the executor the driver moved from ``before`` to ``after`` (servers then get ``step``, not lambda)."""
        if self.kind != "tasks":
            self.pool.advance(before, step, after)

    def close(self) -> None:
        if self.kind != "tasks":
            self.pool.close()


def with_next(items: Iterator[Minibatch]) -> Iterator[tuple[Minibatch, Minibatch | None]]:
    """Pair each minibatch with the one after it, so that its shards can be read ahead.

    Parameters
    ----------
    items : iterator of Minibatch
        The plan.

    Yields
    ------
    tuple of (Minibatch, Minibatch or None)
        A minibatch and the next one (None for the last).
    """
    current = next(items, None)
    while current is not None:
        following = next(items, None)
        yield current, following
        current = following


def fit_online(
    corpus: Corpus,
    config: VBConfig,
    online: OnlineConfig,
    *,
    state: LDAState | None = None,
    t: int = 0,
    docs_seen: int = 0,
    shards: Sequence[int] | None = None,
    client: Any = None,
    split_every: int | None = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_minibatch: Callable[[MinibatchRecord, LDAState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
) -> OnlineResult:
    """Online VB over ``shards`` of ``corpus`` (all of them by default), continuing from ``state`` and ``t``.

    Parameters
    ----------
    corpus : Corpus
    config : VBConfig
        Hyperparameters and the E-step (``vb`` or ``hybrid``); ``max_iter`` and ``tol`` are unused.
    online : OnlineConfig
    state : LDAState, optional
        Model to continue (e.g. a saved model during a nightly update); a fresh random one by default.
    t, docs_seen : int
        Minibatches and documents already processed by ``state`` (the step-size schedule continues).
    shards : sequence of int, optional
        Store indices of the shards to stream, in store order.
    on_minibatch : callable, optional
        ``on_minibatch(record, state)`` after every update, for monitoring.
    checkpoint : CheckpointPolicy, optional
        Write the driver state every ``every`` minibatches; with ``resume``, continue from it.

    Returns
    -------
    OnlineResult
    """
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    unknown: dict[str, list[str]] = {}
    if state is None:
        state, unknown = initial_state(corpus, config)
    shards = list(range(corpus.n_shards)) if shards is None else list(shards)
    total_docs = online.total_docs or len(corpus)
    schedule = online.schedule()
    shard_sizes = [s.n_docs for s in corpus.shards]
    run_token = graph_token(corpus.token(), config.to_dict(), online.to_dict(), shards, split_every, t)
    fingerprint = {
        "method": "online", "settings": config.to_dict(),
        # Every executor gives the same model, so a run may resume on another one.
        "online": {k: v for k, v in online.to_dict().items() if k != "executor"}, "corpus": corpus.token(),
        "shards": shards, "split_every": split_every, "t0": t,
    }
    trace: list[MinibatchRecord] = []
    done = (0, -1)  # (epoch, minibatch index) of the last processed minibatch
    if checkpoint is not None and checkpoint.resume:
        found = read_checkpoint(checkpoint.path, fingerprint)
        if found is not None:
            state = found.state
            t, docs_seen = int(found.position["t"]), int(found.position["docs_seen"])
            done = (int(found.position["epoch"]), int(found.position["minibatch"]))
            trace = [MinibatchRecord(**record) for record in found.trace]
            log.info("resuming from %s at pass %d after minibatch %d", checkpoint.path, *done)
    runner = MinibatchRunner(corpus, online, client)
    params = config.estep_params(online=True)
    plan, remaining = resumed_minibatches(shard_sizes, shards, online, seed=config.seed, passes=online.passes,
                                          done=done)
    try:
        for minibatch, upcoming in progress.track(with_next(plan), total=remaining, desc="online", unit="batch"):
            epoch = minibatch.epoch
            started = time.perf_counter()
            rho = schedule.rho(t)
            token = f"{run_token}-{epoch}-{minibatch.index}"
            stats = runner.estep(minibatch, state, params, t=t, token=token, split_every=split_every,
                                 upcoming=upcoming)
            bound = math.nan
            if online.eval_every and (t + 1) % online.eval_every == 0:
                scale = total_docs / max(stats.n_docs, 1)
                bound = online_vb.minibatch_bound(stats, state.topic_word_var, state.doc_topic_prior,
                                                  state.topic_word_prior, scale) / max(scale * stats.n_tokens, 1)
            step = online_vb.topic_word_step(state, stats, rho=rho, total_docs=total_docs,
                                             optimize_topic_word_prior=config.optimize_topic_word_prior)
            updated = online_vb.online_update(state, stats, step, doc_topic_prior_mode=config.doc_topic_prior_mode)
            runner.advance(state, step, updated)
            state = updated
            t += 1
            docs_seen += stats.n_docs
            seconds = time.perf_counter() - started
            record = MinibatchRecord(
                t=t, epoch=epoch, minibatch=minibatch.index, docs=stats.n_docs, tokens=stats.n_tokens, rho=rho,
                docs_seen=docs_seen, alpha_sum=float(state.doc_topic_prior.sum()), bound_per_token=bound,
                seconds=seconds, docs_per_second=stats.n_docs / max(seconds, 1e-9),
                tokens_per_second=stats.n_tokens / max(seconds, 1e-9),
            )
            trace.append(record)
            log.debug("minibatch %d: rho %.4f, %d docs, %.3f s", t, rho, stats.n_docs, seconds)
            if on_minibatch is not None:
                on_minibatch(record, state)
            if checkpoint is not None and checkpoint.due(len(trace)):
                write_checkpoint(
                    checkpoint.path,
                    Checkpoint(state, {"epoch": epoch, "minibatch": minibatch.index, "t": t, "docs_seen": docs_seen},
                               [r.to_dict() for r in trace], fingerprint),
                    {lang: corpus.vocabulary(lang) for lang in state.languages},
                )
    finally:
        runner.close()
    return OnlineResult(state=state, t=t, docs_seen=docs_seen, trace=tuple(trace), unknown_seed_words=unknown)


def online_info(corpus: Corpus, config: VBConfig, online: OnlineConfig, result: OnlineResult, *,
                seen: Sequence[dict[str, str]], shards: Sequence[int] | None = None) -> ModelInfo:
    """The record of an online model: settings, schedule position, trace and provenance."""
    shards = range(corpus.n_shards) if shards is None else shards
    return ModelInfo(
        kind="vb_lda",
        method="online",
        settings=config.to_dict(),
        online={"config": online.to_dict(), "t": result.t, "docs_seen": result.docs_seen},
        trace=[r.to_dict() for r in result.trace],
        converged=False,
        unknown_seed_words=result.unknown_seed_words,
        corpus=corpus_provenance(corpus, shards, seen),
    )
