"""Streaming Gibbs with decay (SGS, Gao, Chen and Zhu 2016, Algorithm 2): one sampler over the store.

Reads the store in minibatches of ``batch_size`` documents in store order and hands each to
:func:`topicflow.models.lda.streaming.sgs.observe_minibatch`; also the minibatch plan and the saved
model that :mod:`topicflow.pipeline.streaming.dsgs` shares. Seeds, trace records, resume and the nightly
continuation are in :mod:`topicflow.pipeline.streaming.sgs_runs`.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.streaming import sgs
from topicflow.models.lda.streaming.sgs import SGSParams, SGSState
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.streaming.actors import (
    DocumentStream,
    stream_source,
)
from topicflow.pipeline.streaming.outputs import stream_model

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class MinibatchPlan:
    """Minibatch t holds documents ``[start + t * batch_size, min(stop, start + (t + 1) * batch_size))``.

    Attributes
    ----------
    start, stop : int
        Store positions of the first document and one past the last.
    batch_size : int
    minibatches_before : int
        Minibatches the stream had done before ``start`` (the t of the first one, for
        :func:`~topicflow.models.lda.streaming.sgs.prior_beta`).
    """

    start: int
    stop: int
    batch_size: int
    minibatches_before: int = 0

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.start < 0 or self.stop < self.start:
            raise InvalidParameterError(
                f"batch_size must be >= 1 and 0 <= start <= stop; got batch_size={self.batch_size!r}, "
                f"start={self.start!r}, stop={self.stop!r}"
            )

    @property
    def n_minibatches(self) -> int:
        return math.ceil((self.stop - self.start) / self.batch_size)

    def bounds(self, t: int) -> tuple[int, int]:
        lo = self.start + t * self.batch_size
        return lo, min(self.stop, lo + self.batch_size)


def stream_plan(corpus: Corpus, state: SGSState, batch_size: int, max_docs: int | None) -> MinibatchPlan:
    """From where the state stopped (``docs_seen``) to the end of the store, or to ``max_docs``."""
    stop = len(corpus) if max_docs is None else min(len(corpus), int(max_docs))
    return MinibatchPlan(min(state.docs_seen, stop), stop, int(batch_size), state.minibatches_done)


def starting_state(corpus: Corpus, params: SGSParams, state: SGSState | None) -> SGSState:
    """``state`` (grown to the store's vocabulary, copied) or an empty one."""
    n_terms = len(corpus.vocabulary(corpus.languages[0]))
    if state is None:
        return sgs.empty_state(n_terms, params)
    if state.n_topics != params.n_topics or state.n_terms > n_terms:
        raise InvalidParameterError(
            f"the state to resume has {state.n_topics} topics and {state.n_terms} terms; the settings ask for "
            f"{params.n_topics} topics and the store {str(corpus.path)!r} has {n_terms} terms"
        )
    grown = sgs.grow_vocabulary(state, n_terms)
    if grown is state:
        grown = SGSState(state.term_topic_counts.copy(), state.topic_counts.copy(), state.minibatches_done,
                         state.docs_seen, state.tokens_seen)
    return grown


def sgs_model(corpus: Corpus, state: SGSState, params: SGSParams, *, algorithm: str,
              settings: dict[str, Any], summary: list[dict[str, Any]] | None = None) -> SavedModel:
    """The stream's topics as an LDA model (lambda = N + beta_t), with its position in the stream."""
    position = {"docs_seen": state.docs_seen, "minibatches_done": state.minibatches_done,
                "tokens_seen": state.tokens_seen}
    return stream_model(corpus, algorithm=algorithm, topic_word_counts=state.term_topic_counts.T,
                        doc_topic_prior=params.alpha,
                        topic_word_prior=sgs.prior_beta(params, state.minibatches_done),
                        info={"settings": {**params.to_dict(), **settings}, "summary": summary or [],
                              "position": position})


# ----------------------------------------------------------------------------- SGS


@dataclass(frozen=True, slots=True)
class SGSRecord:
    """One minibatch of a single-sampler stream (``minibatch``: its index in this run, from 0)."""

    minibatch: int
    first_doc: int
    docs: int
    tokens: int
    terms_used: int
    iterations: int
    perplexity: float
    stop_reason: str
    docs_seen: int
    seconds: float
    tokens_per_second: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True)
class SGSResult:
    """Outcome of :func:`run_sgs`: the final counts, the trace and the model.

    Attributes
    ----------
    state : SGSState
        Resume a stream from it (``run_sgs(..., state=result.state)``).
    records : tuple of SGSRecord
    model : SavedModel
    seconds : float
        Wall time of the minibatches (reading included).
    """

    state: SGSState
    records: tuple[SGSRecord, ...]
    model: SavedModel
    seconds: float


def run_sgs(
    corpus: Corpus, params: SGSParams, *, batch_size: int, state: SGSState | None = None,
    max_docs: int | None = None, on_minibatch: Callable[[SGSRecord, SGSState], None] | None = None,
    progress: ProgressReporter = NO_PROGRESS,
) -> SGSResult:
    """Streaming Gibbs sampling over a store, minibatches in store order (Gao et al. 2016, Algorithm 2).

    Parameters
    ----------
    corpus : Corpus
        A monolingual store.
    params : SGSParams
    batch_size : int
        Documents per minibatch.
    state : SGSState, optional
        Continue this stream (from its ``docs_seen``, minibatches aligned on that position); not modified.
    max_docs : int, optional
        Stop at this store position (default: the end of the store).
    on_minibatch : callable, optional
        ``on_minibatch(record, state)`` after every minibatch; ``state``'s arrays are the driver's own
        and change with the next minibatch (copy them to keep them).
    progress : ProgressReporter

    Returns
    -------
    SGSResult

    Raises
    ------
    InvalidParameterError
        A multilingual store, a bad ``batch_size``, or a state of other dimensions.
    """
    source = stream_source(corpus)
    state = starting_state(corpus, params, state)
    plan = stream_plan(corpus, state, batch_size, max_docs)
    stream = DocumentStream(source)
    records: list[SGSRecord] = []
    started = time.perf_counter()
    for t in progress.track(range(plan.n_minibatches), total=plan.n_minibatches, desc="sgs", unit="batch"):
        tick = time.perf_counter()
        block = stream.read(*plan.bounds(t))
        state, diag = sgs.observe_minibatch(state, block, params, copy=False)  # the driver owns these arrays
        seconds = time.perf_counter() - tick
        record = SGSRecord(t, diag.first_doc, diag.n_docs, diag.n_tokens,
                           diag.n_terms_used, diag.iterations, diag.perplexity, diag.stop_reason, state.docs_seen,
                           seconds, diag.n_tokens / max(seconds, 1e-9))
        records.append(record)
        log.debug("sgs minibatch %d: %d docs, %d sweeps (%s), perplexity %.1f, %.3f s", record.minibatch,
                  record.docs, record.iterations, record.stop_reason, record.perplexity, seconds)
        if on_minibatch is not None:
            on_minibatch(record, state)
    seconds = time.perf_counter() - started
    model = sgs_model(corpus, state, params, algorithm="sgs", settings={"batch_size": plan.batch_size})
    return SGSResult(state, tuple(records), model, seconds)
