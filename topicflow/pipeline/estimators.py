"""The estimator façade: ``topicflow.LDA`` in the style of scikit-learn.

``__init__`` only stores keyword parameters; ``fit`` validates them once, runs batch variational
Bayes on Dask (the given client, else the current one, else the threaded scheduler) and sets the
fitted attributes, whose names end in ``_``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, NotFittedError
from topicflow.io.model_store import SavedModel, load_model, save_model
from topicflow.io.zarr_shards import Corpus
from topicflow.models.priors import SeedTopic
from topicflow.pipeline.fit import FitResult, IterationRecord, VBConfig, fit_batch_vb
from topicflow.pipeline.infer import (
    EvaluationResult,
    evaluate_model,
    fold_in_params,
    infer_doc_topics,
    model_blocks,
)
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter




def as_corpus(corpus: Any) -> Corpus:
    """Accept a store path or an opened :class:`Corpus`."""
    if isinstance(corpus, Corpus):
        return corpus
    if isinstance(corpus, (str, os.PathLike)):
        return Corpus.open(corpus)
    raise InvalidParameterError(
        f"expected a corpus store path or topicflow.Corpus, got {type(corpus).__name__}; build a store "
        "with `topicflow ingest` or topicflow.pipeline.ingest.ingest_corpus first."
    )


def parse_alpha(alpha: str | float) -> tuple[str, float | None]:
    """``"auto"``, ``"symmetric"`` or a positive number (fixed symmetric alpha)."""
    if isinstance(alpha, str) and alpha in ("auto", "symmetric"):
        return alpha, None
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"alpha must be 'auto', 'symmetric' or a positive number, got {alpha!r}"
        ) from None
    if not value > 0:
        raise InvalidParameterError(f"alpha must be positive, got {alpha!r}")
    return "fixed", value


class LDA:
    """Latent Dirichlet allocation by batch variational Bayes over an out-of-core corpus store.

    A store with several languages gives polylingual LDA (documents share theta across languages).

    Parameters
    ----------
    n_topics : int
    alpha : {"auto", "symmetric"} or float, default "auto"
        ``auto`` learns an asymmetric alpha by Newton-Raphson; ``symmetric`` learns one shared value;
        a number fixes a symmetric alpha.
    eta : float, default 0.01
        Symmetric topic-word prior.
    max_iter : int, default 50
    tol : float, default 1e-4
        Stop when the relative ELBO change falls below it.
    doc_max_iter, doc_tol : per-document E-step limits (mean absolute change of gamma).
    seed : int
    seed_topics : sequence of SeedTopic, optional
        Informed priors (see :func:`topicflow.models.priors.informed_prior`).
    seed_strength : float
    optimize_eta : bool
    split_every : int, optional
        Fan-in of the statistics tree reduction (default from ``topicflow.split-every``).
    warm_start : bool, default False
        After ``cold_iterations`` (10) cold iterations, start each document's E-step from its gamma of
        the previous iteration (kept on disk beside the store, or in ``topicflow.scratch-dir``). Off by
        default: measured on planted corpora it saves little time, and started too early it locks
        documents into the first random topics (alpha collapses).

    Attributes
    ----------
    components_ : ndarray of shape (n_topics, n_terms), or dict of them per language
        lambda.
    topic_word_ : same, rows normalized.
    doc_topic_prior_ : ndarray of shape (n_topics,)
    topic_names_ : list of str
    vocabularies_ : dict of str to Vocabulary
    trace_ : list of IterationRecord
    n_iter_ : int
    converged_ : bool

    Examples
    --------
    >>> model = LDA(n_topics=20).fit("corpus.zarr")          # doctest: +SKIP
    >>> model.perplexity("heldout.zarr")                      # doctest: +SKIP
    """

    def __init__(
        self, n_topics: int = 10, *, alpha: str | float = "auto", eta: float = 0.01, max_iter: int = 50,
        tol: float = 1e-4, doc_max_iter: int = 100, doc_tol: float = 1e-3, seed: int = 0,
        seed_topics: Sequence[SeedTopic] = (), seed_strength: float = 1.0, optimize_eta: bool = False,
        split_every: int | None = None, warm_start: bool = False,
    ) -> None:
        self.n_topics = n_topics
        self.alpha = alpha
        self.eta = eta
        self.max_iter = max_iter
        self.tol = tol
        self.doc_max_iter = doc_max_iter
        self.doc_tol = doc_tol
        self.seed = seed
        self.seed_topics = seed_topics
        self.seed_strength = seed_strength
        self.optimize_eta = optimize_eta
        self.split_every = split_every
        self.warm_start = warm_start

    def __repr__(self) -> str:
        return f"LDA(n_topics={self.n_topics}, alpha={self.alpha!r}, eta={self.eta!r}, seed={self.seed})"

    def _config(self) -> VBConfig:
        mode, value = parse_alpha(self.alpha)
        return VBConfig(
            n_topics=int(self.n_topics), alpha_mode=mode, alpha=value, eta=float(self.eta),  # type: ignore[arg-type]
            optimize_eta=bool(self.optimize_eta), max_iter=int(self.max_iter), tol=float(self.tol),
            doc_max_iter=int(self.doc_max_iter), doc_tol=float(self.doc_tol), seed=int(self.seed),
            seed_topics=tuple(self.seed_topics), seed_strength=float(self.seed_strength),
            warm_start=bool(self.warm_start),
        )

    # ------------------------------------------------------------------ fitting

    def fit(self, corpus: Any, client: Any = None, *, progress: ProgressReporter = NO_PROGRESS) -> LDA:
        """Fit on a corpus store (path or :class:`Corpus`); returns ``self``."""
        corpus = as_corpus(corpus)
        config = self._config()
        result = fit_batch_vb(corpus, config, client=client, split_every=self.split_every, progress=progress)
        self._set_fitted(result, corpus, config)
        return self

    def _set_fitted(self, result: FitResult, corpus: Corpus, config: VBConfig) -> None:
        state = result.state
        self.model_ = SavedModel(
            state=state,
            vocabularies={lang: corpus.vocabulary(lang) for lang in state.languages},
            info={
                "kind": "vb_lda",
                "method": "batch",
                "settings": config.to_dict(),
                "trace": [r.to_dict() for r in result.trace],
                "converged": result.converged,
                "unknown_seed_words": result.unknown_seed_words,
                "corpus": {
                    "path": str(corpus.path), "n_docs": len(corpus), "n_tokens": corpus.n_tokens,
                    "shards": [{"id": s.shard_id, "checksum": s.checksum} for s in corpus.shards],
                },
            },
        )
        self._set_attributes_from_model()
        self.trace_: list[IterationRecord] = list(result.trace)

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
        trace = self.model_.info.get("trace", [])
        self.n_iter_ = len(trace)
        self.converged_ = bool(self.model_.info.get("converged", False))

    def _check_fitted(self) -> SavedModel:
        model = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError("this LDA is not fitted yet; call fit(corpus) or LDA.load(path) first.")
        return model

    # ------------------------------------------------------------------ using the model

    def transform(self, corpus: Any) -> Any:
        """Document-topic proportions (rows sum to 1) as a lazy ``(n_docs, n_topics)`` dask array."""
        import dask
        import dask.array as da

        from topicflow.tasks.estep import graph_token, map_fold_in

        model = self._check_fitted()
        corpus = as_corpus(corpus)
        token = graph_token(corpus.token(), model.info.get("saved"), "transform", id(self))
        blocks, maps = model_blocks(model, corpus, token=token)
        topics = dask.delayed(model.state.prepared_topics(list(maps)), traverse=False, name=f"topics-{token}")
        thetas = map_fold_in(blocks, topics, model.state.doc_topic_prior, fold_in_params(model), token=token)
        k = model.state.n_topics
        return da.concatenate(
            [da.from_delayed(t, shape=(s.n_docs, k), dtype=np.float64) for t, s in zip(thetas, corpus.shards)],
            axis=0,
        )

    def transform_to_zarr(self, corpus: Any, out: str | os.PathLike[str], client: Any = None, *,
                          overwrite: bool = False) -> int:
        """Write document-topic proportions out of core (see :mod:`topicflow.io.doc_topics`)."""
        return infer_doc_topics(self._check_fitted(), as_corpus(corpus), Path(out), client=client, overwrite=overwrite)

    def evaluate(self, corpus: Any, client: Any = None, *, seed: int = 0) -> EvaluationResult:
        """Held-out document-completion perplexity and per-word ELBO bound on ``corpus``."""
        return evaluate_model(self._check_fitted(), as_corpus(corpus), client=client, seed=seed,
                              split_every=self.split_every)

    def perplexity(self, corpus: Any, client: Any = None) -> float:
        """Held-out perplexity by document completion (lower is better)."""
        return self.evaluate(corpus, client).perplexity

    def score(self, corpus: Any, client: Any = None) -> float:
        """Per-word variational lower bound on ``corpus`` with the topics fixed (higher is better)."""
        return self.evaluate(corpus, client).elbo_per_token

    def top_terms(self, n: int = 10, language: str | None = None) -> list[list[tuple[str, float]]]:
        """The ``n`` most probable terms of every topic, with their probabilities."""
        model = self._check_fitted()
        lang = language or model.state.languages[0]
        topic_word = model.state.topic_word()[lang]
        vocab = model.vocabularies[lang]
        order = np.argsort(-topic_word, axis=1, kind="stable")[:, :n]
        return [[(vocab.term_of(int(w)), float(topic_word[k, w])) for w in order[k]] for k in range(len(order))]

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        save_model(Path(path), self._check_fitted(), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LDA:
        model = load_model(Path(path))
        config = VBConfig.from_dict(model.info.get("settings", {"n_topics": model.state.n_topics}))
        estimator = cls(
            n_topics=config.n_topics,
            alpha=config.alpha_mode if config.alpha_mode != "fixed" else config.initial_alpha,
            eta=config.eta, max_iter=config.max_iter, tol=config.tol, doc_max_iter=config.doc_max_iter,
            doc_tol=config.doc_tol, seed=config.seed, seed_topics=config.seed_topics,
            seed_strength=config.seed_strength, optimize_eta=config.optimize_eta, warm_start=config.warm_start,
        )
        estimator.model_ = model
        estimator._set_attributes_from_model()
        estimator.trace_ = [IterationRecord(**r) for r in model.info.get("trace", [])]
        return estimator
