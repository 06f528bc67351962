"""The Dask actor that runs the word-by-word collapsed methods (Bleier's Algorithm 1; SCVB0 per token).

Algorithm 1 updates the global statistics after every token, so it is serial by nature: one actor
holds the :class:`~topicflow.models.hdp.state.HDPState` on one worker and is fed documents in stream
order, and the state never crosses the network per token (only when the driver asks for a snapshot:
at evaluation points, checkpoints and the end). The actor reads the shards itself
(:meth:`CollapsedActor.feed`, given ``(shard, start, stop)`` pieces), or is handed blocks
(:meth:`CollapsedActor.feed_block`) for an unbounded stream that is not in a store. It is a plain
class that only holds state and delegates every step to the method's math
(:data:`topicflow.pipeline.collapsed.model.OPS`); without a cluster the driver uses it in process.

Per-document state (``keep_doc_state``: each document's n_dk kept between passes) lives in the actor's
memory, one row of T float64 per document of the store, up to :data:`DOC_STATE_LIMIT_BYTES`; a larger
store is refused with what to do. Actors die with their worker, so the driver checkpoints snapshots.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.layout import ShardInfo
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.cvb0 import start_doc_topic
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.collapsed.config import CollapsedConfig
from topicflow.pipeline.collapsed.model import (
    OPS,
    lda_view,
    raw_arrays,
    state_from_raw,
    topics_in_use,
)
from topicflow.pipeline.shard_reader import ShardReader

#: Most memory the per-document n_dk of ``keep_doc_state`` may take in the actor (2 GiB by default;
#: ``config.extra["doc_state_limit_bytes"]`` overrides it).
DOC_STATE_LIMIT_BYTES = 2 * 1024 ** 3


def doc_state_rows(config: CollapsedConfig, n_docs: int) -> np.ndarray | None:
    """A fresh per-document n_dk store of ``n_docs`` rows (-1: not seen yet), or None without ``keep_doc_state``.

    Parameters
    ----------
    config : CollapsedConfig
    n_docs : int
        Documents of the store.

    Returns
    -------
    ndarray of shape (n_docs, T) or None

    Raises
    ------
    InvalidParameterError
        The rows would exceed the limit.
    """
    if not config.params.keep_doc_state:
        return None
    limit = int(config.extra.get("doc_state_limit_bytes", DOC_STATE_LIMIT_BYTES))
    needed = n_docs * config.params.truncation * 8
    if needed > limit:
        raise InvalidParameterError(
            f"keep_doc_state needs {needed / 2 ** 20:.0f} MiB for the n_dk of {n_docs} documents x "
            f"{config.params.truncation} topics, above the limit of {limit / 2 ** 20:.0f} MiB; fit without "
            "keep_doc_state (each visit starts n_dk afresh), lower the truncation, or raise "
            "extra['doc_state_limit_bytes']")
    return np.full((n_docs, config.params.truncation), -1.0, dtype=np.float64)


class CollapsedActor:
    """Holds a collapsed state and runs the word-by-word algorithm over what it is fed.

    Parameters
    ----------
    config : CollapsedConfig
        ``config.method`` picks the math; ``config.params`` its settings.
    arrays, scalars : dict
        The starting state, as :func:`~topicflow.pipeline.collapsed.model.raw_arrays` gives it.
    store : str or None
        The corpus store :meth:`feed` reads (None: only :meth:`feed_block`).
    shards : sequence of ShardInfo
        The store's shards.
    language : str
    n_terms : int
        The language's vocabulary size.
    doc_state : ndarray of shape (n_docs, T) or None
        Per-document n_dk (``keep_doc_state``), indexed by global document position.
    """

    def __init__(self, config: CollapsedConfig, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                 store: str | None, shards: Sequence[ShardInfo], language: str, n_terms: int,
                 doc_state: np.ndarray | None = None) -> None:
        self.config = config
        self.ops = OPS[config.method]
        self.state = state_from_raw(arrays, scalars, config.method)
        self.language = language
        self.doc_state = None if doc_state is None else np.array(doc_state, dtype=np.float64)
        self.reader = None if store is None else ShardReader(store, shards, {language: n_terms}, cache_size=2)

    def feed(self, pieces: Sequence[tuple[int, int, int]]) -> dict[str, Any]:
        """Run the algorithm over the documents ``(shard, start, stop)`` of each piece, in order.

        Parameters
        ----------
        pieces : sequence of (int, int, int)
            Store index of the shard and its rows.

        Returns
        -------
        dict
            :meth:`summary` after the last piece.
        """
        if self.reader is None:
            raise InvalidParameterError("this actor reads no store; feed it blocks with feed_block")
        for shard, start, stop in pieces:
            self._run(self.reader.rows(shard, start, stop)[self.language])
        return self.summary()

    def feed_block(self, block: DocBlock) -> dict[str, Any]:
        """Run the method over the documents of ``block`` (an unbounded stream's next minibatch).

        Word by word (``config.batch_size`` None) every token updates the state; in the minibatch form
        the block is one minibatch: the local step over all of it, then the global step.

        Parameters
        ----------
        block : DocBlock
            In the model's term ids; ``first_doc`` keys each document's random start.

        Returns
        -------
        dict
            :meth:`summary` afterwards.
        """
        if self.config.batch_size is None:
            self._run(block)
        else:
            stats = self.ops.local(self.ops.view(self.state), block, self.config.params)
            self.ops.apply(self.state, stats, self.config.params)
        return self.summary()

    def _run(self, block: DocBlock) -> None:
        if self.doc_state is None:
            self.ops.word_by_word(self.state, block, self.config.params, doc_topic=None)
            return
        rows = slice(block.first_doc, block.first_doc + block.n_docs)
        if rows.stop > self.doc_state.shape[0]:
            raise InvalidParameterError(
                f"documents {rows.start}..{rows.stop - 1} lie beyond the {self.doc_state.shape[0]} documents whose "
                "n_dk this actor keeps; keep_doc_state needs a store of known size")
        doc_topic = self.doc_state[rows]
        fresh = doc_topic[:, 0] < 0
        if fresh.any():  # first visit: the method's own start (params.doc_start, keyed by document)
            start = start_doc_topic(block, self.state.truncation, doc_start=self.config.params.doc_start,
                                    seed=self.config.params.seed)
            doc_topic[fresh] = start[fresh]
        self.ops.word_by_word(self.state, block, self.config.params, doc_topic=doc_topic)
        self.doc_state[rows] = doc_topic

    def summary(self) -> dict[str, Any]:
        """Documents and tokens seen, alpha, gamma and the topics in use (what a trace record reports)."""
        state = self.state
        return {"docs_seen": int(state.docs_seen), "tokens_seen": int(state.tokens_seen), "alpha": float(state.alpha),
                "gamma": float(state.gamma), "topics_in_use": topics_in_use(state, self.config)}

    def snapshot(self) -> tuple[dict[str, np.ndarray], dict[str, Any], np.ndarray | None]:
        """A copy of the state with its lazy scale kept (:func:`raw_arrays`) and of the per-document n_dk.

        The live state is not changed, so a run that takes snapshots goes on exactly as one that does not.
        """
        arrays, scalars = raw_arrays(self.state)
        doc_state = None if self.doc_state is None else self.doc_state.copy()
        return arrays, scalars, doc_state

    def lda_view(self) -> LDAState:
        """The state as an LDA model (for held-out evaluation)."""
        return lda_view(self.state, self.config, self.language)

    def close(self) -> None:
        """Stop the shard reader's background thread."""
        if self.reader is not None:
            self.reader.close()
