"""Settings of a streaming run and its result."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from topicflow._typing import (
    InitSelection,
    MinibatchAlgorithm,
    RejuvenationSource,
    ResamplingScheme,
    StreamAlgorithm,
    choices,
)
from topicflow.errors import InvalidParameterError
from topicflow.io.models.store import SavedModel
from topicflow.io.models.stream_state import RunState
from topicflow.models.lda.gibbs.state import GibbsParams
from topicflow.models.lda.streaming import particle_filter, sgs

STREAM_ALGORITHMS: tuple[str, ...] = choices(StreamAlgorithm)
#: Streaming Gibbs with decay (Gao et al. 2016): minibatch samplers, run by :mod:`topicflow.pipeline.streaming.sgs`.
MINIBATCH_ALGORITHMS: tuple[str, ...] = choices(MinibatchAlgorithm)


#: Setting names of streams saved before topicflow used one name per concept (read, never written).
LEGACY_SETTINGS = {"max_iters": "max_iter"}


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """What a stream computes (hyperparameters, initialization, runs); validated at construction.

    Attributes
    ----------
    algorithm : {"gibbs", "olda", "incgibbs", "pf"}
        Batch collapsed Gibbs, o-LDA, the incremental Gibbs sampler, or the particle filter.
    n_topics : int
    doc_topic_prior, topic_word_prior : float
        alpha and beta (symmetric).
    n_particles : int
        Particles of ``"pf"`` (the other samplers keep one).
    ess_threshold : float
        ``"pf"`` resamples when the effective sample size falls below this share of the particles.
    resampling : {"multinomial", "residual", "stratified", "systematic"}
    rejuvenation_steps : int
        Tokens resampled per rejuvenation (after each resampling for ``"pf"``, after each token for
        ``"incgibbs"``).
    rejuvenation_source : {"history", "window", "reservoir"}
    reservoir_size : int
        Capacity of the reservoir, or length of the window, in tokens.
    init_docs, init_sweeps : int
        Size of the initialization prefix, and Gibbs sweeps on it.
    init_trials : int
        Independent initializations per run; the best by ``init_select`` is kept.
    init_select : {"nmi", "perplexity"}
    runs : int
        Independent runs, seeds ``seed, seed + 1, ...``.
    eval_every : int
        Documents between evaluation points (sweeps for ``"gibbs"``).
    sweeps : int
        Sweeps of ``"gibbs"``.
    optimize_every : int
        ``"gibbs"``: learn an asymmetric alpha and a symmetric beta (Minka's fixed point) every this
        many sweeps after the first 50 (0: keep them fixed).
    batch_size, decay, max_iter, patience : int, float, int, int
        ``"sgs"``/``"dsgs"``: documents per minibatch; the factor lambda that scales the counts after
        each minibatch; the sweeps of a minibatch at most, and without improvement of its training
        perplexity.
    sgs_init : {"posterior", "random"}
        ``"sgs"``/``"dsgs"``: start of each minibatch's assignments.
    staleness, sync_first, n_workers : int or None
        ``"dsgs"``: the staleness bound (None: fully asynchronous), minibatches run in order before
        the loops go asynchronous, and the sampler loops (default: one per worker).
    max_docs : int or None
        Stop the stream after this many documents (default: the whole store).
    seed : int
    """

    algorithm: StreamAlgorithm = "pf"
    n_topics: int = 10
    doc_topic_prior: float = 0.1
    topic_word_prior: float = 0.01
    n_particles: int = 100
    ess_threshold: float = 0.5
    resampling: ResamplingScheme = "systematic"
    rejuvenation_steps: int = 30
    rejuvenation_source: RejuvenationSource = "reservoir"
    reservoir_size: int = 1000
    init_docs: int = 100
    init_sweeps: int = 100
    init_trials: int = 1
    init_select: InitSelection = "perplexity"
    runs: int = 1
    eval_every: int = 100
    sweeps: int = 200
    optimize_every: int = 0
    batch_size: int = 256
    decay: float = 1.0
    max_iter: int = 100
    patience: int = 10
    sgs_init: str = "posterior"
    staleness: int | None = None
    sync_first: int = 0
    n_workers: int | None = None
    max_docs: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        allowed_values = {"algorithm": STREAM_ALGORITHMS, "resampling": choices(ResamplingScheme),
                          "rejuvenation_source": choices(RejuvenationSource), "init_select": choices(InitSelection)}
        for name, allowed in allowed_values.items():
            if getattr(self, name) not in allowed:
                raise InvalidParameterError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")
        positive = ("n_topics", "n_particles", "reservoir_size", "init_trials", "runs", "eval_every", "init_sweeps")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise InvalidParameterError(f"{name} must be at least 1; got {getattr(self, name)!r}")
        if self.init_docs < 1 and self.algorithm != "gibbs":
            raise InvalidParameterError(f"init_docs must be at least 1; got {self.init_docs!r}")
        if not 0.0 < self.ess_threshold <= 1.0:
            raise InvalidParameterError(
                f"ess_threshold is a share of the particles, in (0, 1]; got {self.ess_threshold!r}")
        if self.doc_topic_prior <= 0 or self.topic_word_prior <= 0:
            raise InvalidParameterError("alpha and beta must be positive; got "
                                        f"{self.doc_topic_prior!r} and {self.topic_word_prior!r}")
        if self.algorithm in MINIBATCH_ALGORITHMS:
            from topicflow.pipeline.streaming.config import sgs_params

            sgs_params(self, self.seed)  # validates the minibatch settings with the model's own checks
        if self.optimize_every < 0:
            raise InvalidParameterError(f"optimize_every must be >= 0; got {self.optimize_every!r}")
        if self.rejuvenation_steps < 0:
            raise InvalidParameterError(f"rejuvenation_steps must be >= 0; got {self.rejuvenation_steps!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> StreamConfig:
        names = {f.name for f in fields(cls)}
        renamed = {LEGACY_SETTINGS.get(k, k): v for k, v in payload.items()}
        return cls(**{k: v for k, v in renamed.items() if k in names})

    def run_seed(self, run: int) -> int:
        return self.seed + run

    def gibbs_params(self, seed: int) -> GibbsParams:
        return GibbsParams(n_topics=self.n_topics, doc_topic_prior=self.doc_topic_prior,
                           topic_word_prior=self.topic_word_prior, seed=seed)

    def pf_params(self, n_terms: int, seed: int) -> particle_filter.PFParams:
        """The sampler of ``algorithm``: o-LDA and incremental Gibbs are one-particle filters."""
        single = self.algorithm in ("olda", "incgibbs")
        return particle_filter.PFParams(
            n_topics=self.n_topics, n_terms=n_terms, doc_topic_prior=self.doc_topic_prior,
            topic_word_prior=self.topic_word_prior, n_particles=1 if single else self.n_particles,
            ess_threshold=self.ess_threshold, resampling=self.resampling,
            rejuvenation_steps=0 if self.algorithm == "olda" else self.rejuvenation_steps,
            rejuvenation_source=self.rejuvenation_source, source_size=self.reservoir_size,
            rejuvenate_after="token" if self.algorithm == "incgibbs" else "resample", seed=seed,
        )

    def fingerprint(self) -> dict[str, Any]:
        """Settings a resumed stream must share with the saved one (all but where it stops)."""
        payload = self.to_dict()
        for name in ("max_docs", "eval_every", "sweeps"):
            payload.pop(name)
        return payload


@dataclass(frozen=True)
class StreamResult:
    """Outcome of :func:`run_stream`.

    Attributes
    ----------
    config : StreamConfig
    records : list of dict
        One trace record per run and evaluation point (``run``, ``seed``, ``docs_seen``, metrics).
    summary : list of dict
        Per evaluation point, the mean and standard deviation of every metric over runs.
    model : SavedModel
        Run 0's topics as an LDA model (usable by ``topics``, ``infer``, ``evaluate``, ``export``).
    snapshots : list of (arrays, meta)
        Every run's final sampler state.
    """

    config: StreamConfig
    records: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    model: SavedModel
    snapshots: list[RunState] = field(repr=False)


def sgs_params(config: StreamConfig, seed: int) -> sgs.SGSParams:
    """The sampler's hyperparameters from the stream settings (validated by :class:`SGSParams`)."""
    return sgs.SGSParams(n_topics=config.n_topics, doc_topic_prior=config.doc_topic_prior,
                         topic_word_prior=config.topic_word_prior, decay=config.decay, max_iter=config.max_iter,
                         patience=config.patience, init=config.sgs_init, seed=seed)  # type: ignore[arg-type]
