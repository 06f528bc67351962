"""Shard reads shared by the drivers' threads: one read per shard, cached, read ahead."""
from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Mapping, Sequence

from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.reader import load_multiblock
from topicflow.models.common.blocks import DocBlock


class ShardReader:
    """Reads shards of one store, keeping the ``cache_size`` most recently used ones in memory.

    Thread-safe: a thread asking for a shard that another thread is loading waits for that load
    instead of starting its own (the pieces of one minibatch usually come from the same shard).
    :meth:`prefetch` loads shards on a background thread, so the read of the next minibatch's shard
    overlaps the wait for the driver's next call.
    """

    def __init__(self, store: str, shards: Sequence[ShardInfo], vocab_sizes: Mapping[str, int], cache_size: int = 8) -> None:
        self.store = store
        self.shards = list(shards)
        self.vocab_sizes = dict(vocab_sizes)
        self.cache_size = cache_size
        self._cache: collections.OrderedDict[int, concurrent.futures.Future[dict[str, DocBlock]]] = (
            collections.OrderedDict())
        self._lock = threading.Lock()
        self._background: concurrent.futures.ThreadPoolExecutor | None = None

    def rows(self, shard: int, start: int, stop: int) -> dict[str, DocBlock]:
        blocks = self._load(shard).result()
        return {lang: block.slice(start, stop) for lang, block in blocks.items()}

    def prefetch(self, shards: Sequence[int]) -> None:
        """Start loading ``shards`` that are not cached yet, in the background."""
        with self._lock:
            missing = [shard for shard in shards if shard not in self._cache]
        if not missing:
            return
        if self._background is None:
            self._background = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="topicflow-prefetch")
        for shard in missing:
            self._background.submit(self._load, shard)

    def _load(self, shard: int) -> concurrent.futures.Future[dict[str, DocBlock]]:
        with self._lock:
            entry = self._cache.get(shard)
            if entry is not None:
                self._cache.move_to_end(shard)
                return entry
            entry = self._cache[shard] = concurrent.futures.Future()
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)  # a load in progress still completes for its waiters
        try:
            entry.set_result(load_multiblock(self.store, self.shards[shard], self.vocab_sizes))
        except BaseException as exc:
            with self._lock:
                if self._cache.get(shard) is entry:
                    del self._cache[shard]  # the next request tries again
            entry.set_exception(exc)
        return entry

    def close(self) -> None:
        if self._background is not None:
            self._background.shutdown(wait=True)
