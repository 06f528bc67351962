"""The word-by-word driver of PCSVB0 (Bleier's Algorithm 1, exactly) and of SCVB0 with per-token updates.

Every token updates the global statistics, so the run is serial: one
:class:`~topicflow.pipeline.collapsed.actor.CollapsedActor` holds the state on one worker (in process
without a cluster) and the driver feeds it the documents in stream order, :data:`FEED_DOCS` at a time
as ``(shard, start, stop)`` pieces that the actor reads from the store itself. The state crosses the
network only at evaluation points (the LDA view), checkpoints and the end (snapshots).

The visiting order is the minibatch plan's (:func:`~topicflow.pipeline.vb.online.plan_minibatches`
with minibatches of :data:`FEED_DOCS` documents cut into pieces of at most :data:`RUN_DOCS`): store
order, or with ``shuffle_window`` runs of :data:`RUN_DOCS` documents permuted within windows. The feed
size only sets how often the driver talks to the actor (and where checkpoints may fall); the documents'
order, and so the model, is the same for any feed size.

:class:`WordStream` is the same actor for an unbounded stream: feed it a block at a time, snapshot
it when you like.
"""
from __future__ import annotations

import math
import time
from typing import Any, Iterator, Sequence

import numpy as np

from topicflow.models.common.blocks import DocBlock
from topicflow.models.hdp.state import HDPState
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.cluster import actor_of, actor_result
from topicflow.pipeline.collapsed.actor import CollapsedActor, doc_state_rows
from topicflow.pipeline.collapsed.config import CollapsedConfig
from topicflow.pipeline.collapsed.model import OPS, raw_arrays, state_from_raw
from topicflow.pipeline.collapsed.stochastic import Plan, StreamRun
from topicflow.pipeline.vb import resumed_minibatches

#: Documents per call of the actor. Each call costs a round trip to the worker, which on short documents
#: (the KJV verses: 10 tokens) cost more than the token updates at 64 documents per call.
FEED_DOCS = 1024
#: Run length of the shuffle (``shuffle_window``): runs of this many documents are permuted.
RUN_DOCS = 64


class ActorHandle:
    """A :class:`CollapsedActor` on a worker (a Dask actor) or in this process, called the same way.

    Parameters
    ----------
    client : distributed.Client or None
        Where to start it; None: in process.
    *args
        :class:`CollapsedActor`'s arguments.
    """

    def __init__(self, client: Any, *args: Any) -> None:
        self.method = args[0].method
        if client is None:
            self.actor: Any = CollapsedActor(*args)
            self.remote = False
        else:
            self.actor = actor_of(client.submit(CollapsedActor, *args, actor=True, pure=False))
            self.remote = True

    def call(self, method: str, *args: Any) -> Any:
        """Call ``method`` of the actor and wait for its result."""
        result = getattr(self.actor, method)(*args)
        return actor_result(None, self.actor, result) if self.remote else result

    def state(self) -> tuple[HDPState, np.ndarray | None]:
        """The actor's state and per-document n_dk, copied (its lazy scale kept)."""
        arrays, scalars, doc_state = self.call("snapshot")
        return state_from_raw(arrays, scalars, self.method), doc_state

    def close(self) -> None:
        """Stop the actor's reader (the actor goes when the handle is dropped)."""
        self.call("close")


def split_at_points(pieces: Sequence[tuple[int, int, int]], docs_seen: int,
                    every: int) -> Iterator[list[tuple[int, int, int]]]:
    """Cut a feed's pieces where the documents seen reach a multiple of ``every`` (evaluation points).

    Parameters
    ----------
    pieces : sequence of (shard, start, stop)
    docs_seen : int
        Documents seen before the first piece.
    every : int
        Evaluation interval (0: never cut).

    Yields
    ------
    list of (shard, start, stop)
        Consecutive segments; each ends at an evaluation point or at the end of ``pieces``.
    """
    segment: list[tuple[int, int, int]] = []
    for shard, start, stop in pieces:
        while start < stop:
            room = (every - docs_seen % every) if every > 0 else stop - start
            take = min(stop - start, room)
            segment.append((shard, start, start + take))
            start += take
            docs_seen += take
            if every > 0 and docs_seen % every == 0:
                yield segment
                segment = []
    if segment:
        yield segment


