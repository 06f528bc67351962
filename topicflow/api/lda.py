"""The estimator façade: ``topicflow.LDA`` in the style of scikit-learn.

``__init__`` only stores keyword parameters; ``fit`` validates them once, runs batch, online or streaming
variational Bayes on Dask (the given client, else the current one, else the threaded scheduler) and
sets the fitted attributes, whose names end in ``_``. ``partial_fit`` continues an online or streaming fit.
"""
from __future__ import annotations

import os
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from topicflow._typing import GibbsInit, LearningMethod, choices
from topicflow.api._base import (
    Boolean,
    Constraint,
    Interval,
    Options,
    Parsed,
    SequenceOf,
    TopicModelEstimator,
    split_client,
)
from topicflow.api._collapsed import (
    PAPER_STEPS,
    SCVB0_ALPHA,
    STEP_CONSTRAINT,
    parse_step,
    step_tuple,
)
from topicflow.api._evaluation import FittedModelMixin
from topicflow.api._inputs import column_terms, input_kind, store_for
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel, load_model
from topicflow.metrics.matching import MatchingScores
from topicflow.models.lda.priors import SeedTopic
from topicflow.models.lda.vb.hybrid import HYBRID_ALPHA_STATS, HYBRID_INITS
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.presets import with_preset
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb.batch import (
    BATCH_TOL,
    FitResult,
    IterationRecord,
    VBConfig,
    fit_batch_vb,
    start_doc_topic_prior,
)
from topicflow.pipeline.vb.online import (
    EXECUTORS,
    MinibatchRecord,
    OnlineConfig,
    OnlineResult,
    fit_online,
    online_info,
)
from topicflow.pipeline.vb.svb import (
    SVBConfig,
    SVBRecord,
    SVBResult,
    check_svb_settings,
    fit_svb,
    svb_info,
)

if TYPE_CHECKING:
    from topicflow.io.sources.base import FieldSpec
    from topicflow.pipeline.collapsed import CollapsedConfig


def _default_alpha_start(method: str, estep: str, n_topics: int) -> float:
    """Start of a learned alpha when ``doc_topic_prior_init`` is None: batch VB's (vb E-step) or 1 / K."""
    return start_doc_topic_prior(n_topics) if (method, estep) == ("batch", "vb") else 1.0 / n_topics


def _default_tol(method: str) -> float:
    """``tol`` when None: ``BATCH_TOL`` for batch VB, 1e-4 for svb's local iterations."""
    return BATCH_TOL if method == "batch" else 1e-4


def parse_doc_topic_prior(alpha: str | float) -> tuple[str, float | None]:
    """``"auto"``, ``"symmetric"`` or a positive number (fixed symmetric alpha), also written as a str (the CLI's)."""
    if isinstance(alpha, str) and alpha in ("auto", "symmetric"):
        return alpha, None
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"doc_topic_prior (alpha) must be 'auto', 'symmetric' or a positive number, got {alpha!r}"
        ) from None
    if not (value > 0 and np.isfinite(value)):
        raise InvalidParameterError(f"doc_topic_prior (alpha) must be positive, got {alpha!r}")
    return "fixed", value


_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_NONNEGATIVE_INT = Interval(Integral, 0, None, closed="left")
_POSITIVE = Interval(Real, 0, None, closed="neither")
_NONNEGATIVE = Interval(Real, 0, None, closed="left")


