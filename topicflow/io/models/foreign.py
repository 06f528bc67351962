"""Models fitted by other libraries (gensim, tomotopy, or any topic-word matrix) as topicflow saved models.

This module owns one conversion: a foreign model's topic-word Dirichlet parameters, its alpha and eta,
and the terms naming its columns become a :class:`~topicflow.io.models.store.SavedModel` over the
vocabulary of the corpus store its documents came from, columns matched by term string. Once saved
with :func:`~topicflow.io.models.store.save_model`, such a model is read, listed (``topicflow topics``),
folded in and evaluated by exactly the code that serves topicflow's own models, so a comparison
between libraries scores every model the same way.

It imports neither gensim nor tomotopy: their models are read through the attributes they document
(duck typing), so topicflow does not depend on them. The saved record has ``kind = "imported"``
and ``model.json`` gains a ``source`` key (kept in :attr:`ModelInfo.extra`) naming the library, its
version, the model's class and the settings it was fitted with. ``topicflow update`` refuses such a
model: continue it in its own library and convert it again.

Glossary (see :mod:`topicflow.models.lda.state`):
    topic_word_var (lambda, (n_topics, n_terms)): Dirichlet parameters of the topics. gensim's
        variational lambda as it is; for a collapsed Gibbs sampler (tomotopy) the topic-word counts
        plus beta, whose normalized rows are the sampler's phi.
    doc_topic_prior (alpha, (n_topics,)); topic_word_prior (eta, beta in the Gibbs papers).
"""
from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.state import LDAState

#: ``ModelInfo.kind`` of a converted model.
IMPORTED_KIND = "imported"


def library_version(obj: Any) -> str | None:
    """The installed version of the distribution whose top-level package defines ``type(obj)``.

    Parameters
    ----------
    obj : object
        A model object of some library.

    Returns
    -------
    str or None
        For example ``"4.4.0"`` for a gensim model; None when the package is not an installed
        distribution.

    Examples
    --------
    >>> library_version(np.zeros(1)) == np.__version__
    True
    """
    package = type(obj).__module__.split(".")[0]
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def column_order(terms: Sequence[str], corpus: Corpus, language: str) -> np.ndarray:
    """For each term of the store's vocabulary, the column of the foreign model that holds it.

    Parameters
    ----------
    terms : sequence of str
        The foreign model's terms, one per column.
    corpus : Corpus
        The store the foreign model was fitted on.
    language : str
        Its language whose vocabulary the columns must match.

    Returns
    -------
    ndarray of shape (n_terms,), int64
        ``lam[:, order]`` has the store's term order.

    Raises
    ------
    VocabularyMismatchError
        The foreign model has a repeated term, or its terms and the store's vocabulary differ (some
        of each side's extra terms are named).
    """
    vocabulary = corpus.vocabulary(language)
    position = {str(term): column for column, term in enumerate(terms)}
    if len(position) != len(terms):
        raise VocabularyMismatchError(
            f"the model to import names {len(terms) - len(position)} of its {len(terms)} columns by a term "
            "already used; give one distinct term per column.", path=str(corpus.path))
    store_terms = [str(term) for term in vocabulary.terms]
    missing = [term for term in store_terms if term not in position]
    extra = sorted(set(position) - set(store_terms))
    if missing or extra:
        raise VocabularyMismatchError(
            f"the model to import does not have the vocabulary of store {str(corpus.path)!r} ({language!r}): "
            f"{len(missing)} store terms are not among its columns (e.g. {missing[:5]}) and {len(extra)} of "
            f"its terms are not in the store (e.g. {extra[:5]}). Fit it on the store's own bags of words "
            "(the store's term ids and counts) so that both have the same terms.", path=str(corpus.path))
    return np.fromiter((position[term] for term in store_terms), dtype=np.int64, count=len(store_terms))


def _positive(name: str, values: np.ndarray, where: str) -> None:
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise InvalidParameterError(f"{where}: {name} must be finite and positive (Dirichlet parameters); "
                                    f"its smallest value is {float(np.min(values))!r}")


