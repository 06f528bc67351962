"""``topicflow.TreeLDA``: tree-prior LDA (tLDA, and polylingual ptLDA) in the style of scikit-learn.

``__init__`` only stores keyword parameters; ``fit`` validates them once, reads the prior tree
(checking it was built for the store's vocabularies) and runs batch variational or hybrid inference
through :func:`topicflow.pipeline.tree_lda.fit_batch_tree_vb` (or online, minibatch by minibatch,
through :func:`~topicflow.pipeline.tree_lda.fit_online_tree`), or collapsed Gibbs sampling over the
store's shards through :func:`topicflow.pipeline.tree_lda.fit_gibbs_tree`. The fitted model reads as a
(polylingual) LDA model whose topics are the tree's word means (the LDA view), so ``transform``,
``evaluate``, ``save`` (shared with :class:`topicflow.LDA`) and every command that reads a model work on it; the exact edge parameters are kept for reloading. See
docs/tree-lda.md.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np

from topicflow._typing import FloatArray
from topicflow.api._base import (
    Boolean,
    Constraint,
    Interval,
    Options,
    Parsed,
    TopicModelEstimator,
    split_client,
)
from topicflow.api._evaluation import FittedModelMixin
from topicflow.api.lda import parse_doc_topic_prior
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.store import SavedModel, load_model
from topicflow.io.trees import check_tree_matches, read_tree
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import TREE_NORMALIZATIONS
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.presets import with_preset
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.tree_lda import (
    TREE_INFERENCE,
    TreeMinibatchRecord,
    TreeVBConfig,
    continue_tree_online,
    fit_batch_tree_vb,
    fit_gibbs_tree,
    fit_online_tree,
    is_tree_model,
    online_tree_model,
    saved_tree,
    saved_tree_config,
    saved_tree_state,
    tree_model,
)
from topicflow.pipeline.vb import IterationRecord, OnlineConfig

_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_NONNEGATIVE_INT = Interval(Integral, 0, None, closed="left")
_POSITIVE = Interval(Real, 0, None, closed="neither")
#: Default iterations of vb and hybrid, and default sweeps of gibbs (``max_iter=None``).
VB_ITERATIONS = 50
GIBBS_SWEEPS = 200
#: Parameters (with their defaults) that gibbs does not read, and those vb and hybrid do not read.
_GIBBS_UNUSED: dict[str, Any] = {"alpha_init": None, "tol": 1e-4, "burn_in": 5, "samples": 5, "init_shape": 100.0,
                                 "split_every": None}
_VB_UNUSED: dict[str, Any] = {"sync_every": 1, "sparse": False}
#: Parameters that online VB does not read, and the online ones batch fits do not read.
_ONLINE_UNUSED: dict[str, Any] = {"max_iter": None, "tol": 1e-4}
_BATCH_UNUSED: dict[str, Any] = {"batch_size": 256, "tau0": 10.0, "kappa": 0.7, "passes": 1, "shuffle_window": 0}


def _parse_tree(value: Any) -> Any:
    """Accept a path to a prior-tree directory or a PriorTree (None is refused at fit, with what to do)."""
    if value is not None and not isinstance(value, (str, os.PathLike, PriorTree)):
        raise InvalidParameterError(f"prior_tree must be a path or a PriorTree, got {type(value).__name__}")
    return value


class TreeLDA(FittedModelMixin, TopicModelEstimator):
    """Tree-prior LDA (tLDA; ptLDA on aligned multilingual stores) by variational, hybrid or Gibbs inference.

    Zhai (2014), chapter 5: each topic draws, at every internal node of a prior tree, a Dirichlet over
    the node's edges; a word's probability sums the products along its root-to-leaf paths. The
    E-step is LDA's, fed the tree's per-word weights; the M-step splits each topic's word counts over
    the word's paths (eq. 5.5), or samples the paths (hybrid, eq. 5.6). Gibbs samples every token's
    topic and path (eq. 5.2), one chain per shard synchronized AD-LDA style, and is saved as the
    variational state lambda = N_ke + beta_e of its final counts.

    Parameters
    ----------
    n_topics : int, default 10
    prior_tree : str, os.PathLike or PriorTree
        The tree (``topicflow tree build``); a path is checked against the store's vocabularies.
    method : {"batch", "online"}, default "batch"
        vb and hybrid: batch iterations over the whole store, or online VB over minibatches (Hoffman et
        al. 2010; ``batch_size``, ``tau0``, ``kappa``, ``passes``, ``shuffle_window``).
    inference : {"vb", "hybrid", "gibbs"}, default "vb"
        Dense variational E-step, Gibbs sampling within VB (Mimno et al. 2012) with path draws, or
        collapsed Gibbs sampling (fixed alpha; ``max_iter`` sweeps).
    normalization : {"node", "node_language"}, default "node"
        ``node``: one Dirichlet per internal node, the chapter's model (eq. 5.1; a flat tree over several
        languages is LDA over the stacked vocabularies); ``node_language``: one per node and language (a
        flat tree is polylingual LDA exactly; with dictionary concepts a surrogate that pools both
        languages' counts, which measured worse: docs/tree-lda.md). The same on a monolingual store.
    alpha : "auto", "symmetric" or float, optional
        Document-topic prior: learned asymmetric (Newton-Raphson), learned symmetric, or fixed. Default:
        "auto" for vb and hybrid; a fixed 1 / n_topics for gibbs (which only takes a number).
    alpha_init : float, optional
        Starting alpha_k of a learned prior (default 1 / n_topics).
    max_iter : int, optional
        Iterations of vb and hybrid (default 50); sweeps of gibbs (default 200).
    tol : float, default 1e-4
        Relative ELBO change that stops the fit (vb, hybrid).
    max_doc_iter : int, default 100
    doc_tol : float, default 1e-3
    burn_in, samples : int, default 5, 5
        Hybrid: discarded and kept Gibbs sweeps per document (the chapter's settings).
    init_shape : float, default 100
        Shape s of the Gamma(s, 1/s) starting lambda per topic and edge.
    seed : int, default 0
    split_every : int, optional
        Fan-in of the statistics tree reduction (vb, hybrid).
    sync_every : int, default 1
        Gibbs: sweeps of every shard's chain between two synchronizations of the edge counts.
    sparse : bool, default False
        Gibbs: the bucket sampler (Yao et al. 2009; Hu and Boyd-Graber 2012), the same conditional with
        other draws; it pays off only at large K (docs/tree-lda.md, "Gibbs sampling").
    batch_size : int, default 256
        Online: documents per minibatch S.
    tau0, kappa : float, default 10.0 and 0.7
        Online: step sizes rho_t = (tau0 + t) ** -kappa.
    passes : int, default 1
        Online: passes over the documents.
    shuffle_window : int, default 0
        Online: visit documents in a random order within windows of this many (0: store order).

    Attributes
    ----------
    components_ : ndarray of shape (n_topics, n_terms), or dict of str to such arrays
        The LDA view's lambda (per language on a multilingual store).
    topic_word_ : ndarray or dict of str to ndarray
        The tree's posterior-mean word distributions, per language.
    edge_var_ : ndarray of shape (n_topics, n_edges)
        The edge parameters lambda.
    doc_topic_prior_ : ndarray of shape (n_topics,)
    prior_tree_ : PriorTree
    vocabularies_ : dict of str to Vocabulary
    languages_ : list of str
    trace_ : list of IterationRecord or TreeMinibatchRecord
        One per iteration; for gibbs one per synchronization round, with ``iteration`` the sweeps done
        and ``elbo`` the joint log-likelihood log p(w, z, y) of the merged chain; for online one
        :class:`~topicflow.pipeline.tree_lda.TreeMinibatchRecord` per minibatch.
    n_iter_ : int
        Iterations run (gibbs: sweeps; online: minibatches).
    n_docs_seen_ : int
        Online: documents processed (for batch and gibbs, the store's documents).
    converged_ : bool
        Whether the ELBO converged (always False for gibbs).

    Examples
    --------
    >>> model = TreeLDA(20, prior_tree="dict.tree").fit("aligned.zarr")   # doctest: +SKIP
    >>> model.top_terms(5, language="de")                                  # doctest: +SKIP
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "n_topics": [_POSITIVE_INT],
        "prior_tree": [Parsed(_parse_tree, "a path to a prior tree (topicflow tree build) or a PriorTree")],
        "inference": [Options(TREE_INFERENCE)],
        "method": [Options(("batch", "online"))],
        "batch_size": [_POSITIVE_INT],
        "tau0": [Interval(Real, 0, None, closed="left")],
        "kappa": [Interval(Real, 0, 1, closed="both")],
        "passes": [_POSITIVE_INT],
        "shuffle_window": [_NONNEGATIVE_INT],
        "normalization": [Options(TREE_NORMALIZATIONS)],
        "alpha_init": [None, _POSITIVE],
        "max_iter": [None, _POSITIVE_INT],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_doc_iter": [_POSITIVE_INT],
        "doc_tol": [_POSITIVE],
        "burn_in": [_NONNEGATIVE_INT],
        "samples": [_POSITIVE_INT],
        "init_shape": [_POSITIVE],
        "seed": [Interval(Integral, 0, 2**63, closed="left")],
        "split_every": [None, Interval(Integral, 2, None, closed="left")],
        "sync_every": [_POSITIVE_INT],
        "sparse": [Boolean()],
    }
    _fit_hint: ClassVar[str] = "call fit(store) or TreeLDA.load(path) first"

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> TreeLDA:
        """The estimator with a paper's published settings (``zhai2014-ptlda``: Zhai 2014, chapter 5).

        Parameters
        ----------
        name : str
            A tree-LDA preset (:data:`topicflow.pipeline.presets.TREE_PRESETS`).
        **overrides
            Settings that replace the preset's, such as ``prior_tree`` (which a preset never sets).

        Returns
        -------
        TreeLDA

        Raises
        ------
        InvalidParameterError
            No such preset, or a preset of another family.

        Examples
        --------
        >>> TreeLDA.from_preset("zhai2014-ptlda", prior_tree="dict.tree").get_params()["alpha"]
        0.01
        """
        settings = with_preset(name, "fit", overrides)
        if settings.pop("family", None) != "tree_lda":
            raise InvalidParameterError(f"preset {name!r} is not a tree-LDA preset; use topicflow.LDA.from_preset "
                                        "or topicflow.HDP.from_preset")
        return cls(**settings)

    def __init__(
        self, n_topics: int = 10, *, prior_tree: Any = None, method: str = "batch", inference: str = "vb",
        normalization: str = "node", alpha: str | float | None = None, alpha_init: float | None = None,
        max_iter: int | None = None, tol: float = 1e-4, max_doc_iter: int = 100, doc_tol: float = 1e-3,
        burn_in: int = 5, samples: int = 5, init_shape: float = 100.0, seed: int = 0, split_every: int | None = None,
        sync_every: int = 1, sparse: bool = False, batch_size: int = 256, tau0: float = 10.0, kappa: float = 0.7,
        passes: int = 1, shuffle_window: int = 0,
    ) -> None:
        self.n_topics = n_topics
        self.prior_tree = prior_tree
        self.inference = inference
        self.normalization = normalization
        self.alpha = alpha
        self.alpha_init = alpha_init
        self.max_iter = max_iter
        self.tol = tol
        self.max_doc_iter = max_doc_iter
        self.doc_tol = doc_tol
        self.burn_in = burn_in
        self.samples = samples
        self.init_shape = init_shape
        self.seed = seed
        self.split_every = split_every
        self.sync_every = sync_every
        self.sparse = sparse
        self.method = method
        self.batch_size = batch_size
        self.tau0 = tau0
        self.kappa = kappa
        self.passes = passes
        self.shuffle_window = shuffle_window

    def config(self) -> TreeVBConfig:
        """The driver settings of these parameters (validated).

        Returns
        -------
        TreeVBConfig

        Raises
        ------
        InvalidParameterError
            A value outside its allowed set, or a parameter the chosen inference does not use.
        """
        self._validate_params()
        gibbs = self.inference == "gibbs"
        self._refuse_unused()
        alpha = self.alpha if self.alpha is not None else (1.0 / int(self.n_topics) if gibbs else "auto")
        mode, value = parse_doc_topic_prior(alpha)
        if gibbs and mode != "fixed":
            raise InvalidParameterError(
                f"alpha={self.alpha!r} with inference='gibbs': the tree Gibbs sampler keeps alpha fixed; give a number "
                "(Zhai 2014, ch. 5: 0.01) or leave alpha unset for 1 / n_topics, or use inference 'vb' or 'hybrid' "
                "to learn it")
        if mode != "fixed" and self.alpha_init is not None:
            value = float(self.alpha_init)
        max_iter = self.max_iter if self.max_iter is not None else (GIBBS_SWEEPS if gibbs else VB_ITERATIONS)
        return TreeVBConfig(
            n_topics=int(self.n_topics), normalization=self.normalization,  # type: ignore[arg-type]
            estep=self.inference, doc_topic_prior_mode=mode, doc_topic_prior=value,  # type: ignore[arg-type]
            max_iter=int(max_iter), tol=float(self.tol), max_doc_iter=int(self.max_doc_iter),
            doc_tol=float(self.doc_tol), seed=int(self.seed), burn_in=int(self.burn_in), samples=int(self.samples),
            hybrid_init="random" if self.inference == "hybrid" else "progressive", init_shape=float(self.init_shape),
            sync_every=int(self.sync_every), sparse=bool(self.sparse),
        )

    def online_config(self) -> OnlineConfig:
        """The minibatch settings of ``method="online"`` (validated).

        Returns
        -------
        OnlineConfig
            Run as Dask tasks (the only executor of the online tree driver).
        """
        self._validate_params()
        return OnlineConfig(batch_size=int(self.batch_size), tau0=float(self.tau0), kappa=float(self.kappa),
                            passes=int(self.passes), shuffle_window=int(self.shuffle_window), executor="tasks")

    def _refuse_unused(self) -> None:
        """Refuse parameters set away from their defaults that the chosen scheme does not read."""
        if self.method == "online" and self.inference == "gibbs":
            raise InvalidParameterError("method='online' with inference='gibbs': online tree LDA is variational; use "
                                        "inference 'vb' or 'hybrid' online, or method='batch' for the sampler")
        unused = dict(_GIBBS_UNUSED if self.inference == "gibbs" else _VB_UNUSED)
        unused.update(_ONLINE_UNUSED if self.method == "online" else _BATCH_UNUSED)
        given = [f"{name}={getattr(self, name)!r}" for name, default in unused.items() if getattr(self, name) != default]
        if given:
            scheme = f"inference={self.inference!r}" + (", method='online'" if self.method == "online" else "")
            reads = ("gibbs runs max_iter sweeps with a fixed alpha, synchronized every sync_every sweeps"
                     if self.inference == "gibbs" else "online VB runs passes over minibatches of batch_size"
                     if self.method == "online" else "sync_every is gibbs', batch_size, tau0, kappa, passes and "
                     "shuffle_window are method='online''s")
            raise InvalidParameterError(f"{', '.join(given)} given with {scheme}, which does not use them ({reads}); "
                                        "leave them at their defaults")

    def _tree_for(self, corpus: Corpus) -> tuple[PriorTree, str | None]:
        if self.prior_tree is None:
            raise InvalidParameterError("TreeLDA needs prior_tree: a tree built by `topicflow tree build DICT "
                                        "--store STORE --out TREE` (or a PriorTree)")
        if isinstance(self.prior_tree, PriorTree):
            return self.prior_tree, None
        tree, info = read_tree(self.prior_tree)
        check_tree_matches(info, corpus)
        return tree, str(self.prior_tree)

    def fit(self, corpus: Any, y: Any = None, *, client: Any = None,
            progress: ProgressReporter = NO_PROGRESS, checkpoint: CheckpointPolicy | None = None) -> TreeLDA:
        """Fit from scratch on a corpus store whose vocabularies the prior tree was built for.

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            Corpus store (a tree is built for one store's vocabularies, so other inputs are refused).
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        progress : ProgressReporter, optional
            Receives per-iteration progress.
        checkpoint : CheckpointPolicy, optional
            Write the driver state every ``every`` iterations, minibatches or (gibbs) synchronization
            rounds, and with ``resume`` continue from it (the same model as an uninterrupted run).

        Returns
        -------
        TreeLDA
            ``self``, fitted.

        Raises
        ------
        InvalidParameterError
            A parameter outside its allowed values, no prior tree, or an input that is not a store.
        VocabularyMismatchError
            The tree was built for other vocabularies.
        """
        config = self.config()
        client = split_client(y, client)
        if not isinstance(corpus, (str, os.PathLike, Corpus)):
            raise InvalidParameterError(f"TreeLDA fits a corpus store (path or Corpus), not {type(corpus).__name__}: "
                                        "the prior tree is built for a store's vocabularies (`topicflow tree build`)")
        online = self.online_config() if self.method == "online" else None
        store = as_corpus(corpus)
        tree, source = self._tree_for(store)
        if online is not None:
            streamed = fit_online_tree(store, tree, config, online, client=client, split_every=self.split_every,
                                       progress=progress, checkpoint=checkpoint)
            self.model_ = online_tree_model(store, streamed, config, online, tree_source=source)
        elif config.estep == "gibbs":
            result = fit_gibbs_tree(store, tree, config, client=client, progress=progress, checkpoint=checkpoint)
            self.model_ = tree_model(store, result, config, tree_source=source, method="gibbs")
        else:
            result = fit_batch_tree_vb(store, tree, config, client=client, split_every=self.split_every,
                                       progress=progress, checkpoint=checkpoint)
            self.model_ = tree_model(store, result, config, tree_source=source)
        self._set_attributes_from_model()
        return self

    def partial_fit(self, corpus: Any, y: Any = None, *, client: Any = None, shards: Sequence[int] | None = None,
                    progress: ProgressReporter = NO_PROGRESS) -> TreeLDA:
        """Run online VB over the store's shards the model has not seen, continuing its state and step sizes.

        The first call starts an online model (as ``fit`` with ``method="online"`` over ``shards``);
        later calls continue it as ``topicflow update`` does
        (:func:`~topicflow.pipeline.tree_lda.continue_tree_online`): from a batch or Gibbs model too
        (then at t = ceil(n_docs / batch_size); a Gibbs model with the hybrid E-step), and new terms
        of a store grown by ``topicflow append`` join the tree under the root.

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            The store.
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
        shards : sequence of int, optional
            Store positions of the shards to process, in order; by default the unseen ones.
        progress : ProgressReporter, optional

        Returns
        -------
        TreeLDA
            ``self``, updated.

        Raises
        ------
        InvalidParameterError
            ``inference="gibbs"`` on the first call, or an input that is not a store.
        VocabularyMismatchError
            A store whose vocabularies do not extend the model's.
        """
        online_twin = type(self)(**{**self.get_params(), "method": "online", **_ONLINE_UNUSED})
        online = online_twin.online_config()
        client = split_client(y, client)
        if not isinstance(corpus, (str, os.PathLike, Corpus)):
            raise InvalidParameterError(f"TreeLDA.partial_fit reads a corpus store (path or Corpus), not "
                                        f"{type(corpus).__name__}")
        store = as_corpus(corpus)
        model: SavedModel | None = getattr(self, "model_", None)
        if model is None:
            config = online_twin.config()
            tree, source = self._tree_for(store)
            streamed = fit_online_tree(store, tree, config, online, shards=shards, client=client,
                                       split_every=self.split_every, progress=progress)
            self.model_ = online_tree_model(store, streamed, config, online, tree_source=source, shards=shards)
        else:
            self.model_, _, _ = continue_tree_online(model, store, online, shards=shards, client=client,
                                                     split_every=self.split_every, progress=progress)
        self._set_attributes_from_model()
        return self

    def _set_attributes_from_model(self) -> None:
        model: SavedModel = self.model_
        state = model.state
        langs = state.languages
        single = len(langs) == 1
        words = state.topic_word()
        self.components_ = state.topic_word_var[langs[0]] if single else dict(state.topic_word_var)
        self.topic_word_ = words[langs[0]] if single else words
        self.doc_topic_prior_ = np.asarray(state.doc_topic_prior)
        tree_state, layout = saved_tree_state(model)
        self.edge_var_: FloatArray = tree_state.edge_var
        self.prior_tree_ = layout.tree
        self.vocabularies_ = dict(model.vocabularies)
        self.languages_ = list(langs)
        method = model.info.method
        self.trace_: list[Any] = [(TreeMinibatchRecord if method == "online" else IterationRecord)(**r)
                                  for r in model.info.trace]
        last = self.trace_[-1] if self.trace_ else None
        self.n_iter_ = (last.iteration if last is not None else 0) if method == "gibbs" else len(self.trace_)
        online = model.info.online
        self.n_docs_seen_ = int(online["docs_seen"]) if online else int(model.info.corpus.get("n_docs", 0))
        self.converged_ = bool(model.info.converged)
        if single:
            self.n_features_in_ = len(self.vocabularies_[langs[0]])

    def top_terms(self, n: int = 10, language: str | None = None) -> list[list[tuple[str, float]]]:
        """Return the ``n`` most probable terms of every topic in one language.

        Parameters
        ----------
        n : int, default 10
        language : str, optional
            Required on a multilingual model.

        Returns
        -------
        list of list of (str, float)
        """
        model = self._check_fitted()
        langs = model.state.languages
        if language is None:
            if len(langs) != 1:
                raise InvalidParameterError(f"the model has languages {list(langs)}; pass language=")
            language = langs[0]
        if language not in langs:
            raise InvalidParameterError(f"language {language!r} is not one of the model's {list(langs)}")
        rows = model.state.topic_word()[language]
        vocab = model.vocabularies[language]
        return [[(vocab.term_of(int(w)), float(row[w])) for w in np.argsort(-row, kind="stable")[:n]] for row in rows]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TreeLDA:
        """Load a model saved by :meth:`save` or ``topicflow fit --prior-tree``.

        Parameters
        ----------
        path : str or os.PathLike
            Model directory.

        Returns
        -------
        TreeLDA
            A fitted estimator (its ``prior_tree`` is the saved tree).

        Raises
        ------
        InvalidParameterError
            The model is not of the tree_lda family.
        """
        model = load_model(path)
        if not is_tree_model(model):
            raise InvalidParameterError(f"{str(path)!r} is a model of the {model.info.family!r} family, not tree_lda; "
                                        "load it with topicflow.LDA.load or topicflow.HDP.load")
        config = saved_tree_config(model)
        alpha: str | float = config.doc_topic_prior_mode if config.doc_topic_prior_mode != "fixed" \
            else config.initial_alpha
        params: dict[str, Any] = dict(
            n_topics=config.n_topics, prior_tree=saved_tree(model), inference=config.estep,
            normalization=config.normalization, alpha=alpha,
            alpha_init=(config.initial_alpha if config.doc_topic_prior_mode != "fixed"
                        and config.initial_alpha != 1.0 / config.n_topics else None),
            max_iter=config.max_iter, tol=config.tol, max_doc_iter=config.max_doc_iter, doc_tol=config.doc_tol,
            burn_in=config.burn_in, samples=config.samples, init_shape=config.init_shape, seed=config.seed,
            sync_every=config.sync_every, sparse=config.sparse,
        )
        estimator = cls(**{**params, **_online_params(model)})
        estimator.model_ = model
        estimator._set_attributes_from_model()
        return estimator


def _online_params(model: SavedModel) -> dict[str, Any]:
    """The TreeLDA minibatch parameters of a saved online tree model (none for batch and gibbs)."""
    if model.info.method != "online" or not model.info.online:
        return {}
    online = OnlineConfig.from_dict(model.info.online["config"])
    return {"method": "online", "batch_size": online.batch_size, "tau0": online.tau0, "kappa": online.kappa,
            "passes": online.passes, "shuffle_window": online.shuffle_window, "max_iter": None,
            "tol": _ONLINE_UNUSED["tol"]}
