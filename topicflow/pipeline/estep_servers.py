"""Where the E-steps of online minibatches run.

A minibatch of a few hundred documents holds milliseconds of work, less than one scheduler round trip
of a task graph. So by default online VB keeps one :class:`EStepServer` actor per worker: it reads
shards itself (keeping the last few in memory) and runs the E-step of the pieces it is handed, called
directly from the driver, worker to worker, without the scheduler. Without a cluster the pieces run on
a local thread pool (the numba kernels release the GIL).

Whatever runs them, pieces are the same and their statistics are merged by the same fixed tree as
the task graph's (:func:`topicflow.tasks.reduce.tree_reduce_now`), so the model does not depend on the
executor or on the number of workers. A worker lost with its server is replaced and the minibatch
is run again; its E-step is a pure function of its inputs, so the result is unchanged.
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import os
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import TopicflowError
from topicflow.io.zarr_shards import ShardInfo, load_multiblock
from topicflow.models.blocks import DocBlock
from topicflow.models.vb_lda import EStepStats, PreparedTopics, TopicWordVar, prepare_topics_for_blocks
from topicflow.tasks.estep import EStepParams, merge_stats, run_estep
from topicflow.tasks.reduce import tree_reduce_now

log = logging.getLogger(__name__)

#: (piece index, shard index, first row, stop row)
Piece = tuple[int, int, int, int]

#: Attempts at one minibatch when workers die under it.
MAX_ATTEMPTS = 3


class ShardReader:
    """Reads shards of one store, keeping the ``cache_size`` most recently used ones in memory."""

    def __init__(self, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int], cache_size: int = 8) -> None:
        self.store = store
        self.shards = list(shards)
        self.vocab_sizes = dict(vocab_sizes)
        self.cache_size = cache_size
        self._cache: collections.OrderedDict[int, dict[str, DocBlock]] = collections.OrderedDict()

    def rows(self, shard: int, start: int, stop: int) -> dict[str, DocBlock]:
        if shard in self._cache:
            self._cache.move_to_end(shard)
        else:
            self._cache[shard] = load_multiblock(self.store, self.shards[shard], self.vocab_sizes)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return {lang: block.slice(start, stop) for lang, block in self._cache[shard].items()}


def run_pieces(
    reader: ShardReader, pieces: Sequence[Piece], topics: PreparedTopics | TopicWordVar, doc_topic_prior: np.ndarray,
    params: EStepParams, epoch: int,
) -> list[tuple[int, EStepStats]]:
    """The E-step of each piece, tagged with its index.

    Given lambda (:class:`TopicWordVar`) rather than prepared topics, exp(E[log beta]) is computed
    here for the terms of these pieces only; the values are the same either way.
    """
    blocks = [reader.rows(shard, start, stop) for _, shard, start, stop in pieces]
    if isinstance(topics, TopicWordVar):
        topics = prepare_topics_for_blocks(topics, blocks)
    return [(piece[0], run_estep(rows, topics, doc_topic_prior, params, epoch)) for piece, rows in zip(pieces, blocks)]


class EStepServer:
    """A Dask actor: E-steps of minibatch pieces over the shards of one store."""

    def __init__(self, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int]) -> None:
        self.reader = ShardReader(store, shards, vocab_sizes)

    def run(self, pieces: Sequence[Piece], topics: PreparedTopics | TopicWordVar, doc_topic_prior: np.ndarray,
            params: EStepParams, epoch: int) -> list[tuple[int, EStepStats]]:
        return run_pieces(self.reader, pieces, topics, doc_topic_prior, params, epoch)


class LocalPool:
    """Pieces on a thread pool of this process (no cluster)."""

    def __init__(self, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int],
                 threads: int | None = None) -> None:
        self.threads = threads or os.cpu_count() or 1
        self.readers = [ShardReader(store, shards, vocab_sizes) for _ in range(self.threads)]
        self.pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="topicflow-estep")

    def estep(self, pieces: Sequence[Piece], topics: PreparedTopics | TopicWordVar, doc_topic_prior: np.ndarray,
              params: EStepParams, epoch: int, *, split_every: int) -> EStepStats:
        shares = _deal(pieces, self.threads)
        futures = [self.pool.submit(run_pieces, reader, share, topics, doc_topic_prior, params, epoch)
                   for reader, share in zip(self.readers, shares) if share]
        return _merge([f.result() for f in futures], split_every)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class ActorPool:
    """One :class:`EStepServer` per worker of ``client``; replaced when workers come and go."""

    def __init__(self, client: Any, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int]) -> None:
        self.client = client
        self.args = (store, list(shards), dict(vocab_sizes))
        self.servers: list[Any] = []
        self._futures: list[Any] = []
        self._start()

    def _start(self) -> None:
        self._futures = []
        workers = sorted(self.client.scheduler_info()["workers"])
        if not workers:
            self.client.wait_for_workers(1)
            workers = sorted(self.client.scheduler_info()["workers"])
        # allow_other_workers: just after a worker died the scheduler may still list it; a server
        # pinned to it would never start. Two servers on one worker give the same statistics.
        self._futures = [
            self.client.submit(EStepServer, *self.args, actor=True, workers=[worker], allow_other_workers=True,
                               pure=False)
            for worker in workers
        ]
        self.servers = [future.result() for future in self._futures]

    def estep(self, pieces: Sequence[Piece], topics: PreparedTopics | TopicWordVar, doc_topic_prior: np.ndarray,
              params: EStepParams, epoch: int, *, split_every: int) -> EStepStats:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                shares = _deal(pieces, len(self.servers))
                calls = [server.run(share, topics, doc_topic_prior, params, epoch)
                         for server, share in zip(self.servers, shares) if share]
                return _merge([call.result() for call in calls], split_every)
            except TopicflowError:
                raise
            except Exception as exc:  # noqa: BLE001 - a lost worker surfaces as several comm/actor errors
                if attempt == MAX_ATTEMPTS:
                    raise
                log.warning("E-step server lost (%s: %s); restarting servers and rerunning the minibatch",
                            type(exc).__name__, exc)
                self._start()
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.servers, self._futures = [], []


def _deal(pieces: Sequence[Piece], n: int) -> list[list[Piece]]:
    """Contiguous runs of pieces, one per executor (neighbouring pieces often share a shard)."""
    bounds = np.linspace(0, len(pieces), n + 1).round().astype(int)
    return [list(pieces[bounds[i]:bounds[i + 1]]) for i in range(n)]


def _merge(results: Sequence[Sequence[tuple[int, EStepStats]]], split_every: int) -> EStepStats:
    ordered = sorted((item for part in results for item in part), key=lambda item: item[0])
    return tree_reduce_now([stats for _, stats in ordered], merge_stats, split_every=split_every)
