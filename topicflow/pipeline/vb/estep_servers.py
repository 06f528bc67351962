"""Where the E-steps of online minibatches run.

A minibatch of a few hundred documents holds milliseconds of work, less than one scheduler round trip
of a task graph. So by default online VB keeps one :class:`EStepServer` actor per worker: it reads
shards itself (keeping the last few in memory) and runs the E-step of the pieces it is handed, called
directly from the driver, worker to worker, without the scheduler. Without a cluster the pieces run on
a local thread pool (the numba kernels release the GIL).

Each server keeps a replica of lambda (:class:`topicflow.models.lda.vb.online.TopicWordReplica`). lambda
is shipped once; after that every call carries the steps the driver took since the last call (one
minibatch's statistics, n_topics x the terms it contains), which each server applies with the
driver's own formula. At n_topics x n_terms = 100 x 50,000, shipping lambda cost 0.1 s per call.

Whatever runs them, pieces are the same and their statistics are merged by the same fixed tree as
the task graph's (:func:`topicflow.tasks.reduce.tree_reduce_now`), so the model does not depend on the
executor or on the number of workers. A worker lost with its server is replaced and the minibatch
is run again; its E-step is a pure function of its inputs, so the result is unchanged.
"""
from __future__ import annotations

import concurrent.futures
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import TopicflowError
from topicflow.io.corpus.layout import ShardInfo
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb.layout import (
    TopicWordVar,
    empty_prepared_topics,
    fill_prepared_terms,
    prepare_topics_for_blocks,
    terms_of_blocks,
    topic_word_var_source,
)
from topicflow.models.lda.vb.online import ReplicaStep, TopicWordReplica
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.pipeline.cluster import actor_of, actor_result, worker_addresses
from topicflow.pipeline.shard_reader import ShardReader
from topicflow.tasks.estep import EStepParams, merge_stats, run_estep
from topicflow.tasks.reduce import tree_reduce_now

log = logging.getLogger(__name__)

#: (piece index, shard index, first row, stop row)
Piece = tuple[int, int, int, int]

#: Attempts at one minibatch when workers die under it.
MAX_ATTEMPTS = 3


def run_pieces(
    reader: ShardReader, pieces: Sequence[Piece], source: TopicWordVar, doc_topic_prior: np.ndarray,
    params: EStepParams, epoch: int,
) -> list[tuple[int, EStepStats]]:
    """The E-step of each piece, tagged with its index.

    exp(E[log beta]) is computed here from lambda for the terms of these pieces only; the values
    are the same as the driver's for all terms, so the statistics do not depend on the executor.
    """
    blocks = [reader.rows(shard, start, stop) for _, shard, start, stop in pieces]
    topics = prepare_topics_for_blocks(source, blocks)
    return [(piece[0], run_estep(rows, topics, doc_topic_prior, params, epoch)) for piece, rows in zip(pieces, blocks)]


class ReplicaOutOfStep(RuntimeError):
    """A server's replica of lambda is not at the version the driver's steps start from."""


@dataclass(frozen=True, slots=True)
class ReplicaSteps:
    """Bring a server's replica from ``version`` forward by ``steps``, then use it."""

    version: int
    steps: tuple[ReplicaStep, ...]


class EStepServer:
    """A Dask actor: E-steps of minibatch pieces over the shards of one store, with a replica of lambda."""

    def __init__(self, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int]) -> None:
        self.reader = ShardReader(store, shards, vocab_sizes)
        self.replica: TopicWordReplica | None = None

    def sync(self, version: int, topic_word_var: Mapping[str, np.ndarray],
             topic_word_prior: Mapping[str, np.ndarray | float]) -> None:
        self.replica = TopicWordReplica(version, topic_word_var, topic_word_prior)

    def run(self, pieces: Sequence[Piece], catch_up: ReplicaSteps, doc_topic_prior: np.ndarray,
            params: EStepParams, epoch: int, prefetch: Sequence[int] = ()) -> list[tuple[int, EStepStats]]:
        """Apply ``catch_up`` to the replica, then the E-step of ``pieces`` under it; then start reading
        the shards ``prefetch`` (the next call's)."""
        if self.replica is None or self.replica.version != catch_up.version:
            have = None if self.replica is None else self.replica.version
            raise ReplicaOutOfStep(f"replica of lambda at version {have}, steps start at {catch_up.version}")
        for step in catch_up.steps:
            self.replica.apply(step)
        results = []
        if pieces:
            results = run_pieces(self.reader, pieces, topic_word_var_source(self.replica.topic_word_var),
                                 doc_topic_prior, params, epoch)
        self.reader.prefetch(prefetch)
        return results


