"""Settings of a streaming run and its result."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from topicflow._typing import (
    GibbsInit,
    HeldOutMode,
    InitSelection,
    MinibatchAlgorithm,
    RejuvenationSource,
    ResamplingScheme,
    SGSInit,
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


def _at_least(owner: str, name: str, value: int, low: int) -> None:
    if int(value) < low:
        raise InvalidParameterError(f"{owner}: {name} must be at least {low}; got {value!r}")


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How many runs, where they stop and when they are recorded: the same for every algorithm.

    Attributes
    ----------
    runs : int
        Independent runs, seeds ``seed, seed + 1, ...``.
    eval_every : int
        Documents between evaluation points (sweeps for ``"gibbs"``).
    max_docs : int or None
        Stop the stream after this many documents (default: the whole store).
    seed : int
        Seed of run 0.
    """

    runs: int = 1
    eval_every: int = 100
    max_docs: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _at_least("run settings", "runs", self.runs, 1)
        _at_least("run settings", "eval_every", self.eval_every, 1)
        if self.max_docs is not None:
            _at_least("run settings", "max_docs", self.max_docs, 1)


@dataclass(frozen=True, slots=True)
class GibbsSettings:
    """``"gibbs"``: batch collapsed Gibbs over the whole stream, the reference of the online samplers.

    Attributes
    ----------
    sweeps : int
        Sweeps over the corpus.
    optimize_every : int
        Learn an asymmetric alpha and a symmetric beta (Minka's fixed point) every this many sweeps
        after the first 50 (0: keep them fixed).
    gibbs_start : {"random", "sequential", "scvb0"}
        First assignments of the chain: uniform topics (standard collapsed Gibbs, the default),
        each token drawn in order from its conditional given the tokens before it (fewer sweeps to
        a given perplexity; ``fit --gibbs-start`` offers the same choice), or that draw against the
        expected counts of one SCVB0 pass (:mod:`topicflow.models.lda.gibbs.cvb_start`).
    gibbs_partitions : int
        P > 1: partitioned sweeps (documents and words in P parts, P tasks on disjoint documents and
        words at a time, n_k up to one epoch stale; :mod:`topicflow.models.lda.gibbs.partitioned`).
        Part of the chain's definition; 1 is the sequential sampler.
    gibbs_threads : int
        Threads running the tasks of a partitioned sweep (the chain does not depend on it; give the
        worker as many cores, e.g. ``--threads-per-worker``).
    """

    sweeps: int = 200
    optimize_every: int = 0
    gibbs_start: GibbsInit = "random"
    gibbs_partitions: int = 1
    gibbs_threads: int = 1

    def __post_init__(self) -> None:
        _at_least("gibbs", "sweeps", self.sweeps, 1)
        _at_least("gibbs", "optimize_every", self.optimize_every, 0)
        _at_least("gibbs", "gibbs_partitions", self.gibbs_partitions, 1)
        _at_least("gibbs", "gibbs_threads", self.gibbs_threads, 1)
        if self.gibbs_start not in choices(GibbsInit):
            raise InvalidParameterError(
                f"gibbs_start must be one of {', '.join(choices(GibbsInit))}; got {self.gibbs_start!r}")


