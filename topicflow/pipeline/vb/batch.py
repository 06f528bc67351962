"""Driver of batch variational LDA on Dask (the Mr. LDA mapper / reducer / driver split).

Per iteration: scatter exp(E[log beta]) once, map the E-step over every block, tree-merge the
statistics in a fixed order, then on the driver compute the ELBO, update lambda (M-step) and alpha
(Newton-Raphson). The math is in :mod:`topicflow.models`; graphs are built by :mod:`topicflow.tasks`.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar, cast

import dask
import numpy as np

from topicflow import config as tf_config
from topicflow._typing import (
    AlphaMode,
    EStepKind,
    FloatArray,
    HybridAlphaStats,
    HybridInit,
)
from topicflow.errors import InvalidParameterError, TopicflowError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.outputs import gamma_scratch
from topicflow.io.outputs.assignment_layer import scratch_location
from topicflow.io.storage import Location
from topicflow.models.common.dirichlet import (
    newton_alpha,
    newton_symmetric_alpha,
    newton_symmetric_eta,
)
from topicflow.models.lda.priors import (
    LEGACY_OFF_TOPIC,
    LEGACY_SEED_STRENGTH,
    PAPER_SEED_STRENGTH,
    SeedTopic,
    informed_prior,
)
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb.hybrid import (
    HYBRID_ALPHA_STATS,
    HYBRID_INITS,
    HybridParams,
)
from topicflow.models.lda.vb.objective import (
    full_elbo,
    initial_topic_word_var,
    mstep_batch,
)
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.policies import CheckpointPolicy, has_converged
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.estep import graph_token, map_estep, map_estep_warm, tree_merge

log = logging.getLogger(__name__)


#: Setting names of models saved before topicflow used one name per concept (read, never written).
LEGACY_SETTINGS = {"alpha_mode": "doc_topic_prior_mode", "alpha": "doc_topic_prior", "eta": "topic_word_prior",
                   "optimize_eta": "optimize_topic_word_prior", "doc_max_iter": "max_doc_iter"}


#: Default stopping tolerance of batch VB (``LDA(method="batch")``, ``topicflow fit``): the fit stops when
#: the ELBO changes by less than this fraction in one iteration. Measured on fortunes + Bible (K = 20
#: and 100, starts of alpha summing to 5-50; docs/variational-lda.md), this stopped at most 5 iterations
#: after the held-out perplexity's best, within 0.44% of it; the former 1e-4 ran 15-30 iterations
#: longer while the learned alpha kept falling and the held-out perplexity rose again (up to 1.7%).
BATCH_TOL = 1e-3

#: Default start of a learned alpha in batch VB: ``START_ALPHA_SUM / n_topics`` per topic (at most 1).
START_ALPHA_SUM = 20.0


def start_doc_topic_prior(n_topics: int) -> float:
    """Default start of a learned alpha_k in batch VB: ``min(1, START_ALPHA_SUM / n_topics)``.

    Parameters
    ----------
    n_topics : int
        Number of topics K, at least 1.

    Returns
    -------
    float
        The starting value of every alpha_k.

    Notes
    -----
    Batch VB updates alpha by Newton-Raphson on statistics computed with the previous alpha; from a
    small start (1/K, sum 1) the two feed each other (sparse document-topic posteriors ask for a small
    alpha) and the sum of alpha crept from 1 to 2.2 over 200 iterations on the benchmark corpus. From a
    start above the fixed point the first iterations spread each document over topics, which acts like
    deterministic annealing, and Newton brings alpha down as the topics sharpen: with a sum of 20 the
    held-out perplexity reached its best (903 at K = 100, 970 at K = 20) in 15-16 iterations, where the
    1/K start stood at 944 after 200 iterations (K = 100) and 1009 after 50 (K = 20). Sums of 5, 10,
    50 and 100 did worse (docs/variational-lda.md, "Starting alpha and stopping"). The cap of 1 (a
    flat Dirichlet) for K < 20 did slightly better than 20 / K at K = 10 (1026 against 1029; 1/K:
    1086). Mr. LDA's experiments start at 50 / K.

    Examples
    --------
    >>> start_doc_topic_prior(100)
    0.2
    >>> start_doc_topic_prior(5)
    1.0
    """
    return min(1.0, START_ALPHA_SUM / n_topics)


@dataclass(frozen=True, slots=True)
class VBConfig:
    """What batch VB computes (hyperparameters); validated once here.

    Attributes
    ----------
    n_topics : int
    doc_topic_prior_mode : {"auto", "symmetric", "fixed"}
        ``auto`` learns an asymmetric alpha by Newton-Raphson, ``symmetric`` learns one shared value,
        ``fixed`` keeps ``doc_topic_prior`` as given.
    doc_topic_prior : float
        Initial (or fixed) value of every alpha_k; default 1 / n_topics (Mr. LDA's experiments start a
        learned alpha at 50 / n_topics, Mahout's default). ``LDA(method="batch")`` and ``topicflow fit``
        pass :func:`start_doc_topic_prior` (``min(1, 20 / n_topics)``) for a learned alpha.
    topic_word_prior : float
        Symmetric topic-word prior eta (the base value under informed priors).
    optimize_topic_word_prior : bool
        Learn a symmetric eta by Newton-Raphson (not with informed priors).
    max_iter : int
        Most iterations.
    tol : float
        Stop when the relative ELBO change of one iteration is at most ``tol``
        (:func:`~topicflow.pipeline.policies.has_converged`); 0 runs ``max_iter`` iterations unless the
        ELBO stops changing. ``LDA(method="batch")`` and ``topicflow fit`` default to ``BATCH_TOL``
        (1e-3); the 1e-4 here is the default of streaming VB's local iterations.
    seed_topics : tuple of SeedTopic
        Informed priors: the first ``len(seed_topics)`` topics are seeded.
    seed_strength : float
        Prior of a seed word (weight 1) in its own topic; default 10, Mr. LDA's.
    seed_off_topic : float or None
        If set, the prior of a seed word in every other topic (a push-out); None (default, Mr. LDA's
        construction) leaves those pairs at ``topic_word_prior``. Models saved before this setting
        existed load with 1e-3, the value they were fitted with.
    estep : {"vb", "hybrid"}
        ``vb``: dense coordinate ascent per document (``max_doc_iter``, ``doc_tol``); ``hybrid``:
        Gibbs sampling within VB (Mimno et al. 2012), ``burn_in`` discarded and ``samples`` kept
        sweeps per document, sparse in topics, hence faster at large K.
    hybrid_init : {"progressive", "random"}
        Hybrid: how each document's chain starts (:class:`~topicflow.models.lda.vb.hybrid.HybridParams` ``init``).
    hybrid_alpha_stats : {"mean", "samples"}
        Hybrid: how the statistics of the alpha update are built (``HybridParams.alpha_stats``).
    """

    n_topics: int
    doc_topic_prior_mode: AlphaMode = "auto"
    doc_topic_prior: float | None = None
    topic_word_prior: float = 0.01
    optimize_topic_word_prior: bool = False
    max_iter: int = 50
    tol: float = 1e-4
    max_doc_iter: int = 100
    doc_tol: float = 1e-3
    seed: int = 0
    seed_topics: tuple[SeedTopic, ...] = ()
    seed_strength: float = PAPER_SEED_STRENGTH
    seed_off_topic: float | None = None
    #: Start each document's E-step from its gamma of the previous iteration (kept on disk) ...
    warm_start: bool = False
    #: ... but only after this many cold iterations, while topics are still far from their fixed point.
    cold_iterations: int = 10
    estep: EStepKind = "vb"
    burn_in: int = 5
    samples: int = 5
    hybrid_init: HybridInit = "progressive"
    hybrid_alpha_stats: HybridAlphaStats = "mean"
    #: Start of each document's gamma: "uniform" (alpha + N_d / K), "random" (Gamma(100, 1/100), as
    #: Hoffman et al.), or "auto": random for online VB, which sees a document once, uniform for batch.
    gamma_init: str = "auto"
    #: Shape s of the Gamma(s, 1/s) entries of the starting lambda: 100 is Hoffman et al.'s start. A
    #: smaller s starts the topics further apart; on generated LDA corpora s = 10 leaves the flat start
    #: sooner and ends lower, on real text it ended about 1% higher (benchmarks/RESULTS.md).
    init_shape: float = 100.0

    def __post_init__(self) -> None:
        checks = [
            (self.n_topics >= 1, "n_topics must be a positive integer"),
            (self.doc_topic_prior_mode in ("auto", "symmetric", "fixed"),
             "doc_topic_prior_mode must be one of 'auto', 'symmetric', 'fixed'"),
            (self.doc_topic_prior is None or self.doc_topic_prior > 0, "doc_topic_prior must be positive"),
            (self.topic_word_prior > 0, "topic_word_prior must be positive"),
            (self.max_iter >= 1, "max_iter must be at least 1"),
            (self.tol >= 0, "tol must be nonnegative"),
            (len(self.seed_topics) <= self.n_topics, "more seeded topics than n_topics"),
            (self.seed_strength > 0, "seed_strength must be positive"),
            (self.seed_off_topic is None or self.seed_off_topic > 0, "seed_off_topic must be positive (or None)"),
            (not (self.optimize_topic_word_prior and self.seed_topics),
             "optimize_topic_word_prior cannot be combined with informed priors (seed words)"),
            (self.estep in ("vb", "hybrid"), "estep must be 'vb' or 'hybrid'"),
            (self.gamma_init in ("auto", "uniform", "random"), "gamma_init must be 'auto', 'uniform' or 'random'"),
            (self.burn_in >= 0 and self.samples >= 1, "burn_in must be >= 0 and samples >= 1"),
            (self.hybrid_init in HYBRID_INITS, f"hybrid_init must be one of {list(HYBRID_INITS)}"),
            (self.hybrid_alpha_stats in HYBRID_ALPHA_STATS,
             f"hybrid_alpha_stats must be one of {list(HYBRID_ALPHA_STATS)}"),
            (not (self.warm_start and self.estep == "hybrid"), "warm_start applies to the 'vb' E-step only"),
            (self.init_shape > 0, "init_shape must be positive"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidParameterError(f"{message} (got {self!r})")

    @property
    def initial_alpha(self) -> float:
        return self.doc_topic_prior if self.doc_topic_prior is not None else 1.0 / self.n_topics

    def vb_params(self, *, online: bool = False) -> VBParams:
        """Parameters of the dense E-step (with ``online=False``, also those that fold in new documents)."""
        random_init = self.gamma_init == "random" or (self.gamma_init == "auto" and online)
        return VBParams(n_topics=self.n_topics, max_doc_iter=self.max_doc_iter, doc_tol=self.doc_tol,
                        random_init=random_init, seed=self.seed)

    def estep_params(self, *, online: bool = False) -> VBParams | HybridParams:
        """Parameters of the training E-step; their type selects the kernel."""
        if self.estep == "hybrid":
            return HybridParams(n_topics=self.n_topics, burn_in=self.burn_in, samples=self.samples, seed=self.seed,
                                init=self.hybrid_init, alpha_stats=self.hybrid_alpha_stats)
        return self.vb_params(online=online)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (model files keep it as ``settings``); :meth:`from_dict` inverts it."""
        payload = {name: getattr(self, name) for name in self.__slots__}
        payload["doc_topic_prior"] = self.initial_alpha
        payload["seed_topics"] = [
            {"name": s.name, "words": list(s.words), "weights": list(s.weights)} for s in self.seed_topics
        ]
        return payload

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> VBConfig:
        payload = {LEGACY_SETTINGS.get(name, name): value for name, value in payload.items()}
        known = {name: payload[name] for name in cls.__slots__ if name in payload}
        known["seed_topics"] = tuple(
            SeedTopic(s["name"], tuple(s["words"]), tuple(s["weights"])) for s in payload.get("seed_topics", ())
        )
        if known["seed_topics"] and "seed_off_topic" not in payload:
            # Saved before issue 18: fitted with the push-out and (if unrecorded) strength 1.
            known["seed_off_topic"] = LEGACY_OFF_TOPIC
            known.setdefault("seed_strength", LEGACY_SEED_STRENGTH)
        return cls(**known)


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One line of the fit trace."""

    iteration: int
    elbo: float
    elbo_per_token: float
    alpha_sum: float
    eta: float
    seconds: float
    tokens_per_second: float
    docs_capped: int

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class FitResult:
    """The fitted state, the trace of every iteration and whether the ELBO converged.

    Attributes
    ----------
    state : LDAState
        The model after the last iteration.
    trace : tuple of IterationRecord
        One record per iteration, in order (including iterations before a resume).
    converged : bool
        Whether the relative ELBO change fell below the configured tolerance.
    unknown_seed_words : dict of str to list of str
        Seed words missing from the vocabulary, keyed by seed topic name.
    """

    state: LDAState
    trace: tuple[IterationRecord, ...]
    converged: bool
    unknown_seed_words: dict[str, list[str]] = field(default_factory=dict)


def initial_state(corpus: Corpus, config: VBConfig) -> tuple[LDAState, dict[str, list[str]]]:
    """Build the starting state: lambda from the counter RNG, alpha and eta from the config.

    Informed priors (seed topics) are applied to eta; the seed words missing from the vocabulary
    are returned by topic name.
    """
    lam: dict[str, FloatArray] = {}
    priors: dict[str, float | FloatArray] = {}
    names: list[str | None] = [None] * config.n_topics
    unknown: dict[str, list[str]] = {}
    for index, lang in enumerate(corpus.languages):
        vocab = corpus.vocabulary(lang)
        lam[lang] = initial_topic_word_var(config.n_topics, len(vocab), seed=config.seed, language_index=index,
                                           shape=config.init_shape)
        if config.seed_topics:
            prior, topic_names, missing = informed_prior(
                vocab.index, len(vocab), config.n_topics, config.seed_topics,
                base=config.topic_word_prior, seed_strength=config.seed_strength, off_topic=config.seed_off_topic,
            )
            priors[lang] = prior
            names = [a or b for a, b in zip(names, topic_names)]
            for name, words in missing.items():
                unknown.setdefault(name, []).extend(words)
        else:
            priors[lang] = config.topic_word_prior
    alpha = np.full(config.n_topics, config.initial_alpha)
    return LDAState(lam, alpha, priors, tuple(names)), unknown


def share(value: Any, client: Any, *, name: str) -> Any:
    """Make ``value`` available to every task once: scattered on a cluster, a literal otherwise."""
    if client is not None:
        return client.scatter([value], broadcast=True, hash=False)[0]
    return dask.delayed(value, name=name, traverse=False)


def mstep(state: LDAState, stats: EStepStats, config: VBConfig) -> LDAState:
    """Apply the batch M-step: lambda = eta + statistics, and alpha and eta by Newton-Raphson as asked."""
    lam = {
        lang: mstep_batch(stats.topic_terms[lang].to_dense(state.n_terms(lang)), state.topic_word_prior[lang],
                          overwrite_stats=True)
        for lang in state.languages
    }
    alpha = state.doc_topic_prior
    if config.doc_topic_prior_mode == "auto":
        alpha, _ = newton_alpha(alpha, stats.alpha_suff, stats.n_docs)
    elif config.doc_topic_prior_mode == "symmetric":
        shared, _ = newton_symmetric_alpha(float(alpha[0]), stats.alpha_suff, stats.n_docs)
        alpha = np.full(state.n_topics, shared)
    priors = state.topic_word_prior
    if config.optimize_topic_word_prior:
        priors = {}
        for lang in state.languages:
            eta = float(state.topic_word_prior[lang])
            priors[lang] = float(newton_symmetric_eta(lam[lang], eta)[0])
            lam[lang] -= eta  # in place, the same bits as lam - eta + new eta
            lam[lang] += priors[lang]
    return state.with_updates(topic_word_var=lam, doc_topic_prior=np.asarray(alpha), topic_word_prior=priors)


#: Attempts at one iteration when the workers lose what it was sent (see :func:`run_iteration`).
MAX_ATTEMPTS = 3

T = TypeVar("T")


class WorkersLostError(TopicflowError, RuntimeError):
    """Batch VB could not finish an iteration: the workers kept losing its shared topics or tasks."""


def lost_to_workers(exc: BaseException) -> bool:
    """Return whether ``exc`` says a worker died under the computation rather than the computation failing.

    A worker that dies (killed, or restarted by its nanny for passing 95% of its memory limit) takes
    its scattered data with it: tasks that need the topics are then cancelled
    (``FutureCancelledError``, a ``CancelledError``); a task whose workers keep dying is given up
    (``KilledWorker``); a scatter to a dying worker fails on its connection (``CommClosedError``).
    """
    from concurrent.futures import CancelledError

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return isinstance(exc, (CancelledError, KilledWorker, CommClosedError))


def rerun_when_lost(attempt: Callable[[str], T], *, token: str, client: Any, what: str,
                    lost_message: Callable[[BaseException], str]) -> T:
    """Run ``attempt(key)``, again under new keys when the workers lost its scattered data or tasks.

    The keys are ``token``, then ``token-retry1``, ...; up to :data:`MAX_ATTEMPTS` runs in all. Only a
    loss to the workers (:func:`lost_to_workers`, on a cluster) is rerun; any other error propagates.

    Parameters
    ----------
    attempt : callable
        Scatters what it needs and computes, under task keys built from its argument.
    token : str
    client : distributed.Client or None
    what : str
        Names the work in the warning logged before a rerun ("iteration 3").
    lost_message : callable
        The message of the :class:`WorkersLostError` raised after the last attempt.

    Returns
    -------
    The result of the first attempt that finished.
    """
    for number in range(1, MAX_ATTEMPTS + 1):
        try:
            return attempt(token if number == 1 else f"{token}-retry{number - 1}")
        except TopicflowError:
            raise
        except Exception as exc:
            if client is None or not lost_to_workers(exc):
                raise
            if number == MAX_ATTEMPTS:
                raise WorkersLostError(lost_message(exc)) from exc
            log.warning("%s: the workers lost its topics or tasks (%s: %s), most often because a worker was "
                        "restarted for exceeding its memory limit; scattering the topics again and rerunning it "
                        "(attempt %d of %d)", what, type(exc).__name__, exc, number + 1, MAX_ATTEMPTS)
    raise AssertionError("unreachable")  # the loop returns or raises


def _estep_statistics(
    blocks: Sequence[Any], state: LDAState, config: VBConfig, *, token: str, split_every: int, client: Any,
    warm: WarmStart | None, iteration: int,
) -> EStepStats:
    """Share the topics, map the E-step over the blocks and tree-merge the statistics."""
    topics = share(state.prepared_topics(), client, name=f"topics-{token}")
    if warm is None or iteration < config.cold_iterations:
        parts = map_estep(blocks, topics, state.doc_topic_prior, config.estep_params(), token=token, epoch=iteration)
    else:
        parts = map_estep_warm(blocks, topics, state.doc_topic_prior, config.vb_params(), scratch=str(warm.directory),
                               shard_ids=warm.shard_ids, iteration=iteration, token=token)
    (stats,) = compute(tree_merge(parts, split_every=split_every, token=token), client=client)
    return cast(EStepStats, stats)


def run_iteration(
    blocks: Sequence[Any], state: LDAState, config: VBConfig, *, token: str, split_every: int,
    client: Any, warm: WarmStart | None = None, iteration: int = 0,
) -> tuple[LDAState, EStepStats, float]:
    """One E-step over every block, the tree-merge, the ELBO and the M-step.

    On a cluster, when a worker dies under the E-step (most often restarted by its nanny for passing
    95% of its memory limit), the topics scattered to it are lost with it and the tasks that need them
    are cancelled. The iteration is then rerun from a new scatter, under new task keys, up to
    :data:`MAX_ATTEMPTS` times in all; the E-step is a pure function of the topics, so the model is
    the one an undisturbed run gives.

    Raises
    ------
    WorkersLostError
        The workers were lost under every attempt (the message points to docs/cluster.md,
        "Worker memory").
    """
    stats = rerun_when_lost(
        lambda key: _estep_statistics(blocks, state, config, token=key, split_every=split_every, client=client,
                                      warm=warm, iteration=iteration),
        token=token, client=client, what=f"iteration {iteration}",
        lost_message=lambda exc: _lost_message(state, iteration, split_every, exc),
    )
    if warm is not None and iteration >= config.cold_iterations:
        gamma_scratch.drop_iterations_before(warm.directory, iteration)
    elbo = full_elbo(stats, state.topic_word_var, state.doc_topic_prior, state.topic_word_prior)
    return mstep(state, stats, config), stats, elbo


#: Models of at least this many bytes (8 K V, float64, V summed over languages) merge their statistics
#: two at a time by default (:func:`merge_fan_in`).
LARGE_MODEL_BYTES = 256 * 10**6


def merge_fan_in(n_topics: int, n_terms: int, split_every: int | None = None) -> int:
    """The fan-in of batch VB's statistics merge: ``split_every`` if given, else set by the model size.

    Parameters
    ----------
    n_topics : int
        K.
    n_terms : int
        V, summed over the languages.
    split_every : int, optional
        Asked for (``fit --split-every``, ``LDA(split_every=...)``); always used when given.

    Returns
    -------
    int
        ``split_every`` if given; otherwise ``topicflow.split-every`` (8 by default) when the model's
        8 K V bytes are under :data:`LARGE_MODEL_BYTES` (256 MB), and at most 2 from there on.

    Notes
    -----
    A merge node holds its children, each up to K x (terms of a shard) float64, and its output; at
    K = 1000 and V = 100,000 eight children took 2.7 GB and restarted 4 GiB workers, where fan-in 2
    finished without pausing (docs/cluster.md, "Worker memory"). The choice depends on the model
    only, never on the cluster, so a seed gives the same model on any cluster; models under the
    threshold are merged exactly as before.

    Examples
    --------
    >>> merge_fan_in(100, 10_000), merge_fan_in(1000, 100_000), merge_fan_in(1000, 100_000, 4)
    (8, 2, 4)
    """
    if split_every:
        return int(split_every)
    configured = int(tf_config.get("split-every", 8))
    if 8 * n_topics * n_terms >= LARGE_MODEL_BYTES:
        return min(configured, 2)
    return configured


def _lost_message(state: LDAState, iteration: int, split_every: int, exc: BaseException) -> str:
    n_values = sum(state.n_topics * state.n_terms(lang) for lang in state.languages)
    return (
        f"batch VB iteration {iteration} failed on all {MAX_ATTEMPTS} attempts: the workers lost the topics sent to them or "
        f"their tasks ({type(exc).__name__}), most often because a worker passed 95% of its memory limit and was "
        f"restarted. Each worker holds exp E[log beta] ({state.n_topics} topics, {8 * n_values / 1e6:,.1f} MB) plus, "
        f"per thread, the statistics of the shard it works on, and the merge nodes hold up to split-every "
        f"(now {split_every}) of them. See docs/cluster.md, \"Worker memory\": use --split-every 2, one thread per "
        f"worker process, more memory per worker, smaller shards, or --method online."
    )


@dataclass(frozen=True, slots=True)
class WarmStart:
    """Where the shards' gamma waits between iterations (see :mod:`topicflow.io.outputs.gamma_scratch`).

    ``directory`` is local, or a prefix on object storage when the store or ``topicflow.scratch-dir``
    is a URL (so the workers of a cluster without a shared disk reach it).
    """

    directory: Location
    shard_ids: tuple[str, ...]


def fit_batch_vb(
    corpus: Corpus,
    config: VBConfig,
    *,
    client: Any = None,
    split_every: int | None = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_iteration: Callable[[IterationRecord, LDAState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
) -> FitResult:
    """Fit LDA (or polylingual LDA when the store has several languages) by batch VB.

    ``on_iteration(record, state)`` is called after every M-step (for monitoring; it must not
    change ``state``). With ``checkpoint``, the state is written every ``checkpoint.every``
    iterations and, with ``checkpoint.resume``, the fit continues from the checkpoint it finds; it
    then ends with the model an uninterrupted run gives (except with ``warm_start``, whose gamma
    scratch is not kept across runs: the first resumed iteration starts cold).

    Raises
    ------
    NumericalError
        The ELBO became non-finite.
    """
    client = current_client(client)
    split_every = merge_fan_in(config.n_topics, sum(len(corpus.vocabulary(lang)) for lang in corpus.languages),
                               split_every)
    log.info("batch VB: statistics merged %d at a time", split_every)
    run_token = graph_token(corpus.token(), config.to_dict(), split_every)
    warm = None
    if config.warm_start:
        directory = scratch_location(corpus.path, run_token, tf_config.get("scratch-dir"))
        warm = WarmStart(directory, tuple(s.shard_id for s in corpus.shards))
    try:
        return _fit_loop(corpus, config, client, split_every, run_token, warm, progress, on_iteration, checkpoint)
    finally:
        if warm is not None:
            gamma_scratch.remove_scratch(warm.directory)


def _fit_loop(
    corpus: Corpus, config: VBConfig, client: Any, split_every: int, run_token: str, warm: WarmStart | None,
    progress: ProgressReporter, on_iteration: Callable[[IterationRecord, LDAState], None] | None,
    checkpoint: CheckpointPolicy | None,
) -> FitResult:
    state, unknown = initial_state(corpus, config)
    blocks = corpus.to_delayed_multi()
    n_tokens = corpus.n_tokens
    trace: list[IterationRecord] = []
    fingerprint = {"method": "batch", "settings": config.to_dict(), "corpus": corpus.token(), "split_every": split_every}
    start = 0
    if checkpoint is not None and checkpoint.resume:
        found = read_checkpoint(checkpoint.path, fingerprint)
        if found is not None:
            state, start = found.state, int(found.position["iteration"]) + 1
            trace = [IterationRecord(**record) for record in found.trace]
            log.info("resuming from %s after iteration %d", checkpoint.path, start - 1)
    if has_converged([r.elbo for r in trace], config.tol):
        start = config.max_iter
    iterations = progress.track(range(start, config.max_iter), total=config.max_iter - start, desc="fit", unit="iter")
    for iteration in iterations:
        started = time.perf_counter()
        state, stats, elbo = run_iteration(
            blocks, state, config, token=f"{run_token}-{iteration}", split_every=split_every, client=client,
            warm=warm, iteration=iteration,
        )
        seconds = time.perf_counter() - started
        record = IterationRecord(
            iteration=iteration, elbo=elbo, elbo_per_token=elbo / max(n_tokens, 1),
            alpha_sum=float(state.doc_topic_prior.sum()),
            eta=float(np.mean(next(iter(state.topic_word_prior.values())))),
            seconds=seconds, tokens_per_second=n_tokens / max(seconds, 1e-9),
            docs_capped=stats.n_capped,
        )
        trace.append(record)
        log.info(
            "iteration %d: ELBO %.6e (%.4f per token), alpha sum %.4f, %.2f s, %.3g tokens/s",
            iteration, elbo, record.elbo_per_token, record.alpha_sum, seconds, record.tokens_per_second,
        )
        if on_iteration is not None:
            on_iteration(record, state)
        if checkpoint is not None and checkpoint.due(iteration + 1):
            write_checkpoint(
                checkpoint.path,
                Checkpoint(state, {"iteration": iteration}, [r.to_dict() for r in trace], fingerprint),
                {lang: corpus.vocabulary(lang) for lang in state.languages},
            )
        if has_converged([r.elbo for r in trace], config.tol):
            break
    converged = has_converged([r.elbo for r in trace], config.tol)
    return FitResult(state=state, trace=tuple(trace), converged=converged, unknown_seed_words=unknown)