def run_word_by_word(run: StreamRun, state: HDPState) -> HDPState:
    """Algorithm 1 (or SCVB0 per token) over ``run.shards``, ``run.passes`` times, from ``state``, in one actor.

    Parameters
    ----------
    run : StreamRun
    state : HDPState
        The start; the actor works on a copy.

    Returns
    -------
    HDPState
        The state after the run (its lazy scale not folded).
    """
    config, corpus = run.config, run.corpus
    language = run.language
    doc_state = run.doc_state if run.doc_state is not None else doc_state_rows(config, len(corpus))
    arrays, scalars = raw_arrays(state)
    actor = ActorHandle(run.client, config, arrays, scalars, str(corpus.path), tuple(corpus.shards), language,
                        len(corpus.vocabulary(language)), doc_state)
    try:
        plan = Plan(FEED_DOCS, RUN_DOCS, config.shuffle_window)
        per_pass = math.ceil(run.n_docs / FEED_DOCS)
        units, remaining = resumed_minibatches(run.shard_sizes, run.shards, plan, seed=config.params.seed,
                                               passes=run.passes, done=run.done)
        docs_seen = int(state.docs_seen)
        for feed in run.progress.track(units, total=remaining, desc=config.method, unit="feed"):
            end_of_pass = feed.index == per_pass - 1
            segments = list(split_at_points(feed.pieces, docs_seen, config.eval_every))
            for number, segment in enumerate(segments):
                started = time.perf_counter()
                summary = actor.call("feed", segment)
                run.recorder.tick(time.perf_counter() - started)
                due = run.recorder.due(docs_seen, summary["docs_seen"])
                docs_seen = int(summary["docs_seen"])
                ends = end_of_pass and number == len(segments) - 1
                if due or ends:
                    run.recorder.add(summary, _viewer(actor), pass_index=feed.epoch,
                                     evaluate=due or (ends and feed.epoch == run.passes - 1))
            if run.checkpointer is not None and run.checkpointer.due(end_of_pass):
                current, current_docs = actor.state()
                run.checkpointer.write(current, (feed.epoch, feed.index), run.recorder.trace, current_docs)
        final, _ = actor.state()
    finally:
        actor.close()
    return final


def _viewer(actor: ActorHandle) -> Any:
    def view() -> LDAState:
        return actor.call("lda_view")

    return view


class WordStream:
    """An unbounded stream: one actor fed a block at a time, snapshotted on demand.

    Word by word (``config.batch_size`` None) by default; with a ``batch_size`` each block fed is one
    minibatch (local step over the block, then the global step), in the actor.

    Parameters
    ----------
    config : CollapsedConfig
        ``method`` pcsvb0 or scvb0.
    state : HDPState
        The start (e.g. ``OPS[method].initial(...)`` with the stream's expected totals n and D, which
        the targets of eqs. 9-11 need: spec P10).
    language : str, default "default"
    client : distributed.Client, optional
        Where the actor lives; in process without one.

    Examples
    --------
    >>> stream = WordStream(config, state)                     # doctest: +SKIP
    >>> for block in blocks: stream.feed(block)                # doctest: +SKIP
    >>> current = stream.snapshot()                            # doctest: +SKIP
    """

    def __init__(self, config: CollapsedConfig, state: HDPState, *, language: str = "default",
                 client: Any = None) -> None:
        if not OPS[config.method].stochastic:
            raise ValueError(f"method {config.method!r} has no word-by-word form; use pcsvb0 or scvb0")
        arrays, scalars = raw_arrays(state)
        self.actor = ActorHandle(client, config, arrays, scalars, None, (), language, state.n_terms, None)

    def feed(self, block: DocBlock) -> dict[str, Any]:
        """Run the algorithm over ``block``'s documents; returns the state's summary afterwards.

        Parameters
        ----------
        block : DocBlock
            In the model's term ids.

        Returns
        -------
        dict
            ``docs_seen``, ``tokens_seen``, ``alpha``, ``gamma``, ``topics_in_use``.
        """
        return self.actor.call("feed_block", block)

    def snapshot(self) -> HDPState:
        """A copy of the current state (the stream goes on unchanged)."""
        return self.actor.state()[0]

    def close(self) -> None:
        """Release the actor's resources."""
        self.actor.close()