@dataclass(frozen=True, slots=True)
class ParticleSettings:
    """``"pf"``, ``"olda"``, ``"incgibbs"``: Rao-Blackwellized particle filters (Canini et al. 2009).

    o-LDA and incremental Gibbs are one-particle filters (or ``independent_samples`` of them, never
    resampled): they ignore ``n_particles``, ``ess_threshold`` and ``resampling``, and o-LDA does not
    rejuvenate.

    Attributes
    ----------
    n_particles : int
        Particles of ``"pf"``.
    ess_threshold : float
        ``"pf"`` resamples when the effective sample size falls below this share of the particles.
    resampling : {"multinomial", "residual", "stratified", "systematic"}
        Resampling scheme of ``"pf"``.
    rejuvenation_steps : int
        Tokens resampled per rejuvenation (after each resampling for ``"pf"``, after each token for
        ``"incgibbs"``).
    rejuvenation_source : {"history", "window", "reservoir"}
        Where rejuvenated tokens are drawn from.
    reservoir_size : int
        Capacity of the reservoir, or length of the window, in tokens.
    init_docs : int or float
        Size of the initialization prefix: a number of documents (0: no batch Gibbs, the particles
        start empty), or a share of the stream in (0, 1) (May et al. 2014: 0.1, the first 10%).
    init_sweeps : int
        Gibbs sweeps of each initialization.
    init_start : {"sequential", "random"}
        Start of each initialization's Gibbs chain: tokens drawn in order from their conditional, or
        uniform topics (May et al. 2014 and standard collapsed Gibbs).
    init_shared : bool
        One initial model for every run (May et al. 2014, Fig. 1): the best of ``init_trials``
        trials seeded from ``seed``, instead of one initialization per run.
    init_model : str or None
        Directory of a saved initial model (``OUT/init`` of a stream run with ``init_shared``, or
        :func:`~topicflow.pipeline.streaming.particles.save_initial_model`); every run starts there,
        and ``init_docs``, ``init_trials`` and ``init_shared`` are not used.
    init_trials : int
        Independent initializations per run; the best by ``init_select`` is kept (May et al. 2014).
    init_select : {"nmi", "perplexity"}
        How the best initialization is chosen.
    independent_samples : int
        ``"olda"`` and ``"incgibbs"``: independent samples per run, all from the run's initialization
        and never resampled; each evaluation reads the one of highest posterior probability
        (Canini et al. 2009 ran 100). ``"pf"`` ignores it: its samples are its particles.
    heldout_mode : {"fold_in", "next_docs"}
        How test documents are clustered: topics fixed, 5 Gibbs sweeps each (``"fold_in"``), or
        observed as the next documents of the stream by the sampler itself on a copy of its state
        that is then dropped (``"next_docs"``, Canini et al. 2009; needs the ``"history"`` source).
    """

    n_particles: int = 100
    ess_threshold: float = 0.5
    resampling: ResamplingScheme = "systematic"
    rejuvenation_steps: int = 30
    rejuvenation_source: RejuvenationSource = "reservoir"
    reservoir_size: int = 1000
    init_start: GibbsInit = "sequential"
    init_shared: bool = False
    init_model: str | None = None
    init_docs: int | float = 100
    init_sweeps: int = 100
    init_trials: int = 1
    init_select: InitSelection = "perplexity"
    independent_samples: int = 1
    heldout_mode: HeldOutMode = "fold_in"

    def __post_init__(self) -> None:
        _at_least("particle filter", "independent_samples", self.independent_samples, 1)
        if self.heldout_mode not in choices(HeldOutMode):
            raise InvalidParameterError(
                f"heldout_mode must be one of {', '.join(choices(HeldOutMode))}; got {self.heldout_mode!r}")
        if self.heldout_mode == "next_docs" and self.rejuvenation_source != "history":
            raise InvalidParameterError(
                "heldout_mode 'next_docs' reads every document's topic counts, which only the 'history' "
                f"rejuvenation source keeps; got rejuvenation_source {self.rejuvenation_source!r}")
        for name, literal in (("resampling", ResamplingScheme), ("rejuvenation_source", RejuvenationSource),
                              ("init_select", InitSelection)):
            if getattr(self, name) not in choices(literal):
                raise InvalidParameterError(
                    f"{name} must be one of {', '.join(choices(literal))}; got {getattr(self, name)!r}")
        for name in ("n_particles", "reservoir_size", "init_trials", "init_sweeps"):
            _at_least("particle filter", name, getattr(self, name), 1)
        _at_least("particle filter", "rejuvenation_steps", self.rejuvenation_steps, 0)
        if not 0.0 < self.ess_threshold <= 1.0:
            raise InvalidParameterError(
                f"ess_threshold is a share of the particles, in (0, 1]; got {self.ess_threshold!r}")
        self._check_initialization()

    def _check_initialization(self) -> None:
        docs = self.init_docs
        if isinstance(docs, bool) or not isinstance(docs, (int, float)) or docs < 0 \
                or (isinstance(docs, float) and not docs < 1.0):
            raise InvalidParameterError(
                f"init_docs is a number of documents (an integer >= 0) or a share of the stream in (0, 1); "
                f"got {docs!r}")
        if self.init_start not in choices(GibbsInit):
            raise InvalidParameterError(
                f"init_start must be one of {', '.join(choices(GibbsInit))}; got {self.init_start!r}")
        if docs == 0 and self.init_trials > 1:
            raise InvalidParameterError("init_trials > 1 compares initializations, but init_docs = 0 has none; "
                                        "give init_docs > 0 or init_trials = 1")

    def prefix_docs(self, n_stream_docs: int) -> int:
        """Documents of the initialization prefix of a stream of ``n_stream_docs`` documents.

        Parameters
        ----------
        n_stream_docs : int
            Documents the stream will read (the store, or ``max_docs``).

        Returns
        -------
        int
            ``init_docs``, or ``round(init_docs * n_stream_docs)`` for a share; at most the stream.

        Examples
        --------
        >>> ParticleSettings(init_docs=0.1).prefix_docs(31102)
        3110
        >>> ParticleSettings(init_docs=0).prefix_docs(500)
        0
        """
        if isinstance(self.init_docs, float):
            return min(round(self.init_docs * n_stream_docs), n_stream_docs)
        return min(int(self.init_docs), n_stream_docs)


