"""``topicflow.HDP``: the hierarchical Dirichlet process topic model in the style of scikit-learn.

``__init__`` only stores keyword parameters; ``fit`` validates them once and runs Bleier's PCSVB0
(word by word, clumped or in minibatches) or Sato et al.'s batch PCVB0 through
:func:`topicflow.pipeline.collapsed.fit_collapsed`, then sets the fitted attributes, whose names end in
``_``. The fitted model reads as an LDA model with T topics (lambda = n_kw + beta, prior alpha * pi),
so ``transform``, the held-out protocols and every command that reads a model work on it; the topics
*in use* (those holding at least ``topics_in_use_share`` of the expected tokens) are reported apart
from the truncation T, which is not a number of topics. See docs/hdp.md.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Sequence

import numpy as np

from topicflow._typing import FloatArray, HDPMethod, IntArray, choices
from topicflow.api._base import (
    Boolean,
    Constraint,
    Interval,
    Options,
    TopicModelEstimator,
    split_client,
)
from topicflow.api._collapsed import (
    PAPER_STEP_POWER,
    PAPER_STEPS,
    STEP_CONSTRAINT,
    parse_step,
    step_tuple,
)
from topicflow.api._evaluation import FittedModelMixin
from topicflow.api._inputs import store_for
from topicflow.errors import InvalidParameterError
from topicflow.io.models.store import SavedModel, load_model
from topicflow.io.sources.base import FieldSpec
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import TOPIC_IN_USE_SHARE
from topicflow.pipeline.collapsed import (
    CollapsedConfig,
    is_collapsed_model,
    saved_config,
    saved_state,
)
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_NONNEGATIVE_INT = Interval(Integral, 0, None, closed="left")
_POSITIVE = Interval(Real, 0, None, closed="neither")

# ----------------------------------------------------------------------------- read-outs of a saved model


@dataclass(frozen=True)
class HDPTopics:
    """What a saved HDP model says about its topics (every array indexed by physical topic).

    Attributes
    ----------
    truncation : int
        T: the number of sticks (never the number of topics).
    alpha : float
        Document concentration.
    gamma : float or None
        Top-level concentration (None when the model file does not record it).
    stick_weights : ndarray of shape (T,)
        pi (Bleier eq. 3); sums to 1.
    shares : ndarray of shape (T,)
        Share of the expected training tokens, ``n_k. / sum n_k.``.
    in_use : ndarray of int
        The topics holding at least ``min_share`` of the tokens, by decreasing stick weight.
    min_share : float
        The threshold of "in use".
    """

    truncation: int
    alpha: float
    gamma: float | None
    stick_weights: FloatArray
    shares: FloatArray
    in_use: IntArray
    min_share: float

    @property
    def n_in_use(self) -> int:
        """Number of topics in use."""
        return len(self.in_use)

    def headline(self) -> str:
        """``"N topics in use (share >= 0.001) of truncation T"``."""
        return f"{self.n_in_use} topics in use (share >= {self.min_share:g}) of truncation {self.truncation}"


def is_hdp(model: SavedModel) -> bool:
    """Whether a saved model is of the HDP family.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    bool
    """
    return model.info.family == "hdp"


def hdp_topics(model: SavedModel, min_share: float | None = None) -> HDPTopics:
    """Read the stick weights, token shares and topics in use of a saved HDP model.

    A model saved by the collapsed drivers is read from its exact state
    (:func:`~topicflow.pipeline.collapsed.saved_state`); any other model from its LDA view: the prior
    ``alpha * pi`` (alpha is its sum, since pi sums to 1) and ``lambda = n_kw + beta`` (n_k. is a row
    sum of lambda minus beta).

    Parameters
    ----------
    model : SavedModel
        A model of the HDP family (an LDA model is read the same way, its prior then not being
        alpha * pi).
    min_share : float, optional
        Threshold of "in use"; default the model's own (``topics_in_use_share`` of its settings), else 1e-3.

    Returns
    -------
    HDPTopics
    """
    if is_collapsed_model(model):
        hdp_state = saved_state(model)
        if min_share is None:
            min_share = float(saved_config(model).topics_in_use_share)
        weights = hdp_state.stick_weights() if is_hdp(model) else np.full(hdp_state.truncation, 1.0 / hdp_state.truncation)
        shares = hdp_state.topic_shares()
        used = np.flatnonzero(shares >= min_share)
        used = used[np.argsort(-weights[used], kind="stable")]
        return HDPTopics(truncation=hdp_state.truncation, alpha=float(hdp_state.alpha),
                         gamma=float(hdp_state.gamma) if is_hdp(model) else None, stick_weights=weights,
                         shares=shares, in_use=used.astype(np.int64), min_share=float(min_share))
    state = model.state
    if min_share is None:
        min_share = float(model.info.settings.get("topics_in_use_share", TOPIC_IN_USE_SHARE))
    prior = np.asarray(state.doc_topic_prior, dtype=np.float64)
    alpha = float(prior.sum())
    weights = prior / alpha if alpha > 0 else prior
    lang = state.languages[0]
    lam = np.asarray(state.topic_word_var[lang], dtype=np.float64)
    beta = state.topic_word_prior[lang]
    counts = np.maximum((lam - beta).sum(axis=1), 0.0)
    total = float(counts.sum())
    shares = counts / total if total > 0 else counts
    used = np.flatnonzero(shares >= min_share)
    used = used[np.argsort(-weights[used], kind="stable")]
    return HDPTopics(truncation=int(state.n_topics), alpha=alpha, gamma=_recorded_gamma(model),
                     stick_weights=weights, shares=shares, in_use=used.astype(np.int64), min_share=float(min_share))


def _recorded_gamma(model: SavedModel) -> float | None:
    """gamma as the model file records it, or None."""
    scalars = getattr(model.info, "collapsed_state", None) or {}
    return float(scalars["gamma"]) if "gamma" in scalars else None


# ----------------------------------------------------------------------------- the estimator


class HDP(FittedModelMixin, TopicModelEstimator):
    """The hierarchical Dirichlet process topic model (HDP-LDA) by collapsed variational Bayes.

    Bleier's PCSVB0 (practical collapsed stochastic VB: word by word, eqs. 7-12 and Algorithm 1) or
    Sato, Kurihara & Nakagawa's batch PCVB0 (eqs. 2-6), over an out-of-core corpus store on Dask.
    The truncation T is the number of sticks, not the number of topics: the fitted model reports the
    topics in use (``n_topics_in_use_``, ``topics_in_use_``). Defaults are the paper's settings
    (Bleier sec. 4); docs/hdp.md lists every setting and every deviation from the paper.

    Parameters
    ----------
    truncation : int, default 200
        T (Bleier sec. 4: 200).
    method : {"pcsvb0", "pcvb0"}, default "pcsvb0"
        Stochastic (streaming) PCSVB0, or batch PCVB0 (one q per token kept out of core).
    batch_size : int, optional
        PCSVB0: documents per minibatch, computed in parallel with one global update per minibatch.
        Default None: Algorithm 1 word by word, run serially (the reference). Not for pcvb0.
    clumping : bool, default False
        One update per distinct term of a document, scaled by its count (Bleier sec. 5): PCSVB0
        applies it as ``count`` word-by-word updates with q held fixed; PCVB0 keeps one q per
        distinct term of a document instead of one per token.
    passes : int, default 30
        Passes over the corpus (Bleier's Fig. 1: 30 iterations).
    topic_word_prior : float, default 0.01
        The symmetric topic-word prior beta.
    alpha : float, default 1.0
        Starting document concentration (the paper gives none).
    gamma : float, default 1.0
        Starting top-level concentration (the paper gives none).
    learn_alpha, learn_gamma : bool, default True
        Point-estimate updates (eqs. 5/12 and 6); False keeps the starting value.
    alpha_floor : float, default 1e-3
        Lower bound of alpha after each update (eq. 12 is unstable on very short documents).
    topic_word_step : (s, tau), default (10, 1000)
        Step sizes rho^c of n_kw (eq. 9).
    doc_step : (s, tau), default (1, 10)
        Step sizes rho^d of n_dk (eq. 8).
    hyper_step : (s, tau), default (5, 100)
        Step sizes rho^h of the sticks and hyperparameters (eqs. 10-12).
    step_power : float, default 0.9
        The power kappa of all three schedules ``rho_t = s / (tau + t) ** kappa`` (a schedule given as
        ``(s, tau, kappa)`` keeps its own).
    burn_in : int, default 0
        PCSVB0: passes over a document's words that update only n_dk before the pass that updates the
        global statistics (Algorithm 1 has none; Foulds et al. used one).
    doc_start : {"random", "zero"}, default "random"
        n_dk of a document when it is first seen.
    keep_doc_state : bool, default False
        PCSVB0 word by word: keep each document's n_dk between passes (Algorithm 1 initializes it
        once; in the actor's memory); False starts it afresh each visit, as a stream must.
    shuffle_window : int, default 0
        Visit documents in a random order within windows of this many (0: store order).
    eval_every : int, default 0
        With ``fit(..., test=...)``: score the held-out documents every this many documents (0: at the end).
    topics_in_use_share : float, default 1e-3
        A topic is "in use" when it holds at least this share of the expected tokens.
    init_shape : float, default 100
        The start of n_kw is Gamma(s, 1/s) noise rescaled to the number of training tokens.
    seed : int, default 0
        Seed of the starting topics and of every document's start (keyed by document, not by worker).
    split_every : int, optional
        Fan-in of the statistics tree reduction (default from ``topicflow.split-every``).

    Attributes
    ----------
    components_ : ndarray of shape (T, n_terms)
        lambda = n_kw + beta.
    topic_word_ : ndarray of shape (T, n_terms)
        Its rows normalized.
    doc_topic_prior_ : ndarray of shape (T,)
        alpha * pi, the Dirichlet prior of a document's topic proportions.
    alpha_, gamma_ : float
        The learned concentrations.
    stick_weights_ : ndarray of shape (T,)
        pi (eq. 3), per topic; sums to 1.
    topic_shares_ : ndarray of shape (T,)
        Share of the expected training tokens per topic.
    topics_in_use_ : ndarray of int
        Topics holding at least ``topics_in_use_share`` of the tokens, by decreasing stick weight.
    n_topics_in_use_ : int
        Their number (never the truncation).
    truncation_ : int
        T.
    vocabularies_ : dict of str to Vocabulary
    trace_ : list
        The fit's records (documents seen, held-out perplexity, topics in use, alpha, gamma).
    n_docs_seen_ : int
    n_features_in_ : int

    Examples
    --------
    >>> model = HDP(truncation=100).fit("corpus.zarr")       # doctest: +SKIP
    >>> model.n_topics_in_use_, model.alpha_, model.gamma_    # doctest: +SKIP
    >>> model.perplexity("heldout.zarr")                       # doctest: +SKIP
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "truncation": [Interval(Integral, 2, None, closed="left")],
        "method": [Options(choices(HDPMethod))],
        "batch_size": [None, _POSITIVE_INT],
        "clumping": [Boolean()],
        "passes": [_POSITIVE_INT],
        "topic_word_prior": [_POSITIVE],
        "alpha": [_POSITIVE],
        "gamma": [_POSITIVE],
        "learn_alpha": [Boolean()],
        "learn_gamma": [Boolean()],
        "alpha_floor": [_POSITIVE],
        "topic_word_step": [STEP_CONSTRAINT],
        "doc_step": [STEP_CONSTRAINT],
        "hyper_step": [STEP_CONSTRAINT],
        "step_power": [Interval(Real, 0.5, 1, closed="right")],
        "burn_in": [_NONNEGATIVE_INT],
        "doc_start": [Options(("random", "zero"))],
        "keep_doc_state": [Boolean()],
        "shuffle_window": [_NONNEGATIVE_INT],
        "eval_every": [_NONNEGATIVE_INT],
        "topics_in_use_share": [Interval(Real, 0, 1, closed="neither")],
        "init_shape": [_POSITIVE],
        "seed": [Interval(Integral, 0, 2**63, closed="left")],
        "split_every": [None, Interval(Integral, 2, None, closed="left")],
    }
    _fit_hint: ClassVar[str] = "call fit(X) or HDP.load(path) first"

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> HDP:
        """The estimator with a paper's published settings (see docs/reproductions.md).

        Parameters
        ----------
        name : str
            An HDP preset of command ``fit`` (:data:`topicflow.pipeline.presets.PRESETS`), e.g. ``bleier2016``.
        **overrides
            Settings that replace the preset's.

        Returns
        -------
        HDP

        Raises
        ------
        InvalidParameterError
            No such preset, or a preset of another family.
        """
        from topicflow.pipeline.presets import with_preset

        settings = with_preset(name, "fit", overrides)
        if settings.pop("family", None) != "hdp":
            raise InvalidParameterError(f"preset {name!r} is not an HDP preset; use topicflow.LDA.from_preset")
        return cls(**settings)

    def __init__(
        self, truncation: int = 200, *, method: str = "pcsvb0", batch_size: int | None = None, clumping: bool = False,
        passes: int = 30, topic_word_prior: float = 0.01, alpha: float = 1.0, gamma: float = 1.0,
        learn_alpha: bool = True, learn_gamma: bool = True, alpha_floor: float = 1e-3,
        topic_word_step: Any = PAPER_STEPS["topic_word_step"], doc_step: Any = PAPER_STEPS["doc_step"],
        hyper_step: Any = PAPER_STEPS["hyper_step"], step_power: float = PAPER_STEP_POWER, burn_in: int = 0,
        doc_start: str = "random", keep_doc_state: bool = False, shuffle_window: int = 0, eval_every: int = 0,
        topics_in_use_share: float = TOPIC_IN_USE_SHARE, init_shape: float = 100.0, seed: int = 0,
        split_every: int | None = None,
    ) -> None:
        self.truncation = truncation
        self.method = method
        self.batch_size = batch_size
        self.clumping = clumping
        self.passes = passes
        self.topic_word_prior = topic_word_prior
        self.alpha = alpha
        self.gamma = gamma
        self.learn_alpha = learn_alpha
        self.learn_gamma = learn_gamma
        self.alpha_floor = alpha_floor
        self.topic_word_step = topic_word_step
        self.doc_step = doc_step
        self.hyper_step = hyper_step
        self.step_power = step_power
        self.burn_in = burn_in
        self.doc_start = doc_start
        self.keep_doc_state = keep_doc_state
        self.shuffle_window = shuffle_window
        self.eval_every = eval_every
        self.topics_in_use_share = topics_in_use_share
        self.init_shape = init_shape
        self.seed = seed
        self.split_every = split_every

    # ------------------------------------------------------------------ settings

    def hdp_params(self) -> HDPParams:
        """The model and step-size settings as :class:`~topicflow.models.hdp.params.HDPParams`.

        Returns
        -------
        HDPParams

        Raises
        ------
        InvalidParameterError
            A setting outside its allowed values.
        """
        power = float(self.step_power)
        return HDPParams(
            truncation=int(self.truncation), topic_word_prior=float(self.topic_word_prior),
            alpha_init=float(self.alpha), gamma_init=float(self.gamma), learn_alpha=bool(self.learn_alpha),
            learn_gamma=bool(self.learn_gamma), alpha_floor=float(self.alpha_floor),
            topic_word_step=parse_step(self.topic_word_step, power), doc_step=parse_step(self.doc_step, power),
            hyper_step=parse_step(self.hyper_step, power), burn_in=int(self.burn_in),
            doc_start=self.doc_start,  # type: ignore[arg-type]
            keep_doc_state=bool(self.keep_doc_state), clumping=bool(self.clumping), seed=int(self.seed),
            init_shape=float(self.init_shape),
        )

    def config(self) -> CollapsedConfig:
        """The validated settings of :func:`~topicflow.pipeline.collapsed.fit_collapsed`.

        Returns
        -------
        CollapsedConfig

        Raises
        ------
        InvalidParameterError
            A parameter outside its allowed values, or one that does not apply to the method
            (``batch_size``, ``burn_in``, ``keep_doc_state`` with ``method="pcvb0"``).
        """
        self._validate_params()
        if self.method == "pcvb0":
            given = [f"{name}={getattr(self, name)!r}" for name, default in _STOCHASTIC_ONLY.items()
                     if getattr(self, name) != default]
            if given:
                raise InvalidParameterError(
                    f"{', '.join(given)} given with method='pcvb0': batch PCVB0 updates every token against the "
                    "whole corpus each pass (no minibatches, no per-document burn-in or kept n_dk); "
                    "leave them at their defaults, or use method='pcsvb0'")
        if self.keep_doc_state and self.batch_size is not None:
            raise InvalidParameterError(
                f"keep_doc_state=True with batch_size={self.batch_size!r}: the documents' n_dk are kept by the "
                "word-by-word run (batch_size=None) only; drop one of them")
        return CollapsedConfig(method=self.method, params=self.hdp_params(), passes=int(self.passes),  # type: ignore[arg-type]
                               batch_size=None if self.batch_size is None else int(self.batch_size),
                               shuffle_window=int(self.shuffle_window), eval_every=int(self.eval_every),
                               topics_in_use_share=float(self.topics_in_use_share))

    # ------------------------------------------------------------------ fitting

    def fit(self, corpus: Any, y: Any = None, *, client: Any = None, test: Any = None,
            progress: ProgressReporter = NO_PROGRESS, checkpoint: CheckpointPolicy | None = None,
            vocabulary: Sequence[str] | None = None, fields: FieldSpec | None = None,
            store_path: str | os.PathLike[str] | None = None) -> HDP:
        """Fit from scratch on a corpus store, a document-term matrix, a Dask array or Dask texts.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Training documents, as for :meth:`topicflow.LDA.fit` (anything but a store is written to
            a store first).
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        test : same kinds as ``corpus``, optional
            Held-out documents scored along the fit (Bleier's protocol: 70% of each document's tokens
            fold in, 30% are scored) every ``eval_every`` documents, for the trace.
        progress : ProgressReporter, optional
            Receives progress along the passes.
        checkpoint : CheckpointPolicy, optional
            Writes the driver state periodically and, with ``resume``, continues an interrupted fit.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column; default ``t0, t1, ...``.
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.
        store_path : str or os.PathLike, optional
            Where to write (and keep) the store of a non-store input.

        Returns
        -------
        HDP
            ``self``, fitted.

        Raises
        ------
        InvalidParameterError
            A parameter outside its allowed values (the message lists them).
        """
        import contextlib

        from topicflow.pipeline.collapsed import fit_collapsed

        config = self.config()
        client = split_client(y, client)
        options: dict[str, Any] = {"vocabulary": vocabulary, "fields": fields}
        with contextlib.ExitStack() as stack:
            train = stack.enter_context(store_for(corpus, store_path=store_path, client=client, **options))
            held_out = None if test is None else stack.enter_context(store_for(test, client=client, **options))
            result = fit_collapsed(train, config, client=client, progress=progress, checkpoint=checkpoint,
                                   resume=bool(checkpoint is not None and checkpoint.resume), test=held_out,
                                   split_every=self.split_every)
        self.model_: SavedModel = result.saved_model
        self._set_attributes_from_model()
        self.trace_ = list(result.trace)
        return self

    def partial_fit(self, corpus: Any, y: Any = None, *, client: Any = None, shards: Sequence[int] | None = None,
                    progress: ProgressReporter = NO_PROGRESS, vocabulary: Sequence[str] | None = None,
                    fields: FieldSpec | None = None, store_path: str | os.PathLike[str] | None = None) -> HDP:
        """Continue the model with new documents (one pass, the step-size schedules where they stopped).

        The first call starts a model (one pass of PCSVB0); later calls continue it with the shards of
        a grown store it has not seen (or every document of any other input), as ``topicflow update``
        does. The store's vocabulary must extend the model's.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit`.
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        shards : sequence of int, optional
            Positions of the store's shards to process, in order; by default the unseen ones.
        progress : ProgressReporter, optional
            Receives progress.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column.
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.
        store_path : str or os.PathLike, optional
            Where to write (and keep) the store of a non-store input.

        Returns
        -------
        HDP
            ``self``, updated.

        Raises
        ------
        InvalidParameterError
            ``method="pcvb0"`` (a batch method: refit it instead).
        """
        from topicflow.api._inputs import column_terms, input_kind
        from topicflow.pipeline.collapsed import continue_collapsed, fit_collapsed
        from topicflow.pipeline.update import unseen_shards

        config = self.config()
        model = getattr(self, "model_", None)
        method = model.info.method if model is not None else self.method
        if method == "pcvb0":
            raise InvalidParameterError("partial_fit continues a stochastic (pcsvb0) HDP; a pcvb0 model is a batch "
                                        "fit: call fit on the grown corpus instead")
        client = split_client(y, client)
        kind = input_kind(corpus)
        vocabulary = column_terms(corpus, kind, vocabulary, self._model_terms(), owner="HDP", grow=True)
        with store_for(corpus, vocabulary=vocabulary, fields=fields, store_path=store_path, client=client) as store:
            if kind != "store" and shards is None:
                shards = range(store.n_shards)
            if model is None:
                from dataclasses import replace

                result = fit_collapsed(store, replace(config, passes=1), client=client, progress=progress,
                                       split_every=self.split_every)
                self.model_ = result.saved_model
            else:
                if shards is None:
                    shards = unseen_shards(model, store)
                self.model_, _ = continue_collapsed(model, store, list(shards), client=client,
                                                    split_every=self.split_every, progress=progress)
            self.trace_ = list(self.model_.info.trace)
        self._set_attributes_from_model()
        return self

    def _set_attributes_from_model(self) -> None:
        model = self.model_
        state = model.state
        lang = state.languages[0]
        topics = hdp_topics(model, float(self.topics_in_use_share))
        self.components_ = np.asarray(state.topic_word_var[lang])
        self.topic_word_ = state.topic_word()[lang]
        self.doc_topic_prior_ = np.asarray(state.doc_topic_prior)
        self.alpha_ = topics.alpha
        self.gamma_ = topics.gamma if topics.gamma is not None else float("nan")
        self.stick_weights_ = topics.stick_weights
        self.topic_shares_ = topics.shares
        self.topics_in_use_ = topics.in_use
        self.n_topics_in_use_ = topics.n_in_use
        self.truncation_ = topics.truncation
        self.vocabularies_ = dict(model.vocabularies)
        self.n_features_in_ = len(self.vocabularies_[lang])
        scalars = getattr(model.info, "collapsed_state", None) or {}
        self.n_docs_seen_ = int(scalars.get("docs_seen", model.info.corpus.get("n_docs", 0)))

    # ------------------------------------------------------------------ using the model

    def topics_in_use(self, min_share: float | None = None) -> IntArray:
        """The topics holding at least ``min_share`` of the expected tokens, by decreasing stick weight.

        Parameters
        ----------
        min_share : float, optional
            Default ``topics_in_use_share``.

        Returns
        -------
        ndarray of int
        """
        share = float(self.topics_in_use_share if min_share is None else min_share)
        return hdp_topics(self._check_fitted(), share).in_use

    def topic_summary(self, n: int = 10, *, all_topics: bool = False) -> list[dict[str, Any]]:
        """Each topic in use (or every topic) with its stick weight, token share and top terms.

        Parameters
        ----------
        n : int, default 10
            Terms per topic.
        all_topics : bool, default False
            List all T topics (by decreasing stick weight), not only those in use.

        Returns
        -------
        list of dict
            ``topic`` (index), ``stick_weight``, ``share``, ``terms`` (term, probability) pairs.
        """
        model = self._check_fitted()
        topics = hdp_topics(model, float(self.topics_in_use_share))
        order = (np.argsort(-topics.stick_weights, kind="stable") if all_topics else topics.in_use)
        lang = model.state.languages[0]
        vocab = model.vocabularies[lang]
        summary = []
        for k in order:
            row = self.topic_word_[k]
            best = np.argsort(-row, kind="stable")[:n]
            summary.append({"topic": int(k), "stick_weight": float(topics.stick_weights[k]),
                            "share": float(topics.shares[k]),
                            "terms": [(vocab.term_of(int(w)), float(row[w])) for w in best]})
        return summary

    def top_terms(self, n: int = 10) -> list[list[tuple[str, float]]]:
        """Return the ``n`` most probable terms of every topic in use, by decreasing stick weight.

        Parameters
        ----------
        n : int, default 10
            Terms per topic.

        Returns
        -------
        list of list of (str, float)
            One list per topic of ``topics_in_use_``.
        """
        return [entry["terms"] for entry in self.topic_summary(n)]

    # ------------------------------------------------------------------ persistence

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> HDP:
        """Load a model saved by :meth:`save` or ``topicflow fit --family hdp``, with its settings.

        Parameters
        ----------
        path : str or os.PathLike
            Model directory.

        Returns
        -------
        HDP
            A fitted estimator.

        Raises
        ------
        InvalidParameterError
            The model is not of the HDP family.
        """
        return cls.from_model(load_model(path), source=str(path))

    @classmethod
    def from_model(cls, model: SavedModel, *, source: str = "the model") -> HDP:
        """An estimator holding a saved HDP model (its settings as parameters).

        Parameters
        ----------
        model : SavedModel
            A model of the HDP family.
        source : str, optional
            Where it came from, for messages.

        Returns
        -------
        HDP

        Raises
        ------
        InvalidParameterError
            The model is not of the HDP family.
        """
        if not is_hdp(model):
            raise InvalidParameterError(f"{source} is a model of the {model.info.family!r} family, not an HDP; "
                                        "load it with topicflow.LDA.load")
        config = saved_config(model)
        params = config.params
        estimator = cls(
            truncation=params.truncation, method=config.method, batch_size=config.batch_size,
            clumping=params.clumping, passes=config.passes,
            topic_word_prior=params.topic_word_prior, alpha=params.alpha_init, gamma=params.gamma_init,
            learn_alpha=params.learn_alpha, learn_gamma=params.learn_gamma, alpha_floor=params.alpha_floor,
            topic_word_step=step_tuple(params.topic_word_step), doc_step=step_tuple(params.doc_step),
            hyper_step=step_tuple(params.hyper_step), burn_in=params.burn_in, doc_start=params.doc_start,
            keep_doc_state=params.keep_doc_state, shuffle_window=config.shuffle_window,
            eval_every=config.eval_every, topics_in_use_share=config.topics_in_use_share,
            init_shape=params.init_shape, seed=params.seed,
        )
        estimator.model_ = model
        estimator._set_attributes_from_model()
        estimator.trace_ = list(model.info.trace)
        return estimator


#: Settings only the stochastic method has, and their defaults (pcvb0 refuses other values).
_STOCHASTIC_ONLY: dict[str, Any] = {"batch_size": None, "burn_in": 0, "keep_doc_state": False}
