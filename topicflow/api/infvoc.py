"""``topicflow.InfVocLDA``: online LDA with an infinite vocabulary (Zhai 2014, ch. 7) in the style of scikit-learn.

``__init__`` only stores keyword parameters; ``fit`` validates them once and streams a corpus store's
documents, in store order, through :func:`topicflow.pipeline.infvoc_lda.fit_infvoc` (Algorithm 4: the
hybrid Gibbs E-step, eq. 7.2, then the stick updates, eqs. 7.6-7.7, the ranking scores, eq. 7.8, and
every U minibatches the reordering and contraction of each topic's truncation ordered set, TOS). The
store must keep each document's tokens in order (``topicflow ingest --keep-order``): the model reads raw
tokens, out-of-vocabulary strings included, so its vocabulary grows with the stream.

``partial_fit`` continues the stream over the shards the model has not seen (the online model's
natural use, what ``topicflow update`` runs); ``transform`` folds documents in with the state fixed,
by the model's own sampler (:func:`topicflow.models.infvoc_lda.fold_in`), one Dask task per shard;
``top_terms`` lists each topic's most probable words with their TOS rank. The saved model (family
``infvoc``) also carries an LDA view, which ``topicflow topics``, ``infer``, ``evaluate`` and ``export``
read; see docs/infvoc.md, "Using infvoc".
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from numbers import Integral, Real
from pathlib import Path
from typing import Any, ClassVar

import dask
import dask.array as da
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.api._base import (
    Boolean,
    Constraint,
    Interval,
    Options,
    Parsed,
    TopicModelEstimator,
    split_client,
)
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.io.storage import as_location
from topicflow.models.common.blocks import OrderedBlock
from topicflow.models.infvoc_lda import (
    InfVocParams,
    InfVocState,
    fold_in,
    top_words,
    tos_positions,
)
from topicflow.models.infvoc_lda.g0 import CharNgramG0, log_g0
from topicflow.models.lda.vb.online import StepSchedule
from topicflow.pipeline.infvoc_lda import (
    G0Choice,
    InfVocPlan,
    InfVocRecord,
    WordIndex,
    continue_infvoc,
    fit_infvoc,
    infvoc_result_model,
    is_infvoc_model,
    ordered_language,
    saved_g0,
    saved_infvoc,
    tracked_words,
)
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.presets import with_preset
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_NONNEGATIVE_INT = Interval(Integral, 0, None, closed="left")
_POSITIVE = Interval(Real, 0, None, closed="neither")


def _parse_g0(value: Any) -> Any:
    """Accept None (the shipped English G0), False (no G0), a G0 directory or a trained CharNgramG0."""
    if value is None or value is False or isinstance(value, (str, os.PathLike, CharNgramG0)):
        return value
    raise InvalidParameterError(f"g0 must be None (the shipped English G0), False (no G0), a G0 directory or a "
                                f"CharNgramG0, got {value!r}")


def _parse_words(value: Any) -> tuple[str, ...]:
    """Accept a list or tuple of non-empty strings (the words whose ranks are recorded)."""
    if isinstance(value, (list, tuple)) and all(isinstance(w, str) and w for w in value):
        return tuple(value)
    raise InvalidParameterError(f"track_words must be a list or tuple of words, got {value!r}")


def _parse_language(value: Any) -> str:
    """Accept a language name (a non-empty string)."""
    if isinstance(value, str) and value:
        return value
    raise InvalidParameterError(f"language must be a language of the store, got {value!r}")


def driver_g0(g0: Any) -> G0Choice:
    """The driver's ``g0=`` for the estimator's: None -> ``"default"``, False -> None (no G0), else as given.

    Parameters
    ----------
    g0 : None, False, str, os.PathLike or CharNgramG0

    Returns
    -------
    CharNgramG0, str, Path or None
    """
    if g0 is None:
        return "default"
    if g0 is False:
        return None
    return g0 if isinstance(g0, CharNgramG0) else Path(g0)


class InfVocLDA(TopicModelEstimator):
    """Online LDA with an infinite vocabulary: each topic a Dirichlet process over all strings.

    Zhai and Boyd-Graber (2013); Zhai (2014), chapter 7. Each topic keeps a truncation ordered set
    (TOS) of words with Beta sticks q(b_kt) = Beta(nu1_kt, nu2_kt) (eq. 7.1); words never seen enter
    the TOS as they appear in the stream, every ``reorder_every`` minibatches each TOS is sorted by the
    ranking score R (eq. 7.8, G0 x expected counts, interpolated) and cut to ``truncation`` words.

    Parameters
    ----------
    n_topics : int, default 10
        K (the chapter: 10 on de-news, 50 on 20 Newsgroups).
    alpha_beta : float, default 1000.0
        The stick concentration alpha^beta of every topic's DP (the chapter's grids: 1k-5k).
    truncation : int, default 1000
        T, the words each topic keeps at a contraction (the reference code's default; the chapter's
        grids 3k-40k).
    reorder_every : int, default 10
        U, minibatches between two reorderings (the chapter: 10 or 20).
    batch_size : int, default 256
        Documents per minibatch S (the chapter: 140-310).
    tau0, kappa : float, default 64.0 and 0.8
        Step sizes epsilon_i = (tau0 + i) ** -kappa (Fig. 7.3-7.5; Table 7.1 uses kappa 0.6).
    passes : int, default 1
        Passes over the documents (the chapter streams once).
    burn_in, samples : int, default 5 and 5
        Gibbs sweeps per document after the random start, discarded and kept (spec P7).
    new_word_nu : {"one", "prior"}, default "one"
        nu^2 of a word appended to a TOS: 1 (the chapter and the reference code), or alpha^beta (spec P3).
    unseen_weight : {"remaining", "g0"}, default "remaining"
        E-step weight of a word outside a topic's TOS: the remaining stick (eq. 7.4), or the variant
        remaining + E[log b] of a prior stick + log G0 (spec P2).
    g0 : None, False, str, os.PathLike or CharNgramG0, default None
        The base distribution G0 of the ranking scores: None the shipped English G0
        (``topicflow/data/g0_en``), False none (G0 = 1: the reference code, which disables it), a directory
        written by ``topicflow g0 train``, or a trained G0.
    alpha : float, optional
        The symmetric document-topic prior alpha^theta; default 1 / n_topics (sec. 7.5).
    seed : int, default 0
    split_every : int, optional
        Fan-in of the statistics' tree merge.
    track_words : list or tuple of str, default ()
        Words whose TOS rank in every topic is recorded after each minibatch (Figure 7.1;
        ``word_ranks_``, and the rank chart of ``topicflow report``).
    shuffle_window : int, default 0
        Visit documents in a random order within windows of this many (0: store order, the chapter's).
    language : str, optional
        The language read from a multilingual store.
    restate_tail : bool, default False
        After each reorder-and-contract, recompute every nu2 from the new order's tail sums
        (:func:`~topicflow.models.infvoc_lda.update.restate_tails`); False is the chapter's (each word carries
        its (nu1, nu2) to its new position). docs/infvoc.md, "The sawtooth at a contraction".

    Attributes
    ----------
    model_ : SavedModel
        The saved form (family ``infvoc``): exact state, word index, G0, trace and the LDA view.
    state_ : InfVocState
        Each topic's TOS, its (nu1, nu2) and the ranking scores.
    word_index_ : WordIndex
        Every string seen, in first-seen order (word id = position).
    components_ : ndarray of shape (n_topics, n_view)
        The LDA view's lambda over ``view_terms_`` (an approximation: docs/infvoc.md).
    view_terms_ : list of str
        The words in some topic's TOS, in first-seen order.
    doc_topic_prior_ : ndarray of shape (n_topics,)
        alpha^theta.
    tos_sizes_ : ndarray of shape (n_topics,), int64
    n_words_ : int
        Distinct strings seen.
    trace_ : list of InfVocRecord
        One record per minibatch (all runs: partial_fit and ``topicflow update`` append).
    n_iter_ : int
        Minibatches applied, i.
    n_docs_seen_ : int
    word_ranks_ : dict of str to ndarray of shape (n_records, n_topics), int64
        For the tracked words: TOS rank (1 = first; 0 = not in the TOS) after each recorded minibatch.

    Examples
    --------
    >>> model = InfVocLDA(20, alpha_beta=3000.0, batch_size=155).fit("ordered.zarr")   # doctest: +SKIP
    >>> model.top_terms(5)[0]                                                          # doctest: +SKIP
    [('god', 0.031, 1), ('lord', 0.024, 2), ...]
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "n_topics": [_POSITIVE_INT],
        "alpha_beta": [_POSITIVE],
        "truncation": [_POSITIVE_INT],
        "reorder_every": [_POSITIVE_INT],
        "batch_size": [_POSITIVE_INT],
        "tau0": [Interval(Real, 0, None, closed="left")],
        "kappa": [Interval(Real, 0, 1, closed="both")],
        "passes": [_POSITIVE_INT],
        "burn_in": [_NONNEGATIVE_INT],
        "samples": [_POSITIVE_INT],
        "new_word_nu": [Options(("one", "prior"))],
        "unseen_weight": [Options(("remaining", "g0"))],
        "g0": [Parsed(_parse_g0, "None (the shipped English G0), False (no G0), a G0 directory or a CharNgramG0")],
        "alpha": [None, _POSITIVE],
        "seed": [Interval(Integral, 0, 2**63, closed="left")],
        "split_every": [None, Interval(Integral, 2, None, closed="left")],
        "track_words": [Parsed(_parse_words, "a list or tuple of words")],
        "shuffle_window": [_NONNEGATIVE_INT],
        "language": [None, Parsed(_parse_language, "a language of the store")],
        "restate_tail": [Boolean()],
    }
    _fit_hint: ClassVar[str] = "call fit(store) or InfVocLDA.load(path) first"

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> InfVocLDA:
        """The estimator with chapter 7's settings (``zhai2014-infvoc``, ``zhai2014-infvoc-denews``).

        Parameters
        ----------
        name : str
            An infvoc preset (:data:`topicflow.pipeline.presets.INFVOC_PRESETS`).
        **overrides
            Settings that replace the preset's.

        Returns
        -------
        InfVocLDA

        Raises
        ------
        InvalidParameterError
            No such preset, or a preset of another family.

        Examples
        --------
        >>> InfVocLDA.from_preset("zhai2014-infvoc").get_params()["truncation"]
        40000
        """
        settings = with_preset(name, "fit", overrides)
        if settings.pop("family", None) != "infvoc":
            raise InvalidParameterError(f"preset {name!r} is not an infvoc preset; use topicflow.LDA.from_preset, "
                                        "topicflow.HDP.from_preset or topicflow.TreeLDA.from_preset")
        return cls(**settings)

    def __init__(
        self, n_topics: int = 10, *, alpha_beta: float = 1000.0, truncation: int = 1000, reorder_every: int = 10,
        batch_size: int = 256, tau0: float = 64.0, kappa: float = 0.8, passes: int = 1, burn_in: int = 5,
        samples: int = 5, new_word_nu: str = "one", unseen_weight: str = "remaining", g0: Any = None,
        alpha: float | None = None, seed: int = 0, split_every: int | None = None,
        track_words: Sequence[str] = (), shuffle_window: int = 0, language: str | None = None,
        restate_tail: bool = False,
    ) -> None:
        self.n_topics = n_topics
        self.alpha_beta = alpha_beta
        self.truncation = truncation
        self.reorder_every = reorder_every
        self.batch_size = batch_size
        self.tau0 = tau0
        self.kappa = kappa
        self.passes = passes
        self.burn_in = burn_in
        self.samples = samples
        self.new_word_nu = new_word_nu
        self.unseen_weight = unseen_weight
        self.g0 = g0
        self.alpha = alpha
        self.seed = seed
        self.split_every = split_every
        self.track_words = track_words
        self.shuffle_window = shuffle_window
        self.language = language
        self.restate_tail = restate_tail

    # ------------------------------------------------------------------ settings

    def params(self) -> InfVocParams:
        """The model settings as :class:`~topicflow.models.infvoc_lda.InfVocParams` (validated).

        Returns
        -------
        InfVocParams

        Raises
        ------
        InvalidParameterError
            A parameter outside its allowed values (the message lists them).
        """
        self._validate_params()
        return InfVocParams(
            n_topics=int(self.n_topics), doc_topic_prior=None if self.alpha is None else float(self.alpha),
            stick_concentration=float(self.alpha_beta), truncation=int(self.truncation),
            reorder_every=int(self.reorder_every), step=StepSchedule(tau0=float(self.tau0), kappa=float(self.kappa)),
            burn_in=int(self.burn_in), samples=int(self.samples), new_word_nu2=self.new_word_nu,  # type: ignore[arg-type]
            unseen_weight=self.unseen_weight, seed=int(self.seed),  # type: ignore[arg-type]
            restate_tail=bool(self.restate_tail),
        )

    def plan(self) -> InfVocPlan:
        """The minibatch plan (the size of S, passes, shuffle window; D = the store's size).

        Returns
        -------
        InfVocPlan
        """
        self._validate_params()
        return InfVocPlan(batch_size=int(self.batch_size), passes=int(self.passes),
                          shuffle_window=int(self.shuffle_window))

    def _check_g0_setting(self, params: InfVocParams) -> None:
        if params.unseen_weight == "g0" and self.g0 is False:
            raise InvalidParameterError("unseen_weight='g0' weighs unseen words by log G0, but g0=False runs "
                                        "without G0: give a G0 (None for the shipped one) or use "
                                        "unseen_weight='remaining' (eq. 7.4)")

    @staticmethod
    def _store(corpus: Any, owner: str) -> Corpus:
        if not isinstance(corpus, (str, os.PathLike, Corpus)):
            raise InvalidParameterError(
                f"InfVocLDA.{owner} reads a corpus store (path or Corpus) ingested with `topicflow ingest "
                f"--keep-order`, not {type(corpus).__name__}: the model reads each document's raw tokens in "
                "order, out-of-vocabulary words included, which a count matrix does not hold")
        return as_corpus(corpus)

    # ------------------------------------------------------------------ fitting

    def fit(self, corpus: Any, y: Any = None, *, client: Any = None, progress: ProgressReporter = NO_PROGRESS,
            checkpoint: CheckpointPolicy | None = None, doc_topics: str | os.PathLike[str] | None = None,
            shards: Sequence[int] | None = None) -> InfVocLDA:
        """Stream the store's documents, in store order, through the model from an empty state.

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            A store with the ordered-token layer (``topicflow ingest --keep-order``).
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        progress : ProgressReporter, optional
            Receives one step per minibatch.
        checkpoint : CheckpointPolicy, optional
            Write the driver state every ``every`` minibatches; with ``resume`` continue from it (the
            uninterrupted run's model, bit for bit).
        doc_topics : str or os.PathLike, optional
            Write the online pass's document topic vectors (alpha^theta + the last sweep's counts,
            spec P9: the chapter's classification features) to this zarr group.
        shards : sequence of int, optional
            Store positions of the shards to stream, in order (default all).

        Returns
        -------
        InfVocLDA
            ``self``, fitted.

        Raises
        ------
        InvalidParameterError
            A parameter outside its allowed values, or an input that is not a store.
        OrderNotKeptError
            The store was ingested without ``--keep-order``.
        """
        params = self.params()
        self._check_g0_setting(params)
        plan = self.plan()
        client = split_client(y, client)
        store = self._store(corpus, "fit")
        language = ordered_language(store, self.language)
        result = fit_infvoc(store, params, plan, shards=shards, client=client, split_every=self.split_every,
                            progress=progress, checkpoint=checkpoint, g0=driver_g0(self.g0),
                            track_words=_parse_words(self.track_words),
                            doc_topics=None if doc_topics is None else as_location(doc_topics),
                            language=self.language)
        self.model_ = infvoc_result_model(store, result, params, plan, shards=shards, language=language)
        self._set_attributes_from_model()
        return self

    def partial_fit(self, corpus: Any, y: Any = None, *, client: Any = None, shards: Sequence[int] | None = None,
                    progress: ProgressReporter = NO_PROGRESS) -> InfVocLDA:
        """Continue the stream over the store's shards the model has not seen (as ``topicflow update``).

        The first call starts the model (as :meth:`fit` over ``shards``); later calls continue its
        state, word index and step sizes (epsilon_i goes on at i + 1) through
        :func:`~topicflow.pipeline.infvoc_lda.continue_infvoc`. With D = the store's size in both calls,
        shards 0-1 then 2-3 give the model of one fit over 0-3 when the first call's documents fill whole
        minibatches. The estimator's ``track_words`` are recorded in every call's records, so
        ``word_ranks_`` runs on across calls (Figure 7.1 over nights).

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            The store (grown by ``topicflow append`` since, or the same store).
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
        shards : sequence of int, optional
            Store positions of the shards to stream, in order; by default all on the first call and
            the unseen ones later.
        progress : ProgressReporter, optional

        Returns
        -------
        InfVocLDA
            ``self``, updated.

        Raises
        ------
        InvalidParameterError
            An input that is not a store, or no shard left to stream.
        OrderNotKeptError
            The store was ingested without ``--keep-order``.
        """
        client = split_client(y, client)
        store = self._store(corpus, "partial_fit")
        model: SavedModel | None = getattr(self, "model_", None)
        if model is None:
            return self.fit(store, client=client, progress=progress, shards=shards)
        if shards is not None and not list(shards):
            raise InvalidParameterError("partial_fit was given no shard to stream")
        self.model_, _ = continue_infvoc(model, store, shards=shards, client=client, split_every=self.split_every,
                                         progress=progress, track_words=_parse_words(self.track_words))
        self._set_attributes_from_model()
        return self

    def _set_attributes_from_model(self) -> None:
        model: SavedModel = self.model_
        params, state, index, position = saved_infvoc(model)
        self.state_: InfVocState = state
        self.word_index_: WordIndex = index
        view = model.state
        self.components_ = np.asarray(view.topic_word_var["default"])
        self.view_terms_ = [str(t) for t in model.vocabularies["default"].terms]
        self.doc_topic_prior_ = np.asarray(view.doc_topic_prior)
        self.tos_sizes_ = state.tos_sizes()
        self.n_words_ = len(index)
        self.trace_ = [InfVocRecord(**record) for record in model.info.trace]
        self.n_iter_ = position.i
        self.n_docs_seen_ = position.docs_seen
        self.word_ranks_ = word_rank_history(self.trace_)

    # ------------------------------------------------------------------ using the model

    def top_terms(self, n: int = 10) -> list[list[tuple[str, float, int]]]:
        """Each topic's ``n`` most probable words by E[beta], with their TOS rank.

        Parameters
        ----------
        n : int, default 10
            Words per topic (fewer when a TOS is shorter).

        Returns
        -------
        list of list of (str, float, int)
            Per topic (in topic order): (word, E[beta_kt], rank), rank = TOS position + 1 (1 = first,
            the chapter's numbering).
        """
        self._check_fitted()
        return topic_words_with_ranks(self.state_, self.word_index_, n)

    def transform(self, corpus: Any, *, client: Any = None) -> Any:
        """Fold a store's documents into the model with its state fixed (the model's own sampler).

        Each document is sampled as in training (random start, ``burn_in`` + ``samples`` sweeps, eq.
        7.2) with the sticks fixed; a word in no topic's TOS gets every topic's remaining stick (eq.
        7.4). The random numbers are keyed by the seed and the document's store position, so a row does
        not depend on how the store is sharded.

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            A store with the ordered-token layer (any vocabulary: words are matched by string).
        client : distributed.Client, optional
            Unused until the result is computed (kept for symmetry with ``fit``).

        Returns
        -------
        dask.array.Array of shape (n_docs, n_topics), float64
            Rows theta_d = gamma_d / sum(gamma_d), gamma_d = alpha^theta + the last sweep's counts; one chunk
            per shard, nothing computed yet.

        Raises
        ------
        InvalidParameterError
            An input that is not a store.
        OrderNotKeptError
            The store was ingested without ``--keep-order``.
        """
        model = self._check_fitted()
        store = self._store(corpus, "transform")
        lang = ordered_language(store, self.language)
        params, state, index, _ = saved_infvoc(model)
        g0 = saved_g0(model)[0] if params.unseen_weight == "g0" else None
        view = np.unique(state.tos_words)
        known = dask.delayed({w: int(i) for w, i in zip(index.strings(view), view.tolist())}, pure=True)
        shared = dask.delayed((state, params, g0, len(index)), pure=True)
        terms = dask.delayed([str(t) for t in store.vocabulary(lang).terms], pure=True)
        first = np.concatenate([[0], np.cumsum([s.n_docs for s in store.shards])]).astype(np.int64)
        task = dask.delayed(fold_in_block, pure=True)
        chunks = [da.from_delayed(task(block, terms, known, shared, int(first[s])),
                                  shape=(store.shards[s].n_docs, params.n_topics), dtype=np.float64)
                  for s, block in enumerate(store.to_delayed_ordered(lang))]
        if not chunks:
            return da.zeros((0, params.n_topics), dtype=np.float64)
        return da.concatenate(chunks, axis=0)

    def fit_transform(self, corpus: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit, then fold the same documents in with the final state (:meth:`transform`).

        The online pass's own document vectors (spec P9) are ``fit(..., doc_topics=PATH)``'s output.

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
        y : None
            Ignored.
        **fit_params
            Passed to :meth:`fit`.

        Returns
        -------
        dask.array.Array of shape (n_docs, n_topics)
        """
        return self.fit(corpus, y, **fit_params).transform(corpus)

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Save the fitted model (family ``infvoc``) as a versioned model directory.

        Parameters
        ----------
        path : str or os.PathLike
        overwrite : bool, default False
            Replace an existing model directory.
        """
        save_model(path, self._check_fitted(), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> InfVocLDA:
        """Load a model saved by :meth:`save` or ``topicflow fit --family infvoc``, with its settings.

        Parameters
        ----------
        path : str or os.PathLike
            Model directory.

        Returns
        -------
        InfVocLDA
            A fitted estimator; ``g0`` is None (shipped), False (none) or the model's own G0.

        Raises
        ------
        InvalidParameterError
            The model is not of the infvoc family.
        """
        model = load_model(path)
        if not is_infvoc_model(model):
            raise InvalidParameterError(f"{str(path)!r} is a model of the {model.info.family!r} family, not infvoc; "
                                        "load it with topicflow.LDA.load, HDP.load or TreeLDA.load")
        params, _, _, position = saved_infvoc(model, where=str(path))
        g0, source = saved_g0(model, where=str(path))
        extra = model.info.extra.get("infvoc") or {}
        tracked = tracked_words(model)
        estimator = cls(
            n_topics=params.n_topics, alpha_beta=params.stick_concentration, truncation=params.truncation,
            reorder_every=params.reorder_every, batch_size=position.plan.batch_size, tau0=params.step.tau0,
            kappa=params.step.kappa, passes=position.plan.passes, burn_in=params.burn_in, samples=params.samples,
            new_word_nu=params.new_word_nu2, unseen_weight=params.unseen_weight,
            g0=False if g0 is None else (None if source == "default" else g0),
            alpha=None if params.alpha == 1.0 / params.n_topics else params.alpha, seed=params.seed,
            track_words=tracked, shuffle_window=position.plan.shuffle_window,
            language=None if extra.get("language") in (None, "default") else extra.get("language"),
            restate_tail=params.restate_tail,
        )
        estimator.model_ = model
        estimator._set_attributes_from_model()
        return estimator


# ----------------------------------------------------------------------------- read-outs and task bodies


def topic_words_with_ranks(state: InfVocState, word_index: WordIndex, n: int) -> list[list[tuple[str, float, int]]]:
    """Each topic's ``n`` most probable words (E[beta], ties to the first seen) with their TOS rank.

    Parameters
    ----------
    state : InfVocState
    word_index : WordIndex
    n : int

    Returns
    -------
    list of list of (str, float, int)
        Per topic: (word, E[beta_kt], TOS position + 1).
    """
    out = []
    for k, (ids, probs) in enumerate(top_words(state, n)):
        ranks = tos_positions(state, ids)[k] + 1
        out.append([(word, float(p), int(r)) for word, p, r in zip(word_index.strings(ids), probs, ranks)])
    return out


def word_rank_history(trace: Sequence[InfVocRecord]) -> dict[str, IntArray]:
    """The tracked words' TOS ranks after each minibatch that recorded them (Figure 7.1).

    Parameters
    ----------
    trace : sequence of InfVocRecord

    Returns
    -------
    dict of str to ndarray of shape (n_records, n_topics), int64
        Rank = TOS position + 1 (0: not in the topic's TOS), one row per record that tracked the word.
    """
    rows: dict[str, list[list[int]]] = {}
    for record in trace:
        for word, positions in (record.word_ranks or {}).items():
            rows.setdefault(word, []).append([p + 1 for p in positions])
    return {word: np.array(r, dtype=np.int64) for word, r in rows.items()}


def fold_in_block(block: OrderedBlock, terms: Sequence[str], known: dict[str, int],
                  shared: tuple[InfVocState, InfVocParams, CharNgramG0 | None, int], first_doc: int) -> FloatArray:
    """Task body of :meth:`InfVocLDA.transform`: one shard's documents folded in with the state fixed.

    Parameters
    ----------
    block : OrderedBlock
        The shard's tokens in order (store term ids, out-of-vocabulary strings as ``-(j + 1)``).
    terms : sequence of str
        The store's vocabulary.
    known : dict of str to int
        Word id of every word in some topic's TOS.
    shared : tuple
        The state, the settings, the G0 (for ``unseen_weight="g0"``, else None) and the word index's size.
    first_doc : int
        Store position of the shard's first document (keys the random numbers).

    Returns
    -------
    ndarray of shape (n_docs, n_topics), float64
    """
    state, params, g0, n_index = shared
    codes = np.asarray(block.tokens, dtype=np.int64)
    distinct, inverse = np.unique(codes, return_inverse=True)
    strings = [terms[c] if c >= 0 else str(block.oov_terms[-c - 1]) for c in distinct.tolist()]
    # A word in no TOS has the same weight in every topic's eq. 7.4 whatever its id; it gets a fresh id
    # past the word index (its own, so the G0 variant can score it).
    ids = np.array([known.get(s, n_index + j) for j, s in enumerate(strings)], dtype=np.int64)
    word_g0 = None
    if g0 is not None:
        word_g0 = np.zeros(n_index + len(strings))
        word_g0[ids] = log_g0(g0, strings)
    indptr = np.asarray(block.indptr, dtype=np.int64)
    return fold_in(state, indptr, ids[inverse.ravel()], params, first_doc=first_doc, log_g0=word_g0)


__all__ = ["InfVocLDA", "driver_g0", "fold_in_block", "topic_words_with_ranks", "word_rank_history"]