@dataclass(frozen=True, slots=True)
class MinibatchSettings:
    """``"sgs"``, ``"dsgs"``: streaming Gibbs with decay and its parameter-server form (Gao et al. 2016).

    Attributes
    ----------
    batch_size : int
        Documents per minibatch.
    decay : float
        The factor lambda that scales the topic-word counts after each minibatch.
    max_iter : int
        Sweeps of a minibatch at most.
    patience : int
        A minibatch stops after this many sweeps without a better training perplexity.
    sgs_init : {"posterior-token", "posterior-document", "random"}
        Start of each minibatch's assignments (``"posterior"``, the older name, is read as
        ``"posterior-token"``; see :data:`topicflow.models.lda.streaming.sgs.SGS_INITS`).
    sgs_init_sweeps : int
        ``"posterior-document"``: sweeps over each document alone after its sequential draw.
    decay_beta : bool
        Decay the prior beta with the counts (``beta decay^t + N``, Gao et al.'s section 2.2) instead
        of the counts only (``beta + N``, their Algorithm 4; the default).
    staleness : int or None
        ``"dsgs"``: a minibatch may miss at most this many earlier ones (None: fully asynchronous).
    sync_first : int
        ``"dsgs"``: minibatches run in order before the loops go asynchronous.
    n_workers : int or None
        ``"dsgs"``: sampler loops (default: one per worker).
    """

    batch_size: int = 256
    decay: float = 1.0
    max_iter: int = 100
    patience: int = 10
    sgs_init: SGSInit = "posterior-token"
    staleness: int | None = None
    sync_first: int = 0
    n_workers: int | None = None
    sgs_init_sweeps: int = 5
    decay_beta: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sgs_init", sgs.parse_sgs_init(self.sgs_init))
        _at_least("streaming Gibbs", "batch_size", self.batch_size, 1)
        _at_least("streaming Gibbs", "sync_first", self.sync_first, 0)
        if self.staleness is not None:
            _at_least("streaming Gibbs", "staleness", self.staleness, 0)
        if self.n_workers is not None:
            _at_least("streaming Gibbs", "n_workers", self.n_workers, 1)


SamplerSettings = GibbsSettings | ParticleSettings | MinibatchSettings

