"""Growing a fitted model to a corpus store whose vocabulary grew by appends (pure, no I/O).

A store's vocabulary only ever grows at its end (``topicflow append --promote-min-df``): every term
keeps its id and new terms take ids ``V, V+1, ...``. A model fitted on an earlier vocabulary version
is therefore a prefix of the store's current vocabulary, and can be extended column by column
instead of refitted. This module checks that prefix property and extends the model's state and
vocabulary; it must not read files, log, or import dask/zarr.

Glossary (Blei et al. 2003; Hoffman et al. 2010):
    topic_word_var (lambda, per language (n_topics, n_terms)): Dirichlet parameters of q(beta)
    topic_word_prior (eta, per language: a scalar or (n_topics, n_terms)): prior of beta
    n_terms: vocabulary size of one language; "new terms" are the store's terms past the model's
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.models.common.validation import parse_positive_float
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState

__all__ = ["check_vocabulary_prefix", "grow_state", "grow_vocabulary", "promote_candidates"]

_WHAT_TO_DO = (
    "Term ids of the model do not mean the same terms in this store (was the store re-ingested, or "
    "is it another store?). Refit the model on this store (`topicflow fit STORE --model NEW`), or use "
    "`topicflow infer MODEL STORE`, which maps terms by string."
)


def check_vocabulary_prefix(
    model_terms: Sequence[str] | np.ndarray,
    store_terms: Sequence[str] | np.ndarray,
    *,
    language: str,
    model_path: str,
    store_path: str,
) -> int:
    """Number of store terms past the model's, after checking the model's terms are a prefix.

    Parameters
    ----------
    model_terms : sequence of str, length n_terms_model
        The model's vocabulary of ``language``, in term-id order.
    store_terms : sequence of str, length n_terms_store
        The store's current vocabulary of ``language``, in term-id order.
    language : str
    model_path, store_path : str
        Only used in the error message.

    Returns
    -------
    int
        ``n_terms_store - n_terms_model`` (0 when the vocabularies are equal).

    Raises
    ------
    VocabularyMismatchError
        Some term id means another term in the store, or the model has terms the store lacks; the
        message names the first differing position and its terms, and says what to do.

    Examples
    --------
    >>> check_vocabulary_prefix(["tax", "fox"], ["tax", "fox", "zebra"], language="default",
    ...                         model_path="m", store_path="s.zarr")
    1
    """
    model = np.asarray(model_terms, dtype=object)
    store = np.asarray(store_terms, dtype=object)
    common = min(len(model), len(store))
    differs = np.flatnonzero(model[:common] != store[:common])
    where = f"language {language!r} of model {model_path!r} and store {store_path!r}"
    if len(differs):
        position = int(differs[0])
        raise VocabularyMismatchError(
            f"{where}: the model's vocabulary is not a prefix of the store's; term id {position} is "
            f"{str(model[position])!r} in the model but {str(store[position])!r} in the store. "
            + _WHAT_TO_DO,
            path=store_path,
        )
    if len(model) > len(store):
        raise VocabularyMismatchError(
            f"{where}: the model has {len(model)} terms but the store only {len(store)}; from term id "
            f"{len(store)} ({str(model[len(store)])!r}) on, the model has terms the store lacks. "
            + _WHAT_TO_DO,
            path=store_path,
        )
    return len(store) - len(model)


def grow_state(state: LDAState, new_sizes: Mapping[str, int], base_prior: float) -> LDAState:
    """``state`` extended to larger vocabularies, new topic columns initialized from the prior.

    For an unseen term the posterior equals the prior, so the new columns of lambda are eta: the
    language's scalar eta, or ``base_prior`` where eta is a matrix (informed priors), whose new
    columns are ``base_prior`` as well (a new term is seeded in no topic). A scalar eta stays scalar.

    Parameters
    ----------
    state : LDAState
    new_sizes : mapping of str to int
        Vocabulary size (total, not the number of new terms) of each language after growth, e.g.
        ``corpus.vocab_sizes()``. Languages left out, or whose size is unchanged, are not touched.
    base_prior : float
        Positive: eta of new terms in languages whose eta is a matrix.

    Returns
    -------
    LDAState
        A new state; ``state`` is not modified. Each grown language has
        ``topic_word_var[lang]`` of shape (n_topics, new_sizes[lang]), float64.

    Raises
    ------
    InvalidParameterError
        A language unknown to the model, a size smaller than the model's vocabulary, or a
        ``base_prior`` that is not a positive finite number.

    Notes
    -----
    NumPy equivalent for one language: ``np.hstack([lam, np.full((n_topics, n_new), eta)])``.

    Examples
    --------
    >>> state = LDAState({"default": np.ones((2, 3))}, np.full(2, 0.5), {"default": 0.1})
    >>> grow_state(state, {"default": 5}, 0.01).topic_word_var["default"][:, 3:].tolist()
    [[0.1, 0.1], [0.1, 0.1]]
    """
    base_prior = parse_positive_float("base_prior", base_prior)
    lam = dict(state.topic_word_var)
    priors = dict(state.topic_word_prior)
    for lang, size in new_sizes.items():
        if lang not in lam:
            raise InvalidParameterError(
                f"cannot grow language {lang!r}: the model has languages {list(state.languages)!r}."
            )
        n_new = int(size) - state.n_terms(lang)
        if n_new < 0:
            raise InvalidParameterError(
                f"cannot grow language {lang!r} from {state.n_terms(lang)} to {int(size)} terms: "
                "vocabularies only grow."
            )
        if n_new == 0:
            continue
        prior = priors[lang]
        if np.ndim(prior) == 0:
            new_columns = np.full((state.n_topics, n_new), float(prior))
        else:
            new_columns = np.full((state.n_topics, n_new), float(base_prior))
            priors[lang] = np.hstack([np.asarray(prior, dtype=np.float64), new_columns])
        lam[lang] = np.hstack([np.asarray(lam[lang], dtype=np.float64), new_columns])
    return state.with_updates(topic_word_var=lam, topic_word_prior=priors)


def grow_vocabulary(model_vocab: Vocabulary, store_vocab: Vocabulary) -> Vocabulary:
    """The model's vocabulary followed by the store's terms past it (the model keeps its own copy).

    Parameters
    ----------
    model_vocab : Vocabulary
        The model's vocabulary of one language; its terms and frequencies are kept as they are.
    store_vocab : Vocabulary
        The store's current vocabulary of the same language, of which ``model_vocab`` is a prefix
        (check with :func:`check_vocabulary_prefix` first).

    Returns
    -------
    Vocabulary
        Of length ``len(store_vocab)``; the new terms come with the store's frequencies.

    Raises
    ------
    InvalidParameterError
        ``store_vocab`` is shorter than ``model_vocab``.

    Examples
    --------
    >>> old = Vocabulary.from_counts({"tax": 2}, {"tax": 3})
    >>> new = Vocabulary.from_counts({"tax": 2, "zebra": 1}, {"tax": 3, "zebra": 1})
    >>> grow_vocabulary(old, new).terms.tolist()
    ['tax', 'zebra']
    """
    n_model = len(model_vocab)
    if len(store_vocab) < n_model:
        raise InvalidParameterError(
            f"cannot grow a vocabulary of {n_model} terms to {len(store_vocab)}: vocabularies only grow."
        )
    return Vocabulary(
        terms=np.concatenate([np.asarray(model_vocab.terms, dtype=object),
                              np.asarray(store_vocab.terms[n_model:], dtype=object)]),
        doc_freq=np.concatenate([model_vocab.doc_freq, store_vocab.doc_freq[n_model:]]).astype(np.int64),
        corpus_freq=np.concatenate([model_vocab.corpus_freq, store_vocab.corpus_freq[n_model:]]).astype(np.int64),
    )


def promote_candidates(
    vocab: Vocabulary, candidates: Vocabulary, min_df: int
) -> tuple[Vocabulary, Vocabulary]:
    """Move candidate terms found in at least ``min_df`` documents to the end of ``vocab``.

    Parameters
    ----------
    vocab : Vocabulary
        A store's current vocabulary of one language; every term keeps its id.
    candidates : Vocabulary
        Out-of-vocabulary terms with their frequencies, in canonical order (as
        :meth:`Vocabulary.from_counts` builds them), disjoint from ``vocab``.
    min_df : int
        Positive promotion threshold on ``candidates.doc_freq``.

    Returns
    -------
    grown : Vocabulary
        ``vocab`` followed by the promoted terms, in their canonical order, with their candidate
        frequencies: ids ``len(vocab), len(vocab) + 1, ...``.
    remaining : Vocabulary
        The candidates that were not promoted, in the same order.

    Raises
    ------
    InvalidParameterError
        ``min_df`` is not a positive integer.

    Examples
    --------
    >>> vocab = Vocabulary.from_counts({"tax": 3}, {"tax": 5})
    >>> cands = Vocabulary.from_counts({"zebra": 2, "quagga": 1}, {"zebra": 3, "quagga": 1})
    >>> grown, rest = promote_candidates(vocab, cands, 2)
    >>> grown.terms.tolist(), rest.terms.tolist()
    (['tax', 'zebra'], ['quagga'])
    """
    if isinstance(min_df, bool) or not isinstance(min_df, (int, np.integer)) or min_df < 1:
        raise InvalidParameterError(f"promote_min_df must be a positive integer, got {min_df!r}.")
    keep = np.asarray(candidates.doc_freq) >= int(min_df)
    grown = Vocabulary(
        terms=np.concatenate([np.asarray(vocab.terms, dtype=object),
                              np.asarray(candidates.terms, dtype=object)[keep]]),
        doc_freq=np.concatenate([vocab.doc_freq, candidates.doc_freq[keep]]).astype(np.int64),
        corpus_freq=np.concatenate([vocab.corpus_freq, candidates.corpus_freq[keep]]).astype(np.int64),
    )
    remaining = Vocabulary(
        terms=np.asarray(candidates.terms, dtype=object)[~keep],
        doc_freq=np.asarray(candidates.doc_freq, dtype=np.int64)[~keep],
        corpus_freq=np.asarray(candidates.corpus_freq, dtype=np.int64)[~keep],
    )
    return grown, remaining
