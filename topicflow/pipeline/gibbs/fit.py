"""Driver of the distributed collapsed Gibbs sampler for LDA (AD-LDA over fixed blocks; docs/gibbs.md).

Per sweep s: share the global counts n_wk, n_k at the start of the sweep (one scatter), submit one task
per partition (consecutive blocks; each block is sampled against those counts plus its own changes,
:func:`topicflow.models.lda.gibbs.adlda.sweep_block`, its tokens and z read from and its z written to
the assignment layer, :mod:`topicflow.io.outputs.assignment_layer`), add each partition's sparse
count deltas to the counts and merge its document-topic histograms as the partition finishes, and,
every ``optimize_every`` sweeps after ``burn_in``, set alpha (and beta) by Minka's fixed point from
the histograms. The driver holds two K x V counts (the running ones and the sweep-start view) and
the results of at most the running tasks; a worker holds its blocks' tokens and z plus K x V counts.

Determinism: blocks are runs of ``block_size`` documents of the store, the random numbers are
keyed by (seed, sweep, global document), every block reads only the sweep-start counts, and integer
deltas and histograms are summed exactly, in whatever order the tasks finish; so the model is the
same for any number of workers, partitions (``blocks_per_partition``) or threads, on threads of this
process or on a distributed cluster.

Checkpoints: with a :class:`~topicflow.pipeline.policies.CheckpointPolicy` the assignment layer lives
in the checkpoint directory, and every ``checkpoint.every`` sweeps (and after the last) the counts,
alpha, beta and trace are written there (:func:`topicflow.io.models.checkpoint.write_checkpoint`), which
commits that sweep's z; ``resume`` continues from the committed sweep and ends with the model an
uninterrupted run gives. A checkpoint on object storage (a :class:`~topicflow.io.storage.StoragePath`)
holds the assignment layer too: the tasks read and write z there, and the commit is the checkpoint's
``latest.json``, put last. Without a checkpoint the layer lives in a run directory beside the store
(:func:`~topicflow.io.outputs.assignment_layer.scratch_location`): on object storage for a store on a
URL. Either way a store and checkpoint on object storage need no disk shared by the driver and the
workers (docs/cluster.md).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import dask
import numpy as np

from topicflow import config as tf_config
from topicflow._typing import GibbsInit, choices
from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.io.outputs import assignment_layer
from topicflow.io.storage import Location, StoragePath
from topicflow.models.common.validation import parse_int, parse_positive_float
from topicflow.models.lda.gibbs.adlda import (
    DocHistograms,
    SweepView,
    apply_delta,
    joint_log_likelihood,
    lda_view,
    optimize_hyperparameters,
)
from topicflow.models.lda.gibbs.cvb_start import SCVB0Pass, word_factor
from topicflow.models.lda.gibbs.state import GibbsParams
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.cluster import current_client, settled_on_failure
from topicflow.pipeline.evaluation import heldout_likelihood
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.estep import graph_token
from topicflow.tasks.gibbs import (
    Partition,
    PartitionResult,
    SCVB0Draw,
    plan_blocks,
    plan_partitions,
    scvb0_pass_partition,
    sweep_partition,
)

log = logging.getLogger(__name__)

#: Kind of the saved model (``model.json``'s ``kind``).
GIBBS_KIND = "gibbs_lda"
#: Seed of the held-out token split (the evaluator's random numbers, not the sampler's).
HELDOUT_SEED = 0


@dataclass(frozen=True)
class GibbsConfig:
    """Settings of a distributed collapsed Gibbs fit.

    Attributes
    ----------
    n_topics : int
        K, at least 1.
    sweeps : int, default 50
        Sweeps to run in total (a resumed fit runs the rest).
    doc_topic_prior : float, default 0.1
        alpha: its fixed symmetric value, or the start of a learned one.
    learn_alpha : bool, default True
        Learn an asymmetric alpha by Minka's fixed point.
    topic_word_prior : float, default 0.01
        beta: fixed, or the start of a learned one.
    learn_beta : bool, default False
        Learn a symmetric beta by Minka's fixed point.
    burn_in : int, default 5
        Sweeps before the first hyperparameter update.
    optimize_every : int, default 10
        Sweeps between hyperparameter updates (after sweep n with ``n > burn_in`` and
        ``(n - burn_in) % optimize_every == 0``, as :func:`~topicflow.models.lda.gibbs.chain.run_sweeps`).
    block_size : int or None, default None
        Documents per sampling block (consecutive documents of the store, across shards). Part of the
        model: blocks see each other's changes only at sweep ends. None: a quarter of the corpus,
        within [256, 4096] documents (:func:`default_block_size`; the saved settings hold the value used).
    init : {"random", "sequential", "scvb0"}, default "random"
        The start: z uniform (Newman et al.'s), or every token drawn given the tokens before it, block
        after block in store order (one sweep without parallelism; a much better first sweeps'
        likelihood, but on planted corpora it often locks topics together: docs/gibbs.md), or the SCVB0
        start: one serial SCVB0 pass over the blocks in store order (one task at a time, N^phi passed
        from task to task), then every block's z drawn from its posterior at once; the same z as the
        in-memory sampler's ``init="scvb0"`` on the whole store.
    seed : int, default 0
    eval_every : int, default 10
        With a held-out store: score it every this many sweeps (0: only after the last sweep).
    threads : int or None, default None
        Blocks of one task sampled at once on a thread pool (the kernels release the GIL); given with
        ``blocks_per_partition`` 1, a task then takes ``threads`` blocks. None: one block per task, the
        tasks spread over the workers' threads by Dask. Not part of the model.
    blocks_per_partition : int, default 1
        Consecutive blocks per task. Not part of the model.
    """

    n_topics: int
    sweeps: int = 50
    doc_topic_prior: float = 0.1
    learn_alpha: bool = True
    topic_word_prior: float = 0.01
    learn_beta: bool = False
    burn_in: int = 5
    optimize_every: int = 10
    block_size: int | None = None
    init: str = "random"
    seed: int = 0
    eval_every: int = 10
    threads: int | None = None
    blocks_per_partition: int = 1

    def __post_init__(self) -> None:
        for name, low in (("n_topics", 1), ("sweeps", 0), ("burn_in", 0), ("optimize_every", 1),
                          ("seed", 0), ("eval_every", 0), ("blocks_per_partition", 1)):
            object.__setattr__(self, name, parse_int(f"GibbsConfig.{name}", getattr(self, name), low))
        if self.init not in choices(GibbsInit):
            raise InvalidParameterError(
                f"GibbsConfig.init must be one of {', '.join(choices(GibbsInit))}, got {self.init!r}")
        for name in ("threads", "block_size"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, parse_int(f"GibbsConfig.{name}", getattr(self, name), 1))
        for name in ("doc_topic_prior", "topic_word_prior"):
            object.__setattr__(self, name, parse_positive_float(f"GibbsConfig.{name}", getattr(self, name)))
        for name in ("learn_alpha", "learn_beta"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields (the saved model's ``settings``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GibbsConfig:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})

    def model_settings(self) -> dict[str, Any]:
        """The settings that define the chain (a checkpoint's fingerprint): not sweeps, evaluation or execution."""
        return {key: value for key, value in self.to_dict().items()
                if key not in ("sweeps", "eval_every", "threads", "blocks_per_partition")}


@dataclass(frozen=True)
class GibbsSweepRecord:
    """One line of the trace (one sweep).

    Attributes
    ----------
    sweep : int
    seconds : float
        Wall time of the sweep: sampling, merge, hyperparameters (not the held-out score).
    elapsed : float
        Training seconds since the start of the fit, the start (sweep 0) included and evaluation
        excluded; a resumed fit continues the sum.
    tokens_per_second : float
    log_likelihood : float
        Joint log p(w, z | alpha, beta) after the sweep (with the hyperparameters after its update).
    log_likelihood_per_token : float
    alpha_sum : float
    beta : float
    heldout_perplexity : float or None
        Held-out perplexity (protocol ``completion-random``), None where not scored.
    """

    sweep: int
    seconds: float
    elapsed: float
    tokens_per_second: float
    log_likelihood: float
    log_likelihood_per_token: float
    alpha_sum: float
    beta: float
    heldout_perplexity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-able dict."""
        return asdict(self)


@dataclass(frozen=True)
class GibbsFitResult:
    """The result of :func:`fit_gibbs`.

    Attributes
    ----------
    state : LDAState
        topic_word_var = n_wk + beta (so ``topic_word()`` is (n_wk + beta) / (n_k + V beta)), alpha.
    trace : tuple of GibbsSweepRecord
    saved_model : SavedModel
        Ready for :func:`topicflow.io.models.store.save_model`.
    term_topic : ndarray of shape (n_terms, n_topics), int32
    topic_counts : ndarray of shape (n_topics,), int64
    language : str
    """

    state: LDAState
    trace: tuple[GibbsSweepRecord, ...]
    saved_model: SavedModel
    term_topic: np.ndarray
    topic_counts: np.ndarray
    language: str

    @property
    def sweeps_done(self) -> int:
        """Sweeps of the chain."""
        return self.trace[-1].sweep if self.trace else 0


class _Chain:
    """Global counts, hyperparameters and trace of one fit (what a checkpoint holds)."""

    def __init__(self, n_terms: int, config: GibbsConfig) -> None:
        self.term_topic = np.zeros((n_terms, config.n_topics), dtype=np.int32)
        self.topic_counts = np.zeros(config.n_topics, dtype=np.int64)
        self.alpha = np.full(config.n_topics, config.doc_topic_prior)
        self.beta = config.topic_word_prior
        self.sweep = 0
        self.trace: list[GibbsSweepRecord] = []
        self.n_tokens = 0
        self.start_seconds = 0.0

    @property
    def elapsed(self) -> float:
        return self.trace[-1].elapsed if self.trace else self.start_seconds


#: Default block size: a quarter of the corpus, within these bounds (documents).
MIN_BLOCK_DOCS, MAX_BLOCK_DOCS, DEFAULT_BLOCKS = 256, 4096, 4


def default_block_size(n_docs: int) -> int:
    """Choose the documents per block when none is given: ``ceil(n_docs / 4)`` within [256, 4096].

    Parameters
    ----------
    n_docs : int

    Returns
    -------
    int

    Notes
    -----
    Few blocks keep the sampler close to the sequential one (each block sees the others' changes
    only at sweep ends) while still giving a 2- or 4-core machine a block per core; the upper bound
    keeps a task's memory flat as the corpus grows. It depends on the store only, never on workers.
    """
    return int(min(MAX_BLOCK_DOCS, max(MIN_BLOCK_DOCS, -(-n_docs // DEFAULT_BLOCKS))))


def _local_slots() -> int:
    """Threads of this process's pool: Dask's ``num_workers`` setting, else the cores (Dask's default)."""
    return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)


def _threads(config: GibbsConfig, client: Any, n_partitions: int, largest: int) -> int:
    if config.threads is not None:
        return config.threads
    slots = sum(client.nthreads().values()) if client is not None else _local_slots()
    return max(1, min(largest, slots // max(1, n_partitions)))


class _Executor:
    """Runs a sweep's partition tasks on the cluster, or on a pool of threads of this process, and hands
    back their results as they finish (so that the driver adds each delta at once and never holds
    more results than tasks run at a time)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = f"{name}-{uuid.uuid4().hex[:8]}"  # keys of one fit: never another fit's results
        self.pool = ThreadPoolExecutor(max_workers=_local_slots()) if client is None else None

    def share(self, view: SweepView | SCVB0Draw) -> Any:
        """The sweep-start counts (or the SCVB0 start's word factor) as every task receives them (one
        scatter on a cluster)."""
        if self.client is not None:
            return self.client.scatter(view, broadcast=True, hash=False)
        return view

    def run(self, sweep: int, partitions: list[Partition], args: Callable[[Partition], tuple[Any, ...]]
            ) -> Iterator[PartitionResult]:
        """Yield the result of ``sweep_partition(*args(p))`` for every partition, in the order they finish."""
        if self.pool is not None:
            pending: set[Future[PartitionResult]] = {self.pool.submit(sweep_partition, *args(p)) for p in partitions}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            finally:  # on an error, let the running tasks end before the caller removes their directory
                for future in pending:
                    future.cancel()
                wait(pending)
            return
        from distributed import as_completed

        futures = {self.client.submit(sweep_partition, *args(p), key=f"gibbs-part-{self.name}-{sweep}-{i}",
                                      pure=False): i for i, p in enumerate(partitions)}
        # On a failure, cancel the rest and return only once no worker still runs one of them: a
        # cancelled task runs on until it returns, and would write its z after the caller removed the run.
        with settled_on_failure(self.client, list(futures)):
            for future, result in as_completed(list(futures), with_results=True):
                del futures[future]  # released: its result leaves the worker
                yield result

    def chain(self, fn: Callable[..., Any], step: int, *args: Any) -> Any:
        """``fn(*args)``, one of a serial chain of tasks: its value in process, or a future on a cluster
        (so that the result stays on the workers and feeds the next task)."""
        if self.pool is not None:
            return fn(*args)
        return self.client.submit(fn, *args, key=f"gibbs-chain-{self.name}-{step}", pure=False)

    def value(self, result: Any) -> Any:
        """A result of :meth:`chain` in this process."""
        return result if self.pool is not None else result.result()

    def close(self) -> None:
        """Stop the thread pool, if any."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


class _SweepSums:
    """What the driver keeps of one sweep's results: the merged histograms and the token count (the
    deltas go straight into the counts)."""

    def __init__(self) -> None:
        self._histograms: DocHistograms | None = None
        self.n_tokens = 0

    @property
    def histograms(self) -> DocHistograms:
        """The histograms of every document of the sweep."""
        assert self._histograms is not None, "a sweep has at least one partition"
        return self._histograms

    def add(self, result: PartitionResult, term_topic: np.ndarray, topic_counts: np.ndarray) -> None:
        """Add one partition's deltas to the counts (in place) and merge its histograms."""
        for delta in result.deltas:
            apply_delta(term_topic, topic_counts, delta)
        self._histograms = (result.histograms if self._histograms is None
                            else self._histograms.merge(result.histograms))
        self.n_tokens += result.n_tokens


def fit_gibbs(
    corpus: Corpus | str | Path,
    config: GibbsConfig,
    *,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
    checkpoint: CheckpointPolicy | None = None,
    test: Corpus | str | Path | None = None,
    split_every: int | None = None,
    scratch_dir: str | None = None,
    on_sweep: Callable[[GibbsSweepRecord, LDAState], None] | None = None,
) -> GibbsFitResult:
    """Fit LDA by distributed collapsed Gibbs sampling (AD-LDA) on a store (see the module docstring).

    Parameters
    ----------
    corpus : Corpus or path
        A monolingual store (a polylingual one is refused: ingest one language).
    config : GibbsConfig
    client : distributed.Client, optional
        Default: the current client, else a pool of threads of this process (Dask's ``num_workers``
        setting, else the cores).
    progress : ProgressReporter, optional
        Told of each sweep.
    checkpoint : CheckpointPolicy, optional
        Commit the chain every ``every`` sweeps; with ``resume``, continue from the committed sweep.
    test : Corpus or path, optional
        Held-out documents, scored every ``config.eval_every`` sweeps and after the last.
    split_every : int, optional
        Accepted for the estimators' common signature and ignored: the partitions' deltas are added to
        the counts as they arrive (integer sums), not reduced in a tree.
    scratch_dir : str, optional
        Parent of the assignment layer without a checkpoint, a local directory or a URL (default: the
        ``scratch-dir`` setting, else beside the store, on object storage for a store there).
    on_sweep : callable, optional
        ``on_sweep(record, model)`` after each sweep (and its checkpoint, if any), with the chain as an
        LDA model (:func:`lda_view`), e.g. for a benchmark's own held-out evaluator.

    Returns
    -------
    GibbsFitResult

    Raises
    ------
    InvalidParameterError
        A store with several languages or no tokens, or a checkpoint of other settings or another store.
    ModelFormatError
        A damaged checkpoint or assignment layer.
    """
    corpus = as_corpus(corpus)
    try:
        language = corpus.resolve_language(None)
    except ValueError as exc:
        raise InvalidParameterError(f"collapsed Gibbs (--method gibbs) fits one language: {exc} Ingest the "
                                    "language on its own, or fit the polylingual store by batch VB.") from exc
    if len(corpus) == 0 or corpus.n_tokens == 0:
        raise InvalidParameterError(f"store {str(corpus.path)!r} has no tokens to fit; ingest documents first.")
    test_corpus = None if test is None else as_corpus(test)
    client = current_client(client)
    n_terms = corpus.vocab_sizes()[language]
    shards = list(corpus.shards)
    if config.block_size is None:
        config = dataclasses.replace(config, block_size=default_block_size(len(corpus)))
    assert config.block_size is not None
    blocks = plan_blocks(shards, config.block_size)
    per_task = config.blocks_per_partition
    if config.threads is not None and per_task == 1:  # threads in a task need blocks to share out
        per_task = config.threads
    partitions = plan_partitions(shards, blocks, per_task)
    threads = _threads(config, client, len(partitions), max(len(p.blocks) for p in partitions))
    fingerprint = {"method": "gibbs", "settings": config.model_settings(), "corpus": corpus.token(),
                   "language": language}
    token = graph_token(fingerprint)
    vocabulary = corpus.vocabulary(language)
    chain = _Chain(n_terms, config)
    resumed = False
    directory: Location
    if checkpoint is not None:  # z lives in the checkpoint, local or on object storage
        directory = checkpoint.path if isinstance(checkpoint.path, StoragePath) else Path(checkpoint.path)
        found = read_checkpoint(directory, fingerprint) if checkpoint.resume else None
        if found is not None:
            _restore(chain, found, directory)
            resumed = True
            log.info("resuming the Gibbs chain from %s after sweep %d", directory, chain.sweep)
        else:
            assignment_layer.remove_layer(directory)
    else:
        directory = assignment_layer.scratch_location(corpus.path, token, scratch_dir or tf_config.get("scratch-dir"))
    layer = str(directory)  # a local path or a URL: the tasks open either
    committed = chain.sweep if resumed else -1

    executor = _Executor(client, f"{token}")

    def run(sweep: int, view: Any, parts: list[Partition] = partitions, sequential: bool = False) -> _SweepSums:
        """Run one sweep's tasks; add each delta to the chain's counts as it arrives."""
        shared = executor.share(view) if view is not None else None
        sums = _SweepSums()
        for result in executor.run(sweep, parts, lambda p: (str(corpus.path), p, language, n_terms, layer, sweep, shared,
                                                             config.n_topics, config.seed, threads, sequential)):
            sums.add(result, chain.term_topic, chain.topic_counts)
            del result
        return sums

    def view() -> SweepView:
        return SweepView(chain.term_topic.copy(), chain.topic_counts.copy(), chain.alpha, chain.beta, config.seed)

    def heldout() -> float:
        view = lda_view(chain.term_topic, chain.alpha, chain.beta, language)
        model = SavedModel(view, {language: vocabulary}, ModelInfo(kind=GIBBS_KIND, method="gibbs"))
        return float(heldout_likelihood(model, test_corpus, "completion-random", client=client,
                                        seed=HELDOUT_SEED).perplexity)

    try:
        started = time.perf_counter()
        if not resumed and config.init == "random":
            chain.n_tokens = run(0, None).n_tokens
        elif not resumed and config.init == "scvb0":  # one serial SCVB0 pass, then every block drawn at once
            params = GibbsParams(n_topics=config.n_topics, doc_topic_prior=chain.alpha, topic_word_prior=chain.beta,
                                 seed=config.seed)
            pass_state: Any = SCVB0Pass.begin(params, n_terms=n_terms, n_tokens=corpus.n_tokens)
            for step, partition in enumerate(progress.track(partitions, total=len(partitions), desc="SCVB0 pass",
                                                            unit="task")):
                pass_state = executor.chain(scvb0_pass_partition, step, str(corpus.path), partition, language,
                                            n_terms, layer, pass_state)
            final = executor.value(pass_state)
            draw = executor.share(SCVB0Draw(word_factor(final.expected_counts(), chain.beta), params))
            del pass_state, final
            drawn = _SweepSums()
            for part in executor.run(0, partitions, lambda p: (
                    str(corpus.path), p, language, n_terms, layer, 0, None, config.n_topics, config.seed, threads,
                    False, draw)):
                drawn.add(part, chain.term_topic, chain.topic_counts)
                del part
            chain.n_tokens = drawn.n_tokens
            assignment_layer.drop_doc_topics(directory)
        elif not resumed:  # partition after partition, each given the counts of the ones before
            for partition in progress.track(partitions, total=len(partitions), desc="Gibbs start", unit="task"):
                chain.n_tokens += run(0, view(), [partition], True).n_tokens
        if not resumed:
            chain.start_seconds = time.perf_counter() - started
        else:
            chain.n_tokens = int(chain.topic_counts.sum())
        remaining = range(chain.sweep + 1, config.sweeps + 1)
        for sweep in progress.track(remaining, total=len(remaining), desc="Gibbs", unit="sweep"):
            started = time.perf_counter()
            result = run(sweep, view())
            learn = config.learn_alpha or config.learn_beta
            if learn and sweep > config.burn_in and (sweep - config.burn_in) % config.optimize_every == 0:
                chain.alpha, chain.beta = optimize_hyperparameters(
                    result.histograms, chain.term_topic, chain.topic_counts, chain.alpha, chain.beta,
                    learn_alpha=config.learn_alpha, learn_beta=config.learn_beta)
            log_lik = joint_log_likelihood(result.histograms, chain.term_topic, chain.topic_counts, chain.alpha,
                                           chain.beta)
            seconds = time.perf_counter() - started
            scored = test_corpus is not None and (sweep == config.sweeps or (
                config.eval_every > 0 and sweep % config.eval_every == 0))
            record = GibbsSweepRecord(
                sweep=sweep, seconds=seconds, elapsed=chain.elapsed + seconds,
                tokens_per_second=result.n_tokens / max(seconds, 1e-9), log_likelihood=log_lik,
                log_likelihood_per_token=log_lik / max(result.n_tokens, 1), alpha_sum=float(chain.alpha.sum()),
                beta=float(chain.beta), heldout_perplexity=heldout() if scored else None)
            chain.trace.append(record)
            chain.sweep = sweep
            if checkpoint is not None and (sweep % checkpoint.every == 0 or sweep == config.sweeps):
                _commit(chain, directory, fingerprint, language, vocabulary)
                committed = sweep
            assignment_layer.drop_sweeps(directory, {sweep, committed})
            if on_sweep is not None:
                on_sweep(record, lda_view(chain.term_topic, chain.alpha, chain.beta, language))
    finally:
        executor.close()
        if checkpoint is None:
            assignment_layer.remove_run(directory)
    state = lda_view(chain.term_topic, chain.alpha, chain.beta, language)
    info = ModelInfo(family="lda", kind=GIBBS_KIND, method="gibbs", settings=config.to_dict(),
                     trace=[r.to_dict() for r in chain.trace], converged=False,
                     corpus=corpus_provenance(corpus, range(corpus.n_shards)),
                     extra={"gibbs": {"sweeps_done": chain.sweep, "n_blocks": len(blocks),
                                      "topic_word_prior": float(chain.beta)}})
    saved = SavedModel(state, {language: vocabulary}, info)
    return GibbsFitResult(state, tuple(chain.trace), saved, chain.term_topic, chain.topic_counts, language)


def _commit(chain: _Chain, directory: Location, fingerprint: dict[str, Any], language: str, vocabulary: Any) -> None:
    state = lda_view(chain.term_topic, chain.alpha, chain.beta, language)
    write_checkpoint(directory, Checkpoint(
        state, {"sweep": chain.sweep, "beta": float(chain.beta)}, [r.to_dict() for r in chain.trace], fingerprint,
        {"term_topic": chain.term_topic.copy(), "topic_counts": chain.topic_counts.copy()}), {language: vocabulary})


def _restore(chain: _Chain, found: Checkpoint, directory: Location) -> None:
    try:
        chain.sweep = int(found.position["sweep"])
        chain.beta = float(found.position["beta"])
        chain.term_topic = np.ascontiguousarray(found.sampler_state["term_topic"], dtype=np.int32)
        chain.topic_counts = np.asarray(found.sampler_state["topic_counts"], dtype=np.int64).copy()
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFormatError(f"checkpoint {str(directory)!r} holds no Gibbs chain ({exc}); delete it, or run the "
                               "fit without --resume.", path=str(directory)) from exc
    if chain.sweep not in assignment_layer.sweeps_on_disk(directory):
        raise ModelFormatError(f"checkpoint {str(directory)!r} names sweep {chain.sweep} but its assignment layer "
                               f"{str(assignment_layer.layer_path(directory))!r} lacks it; delete the checkpoint, or "
                               "run the fit without --resume.", path=str(directory))
    chain.alpha = np.array(found.state.doc_topic_prior, dtype=np.float64)
    chain.trace = [GibbsSweepRecord(**record) for record in found.trace]
    if not all(math.isfinite(r.log_likelihood) for r in chain.trace):
        raise ModelFormatError(f"checkpoint {str(directory)!r} has a damaged trace; delete it.", path=str(directory))