#: The settings record of each algorithm.
SAMPLER_SETTINGS: dict[str, type[GibbsSettings] | type[ParticleSettings] | type[MinibatchSettings]] = {
    "gibbs": GibbsSettings, "olda": ParticleSettings, "incgibbs": ParticleSettings, "pf": ParticleSettings,
    "sgs": MinibatchSettings, "dsgs": MinibatchSettings,
}
_RUN_FIELDS = tuple(f.name for f in fields(RunSettings))
_MODEL_FIELDS = ("algorithm", "n_topics", "doc_topic_prior", "topic_word_prior")
#: The flat settings of :class:`RunSettings`.
RUN_SETTING_NAMES: frozenset[str] = frozenset(_RUN_FIELDS)
#: Every flat setting :meth:`StreamConfig.create` accepts, whatever the algorithm.
SETTING_NAMES: frozenset[str] = frozenset(
    _MODEL_FIELDS + _RUN_FIELDS + tuple(f.name for kind in set(SAMPLER_SETTINGS.values()) for f in fields(kind)))


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """What a stream computes: the model, the runs, and the settings of its algorithm's sampler.

    Build one from flat keyword settings with :meth:`create` (what the command line and
    :class:`topicflow.StreamingLDA` do), or from a saved stream with :meth:`from_dict`.

    Attributes
    ----------
    algorithm : {"gibbs", "olda", "incgibbs", "pf", "sgs", "dsgs"}
        Batch collapsed Gibbs, o-LDA, incremental Gibbs, the particle filter, streaming Gibbs with
        decay, or its parameter-server form.
    n_topics : int
        Number of topics K.
    doc_topic_prior, topic_word_prior : float
        alpha and beta (symmetric).
    run : RunSettings
        Runs, evaluation points, where to stop, seed.
    sampler : GibbsSettings, ParticleSettings or MinibatchSettings
        The settings of ``algorithm`` (see :data:`SAMPLER_SETTINGS`); read them through
        :attr:`gibbs`, :attr:`particles` or :attr:`minibatch`.
    """

    algorithm: StreamAlgorithm = "pf"
    n_topics: int = 10
    doc_topic_prior: float = 0.1
    topic_word_prior: float = 0.01
    run: RunSettings = field(default_factory=RunSettings)
    sampler: SamplerSettings = field(default_factory=ParticleSettings)

    def __post_init__(self) -> None:
        if self.algorithm not in STREAM_ALGORITHMS:
            raise InvalidParameterError(
                f"algorithm must be one of {', '.join(STREAM_ALGORITHMS)}; got {self.algorithm!r}")
        _at_least("stream", "n_topics", self.n_topics, 1)
        if self.doc_topic_prior <= 0 or self.topic_word_prior <= 0:
            raise InvalidParameterError("doc_topic_prior and topic_word_prior must be positive; got "
                                        f"{self.doc_topic_prior!r} and {self.topic_word_prior!r}")
        expected = SAMPLER_SETTINGS[self.algorithm]
        if not isinstance(self.sampler, expected):
            raise InvalidParameterError(
                f"algorithm {self.algorithm!r} takes {expected.__name__}, got {type(self.sampler).__name__}")
        if self.algorithm in MINIBATCH_ALGORITHMS:
            sgs_params(self, self.run.seed)  # validates the minibatch settings with the model's own checks

    @classmethod
    def create(cls, algorithm: StreamAlgorithm = "pf", n_topics: int = 10, doc_topic_prior: float = 0.1,
               topic_word_prior: float = 0.01, **settings: Any) -> StreamConfig:
        """Build the config from flat settings (the command line's and the estimator's).

        Parameters
        ----------
        algorithm : str
            The streaming algorithm.
        n_topics : int
            Number of topics K.
        doc_topic_prior, topic_word_prior : float
            alpha and beta.
        **settings
            Fields of :class:`RunSettings` and of the algorithm's settings record. A setting of
            another algorithm's record is refused unless it has that record's default value.

        Returns
        -------
        StreamConfig

        Raises
        ------
        InvalidParameterError
            An unknown setting, a setting of another algorithm, or a bad value.
        """
        if algorithm not in SAMPLER_SETTINGS:
            raise InvalidParameterError(
                f"algorithm must be one of {', '.join(STREAM_ALGORITHMS)}; got {algorithm!r}")
        record = SAMPLER_SETTINGS[algorithm]
        own = {f.name for f in fields(record)}
        defaults = {f.name: f.default for kind in set(SAMPLER_SETTINGS.values()) for f in fields(kind)}
        unknown = sorted(set(settings) - own - set(_RUN_FIELDS) - set(defaults))
        if unknown:
            allowed = sorted(own | set(_RUN_FIELDS))
            raise InvalidParameterError(f"unknown settings {unknown} for algorithm {algorithm!r}; it takes "
                                        f"{', '.join(allowed)}")
        foreign = sorted(name for name in set(settings) - own - set(_RUN_FIELDS)
                         if settings[name] != defaults[name])
        if foreign:
            raise InvalidParameterError(
                f"{', '.join(foreign)} {'does' if len(foreign) == 1 else 'do'} not apply to algorithm {algorithm!r}, "
                f"which takes {', '.join(sorted(own))}")
        return cls(algorithm=algorithm, n_topics=n_topics, doc_topic_prior=doc_topic_prior,
                   topic_word_prior=topic_word_prior,
                   run=RunSettings(**{k: v for k, v in settings.items() if k in _RUN_FIELDS}),
                   sampler=record(**{k: v for k, v in settings.items() if k in own}))

    @staticmethod
    def setting_names(algorithm: str) -> frozenset[str]:
        """The flat settings :meth:`create` takes for ``algorithm`` (model, runs and its own record).

        Parameters
        ----------
        algorithm : str
            A streaming algorithm.

        Returns
        -------
        frozenset of str
        """
        return frozenset(_MODEL_FIELDS + _RUN_FIELDS + tuple(f.name for f in fields(SAMPLER_SETTINGS[algorithm])))

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-able settings: the model's, the run's and the algorithm's own (as saved streams hold them).

        Returns
        -------
        dict
            :meth:`from_dict` reads it back to an equal config.
        """
        return {**{name: getattr(self, name) for name in _MODEL_FIELDS}, **asdict(self.run), **asdict(self.sampler)}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> StreamConfig:
        """Read flat settings saved by :meth:`to_dict` (or by older versions, which saved every field).

        Settings of other algorithms' records, which older versions saved for every stream, are
        dropped; renamed settings are read under their new names.

        Parameters
        ----------
        payload : mapping
            Flat settings.

        Returns
        -------
        StreamConfig
        """
        renamed = {LEGACY_SETTINGS.get(k, k): v for k, v in payload.items()}
        algorithm = renamed.get("algorithm", "pf")
        own = {f.name for f in fields(SAMPLER_SETTINGS.get(algorithm, ParticleSettings))}
        keep = own | set(_RUN_FIELDS) | set(_MODEL_FIELDS)
        return cls.create(**{k: v for k, v in renamed.items() if k in keep})

    @property
    def gibbs(self) -> GibbsSettings:
        """The settings of ``"gibbs"`` (InvalidParameterError for another algorithm)."""
        return self._sampler_of(GibbsSettings)

    @property
    def particles(self) -> ParticleSettings:
        """The settings of ``"pf"``, ``"olda"`` and ``"incgibbs"`` (InvalidParameterError otherwise)."""
        return self._sampler_of(ParticleSettings)

    @property
    def minibatch(self) -> MinibatchSettings:
        """The settings of ``"sgs"`` and ``"dsgs"`` (InvalidParameterError otherwise)."""
        return self._sampler_of(MinibatchSettings)

    def _sampler_of(self, kind: type[Any]) -> Any:
        if not isinstance(self.sampler, kind):
            raise InvalidParameterError(f"algorithm {self.algorithm!r} has no {kind.__name__}")
        return self.sampler

    def run_seed(self, run: int) -> int:
        """Seed of run ``run`` (``seed + run``).

        Parameters
        ----------
        run : int
            Run number from 0.

        Returns
        -------
        int
        """
        return self.run.seed + run

    def gibbs_params(self, seed: int) -> GibbsParams:
        """The collapsed Gibbs sampler's hyperparameters (of ``"gibbs"``, and of every initialization).

        Parameters
        ----------
        seed : int
            Seed of the chain.

        Returns
        -------
        GibbsParams
        """
        return GibbsParams(n_topics=self.n_topics, doc_topic_prior=self.doc_topic_prior,
                           topic_word_prior=self.topic_word_prior, seed=seed)

    def pf_params(self, n_terms: int, seed: int) -> particle_filter.PFParams:
        """The sampler of ``algorithm``: o-LDA and incremental Gibbs are one-particle filters.

        Parameters
        ----------
        n_terms : int
            Vocabulary size of the stream.
        seed : int
            Seed of the run.

        Returns
        -------
        PFParams
        """
        settings = self.particles
        single = self.algorithm in ("olda", "incgibbs")
        independent = single and settings.independent_samples > 1  # a cloud that is never resampled
        return particle_filter.PFParams(
            n_topics=self.n_topics, n_terms=n_terms, doc_topic_prior=self.doc_topic_prior,
            topic_word_prior=self.topic_word_prior,
            n_particles=settings.independent_samples if single else settings.n_particles,
            ess_threshold=0.0 if independent else settings.ess_threshold, resampling=settings.resampling,
            rejuvenation_steps=0 if self.algorithm == "olda" else settings.rejuvenation_steps,
            rejuvenation_source=settings.rejuvenation_source, source_size=settings.reservoir_size,
            rejuvenate_after="token" if self.algorithm == "incgibbs" else "resample", seed=seed,
        )

    def fingerprint(self) -> dict[str, Any]:
        """Settings a resumed stream must share with the saved one (all but where it stops).

        Returns
        -------
        dict
            :meth:`to_dict` without ``max_docs``, ``eval_every``, ``sweeps`` and ``gibbs_threads``.
        """
        payload = self.to_dict()
        for name in ("max_docs", "eval_every", "sweeps", "gibbs_threads"):
            payload.pop(name, None)
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
    settings = config.minibatch
    return sgs.SGSParams(n_topics=config.n_topics, doc_topic_prior=config.doc_topic_prior,
                         topic_word_prior=config.topic_word_prior, decay=settings.decay, max_iter=settings.max_iter,
                         patience=settings.patience, init=settings.sgs_init, seed=seed,
                         init_sweeps=settings.sgs_init_sweeps, decay_beta=settings.decay_beta)
