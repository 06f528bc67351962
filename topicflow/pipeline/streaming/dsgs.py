"""Distributed streaming Gibbs sampling (DSGS): many SGS samplers behind a parameter server.

SGS (Gao, Chen and Zhu 2016, Algorithm 2) reads the store in minibatches of ``batch_size``
documents in store order and hands each to :func:`topicflow.models.lda.streaming.sgs.observe_minibatch`.

DSGS (their Algorithm 4) keeps the decayed topic-word counts N on a :class:`ParameterServer`, a
Dask actor (or, without a cluster, an object shared by threads of this process). Each sampler loop
(:func:`run_worker_loop`, a long-running task that leaves its worker's thread pool) repeats:

1. claim the next minibatch t (minibatches are numbered 0, 1, ... in store order and claimed in
   that order);
2. with a staleness bound B, wait until minibatches ``0 .. t - B - 1`` have all been applied (below;
   the first ``sync_first`` minibatches wait for all earlier ones whatever B);
3. fetch the rows of N for the minibatch's terms, with N_k and the vocabulary size;
4. run collapsed Gibbs on the minibatch against them (:func:`~topicflow.models.lda.streaming.sgs.minibatch_delta`);
5. push the delta (the minibatch's counts for its terms, in CSR form: :class:`WireDelta`); the server applies
   ``N <- decay * (N + delta)`` (:func:`~topicflow.models.lda.streaming.sgs.apply_delta`) under its lock
   and its version (the number of pushes applied) goes up by one.

By default the loops never wait for each other (hogwild): a minibatch samples against whatever the
server holds when it fetches, and the pushes of other loops may land between its fetch and its push.

**Staleness bound.** With ``staleness=B`` (an integer >= 0), minibatch t may fetch only once the
server's *watermark* (the length of the prefix 0, 1, ... of minibatches whose pushes it has applied)
is at least ``t - B``: of the t minibatches before it in store order, at most B are missing from the
counts it samples against (the stale synchronous parallel condition of Ho et al. 2013, on
minibatches). Each record carries that number as ``lag`` (<= B). ``B = 0`` is sequential: every
minibatch sees all earlier ones and the pushes land in store order, so DSGS with B = 0 on any number
of workers, or with one worker, is SGS exactly. The bound is on what a minibatch misses when it
starts, because every minibatch fetches fresh rows: a rule on how far the server may run ahead of a
worker's last fetch would never bind. The pushes of other loops between a minibatch's fetch and its
push (its *staleness*, ``version_before_push - fetched_version``) are recorded, not bounded.

**Synchronized start.** With ``sync_first=m``, minibatches ``t < m`` wait for all earlier ones
(bound 0) whatever B. Without it the first ``n_workers`` minibatches all start from N = 0 (or from
nearly empty counts) and push independently labelled topic sets into the same N (label switching),
which costs the hogwild stream held-out perplexity and extra sweeps per minibatch that it does not
win back. ``sync_first = n_workers`` recovered SGS's perplexity with up to 8 loops in
``benchmarks/bench_sgs.py`` and is the recommended setting; the default, 0, is fully asynchronous.

Random numbers are keyed by (seed, sweep, global document), never by worker, so the only
nondeterminism of DSGS is the order in which the loops' fetches and pushes interleave.

**Lost workers.** A sampler loop is a Dask task; when its worker dies, the scheduler runs it again
elsewhere under the same loop number. The server remembers each loop's claimed, unpushed minibatch
and hands it to the rerun first, so no minibatch is skipped, and it ignores a second push of a
minibatch it has already applied, so none counts twice. Records travel to the server with the next
claim; the record of a minibatch whose loop died between its push and its next claim is lost (its
counts are not). The server itself is an actor: it dies with its worker, and then the run stops
with an error (:class:`ParameterServerLost`). Run a long stream in pieces (``max_docs``) and keep
each piece's ``result.state`` (:func:`~topicflow.models.lda.streaming.sgs.to_arrays`) to resume from.

**Waiting.** A loop waiting for the staleness bound polls the server's watermark (every
``poll_seconds``, doubling up to 50 times that) and gives up after ``dsgs-wait-timeout`` seconds of
the shipped config (``topicflow.dsgs-wait-timeout`` in ``dask.config``, 600 by default): a
guard against a loop lost for good, never reached by a healthy run.

**A loop that raises** (a damaged shard, say; not a lost worker) tells the server
(:meth:`ParameterServer.fail`) before its error goes to the driver: every other loop gets no further
minibatch, and one waiting for the staleness bound stops waiting, so the run ends at once with that
error. Before, the loops waiting for the failed minibatch waited out ``dsgs-wait-timeout`` and,
without a cluster, the run then reported their timeout instead of the damaged shard.

**Events.** ``run_dsgs(..., hook=...)`` passes an
:class:`~topicflow.pipeline.progress.EventHook` to every loop, which calls it (on the loop's worker
or thread; ``loop`` is the loop's number, ``minibatch`` is t) at these points:

* ``"dsgs-claimed"`` (``loop``, ``minibatch``): after each claim; ``minibatch=-1`` when none was left;
* ``"dsgs-fetch"`` and ``"dsgs-fetched"`` (``loop``, ``minibatch``): after the staleness wait, just
  before and just after the fetch of minibatch t;
* ``"dsgs-push"`` and ``"dsgs-pushed"`` (``loop``, ``minibatch``): just before and just after its push;
* ``"dsgs-stopped"`` (``loop``, ``minibatch``): the loop stopped waiting for the staleness bound
  before minibatch t because another loop failed (above).

Tests use them to kill a worker while a loop holds an unpushed minibatch, and to fix the
interleaving of the loops' fetches and pushes (:mod:`topicflow.testing.faults`). Without a hook
nothing happens at these points.

References
----------
Gao, Chen and Zhu (2016). Streaming Gibbs sampling for LDA model. arXiv:1601.01142.
Ho et al. (2013). More effective distributed ML via a stale synchronous parallel parameter server. NIPS.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from topicflow import config
from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError, ParameterServerLost, TopicflowError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.streaming import sgs
from topicflow.models.lda.streaming.sgs import SGSParams, SGSState
from topicflow.pipeline.cluster import (
    actor_of,
    actor_result,
    current_client,
    worker_addresses,
)
from topicflow.pipeline.policies import SyncPolicy
from topicflow.pipeline.progress import NO_EVENTS, EventHook
from topicflow.pipeline.streaming.actors import (
    DocumentStream,
    StreamSource,
    stream_source,
)
from topicflow.pipeline.streaming.sgs import (
    MinibatchPlan,
    run_sgs,
    sgs_model,
    starting_state,
    stream_plan,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the parameter server


@dataclass(frozen=True, slots=True)
class WireDelta:
    """A minibatch's delta as pushed: its rows in CSR form (a minibatch uses few topics per term).

    Attributes
    ----------
    indptr : ndarray of shape (n_rows + 1,), int32
        Row i's entries are ``indptr[i]:indptr[i + 1]``.
    topics : ndarray of shape (n_nonzero,), int32
    counts : ndarray of shape (n_nonzero,), int32
        Positive counts n_wk.
    n_topics : int
    """

    indptr: np.ndarray
    topics: np.ndarray
    counts: np.ndarray
    n_topics: int

    @classmethod
    def from_dense(cls, values: np.ndarray) -> WireDelta:
        """From ``(n_rows, n_topics)`` counts (what :func:`~topicflow.models.lda.streaming.sgs.minibatch_delta` gives)."""
        rows, topics = np.nonzero(values)
        indptr = np.zeros(values.shape[0] + 1, dtype=np.int32)
        np.cumsum(np.bincount(rows, minlength=values.shape[0]), out=indptr[1:])
        return cls(indptr, topics.astype(np.int32), values[rows, topics].astype(np.int32), int(values.shape[1]))

    def to_dense(self) -> np.ndarray:
        """The ``(n_rows, n_topics)`` int32 counts again."""
        out = np.zeros((self.indptr.shape[0] - 1, self.n_topics), dtype=np.int32)
        out[np.repeat(np.arange(out.shape[0]), np.diff(self.indptr)), self.topics] = self.counts
        return out

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.topics.nbytes + self.counts.nbytes)


@dataclass(frozen=True, slots=True)
class Fetched:
    """What :meth:`ParameterServer.fetch` returns.

    Attributes
    ----------
    version : int
        Pushes applied when the rows were read.
    rows : ndarray of shape (n_rows, n_topics), float64
        N for the requested terms.
    topic_counts : ndarray of shape (n_topics,), float64
        N_k.
    n_terms : int
        Rows of N (the vocabulary size V the worker must use).
    missing : int
        Minibatches before the requesting one whose pushes are not in these counts (its lag).
    """

    version: int
    rows: FloatArray
    topic_counts: FloatArray
    n_terms: int
    missing: int

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.topic_counts.nbytes)


class ParameterServer:
    """Holds the global decayed counts N of DSGS; a plain class, run as a Dask actor or shared by threads.

    Parameters
    ----------
    term_topic_counts : ndarray of shape (n_terms, n_topics), float64
        N at the start (copied).
    topic_counts : ndarray of shape (n_topics,), float64
        N_k at the start (copied).
    decay : float
        Decay factor lambda, applied once per push.
    n_minibatches : int
        Minibatches handed out by :meth:`claim`.

    Notes
    -----
    N is dense by rows (a term's row is contiguous; rows are fetched and updated by term id). Every
    method takes one lock, so concurrent pushes are applied one at a time, in the order they take
    it, and none is lost. On a Dask worker, actor methods run one at a time on the worker's actor
    thread anyway; the lock serves the threaded (no cluster) mode. Payload bytes are counted as the
    arrays' ``nbytes`` (serialization overhead excluded).
    """

    def __init__(self, term_topic_counts: FloatArray, topic_counts: FloatArray, decay: float,
                 n_minibatches: int) -> None:
        self._counts = np.array(term_topic_counts, dtype=np.float64)
        self._topic_counts = np.array(topic_counts, dtype=np.float64)
        self._decay = float(decay)
        self._n_minibatches = int(n_minibatches)
        self._lock = threading.Lock()
        self._next = 0
        self._version = 0
        self._bytes_received = 0
        self._bytes_sent = 0
        self._fetches = 0
        self._max_staleness = 0
        self._push_log: list[int] = []  # the minibatch of every push, in the order applied
        self._applied = np.zeros(self._n_minibatches, dtype=bool)
        self._watermark = 0
        self._claimed: dict[int, int] = {}  # loop -> its last claimed minibatch
        self._records: dict[int, Any] = {}
        self._tokens = 0
        self._reissued = 0
        self._duplicate_pushes = 0
        self._failure: str | None = None  # what the first loop that raised reported

    def claim(self, loop: int = -1, record: Any = None) -> int:
        """The next minibatch for sampler loop ``loop`` (in store order), or -1 when all are handed out.

        A loop claiming again before its last claimed minibatch was pushed has been restarted (its
        worker died): it gets that minibatch again. ``record`` (the loop's record of its previous
        minibatch, any object with a ``minibatch`` attribute) is kept for :meth:`records`.
        """
        with self._lock:
            if record is not None:
                self._records[int(record.minibatch)] = record
            if self._failure is not None:
                return -1
            if loop >= 0 and loop in self._claimed and not self._applied[self._claimed[loop]]:
                self._reissued += 1
                return self._claimed[loop]
            if self._next >= self._n_minibatches:
                return -1
            self._next += 1
            if loop >= 0:
                self._claimed[loop] = self._next - 1
            return self._next - 1

    def records(self) -> list[Any]:
        """Records received with claims, by minibatch."""
        with self._lock:
            return [self._records[t] for t in sorted(self._records)]

    def tokens_applied(self) -> int:
        """Tokens in the deltas applied so far (the sum of their counts)."""
        with self._lock:
            return self._tokens

    def current_version(self) -> int:
        """Pushes applied so far."""
        with self._lock:
            return self._version

    def watermark(self) -> int:
        """Length of the prefix 0, 1, ... of minibatches whose pushes are applied."""
        with self._lock:
            return self._watermark

    def fail(self, loop: int, minibatch: int, reason: str) -> None:
        """Record that loop ``loop`` raised on ``minibatch`` (a damaged shard, a bug; not the loss of its
        worker, which reruns the loop): the run stops, every later :meth:`claim` gets -1, and
        :meth:`failure` tells the loops waiting for the staleness bound to stop waiting."""
        with self._lock:
            if self._failure is None:
                self._failure = f"loop {loop} failed on minibatch {minibatch}: {reason}"

    def failure(self) -> str | None:
        """What :meth:`fail` recorded first, or None while no loop has failed."""
        with self._lock:
            return self._failure

    def fetch(self, term_ids: IntArray, minibatch: int = -1) -> Fetched:
        """The rows of N for ``term_ids`` (copies) with N_k, n_terms and the version; unseen terms grow N
        with zero rows. ``minibatch`` (if >= 0) only sets :attr:`Fetched.missing`."""
        term_ids = np.asarray(term_ids, dtype=np.int64)
        with self._lock:
            self._grow(int(term_ids.max(initial=-1)) + 1)
            rows = self._counts[term_ids]
            totals = self._topic_counts.copy()
            self._fetches += 1
            self._bytes_received += term_ids.nbytes
            self._bytes_sent += rows.nbytes + totals.nbytes
            missing = 0 if minibatch < 0 else int(minibatch) - int(self._applied[:minibatch].sum())
            return Fetched(self._version, rows, totals, int(self._counts.shape[0]), missing)

    def push(self, term_ids: IntArray, delta: np.ndarray | WireDelta, fetched_version: int, minibatch: int = -1,
             vocab_size: int = 0) -> int:
        """Apply ``N <- decay * (N + delta)`` on the rows ``term_ids``; returns the new version.

        ``delta`` is ``(n_rows, n_topics)`` counts or their :class:`WireDelta`. ``fetched_version`` is
        the version the delta was sampled against: the pushes applied since (its staleness) are
        recorded. ``minibatch`` (if >= 0) advances the watermark; a minibatch already applied (pushed
        again by the rerun of a loop that died after pushing) is ignored. ``vocab_size`` grows N
        first if the worker saw a larger vocabulary.
        """
        term_ids = np.asarray(term_ids, dtype=np.int64)
        received = term_ids.nbytes + delta.nbytes
        values = delta.to_dense() if isinstance(delta, WireDelta) else np.asarray(delta)
        with self._lock:
            if 0 <= minibatch < self._n_minibatches and self._applied[minibatch]:
                self._duplicate_pushes += 1
                log.warning("minibatch %d was pushed twice; the second push is ignored", minibatch)
                return self._version
            self._tokens += int(values.sum())
            self._grow(max(int(vocab_size), int(term_ids.max(initial=-1)) + 1))
            sgs.apply_delta(self._counts, term_ids, values, self._decay, topic_counts=self._topic_counts,
                            out=(self._counts, self._topic_counts))
            self._max_staleness = max(self._max_staleness, self._version - int(fetched_version))
            self._version += 1
            self._push_log.append(int(minibatch))
            if 0 <= minibatch < self._n_minibatches:
                self._applied[minibatch] = True
                while self._watermark < self._n_minibatches and self._applied[self._watermark]:
                    self._watermark += 1
            self._bytes_received += received
            return self._version

    def snapshot(self) -> tuple[FloatArray, FloatArray, int]:
        """(N, N_k, version), copies."""
        with self._lock:
            return self._counts.copy(), self._topic_counts.copy(), self._version

    def stats(self) -> dict[str, Any]:
        """Traffic and versions: bytes received and sent, fetches, pushes, the largest staleness, push order."""
        with self._lock:
            n_terms, n_topics = self._counts.shape
            return {"version": self._version, "fetches": self._fetches, "bytes_received": self._bytes_received,
                    "bytes_sent": self._bytes_sent, "max_staleness": self._max_staleness,
                    "dense_update_bytes": n_terms * n_topics * 8, "push_order": list(self._push_log),
                    "reissued_claims": self._reissued, "duplicate_pushes": self._duplicate_pushes}

    def _grow(self, n_terms: int) -> None:
        if n_terms > self._counts.shape[0]:
            grown = np.zeros((n_terms, self._counts.shape[1]))
            grown[: self._counts.shape[0]] = self._counts
            self._counts = grown


class ServerHandle:
    """Calls a :class:`ParameterServer` the same way whether it is a local object or a Dask actor."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.remote = not isinstance(server, ParameterServer)

    def call(self, method: str, *args: Any) -> Any:
        result = getattr(self.server, method)(*args)
        return actor_result(None, self.server, result) if self.remote else result


# ----------------------------------------------------------------------------- sampler loops


@dataclass(frozen=True, slots=True)
class DSGSRecord:
    """One minibatch of a distributed stream (``minibatch``: t, its index in this run), as its loop saw it.

    ``lag``: earlier minibatches (in store order) missing from the counts it sampled against (<= the
    staleness bound); ``staleness``: pushes of other loops between its fetch and its push;
    ``nonzeros``: entries of its :class:`WireDelta`; ``comm_seconds``: its fetch and push calls.
    Bytes are payload bytes (``nbytes`` of the arrays sent: rows of N and N_k fetched; term ids and
    the wire delta pushed); ``dense_bytes`` is one dense float64 N of the same shape.
    """

    minibatch: int
    worker: int
    first_doc: int
    docs: int
    tokens: int
    terms_used: int
    iterations: int
    perplexity: float
    stop_reason: str
    fetched_version: int
    pushed_version: int
    lag: int
    staleness: int
    bytes_fetched: int
    bytes_pushed: int
    nonzeros: int
    dense_bytes: int
    wait_seconds: float
    sample_seconds: float
    comm_seconds: float
    seconds: float
    tokens_per_second: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _leave_thread_pool() -> None:
    """On a Dask worker, leave its thread pool (a loop runs for the whole stream; see ``distributed.secede``)."""
    try:
        from distributed import get_worker, secede

        get_worker()
    except (ImportError, ValueError):
        return
    secede()


class RunStopped(Exception):
    """Another sampler loop of the run failed (:meth:`ParameterServer.fail`): this one stops without error."""


def _wait_for_watermark(server: ServerHandle, needed: int, poll_seconds: float, timeout: float) -> float:
    """Poll until the server's watermark reaches ``needed``; returns the seconds waited.

    Raises :class:`RunStopped` when another loop failed meanwhile: the minibatches it waits for
    would never arrive, and that loop's error, not a timeout here, is what the run reports.
    """
    started = time.perf_counter()
    delay = poll_seconds
    while server.call("watermark") < needed:
        if server.call("failure") is not None:
            raise RunStopped()
        if time.perf_counter() - started > timeout:
            raise TopicflowError(f"waited {timeout:.0f} s for the first {needed} minibatches to reach the parameter "
                                 "server; a sampler loop is probably lost. Resume the stream from its last saved "
                                 "state.")
        time.sleep(delay)
        delay = min(2 * delay, 50 * poll_seconds)
    return time.perf_counter() - started


def sample_one(server: ServerHandle, stream: DocumentStream, params: SGSParams, plan: MinibatchPlan, t: int,
               worker: int, sync: SyncPolicy, poll_seconds: float, timeout: float,
               hook: EventHook = NO_EVENTS) -> DSGSRecord:
    """Algorithm 4 for one minibatch: wait as ``sync`` says, fetch, sample, push (events as in the module docstring)."""
    tick = time.perf_counter()
    needed = sync.needed(t)
    waited = 0.0 if needed is None else _wait_for_watermark(server, needed, poll_seconds, timeout)
    block = stream.read(*plan.bounds(t))
    term_ids = sgs.minibatch_terms(block)
    hook("dsgs-fetch", loop=worker, minibatch=t)
    fetching = time.perf_counter()
    fetched: Fetched = server.call("fetch", term_ids, t)
    fetched_at = time.perf_counter()
    hook("dsgs-fetched", loop=worker, minibatch=t)
    sampling = time.perf_counter()
    vocab_size = max(fetched.n_terms, block.n_terms)
    # The prior's beta part after the pushes the fetched counts hold (beta itself unless decay_beta).
    beta = sgs.prior_beta(params, plan.minibatches_before + fetched.version)
    rows, delta, diag = sgs.minibatch_delta(block, fetched.rows, fetched.topic_counts, params, vocab_size=vocab_size,
                                            beta=beta)
    wire = WireDelta.from_dense(delta)
    sampled = time.perf_counter()
    hook("dsgs-push", loop=worker, minibatch=t)
    pushing = time.perf_counter()
    pushed = int(server.call("push", rows, wire, fetched.version, t, vocab_size))
    done = time.perf_counter()
    hook("dsgs-pushed", loop=worker, minibatch=t)
    return DSGSRecord(t, worker, diag.first_doc, diag.n_docs, diag.n_tokens, diag.n_terms_used, diag.iterations,
                      diag.perplexity, diag.stop_reason, fetched.version, pushed, fetched.missing,
                      pushed - 1 - fetched.version, fetched.nbytes, int(rows.nbytes + wire.nbytes),
                      int(wire.counts.shape[0]), vocab_size * params.n_topics * 8, waited, sampled - sampling,
                      (fetched_at - fetching) + (done - pushing), done - tick, diag.n_tokens / max(done - tick, 1e-9))


def run_worker_loop(server: Any, source: StreamSource, params: SGSParams, plan: MinibatchPlan, worker: int,
                    sync: SyncPolicy = SyncPolicy(), poll_seconds: float = 0.002,
                    timeout: float | None = None, hook: EventHook = NO_EVENTS) -> int:
    """One DSGS sampler: claim minibatches until none are left; returns how many it sampled.

    Each minibatch's :class:`DSGSRecord` goes to the server with the next claim
    (:meth:`ParameterServer.records`), so the records of a loop that dies are not lost with it.

    Parameters
    ----------
    server : ParameterServer or Dask actor of one
    source : StreamSource
        Where the loop reads its minibatches (it reads them itself: the driver ships no data).
    params : SGSParams
    plan : MinibatchPlan
    worker : int
        The loop's number: the server re-issues its unfinished claim to a rerun of the same loop.
        Draws never depend on it.
    sync : SyncPolicy
        When each minibatch may fetch (default: never waits).
    poll_seconds : float
        First interval of the poll on the server's version (doubling up to 50 times this).
    timeout : float, optional
        Seconds to wait for the bound before raising (default: ``dsgs-wait-timeout`` of the config).
    hook : EventHook
        Told of the events of the module docstring (default: none).

    Returns
    -------
    int
    """
    _leave_thread_pool()
    wait_timeout = _wait_timeout_seconds() if timeout is None else float(timeout)
    handle = server if isinstance(server, ServerHandle) else ServerHandle(server)
    stream = DocumentStream(source)
    record = None
    sampled = 0
    while True:
        t = int(handle.call("claim", worker, record))
        hook("dsgs-claimed", loop=worker, minibatch=t)
        if t < 0:
            return sampled
        try:
            record = sample_one(handle, stream, params, plan, t, worker, sync, poll_seconds, wait_timeout, hook)
        except RunStopped:
            hook("dsgs-stopped", loop=worker, minibatch=t)
            return sampled
        except Exception as exc:
            _report_failure(handle, worker, t, exc)
            raise
        sampled += 1


def _report_failure(server: ServerHandle, loop: int, minibatch: int, exc: Exception) -> None:
    """Tell the server that ``loop`` failed, so the other loops stop (a lost server cannot be told)."""
    try:
        server.call("fail", loop, minibatch, f"{type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - the loop's own error is the one to raise
        log.debug("dsgs: could not tell the parameter server that loop %d failed", loop, exc_info=True)


def _wait_timeout_seconds() -> float:
    """Return the seconds a sampler loop waits for the staleness bound (``dsgs-wait-timeout`` of the config)."""
    return float(config.get("dsgs-wait-timeout", 600.0))


def _server_alive(server: Any) -> bool:
    try:
        ServerHandle(server).call("current_version")
    except Exception:  # noqa: BLE001 - any failure to reach it means it is gone
        return False
    return True


@dataclass(frozen=True)
class DSGSResult:
    """Outcome of :func:`run_dsgs`.

    Attributes
    ----------
    state : SGSState
        The server's final counts; resume from it with either driver.
    records : tuple of DSGSRecord
        Sorted by minibatch.
    model : SavedModel
    seconds : float
        Wall time from the first claim to the last push.
    n_workers : int
    staleness : int or None
    server_stats : dict
        :meth:`ParameterServer.stats` at the end (``push_order``: the minibatch of each push in order).
    sync_first : int
    """

    state: SGSState
    records: tuple[DSGSRecord, ...]
    model: SavedModel
    seconds: float
    n_workers: int
    staleness: int | None
    server_stats: dict[str, Any] = field(default_factory=dict)
    sync_first: int = 0

    @property
    def tokens_per_second(self) -> float:
        return sum(r.tokens for r in self.records) / max(self.seconds, 1e-9)


def run_dsgs(
    corpus: Corpus, params: SGSParams, *, batch_size: int, client: Any = None, n_workers: int = 2,
    staleness: int | None = None, sync_first: int = 0, state: SGSState | None = None, max_docs: int | None = None,
    poll_seconds: float = 0.002, hook: EventHook = NO_EVENTS,
) -> DSGSResult:
    """Distributed streaming Gibbs sampling with a parameter server (Gao et al. 2016, Algorithm 4).

    Parameters
    ----------
    corpus : Corpus
        A monolingual store, minibatches in store order.
    params : SGSParams
    batch_size : int
    client : distributed.Client, optional
        The server becomes an actor on the first worker and the loops long-running tasks spread over
        the workers in turn (several loops may share a worker); default: the current client, else
        the server and ``n_workers`` loops run in threads of this process.
    n_workers : int, default 2
        Sampler loops.
    staleness : int, optional
        The bound B of the module docstring (0: sequential, equal to SGS); None: fully asynchronous.
    sync_first : int, default 0
        Minibatches ``0 .. sync_first - 1`` each wait for all earlier ones (a synchronized start).
    state : SGSState, optional
        Continue from it (not modified).
    max_docs : int, optional
        Stop at this store position.
    poll_seconds : float
        First interval of the loops' poll on the server's version when they wait for the bound.
    hook : EventHook
        Told of the loops' events (module docstring); it must be picklable on a cluster. Default: none.

    Returns
    -------
    DSGSResult

    Raises
    ------
    InvalidParameterError
        As :func:`run_sgs`, or ``n_workers < 1``, ``staleness < 0`` or ``sync_first < 0``.
    """
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise InvalidParameterError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    sync = SyncPolicy(staleness, sync_first)
    client = current_client(client)
    source = stream_source(corpus)
    start = starting_state(corpus, params, state)
    plan = stream_plan(corpus, start, batch_size, max_docs)
    args = (start.term_topic_counts, start.topic_counts, params.decay, plan.n_minibatches)
    loop_args = (source, params, plan)
    timeout = _wait_timeout_seconds()  # read here: the driver's config, whatever the workers' is
    started = time.perf_counter()
    if client is None:
        server: Any = ParameterServer(*args)
        with concurrent.futures.ThreadPoolExecutor(n_workers, thread_name_prefix="topicflow-dsgs") as pool:
            futures = [pool.submit(run_worker_loop, server, *loop_args, i, sync, poll_seconds, timeout, hook)
                       for i in range(n_workers)]
            for future in futures:
                future.result()
    else:
        workers = worker_addresses(client)
        run = uuid.uuid4().hex[:12]  # loops are not pure: a key per run, never a cached result
        counts = client.scatter(start.term_topic_counts, workers=workers[:1])  # not inside the task: N can be large
        server = actor_of(client.submit(ParameterServer, counts, *args[1:], actor=True, workers=workers[:1],
                                        pure=False))
        # A loop whose worker dies is rerun wherever there is room (see "Lost workers" above).
        futures = [client.submit(run_worker_loop, server, *loop_args, i, sync, poll_seconds, timeout, hook,
                                 workers=[workers[i % len(workers)]], allow_other_workers=True, pure=False,
                                 key=f"dsgs-loop-{run}-{i}")
                   for i in range(n_workers)]
        try:
            client.gather(futures)
        except Exception as exc:  # noqa: BLE001 - an actor lost with its worker surfaces as many error types
            if _server_alive(server):
                raise
            raise ParameterServerLost(
                "the parameter server of this DSGS run was lost with its worker "
                f"({type(exc).__name__}: {exc}); nothing of this run was saved. Run the stream again, or in "
                "pieces (max_docs / --max-docs) resuming from the last saved state."
            ) from exc
    seconds = time.perf_counter() - started
    handle = ServerHandle(server)
    counts, totals, _ = handle.call("snapshot")
    stats = handle.call("stats")
    records = tuple(handle.call("records"))
    if len(records) < plan.n_minibatches:
        log.warning("dsgs: %d of %d minibatches have no record (their loop died after pushing); their counts are in",
                    plan.n_minibatches - len(records), plan.n_minibatches)
    final = SGSState(counts, totals, start.minibatches_done + plan.n_minibatches,
                     plan.stop if plan.n_minibatches else start.docs_seen,
                     start.tokens_seen + int(handle.call("tokens_applied")))
    log.info("dsgs: %d minibatches on %d loops in %.1f s, largest staleness %d", len(records), n_workers, seconds,
             stats["max_staleness"])
    model = sgs_model(corpus, final, params, algorithm="dsgs",
                      settings={"batch_size": plan.batch_size, "n_workers": n_workers, "staleness": staleness,
                                "sync_first": sync_first})
    return DSGSResult(final, records, model, seconds, n_workers, staleness, stats, sync_first)


__all__: Sequence[str] = (
    "DSGSRecord", "DSGSResult", "Fetched", "MinibatchPlan", "ParameterServer", "ParameterServerLost",
    "RunStopped", "ServerHandle",
    "SyncPolicy", "WireDelta",
    "run_dsgs", "run_sgs", "run_worker_loop", "sample_one", "sgs_model", "starting_state",
    "stream_plan",
)