class LDA(FittedModelMixin, TopicModelEstimator):
    """Latent Dirichlet allocation by batch or online variational Bayes over an out-of-core corpus store.

    A store with several languages gives polylingual LDA (documents share theta across languages).
    Documents may also be given as a scipy.sparse (or NumPy) document-term matrix of counts, a Dask
    array of such counts, or texts in a Dask DataFrame or bag: ``fit`` writes them to a store first
    (see :mod:`topicflow.api._inputs` for where it goes). Parameters are checked at ``fit`` against
    ``_parameter_constraints``; ``get_params``/``set_params`` follow scikit-learn, so
    ``sklearn.base.clone`` and grid searches work.

    Parameters
    ----------
    n_topics : int, default 10
        Number of topics K.
    doc_topic_prior : {"auto", "symmetric"} or float, default "auto"
        Document-topic prior alpha. ``auto`` learns an asymmetric alpha by Newton-Raphson; ``symmetric`` learns one shared value;
        a number fixes a symmetric alpha.
    topic_word_prior : float, default 0.01
        Symmetric topic-word prior.
    max_iter : int, default 50
        Batch iterations at most.
    tol : float, optional
        Stop when the relative ELBO change of one iteration falls below it (batch; svb: of a
        minibatch's local iterations). Default: 1e-3 for batch (``BATCH_TOL``, tuned to stop once the
        held-out perplexity has settled; docs/variational-lda.md), 1e-4 for svb.
    max_doc_iter : int, default 100
        Per-document E-step iteration limit.
    doc_tol : float, default 1e-3
        Per-document E-step tolerance on the mean absolute change of gamma.
    seed : int, default 0
        Seed of the starting topics and of every random draw (keyed by document, not by worker).
    seed_topics : sequence of SeedTopic, optional
        Informed priors (see :func:`topicflow.models.lda.priors.informed_prior`).
    seed_strength : float, default 10.0
        Prior of a seed word (weight 1) in its topic; with ``topic_word_prior=0.01`` everywhere else
        this is Mr. LDA's informed prior (10 and 0.01).
    seed_off_topic : float, optional
        Push-out: the prior of a seed word in every topic that does not list it (topicflow used 1e-3
        before issue 18). Default None: those pairs keep ``topic_word_prior``, as in Mr. LDA.
    doc_topic_prior_init : float, optional
        Start of a learned alpha (``doc_topic_prior`` "auto" or "symmetric"); default
        ``min(1, 20 / n_topics)`` for batch VB with the ``vb`` E-step
        (:func:`~topicflow.pipeline.vb.batch.start_doc_topic_prior`), 1 / n_topics otherwise.
        Mr. LDA's experiments start at 50 / n_topics (preset ``zhai2014-mrlda``). Ignored when
        ``doc_topic_prior`` is a number (a fixed alpha).
    optimize_topic_word_prior : bool, default False
        Learn a symmetric eta by Newton-Raphson.
    split_every : int, optional
        Fan-in of the statistics tree reduction (default from ``topicflow.split-every``; batch VB
        merges 2 at a time when 8 x K x V reaches 256 MB); no effect with ``method="gibbs"``.
    warm_start : bool, default False
        After ``cold_iterations`` (10) cold iterations, start each document's E-step from its gamma of
        the previous iteration (kept on disk beside the store, or in ``topicflow.scratch-dir``). Off by
        default: measured on planted corpora it saves little time, and started too early it locks
        documents into the first random topics (alpha collapses).
    method : {"batch", "online", "svb", "scvb0", "gibbs"}, default "batch"
        ``online`` streams minibatches (Hoffman et al. 2010) with the settings below; ``max_iter``
        and ``tol`` then do not apply. ``scvb0`` is stochastic collapsed variational Bayes (Foulds et
        al. 2013; the baseline of Bleier's Fig. 1, docs/hdp.md): a fixed symmetric alpha (a number
        for ``doc_topic_prior``; the default ``"auto"`` means Bleier's alpha = 0.1), ``passes``,
        ``batch_size`` (None: word by word, every token updates the topics, as in Bleier's
        comparison), ``shuffle_window``, ``topic_word_step``, ``doc_step``, ``doc_burn_in``,
        ``seed`` and ``init_shape`` apply. ``svb`` is streaming variational Bayes (Broderick et al. 2013):
        each minibatch is fitted by batch VB (at most ``max_iter`` iterations, stopping at ``tol``)
        with the posterior so far as its prior, with no step sizes and no corpus size (``tau0``,
        ``kappa``, ``passes`` and ``total_docs`` must stay at their defaults; ``batch_size``,
        ``shuffle_window`` and ``executor`` apply). ``gibbs`` is distributed collapsed Gibbs sampling
        (see ``block_size`` below and docs/gibbs.md).
    batch_size : int or None, default 256
        Online, svb and scvb0: documents per minibatch, S (None: word by word, scvb0 only).
    tau0 : float, default 10.0
        Online: step sizes rho_t = (tau0 + t) ** -kappa.
    kappa : float, default 0.7
        Online: see ``tau0``.
    passes : int, default 1
        Online and scvb0: passes over the documents (Bleier's Fig. 1 runs SCVB0 for 30).
    shuffle_window : int, default 0
        Online and scvb0: visit documents in a random order within windows of this many (0: store order).
    total_docs : int, optional
        Online: D in the D/S scaling; default the number of documents in the store.
    eval_every : int, default 10
        Online: estimate the per-word bound every this many minibatches (0: never). scvb0 with
        ``fit(..., test=...)``: score the held-out documents every this many documents seen (0: at the end).
    estep : {"vb", "hybrid"}, default "vb"
        Dense coordinate ascent, or Gibbs sampling within VB (Mimno et al. 2012) with ``burn_in``
        discarded and ``samples`` kept sweeps per document (faster for many topics).
    burn_in : int, default 5
        Hybrid E-step: discarded sweeps per document.
    samples : int, default 5
        Hybrid E-step: kept sweeps per document.
    executor : {"auto", "servers", "threads", "tasks"}, default "auto"
        Online: where minibatch E-steps run (see :class:`OnlineConfig`); ``"threads"`` keeps them in
        this process even with a cluster. The model is the same.
    hybrid_init : {"progressive", "random"}, default "progressive"
        Hybrid E-step: start each document's chain by drawing each token given the earlier ones, or
        from uniformly random topics (Zhai 2014, section 4.2; preset ``zhai2014-hybrid``).
    hybrid_alpha_stats : {"mean", "samples"}, default "mean"
        Hybrid E-step: the alpha update's statistics from the mean counts of the kept sweeps, or
        averaged over the kept sweeps (see :class:`~topicflow.models.lda.vb.hybrid.HybridParams`).
    init_shape : float, default 100
        Shape s of the Gamma(s, 1/s) entries of the random starting lambda (100: Hoffman et al.'s
        start). A smaller s starts the topics further apart (see ``VBConfig.init_shape``).
    topic_word_step : (s, tau) or (s, tau, kappa), optional
        SCVB0: step sizes rho_t = s / (tau + t) ** kappa of the topic-word statistics; default
        Foulds et al.'s and Bleier's (10, 1000, 0.9).
    doc_step : (s, tau) or (s, tau, kappa), optional
        SCVB0: step sizes of a document's topic statistics; default (1, 10, 0.9).
    doc_burn_in : int, default 1
        SCVB0: passes over a document's words that update only its topic statistics before the pass
        that updates the topics (Foulds et al.'s one burn-in pass; 0 makes SCVB0 differ from PCSVB0
        only in the prior).
    block_size : int, optional
        ``method="gibbs"``: documents per sampling block (default: a quarter of the corpus within
        [256, 4096] documents; docs/gibbs.md). ``gibbs`` is distributed
        collapsed Gibbs sampling (AD-LDA over blocks, z on disk beside the run): ``max_iter`` sweeps,
        ``doc_topic_prior`` "auto" (an asymmetric alpha learned by Minka's fixed point from
        ``doc_topic_prior_init``, default 0.1) or a fixed number, ``topic_word_prior`` (learned with
        ``optimize_topic_word_prior``), ``burn_in`` sweeps before the first hyperparameter update,
        ``optimize_every``, ``seed`` and ``eval_every`` (sweeps between scores of ``fit(..., test=...)``)
        apply; ``split_every`` is accepted and ignored (the blocks' count deltas are added as they
        arrive, not reduced by a tree).
    optimize_every : int, default 10
        ``method="gibbs"``: sweeps between hyperparameter updates.
    threads : int, optional
        ``method="gibbs"``: blocks of one task sampled at once (default: the cores per task); the
        model does not depend on it.
    gibbs_start : {"random", "sequential", "scvb0"}, default "random"
        ``method="gibbs"``: the chain's start. "random" draws every z uniformly (Newman et al.);
        "sequential" draws every token given the tokens before it, block after block in store order
        (one sweep without parallelism). The sequential start reaches a given held-out perplexity in
        fewer sweeps on real text, but on planted corpora with disjoint topics it can lock two topics
        together (docs/gibbs.md, "Start"). "scvb0": one serial SCVB0 pass over the store, then every
        block's z drawn from its posterior (docs/gibbs.md, "The SCVB0 start").

    Attributes
    ----------
    components_ : ndarray of shape (n_topics, n_terms), or dict of them per language
        lambda.
    topic_word_ : same, rows normalized.
    doc_topic_prior_ : ndarray of shape (n_topics,)
    topic_names_ : list of str
    vocabularies_ : dict of str to Vocabulary
    trace_ : list of IterationRecord (batch), MinibatchRecord (online) or SVBRecord (svb; this run's minibatches)
        scvb0: the driver's records, dicts (documents seen, held-out perplexity, ...).
    n_iter_ : int
        Batch iterations, or minibatches processed so far (online: the step-size schedule's t; svb).
    converged_ : bool
    n_docs_seen_ : int
        Online and svb: documents processed so far, over all ``partial_fit`` calls.
    n_features_in_ : int
        Number of terms of a monolingual model (the columns ``transform`` expects of a matrix).

    Examples
    --------
    >>> model = LDA(n_topics=20).fit("corpus.zarr")          # doctest: +SKIP
    >>> model.perplexity("heldout.zarr")                      # doctest: +SKIP
    >>> X = CountVectorizer().fit_transform(texts)            # doctest: +SKIP
    >>> doc_topic = LDA(n_topics=5).fit_transform(X)          # doctest: +SKIP
    """

    trace_: list[IterationRecord] | list[MinibatchRecord] | list[SVBRecord]

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "n_topics": [_POSITIVE_INT],
        "doc_topic_prior": [Parsed(parse_doc_topic_prior, "'auto', 'symmetric' or a positive float (or a str holding one)")],
        "topic_word_prior": [_POSITIVE],
        "max_iter": [_POSITIVE_INT],
        "tol": [None, _NONNEGATIVE],
        "max_doc_iter": [_POSITIVE_INT],
        "doc_tol": [_NONNEGATIVE],
        "seed": [Interval(Integral, 0, 2**63, closed="left")],
        "seed_topics": [SequenceOf(SeedTopic)],
        "seed_strength": [_POSITIVE],
        "seed_off_topic": [None, _POSITIVE],
        "doc_topic_prior_init": [None, _POSITIVE],
        "optimize_topic_word_prior": [Boolean()],
        "split_every": [None, Interval(Integral, 2, None, closed="left")],
        "warm_start": [Boolean()],
        "method": [Options((*choices(LearningMethod), "scvb0", "gibbs"))],
        "batch_size": [None, _POSITIVE_INT],
        "tau0": [_NONNEGATIVE],
        "kappa": [Interval(Real, 0, 1, closed="both")],
        "passes": [_POSITIVE_INT],
        "shuffle_window": [_NONNEGATIVE_INT],
        "total_docs": [None, _POSITIVE_INT],
        "eval_every": [_NONNEGATIVE_INT],
        "estep": [Options(("vb", "hybrid"))],
        "burn_in": [_NONNEGATIVE_INT],
        "samples": [_POSITIVE_INT],
        "hybrid_init": [Options(HYBRID_INITS)],
        "hybrid_alpha_stats": [Options(HYBRID_ALPHA_STATS)],
        "executor": [Options(EXECUTORS)],
        "init_shape": [_POSITIVE],
        "topic_word_step": [None, STEP_CONSTRAINT],
        "doc_step": [None, STEP_CONSTRAINT],
        "doc_burn_in": [_NONNEGATIVE_INT],
        "block_size": [None, _POSITIVE_INT],
        "optimize_every": [_POSITIVE_INT],
        "threads": [None, _POSITIVE_INT],
        "gibbs_start": [Options(choices(GibbsInit))],
    }
    _fit_hint: ClassVar[str] = "call fit(X) or LDA.load(path) first"

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> LDA:
        """The estimator with a paper's published settings (see docs/reproductions.md).

        Parameters
        ----------
        name : str
            A preset of command ``fit`` (:data:`topicflow.pipeline.presets.PRESETS`).
        **overrides
            Settings that replace the preset's.

        Returns
        -------
        LDA

        Raises
        ------
        InvalidParameterError
            No such preset.
        """
        return cls(**with_preset(name, "fit", overrides))

    def __init__(
        self, n_topics: int = 10, *, doc_topic_prior: str | float = "auto", topic_word_prior: float = 0.01,
        max_iter: int = 50,
        tol: float | None = None, max_doc_iter: int = 100, doc_tol: float = 1e-3, seed: int = 0,
        seed_topics: Sequence[SeedTopic] = (), seed_strength: float = 10.0, seed_off_topic: float | None = None,
        doc_topic_prior_init: float | None = None,
        optimize_topic_word_prior: bool = False,
        split_every: int | None = None, warm_start: bool = False, method: str = "batch",
        batch_size: int | None = 256, tau0: float = 10.0, kappa: float = 0.7, passes: int = 1,
        shuffle_window: int = 0, total_docs: int | None = None, eval_every: int = 10,
        estep: str = "vb", burn_in: int = 5, samples: int = 5, executor: str = "auto",
        hybrid_init: str = "progressive", hybrid_alpha_stats: str = "mean",
        init_shape: float = 100.0, topic_word_step: Any = None, doc_step: Any = None, doc_burn_in: int = 1,
        block_size: int | None = None, optimize_every: int = 10, threads: int | None = None,
        gibbs_start: str = "random",
    ) -> None:
        self.n_topics = n_topics
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.max_iter = max_iter
        self.tol = tol
        self.max_doc_iter = max_doc_iter
        self.doc_tol = doc_tol
        self.seed = seed
        self.seed_topics = seed_topics
        self.seed_strength = seed_strength
        self.seed_off_topic = seed_off_topic
        self.doc_topic_prior_init = doc_topic_prior_init
        self.optimize_topic_word_prior = optimize_topic_word_prior
        self.split_every = split_every
        self.warm_start = warm_start
        self.method = method
        self.batch_size = batch_size
        self.tau0 = tau0
        self.kappa = kappa
        self.passes = passes
        self.shuffle_window = shuffle_window
        self.total_docs = total_docs
        self.eval_every = eval_every
        self.estep = estep
        self.burn_in = burn_in
        self.samples = samples
        self.hybrid_init = hybrid_init
        self.hybrid_alpha_stats = hybrid_alpha_stats
        self.executor = executor
        self.init_shape = init_shape
        self.topic_word_step = topic_word_step
        self.doc_step = doc_step
        self.doc_burn_in = doc_burn_in
        self.block_size = block_size
        self.optimize_every = optimize_every
        self.threads = threads
        self.gibbs_start = gibbs_start

    def _config(self) -> VBConfig:
        mode, value = parse_doc_topic_prior(self.doc_topic_prior)
        if mode != "fixed" and self.doc_topic_prior_init is not None:
            value = float(self.doc_topic_prior_init)
        elif mode != "fixed":
            value = _default_alpha_start(self.method, self.estep, int(self.n_topics))
        tol = _default_tol(self.method) if self.tol is None else self.tol
        return VBConfig(
            n_topics=int(self.n_topics), doc_topic_prior_mode=mode, doc_topic_prior=value, topic_word_prior=float(self.topic_word_prior),  # type: ignore[arg-type]
            optimize_topic_word_prior=bool(self.optimize_topic_word_prior), max_iter=int(self.max_iter), tol=float(tol),
            max_doc_iter=int(self.max_doc_iter), doc_tol=float(self.doc_tol), seed=int(self.seed),
            seed_topics=tuple(self.seed_topics), seed_strength=float(self.seed_strength),
            seed_off_topic=None if self.seed_off_topic is None else float(self.seed_off_topic),
            warm_start=bool(self.warm_start), estep=self.estep, burn_in=int(self.burn_in),  # type: ignore[arg-type]
            samples=int(self.samples), init_shape=float(self.init_shape),
            hybrid_init=self.hybrid_init, hybrid_alpha_stats=self.hybrid_alpha_stats,  # type: ignore[arg-type]
        )

    #: Online-only settings and their defaults: with method "svb" they must keep these values.
    _ONLINE_ONLY: ClassVar[dict[str, Any]] = {"tau0": 10.0, "kappa": 0.7, "passes": 1, "total_docs": None}

    def _require_batch_size(self) -> int:
        if self.batch_size is None:
            raise InvalidParameterError(
                f"batch_size=None (word by word) is a setting of method='scvb0'; method={self.method!r} needs a "
                "number of documents per minibatch")
        return int(self.batch_size)

    def _scvb0_config(self) -> CollapsedConfig:
        """The settings of SCVB0 (``method="scvb0"``) for :func:`~topicflow.pipeline.collapsed.fit_collapsed`."""
        from dataclasses import replace

        from topicflow.models.hdp.params import HDPParams
        from topicflow.pipeline.collapsed import CollapsedConfig

        mode, value = parse_doc_topic_prior(self.doc_topic_prior)
        if mode == "symmetric" or (mode == "auto" and self.doc_topic_prior != "auto"):
            raise InvalidParameterError(
                f"doc_topic_prior={self.doc_topic_prior!r} with method='scvb0': SCVB0 keeps a fixed symmetric alpha; "
                f"give a number (the default 'auto' means Bleier's alpha = {SCVB0_ALPHA})")
        unused = {"optimize_topic_word_prior": False, "seed_topics": (), "warm_start": False, "estep": "vb",
                  "tau0": 10.0, "kappa": 0.7, "total_docs": None}
        given = [f"{name}={getattr(self, name)!r}" for name, default in unused.items()
                 if getattr(self, name) not in (default, list(default) if isinstance(default, tuple) else default)]
        if given:
            raise InvalidParameterError(
                f"{', '.join(given)} given with method='scvb0', which does not use them (SCVB0 has a fixed alpha, a "
                "fixed beta, its own step sizes topic_word_step and doc_step, and no seed words); leave them at "
                "their defaults")
        alpha = SCVB0_ALPHA if value is None else float(value)
        params = HDPParams(
            truncation=max(int(self.n_topics), 2), topic_word_prior=float(self.topic_word_prior), alpha_init=alpha,
            learn_alpha=False, learn_gamma=False,
            topic_word_step=parse_step(self.topic_word_step or PAPER_STEPS["topic_word_step"]),
            doc_step=parse_step(self.doc_step or PAPER_STEPS["doc_step"]), burn_in=int(self.doc_burn_in),
            seed=int(self.seed), init_shape=float(self.init_shape))
        if int(self.n_topics) < 2:
            raise InvalidParameterError(f"method='scvb0' needs n_topics >= 2, got {self.n_topics!r}")
        return replace(CollapsedConfig(method="scvb0", params=params), passes=int(self.passes),
                       batch_size=None if self.batch_size is None else int(self.batch_size),
                       shuffle_window=int(self.shuffle_window), eval_every=int(self.eval_every))

    def _svb_config(self) -> SVBConfig:
        changed = [name for name, default in self._ONLINE_ONLY.items() if getattr(self, name) != default]
        if changed:
            raise InvalidParameterError(
                f"{', '.join(f'{name}={getattr(self, name)!r}' for name in changed)} given with method='svb': "
                "streaming VB has no step sizes (tau0, kappa), sees each document once (passes) and needs no corpus "
                "size (total_docs); leave them at their defaults, or use method='online'")
        check_svb_settings(self._config())
        return SVBConfig(batch_size=self._require_batch_size(), shuffle_window=int(self.shuffle_window),
                         executor=self.executor)

    def _online_config(self) -> OnlineConfig:
        return OnlineConfig(
            batch_size=self._require_batch_size(), tau0=float(self.tau0), kappa=float(self.kappa), passes=int(self.passes),
            shuffle_window=int(self.shuffle_window), total_docs=self.total_docs, eval_every=int(self.eval_every),
            executor=self.executor,
        )

    # ------------------------------------------------------------------ fitting

    def fit(self, corpus: Any, y: Any = None, *, client: Any = None, progress: ProgressReporter = NO_PROGRESS,
            checkpoint: CheckpointPolicy | None = None, vocabulary: Sequence[str] | None = None,
            fields: FieldSpec | None = None, store_path: str | os.PathLike[str] | None = None, test: Any = None) -> LDA:
        """Fit from scratch on a corpus store, a document-term matrix, a Dask array or Dask texts.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Corpus store (path or opened :class:`Corpus`); a document-term matrix of counts
            (scipy.sparse in any format, NumPy, pydata/sparse; documents in rows); a Dask array of
            counts with such chunks; or texts (a Dask DataFrame or Series with a text column, a Dask
            bag of strings or dicts). Anything but a store is written to a store first.
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        progress : ProgressReporter, optional
            Receives per-iteration (batch) or per-minibatch (online) progress.
        checkpoint : CheckpointPolicy, optional
            Writes the driver state periodically and, with ``resume``, continues an interrupted
            fit (see :class:`topicflow.pipeline.policies.CheckpointPolicy`); give a store, or
            ``store_path``, to resume from an array input.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column; default ``t0, t1, ...``.
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys; default ``text`` (and ``id`` where present).
        store_path : str or os.PathLike, optional
            Where to write (and keep) the store of a non-store input; by default a temporary
            directory under ``topicflow.scratch-dir``, removed when ``fit`` returns.
        test : same kinds as ``corpus``, optional
            ``method="scvb0"`` only: held-out documents scored along the fit (Bleier's protocol: 70% of
            each document's tokens fold in, 30% are scored), for the trace.

        Returns
        -------
        LDA
            ``self``, fitted.

        Raises
        ------
        InvalidParameterError
            A parameter outside its allowed values (the message lists them).
        InputError
            Counts that are negative, fractional or not numbers (the message names row and column).
        """
        self._validate_params()
        client = split_client(y, client)
        if self.method == "scvb0":
            return self._fit_scvb0(corpus, client=client, progress=progress, checkpoint=checkpoint,
                                   vocabulary=vocabulary, fields=fields, store_path=store_path, test=test)
        if self.method == "gibbs":
            return self._fit_gibbs(corpus, client=client, progress=progress, checkpoint=checkpoint,
                                   vocabulary=vocabulary, fields=fields, store_path=store_path, test=test)
        if test is not None:
            raise InvalidParameterError(f"test= is scored along a method='scvb0' fit; method={self.method!r} does not "
                                        "take it (score the fitted model with heldout_likelihood)")
        config = self._config()
        with store_for(corpus, vocabulary=vocabulary, fields=fields, store_path=store_path, client=client) as corpus:
            if self.method == "svb":
                svb = self._svb_config()
                streamed = fit_svb(corpus, config, svb, client=client, split_every=self.split_every,
                                   progress=progress, checkpoint=checkpoint)
                self._set_fitted_svb(streamed, corpus, config, svb, shards=None)
                return self
            if self.method == "online":
                online = self._online_config()
                result = fit_online(corpus, config, online, client=client, split_every=self.split_every,
                                    progress=progress, checkpoint=checkpoint)
                self._set_fitted_online(result, corpus, config, online, shards=None)
                return self
            batch = fit_batch_vb(corpus, config, client=client, split_every=self.split_every, progress=progress,
                                 checkpoint=checkpoint)
            self._set_fitted(batch, corpus, config)
        return self

    def _fit_scvb0(self, corpus: Any, *, client: Any, progress: ProgressReporter, checkpoint: CheckpointPolicy | None,
                   vocabulary: Sequence[str] | None, fields: FieldSpec | None,
                   store_path: str | os.PathLike[str] | None, test: Any) -> LDA:
        """fit with ``method="scvb0"``: :func:`~topicflow.pipeline.collapsed.fit_collapsed` on the store."""
        import contextlib

        from topicflow.pipeline.collapsed import fit_collapsed

        config = self._scvb0_config()
        options: dict[str, Any] = {"vocabulary": vocabulary, "fields": fields}
        with contextlib.ExitStack() as stack:
            store = stack.enter_context(store_for(corpus, store_path=store_path, client=client, **options))
            held_out = None if test is None else stack.enter_context(store_for(test, client=client, **options))
            result = fit_collapsed(store, config, client=client, progress=progress, checkpoint=checkpoint,
                                   resume=bool(checkpoint is not None and checkpoint.resume), test=held_out,
                                   split_every=self.split_every)
        self.model_ = result.saved_model
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)  # type: ignore[assignment]  # scvb0: the driver's dict records
        return self

    def _gibbs_config(self) -> Any:
        """The settings of ``method="gibbs"`` for :func:`~topicflow.pipeline.gibbs.fit_gibbs`."""
        from topicflow.pipeline.gibbs import GibbsConfig

        mode, value = parse_doc_topic_prior(self.doc_topic_prior)
        if mode == "symmetric":
            raise InvalidParameterError("doc_topic_prior='symmetric' with method='gibbs': the sampler learns an "
                                        "asymmetric alpha ('auto') or keeps a fixed one (a number)")
        if self.seed_topics:
            raise InvalidParameterError("seed_topics with method='gibbs': informed priors are fitted by batch or "
                                        "online VB; drop seed_topics or use method='batch'")
        start = value if mode == "fixed" else (self.doc_topic_prior_init or 0.1)
        return GibbsConfig(
            n_topics=int(self.n_topics), sweeps=int(self.max_iter), doc_topic_prior=float(start),  # type: ignore[arg-type]
            learn_alpha=mode == "auto", topic_word_prior=float(self.topic_word_prior),
            learn_beta=bool(self.optimize_topic_word_prior), burn_in=int(self.burn_in),
            optimize_every=int(self.optimize_every), block_size=self.block_size, seed=int(self.seed),
            eval_every=int(self.eval_every), threads=self.threads, init=str(self.gibbs_start),
        )

    def _fit_gibbs(self, corpus: Any, *, client: Any, progress: ProgressReporter, checkpoint: CheckpointPolicy | None,
                   vocabulary: Sequence[str] | None, fields: FieldSpec | None,
                   store_path: str | os.PathLike[str] | None, test: Any) -> LDA:
        """fit with ``method="gibbs"``: :func:`~topicflow.pipeline.gibbs.fit_gibbs` on the store."""
        import contextlib

        from topicflow.pipeline.gibbs import fit_gibbs

        config = self._gibbs_config()
        options: dict[str, Any] = {"vocabulary": vocabulary, "fields": fields}
        with contextlib.ExitStack() as stack:
            store = stack.enter_context(store_for(corpus, store_path=store_path, client=client, **options))
            held_out = None if test is None else stack.enter_context(store_for(test, client=client, **options))
            result = fit_gibbs(store, config, client=client, progress=progress, checkpoint=checkpoint, test=held_out,
                               split_every=self.split_every)
        self.model_ = result.saved_model
        self._set_attributes_from_model()
        self.trace_ = [r.to_dict() for r in result.trace]  # type: ignore[assignment]  # gibbs: dict records
        return self

    def partial_fit(self, corpus: Any, y: Any = None, *, client: Any = None, shards: Sequence[int] | None = None,
                    progress: ProgressReporter = NO_PROGRESS, vocabulary: Sequence[str] | None = None,
                    fields: FieldSpec | None = None, store_path: str | os.PathLike[str] | None = None) -> LDA:
        """Run one online pass over ``corpus`` (or its ``shards``), continuing the model and its step sizes.

        The first call starts a model (any ``method``); later calls continue it. The corpus's
        vocabulary must extend the model's (same terms first, as a store whose vocabulary grew by
        ``topicflow append --promote-min-df``); new terms join with topic columns from the prior.
        A store's shards already processed are skipped; every document of any other input is new.
        A streaming-VB model (``method="svb"``) continues by streaming VB instead: the new documents'
        statistics are added to its posterior, minibatch by minibatch.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit`. A matrix's columns are the model's terms, in order, and
            columns past them new terms (unless ``vocabulary`` names them).
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        shards : sequence of int, optional
            Positions of the store's shards to process, in order; by default the unseen ones.
        progress : ProgressReporter, optional
            Receives per-minibatch progress.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column.
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.
        store_path : str or os.PathLike, optional
            Where to write (and keep) the store of a non-store input (see :meth:`fit`).

        Returns
        -------
        LDA
            ``self``, updated.
        """
        self._validate_params()
        if self.method == "scvb0" or (getattr(self, "model_", None) is not None and self.model_.info.method == "scvb0"):
            raise InvalidParameterError("partial_fit continues an online or streaming VB model; an SCVB0 model "
                                        "(method='scvb0') is not continued: call fit on the grown corpus")
        if self.method == "gibbs" or (getattr(self, "model_", None) is not None and self.model_.info.method == "gibbs"):
            raise InvalidParameterError("partial_fit continues an online or streaming VB model; a collapsed Gibbs "
                                        "model (method='gibbs') is not continued: call fit on the grown corpus")
        client = split_client(y, client)
        kind = input_kind(corpus)
        model = getattr(self, "model_", None)
        vocabulary = column_terms(corpus, kind, vocabulary, self._model_terms(), owner="LDA", grow=True)
        config = self._config()
        if (model.info.method if model is not None else self.method) == "svb":
            return self._partial_fit_svb(corpus, model, config, kind=kind, client=client, shards=shards,
                                         progress=progress, vocabulary=vocabulary, fields=fields,
                                         store_path=store_path)
        online = self._online_config()
        with store_for(corpus, vocabulary=vocabulary, fields=fields, store_path=store_path, client=client) as corpus:
            if kind != "store" and shards is None:
                shards = range(corpus.n_shards)  # a new input: all of it, even if its shard ids were seen
            if model is None:
                result = fit_online(corpus, config, online, client=client, split_every=self.split_every,
                                    progress=progress, shards=shards)
                self._set_fitted_online(result, corpus, config, online, shards=shards)
                return self
            from topicflow.pipeline.vb.nightly import continue_online

            self.model_, result, _ = continue_online(model, corpus, config, online, client=client, shards=shards,
                                                  split_every=self.split_every, progress=progress)
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)
        return self

    def _partial_fit_svb(self, corpus: Any, model: SavedModel | None, config: VBConfig, *, kind: str, client: Any,
                         shards: Sequence[int] | None, progress: ProgressReporter, vocabulary: Sequence[str] | None,
                         fields: FieldSpec | None, store_path: str | os.PathLike[str] | None) -> LDA:
        """partial_fit of a streaming-VB model: the new documents' statistics join the posterior."""
        svb = self._svb_config()
        with store_for(corpus, vocabulary=vocabulary, fields=fields, store_path=store_path, client=client) as store:
            if kind != "store" and shards is None:
                shards = range(store.n_shards)
            if model is None:
                result = fit_svb(store, config, svb, client=client, split_every=self.split_every, progress=progress,
                                 shards=shards)
                self._set_fitted_svb(result, store, config, svb, shards=shards)
                return self
            from topicflow.pipeline.vb.nightly import continue_svb

            self.model_, result, _ = continue_svb(model, store, config, svb, client=client, shards=shards,
                                                  split_every=self.split_every, progress=progress)
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)
        return self

    def _set_fitted_svb(self, result: SVBResult, corpus: Corpus, config: VBConfig, svb: SVBConfig,
                        shards: Sequence[int] | None) -> None:
        self.model_ = SavedModel(
            state=result.state,
            vocabularies={lang: corpus.vocabulary(lang) for lang in result.state.languages},
            info=svb_info(corpus, config, svb, result, seen=(), shards=shards),
        )
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)

    def _set_fitted(self, result: FitResult, corpus: Corpus, config: VBConfig) -> None:
        state = result.state
        self.model_ = SavedModel(
            state=state,
            vocabularies={lang: corpus.vocabulary(lang) for lang in state.languages},
            info=ModelInfo(
                kind="vb_lda",
                method="batch",
                settings=config.to_dict(),
                trace=[r.to_dict() for r in result.trace],
                converged=result.converged,
                unknown_seed_words=result.unknown_seed_words,
                corpus=corpus_provenance(corpus, range(corpus.n_shards)),
            ),
        )
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)

    def _set_fitted_online(self, result: OnlineResult, corpus: Corpus, config: VBConfig, online: OnlineConfig,
                           shards: Sequence[int] | None) -> None:
        self.model_ = SavedModel(
            state=result.state,
            vocabularies={lang: corpus.vocabulary(lang) for lang in result.state.languages},
            info=online_info(corpus, config, online, result, seen=(), shards=shards),
        )
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)

    def _set_attributes_from_model(self) -> None:
        state = self.model_.state
        langs = state.languages
        single = len(langs) == 1
        topic_word = state.topic_word()
        self.components_ = state.topic_word_var[langs[0]] if single else dict(state.topic_word_var)
        self.topic_word_ = topic_word[langs[0]] if single else topic_word
        self.doc_topic_prior_ = np.asarray(state.doc_topic_prior)
        self.topic_names_ = [state.topic_label(k) for k in range(state.n_topics)]
        self.vocabularies_ = dict(self.model_.vocabularies)
        self.languages_ = list(langs)
        info = self.model_.info
        online = info.online
        self.n_iter_ = int(online["t"]) if online else len(info.trace)
        self.n_docs_seen_ = int(online["docs_seen"]) if online else int(info.corpus.get("n_docs", 0))
        self.converged_ = bool(info.converged)
        if single:
            self.n_features_in_ = len(self.vocabularies_[langs[0]])

    # ------------------------------------------------------------------ using the model

    def top_terms(self, n: int = 10, language: str | None = None) -> list[list[tuple[str, float]]]:
        """Return the ``n`` most probable terms of every topic, with their probabilities.

        Parameters
        ----------
        n : int, default 10
            Terms per topic.
        language : str, optional
            Language of a polylingual model; by default its first.

        Returns
        -------
        list of list of (str, float)
            Per topic, (term, probability) pairs in decreasing probability.
        """
        model = self._check_fitted()
        lang = language or model.state.languages[0]
        topic_word = model.state.topic_word()[lang]
        vocab = model.vocabularies[lang]
        order = np.argsort(-topic_word, axis=1, kind="stable")[:, :n]
        return [[(vocab.term_of(int(w)), float(topic_word[k, w])) for w in order[k]] for k in range(len(order))]

    def match_documents(self, corpus: Any, *, query_language: str, candidate_language: str,
                        divergence: str = "jensen-shannon", client: Any = None) -> MatchingScores:
        """Find each aligned document's other-language side by topic divergence (Mimno et al. 2009).

        Theta is folded in from each language's side alone; every query ranks every candidate by
        the divergence of their topic vectors (:mod:`topicflow.metrics.matching`).

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            An aligned store with both languages (usually documents held out from training).
        query_language, candidate_language : str
            The languages of the queries and of the candidates.
        divergence : {"jensen-shannon", "hellinger"}, default "jensen-shannon"
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.

        Returns
        -------
        MatchingScores
            ``precision_at_1``, ``mean_reciprocal_rank`` and every pair's rank.
        """
        # Imported here, not at import: a fit never needs the evaluation package.
        from topicflow.pipeline.evaluation.matching import document_matching

        return document_matching(self._check_fitted(), as_corpus(corpus), query_language=query_language,
                                 candidate_language=candidate_language, divergence=divergence,  # type: ignore[arg-type]
                                 client=client)

    # ------------------------------------------------------------------ persistence

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LDA:
        """Load a model saved by :meth:`save` or ``topicflow fit``, with its settings.

        Parameters
        ----------
        path : str or os.PathLike
            Model directory.

        Returns
        -------
        LDA
            A fitted estimator; ``partial_fit`` continues an online model's schedule.
        """
        model = load_model(path)
        if model.info.family != "lda":
            raise InvalidParameterError(f"{str(path)!r} is a model of the {model.info.family!r} family; load it with "
                                        f"topicflow.{model.info.family.upper()}.load")
        if model.info.method == "scvb0":
            return cls._load_scvb0(model)
        if model.info.method == "gibbs":
            return cls._load_gibbs(model)
        config = VBConfig.from_dict(model.info.settings or {"n_topics": model.state.n_topics})
        method = model.info.method or "batch"
        online = OnlineConfig.from_dict(model.info.online["config"]) if model.info.online else OnlineConfig()
        estimator = cls(
            n_topics=config.n_topics,
            doc_topic_prior=config.doc_topic_prior_mode if config.doc_topic_prior_mode != "fixed" else config.initial_alpha,
            topic_word_prior=config.topic_word_prior, max_iter=config.max_iter,
            tol=None if config.tol == _default_tol(method) else config.tol,
            max_doc_iter=config.max_doc_iter,
            doc_tol=config.doc_tol, seed=config.seed, seed_topics=config.seed_topics,
            seed_strength=config.seed_strength, seed_off_topic=config.seed_off_topic,
            doc_topic_prior_init=(config.doc_topic_prior if config.doc_topic_prior_mode != "fixed" and config.initial_alpha
                                  != _default_alpha_start(method, config.estep, config.n_topics) else None),
            optimize_topic_word_prior=config.optimize_topic_word_prior, warm_start=config.warm_start,
            method=method, batch_size=online.batch_size, tau0=online.tau0,
            kappa=online.kappa, passes=online.passes, shuffle_window=online.shuffle_window,
            total_docs=online.total_docs, eval_every=online.eval_every, estep=config.estep,
            burn_in=config.burn_in, samples=config.samples, init_shape=config.init_shape,
            hybrid_init=config.hybrid_init, hybrid_alpha_stats=config.hybrid_alpha_stats,
        )
        estimator.model_ = model
        estimator._set_attributes_from_model()
        trace = model.info.trace
        if model.info.method == "svb":
            estimator.trace_ = [SVBRecord(**r) for r in trace]
        elif model.info.online is not None:
            estimator.trace_ = [MinibatchRecord(**r) for r in trace]
        else:
            estimator.trace_ = [IterationRecord(**r) for r in trace]
        return estimator


    @classmethod
    def _load_gibbs(cls, model: SavedModel) -> LDA:
        """An estimator holding a saved Gibbs model, its ``GibbsConfig`` as parameters."""
        from topicflow.pipeline.gibbs import GibbsConfig

        config = GibbsConfig.from_dict(model.info.settings or {"n_topics": model.state.n_topics})
        estimator = cls(
            n_topics=config.n_topics, doc_topic_prior="auto" if config.learn_alpha else config.doc_topic_prior,
            doc_topic_prior_init=config.doc_topic_prior if config.learn_alpha else None,
            topic_word_prior=config.topic_word_prior, optimize_topic_word_prior=config.learn_beta,
            max_iter=config.sweeps, burn_in=config.burn_in, optimize_every=config.optimize_every,
            block_size=config.block_size, seed=config.seed, eval_every=config.eval_every, threads=config.threads,
            gibbs_start=config.init, method="gibbs",
        )
        estimator.model_ = model
        estimator._set_attributes_from_model()
        estimator.trace_ = list(model.info.trace)  # type: ignore[assignment]  # gibbs: dict records
        return estimator

    @classmethod
    def _load_scvb0(cls, model: SavedModel) -> LDA:
        """An estimator holding a saved SCVB0 model, its settings (a ``CollapsedConfig``'s) as parameters."""
        from topicflow.pipeline.collapsed import saved_config

        config = saved_config(model)
        params = config.params
        estimator = cls(
            n_topics=model.state.n_topics, doc_topic_prior=params.alpha_init, topic_word_prior=params.topic_word_prior,
            seed=params.seed, method="scvb0", batch_size=config.batch_size, passes=config.passes,
            shuffle_window=config.shuffle_window, eval_every=config.eval_every,
            init_shape=params.init_shape, topic_word_step=step_tuple(params.topic_word_step),
            doc_step=step_tuple(params.doc_step), doc_burn_in=params.burn_in,
        )
        estimator.model_ = model
        estimator._set_attributes_from_model()
        estimator.trace_ = list(model.info.trace)  # type: ignore[assignment]  # scvb0: the driver's dict records
        return estimator