def imported_model(topic_word_var: Any, doc_topic_prior: Any, topic_word_prior: Any, terms: Sequence[str],
                   corpus: Corpus, *, source: Mapping[str, Any], language: str | None = None) -> SavedModel:
    """Make a saved model of a foreign model's topic-word parameters, over the store it was fitted on.

    Parameters
    ----------
    topic_word_var : array-like of shape (n_topics, n_model_terms)
        The topics' positive Dirichlet parameters (lambda), columns named by ``terms``.
    doc_topic_prior : float or array-like of shape (n_topics,)
        The document-topic prior (alpha).
    topic_word_prior : float, or array-like of shape (n_model_terms,) or (n_topics, n_model_terms)
        The topic-word prior (eta); kept as a number when all its values are equal, else as a
        (n_topics, n_terms) matrix.
    terms : sequence of str
        The term of each column of ``topic_word_var``; the same set as the store's vocabulary.
    corpus : Corpus
        The store whose bags of words the foreign model was fitted on; its vocabulary becomes the
        model's (columns reordered to it) and its shards are recorded as the model's provenance.
    source : mapping
        Where the model came from (``library``, ``version``, ``class``, ``settings``, ...): saved as
        ``model.json``'s ``source``.
    language : str, optional
        The store's language the model covers (default: its only one).

    Returns
    -------
    SavedModel
        With ``info.kind == "imported"`` and ``info.extra["source"]``.

    Raises
    ------
    InvalidParameterError
        Shapes that disagree, or values that are not finite and positive.
    VocabularyMismatchError
        ``terms`` and the store's vocabulary differ.

    Examples
    --------
    >>> model = imported_model(lam, alpha, 0.01, terms, Corpus.open("train.zarr"),
    ...                        source={"library": "mylib"})   # doctest: +SKIP
    >>> save_model(Path("imported"), model)                   # doctest: +SKIP
    """
    lang = corpus.resolve_language(language)
    where = f"importing a model over store {str(corpus.path)!r}"
    lam = np.asarray(topic_word_var, dtype=np.float64)
    if lam.ndim != 2 or lam.shape[1] != len(terms):
        raise InvalidParameterError(f"{where}: topic_word_var has shape {lam.shape}, expected "
                                    f"(n_topics, {len(terms)}) (one column per term)")
    alpha = np.broadcast_to(np.asarray(doc_topic_prior, dtype=np.float64), (lam.shape[0],)).copy()
    eta = np.asarray(topic_word_prior, dtype=np.float64)
    if eta.ndim > 0 and eta.shape[-1] != lam.shape[1]:
        raise InvalidParameterError(f"{where}: topic_word_prior has shape {eta.shape}, expected a number, "
                                    f"({lam.shape[1]},) or {lam.shape}")
    for name, values in (("topic_word_var", lam), ("doc_topic_prior", alpha), ("topic_word_prior", eta)):
        _positive(name, values, where)
    order = column_order(terms, corpus, lang)
    prior: float | FloatArray
    if eta.ndim == 0 or np.all(eta == eta.flat[0]):
        prior = float(eta.flat[0])
    else:
        prior = np.ascontiguousarray(np.broadcast_to(eta, lam.shape)[:, order])
    state = LDAState(topic_word_var={lang: np.ascontiguousarray(lam[:, order])}, doc_topic_prior=alpha,
                     topic_word_prior={lang: prior})
    info = ModelInfo(kind=IMPORTED_KIND, settings=dict(source.get("settings", {})),
                     corpus=corpus_provenance(corpus, range(corpus.n_shards)), extra={"source": dict(source)})
    return SavedModel(state, {lang: corpus.vocabulary(lang)}, info)


def _settings_of(model: Any, names: Sequence[str]) -> dict[str, Any]:
    """The JSON-able scalar attributes ``names`` of ``model`` that it has."""
    settings: dict[str, Any] = {}
    for name in names:
        value = getattr(model, name, None)
        if isinstance(value, (bool, int, float, str)):
            settings[name] = value
        elif isinstance(value, np.generic):
            settings[name] = value.item()
    return settings