class LocalPool:
    """Pieces on a thread pool of the driver's process (without a cluster, or ``executor="threads"``)."""

    def __init__(self, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int],
                 threads: int | None = None) -> None:
        self.threads = threads or os.cpu_count() or 1
        self.reader = ShardReader(store, shards, vocab_sizes)
        self.pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="topicflow-estep")

    def estep(self, pieces: Sequence[Piece], state: LDAState, params: EStepParams, epoch: int, *,
              split_every: int, upcoming: Sequence[Piece] = ()) -> EStepStats:
        """Statistics of ``pieces`` under ``state``; meanwhile start reading the shards of ``upcoming`` pieces.

        The threads first share the exp(E[log beta]) rows of the minibatch's terms (each term once,
        instead of once per thread that meets it), then run the pieces' E-steps.
        """
        # Read ahead from the start: a read begun after the E-step would overlap only the driver's short
        # merge and M-step, and the next minibatch would wait for it.
        self.reader.prefetch(_shards_of(upcoming))
        source = topic_word_var_source(state.topic_word_var)
        blocks = [self.reader.rows(shard, start, stop) for _, shard, start, stop in pieces]
        terms = terms_of_blocks(source, blocks)
        topics = empty_prepared_topics(source)
        for future in [self.pool.submit(fill_prepared_terms, source, terms, topics, part, self.threads)
                       for part in range(self.threads)]:
            future.result()
        # One task per piece, not one run per thread: a thread that is done early takes the next piece.
        runs = [self.pool.submit(run_estep, rows, topics, state.doc_topic_prior, params, epoch) for rows in blocks]
        return _merge([[(piece[0], run.result()) for piece, run in zip(pieces, runs)]], split_every)

    def advance(self, before: LDAState, step: ReplicaStep, after: LDAState) -> None:
        """Nothing to do: the threads read the driver's state."""

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.reader.close()


class ActorPool:
    """One :class:`EStepServer` per worker of ``client``; replaced when workers come and go."""

    def __init__(self, client: Any, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int]) -> None:
        self.client = client
        self.args = (store, list(shards), dict(vocab_sizes))
        self.servers: list[Any] = []
        self._futures: list[Any] = []
        self._replica_of: LDAState | None = None  # the state the replicas hold once the pending steps apply
        self._pending: list[ReplicaStep] = []
        self._version = 0
        #: Times lambda itself was shipped to the servers (once per fit, plus once per restart).
        self.full_syncs = 0
        self._start()

    def _start(self) -> None:
        self._futures = []
        self._replica_of = None
        workers = worker_addresses(self.client)
        if not workers:
            self.client.wait_for_workers(1)
            workers = worker_addresses(self.client)
        # allow_other_workers: just after a worker died the scheduler may still list it; a server
        # pinned to it would never start. Two servers on one worker give the same statistics.
        self._futures = [
            self.client.submit(EStepServer, *self.args, actor=True, workers=[worker], allow_other_workers=True,
                               pure=False)
            for worker in workers
        ]
        self.servers = [actor_of(future) for future in self._futures]

    def estep(self, pieces: Sequence[Piece], state: LDAState, params: EStepParams, epoch: int, *,
              split_every: int, upcoming: Sequence[Piece] = ()) -> EStepStats:
        """Statistics of ``pieces`` under ``state``; the servers' replicas catch up with ``state`` first.

        Each server then starts reading the shards of its share of the ``upcoming`` pieces.
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                if self._replica_of is not state:
                    self._sync(state)
                message = ReplicaSteps(self._version, tuple(self._pending))
                shares = _deal(pieces, len(self.servers))
                next_shares = _deal(upcoming, len(self.servers))
                # Servers without pieces still take the steps, so every replica stays current.
                calls = [server.run(share, message, state.doc_topic_prior, params, epoch, _shards_of(next_share))
                         for server, share, next_share in zip(self.servers, shares, next_shares)]
                results = [actor_result(self.client, server, call) for server, call in zip(self.servers, calls)]
                self._version += len(self._pending)
                self._pending = []
                return _merge(results, split_every)
            except TopicflowError:
                raise
            except Exception as exc:  # noqa: BLE001 - a lost worker surfaces as several comm/actor errors
                if attempt == MAX_ATTEMPTS:
                    raise
                log.warning("E-step server lost (%s: %s); restarting servers and rerunning the minibatch",
                            type(exc).__name__, exc)
                self._start()
        raise AssertionError("unreachable")

    def advance(self, before: LDAState, step: ReplicaStep, after: LDAState) -> None:
        """The driver moved from ``before`` to ``after`` by ``step``: the next call sends the step, not lambda."""
        if self._replica_of is before:
            self._pending.append(step)
            self._replica_of = after

    def _sync(self, state: LDAState) -> None:
        self._version += 1  # a version no replica has had
        calls = [server.sync(self._version, state.topic_word_var, state.topic_word_prior) for server in self.servers]
        for server, call in zip(self.servers, calls):
            actor_result(self.client, server, call)
        self._pending = []
        self._replica_of = state
        self.full_syncs += 1

    def close(self) -> None:
        self.servers, self._futures = [], []


def _deal(pieces: Sequence[Piece], n: int) -> list[list[Piece]]:
    """Contiguous runs of pieces, one per executor (neighbouring pieces often share a shard)."""
    bounds = np.linspace(0, len(pieces), n + 1).round().astype(int)
    return [list(pieces[bounds[i]:bounds[i + 1]]) for i in range(n)]


def _shards_of(pieces: Sequence[Piece]) -> list[int]:
    return sorted({shard for _, shard, _, _ in pieces})


def _merge(results: Sequence[Sequence[tuple[int, EStepStats]]], split_every: int) -> EStepStats:
    ordered = sorted((item for part in results for item in part), key=lambda item: item[0])
    return tree_reduce_now([stats for _, stats in ordered], merge_stats, split_every=split_every)