def from_gensim(model: Any, corpus: Corpus, *, language: str | None = None,
                settings: Mapping[str, Any] | None = None) -> SavedModel:
    """Convert a fitted gensim ``LdaModel`` (or ``LdaMulticore``) into a saved model.

    lambda is gensim's variational parameter ``model.state.get_lambda()`` (whose normalized rows are
    ``model.get_topics()``), alpha is ``model.alpha`` and eta ``model.eta``; the column terms are
    ``model.id2word[0 .. num_terms - 1]``, so fit gensim with ``id2word`` mapping the store's term
    ids to its terms.

    Parameters
    ----------
    model : gensim.models.LdaModel
        Fitted on the bags of words of ``corpus``.
    corpus : Corpus
        That store (see :func:`imported_model`).
    language : str, optional
        The store's language (default: its only one).
    settings : mapping, optional
        How it was fitted (passes, iterations, ...), recorded with the model; gensim's own
        ``num_topics``, ``passes``, ``iterations``, ``chunksize``, ``decay``, ``offset``,
        ``gamma_threshold`` and ``random_state`` are added where present.

    Returns
    -------
    SavedModel
        ``info.extra["source"]["library"] == "gensim"``.

    Raises
    ------
    VocabularyMismatchError
        ``model.id2word`` does not name the store's terms.

    Examples
    --------
    >>> lda = LdaModel(bags, id2word=dict(enumerate(terms)), num_topics=20)   # doctest: +SKIP
    >>> save_model(Path("gensim-model"), from_gensim(lda, corpus))           # doctest: +SKIP
    """
    terms = [str(model.id2word[i]) for i in range(int(model.num_terms))]
    recorded = _settings_of(model, ("num_topics", "passes", "iterations", "chunksize", "decay", "offset",
                                    "gamma_threshold", "eval_every", "update_every"))
    source = {"library": "gensim", "version": library_version(model),
              "class": f"{type(model).__module__}.{type(model).__qualname__}",
              "settings": {**recorded, **dict(settings or {})}}
    return imported_model(model.state.get_lambda(), model.alpha, model.eta, terms, corpus, source=source,
                          language=language)


def from_tomotopy(model: Any, corpus: Corpus, *, language: str | None = None,
                  settings: Mapping[str, Any] | None = None) -> SavedModel:
    """Convert a trained tomotopy ``LDAModel`` into a saved model.

    lambda is each topic's raw topic-word weights, ``get_topic_word_dist(k, normalize=False)``: the
    word counts of the topic plus eta, so its normalized rows are tomotopy's own topic-word
    distributions. alpha is ``model.alpha`` (learned when ``optim_interval > 0``, tomotopy's
    default), eta ``model.eta``; the column terms are ``model.used_vocabs``.

    Parameters
    ----------
    model : tomotopy.LDAModel
        Trained on the documents of ``corpus`` (each document's terms repeated by their counts), with
        no vocabulary cut of its own (``min_cf=0``, ``min_df=0``, ``rm_top=0``) and term weighting
        ``ONE``.
    corpus : Corpus
        That store (see :func:`imported_model`).
    language : str, optional
        The store's language (default: its only one).
    settings : mapping, optional
        How it was trained (iterations, workers, ...), recorded with the model; tomotopy's own
        ``k``, ``burn_in``, ``optim_interval``, ``global_step`` and ``tw`` are added.

    Returns
    -------
    SavedModel
        ``info.extra["source"]["library"] == "tomotopy"``.

    Raises
    ------
    VocabularyMismatchError
        Its vocabulary is not the store's (for example tomotopy removed terms of its own).

    Examples
    --------
    >>> mdl = tomotopy.LDAModel(k=20, min_cf=0, rm_top=0)   # doctest: +SKIP
    >>> save_model(Path("tomotopy-model"), from_tomotopy(mdl, corpus))   # doctest: +SKIP
    """
    terms = [str(term) for term in model.used_vocabs]
    lam = np.array([model.get_topic_word_dist(k, normalize=False) for k in range(int(model.k))], dtype=np.float64)
    recorded = _settings_of(model, ("k", "burn_in", "optim_interval", "global_step"))
    recorded["tw"] = str(getattr(model, "tw", ""))
    source = {"library": "tomotopy", "version": library_version(model),
              "class": f"{type(model).__module__}.{type(model).__qualname__}",
              "settings": {**recorded, **dict(settings or {})}}
    return imported_model(lam, np.asarray(model.alpha, dtype=np.float64), float(model.eta), terms, corpus,
                          source=source, language=language)
