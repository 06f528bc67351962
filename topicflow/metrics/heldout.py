"""Model evaluation shared by every system in the benchmarks: document completion and NMI.

This module owns the held-out split of documents (deterministic per global document), the
document-completion log-likelihood that scores any topic model from its topic-word matrix and alpha
alone, and normalized mutual information for clusterings. For the streaming samplers it also owns
the split of whole documents into training and held-out streams, the particle-learning held-out
likelihood and the NMI of each document's most frequent topic. It must not import dask, zarr or logging,
and it does no I/O.

Glossary:
    observed / heldout: the two parts of every test document's tokens
    topic_word (beta, (n_topics, n_terms)): row-normalized topic-word probabilities (point estimate)
    doc_topic_prior (alpha, (n_topics,))
    theta ((n_docs, n_topics)): topic proportions estimated from the observed part
    expected_counts (m_dk, (n_topics,)): expected topic counts of a document's tokens seen so far
    doc_topic_counts (N_dk, (n_docs, n_topics)): tokens of document d assigned to topic k by a sampler

References
----------
Wallach, Murray, Salakhutdinov and Mimno (2009). Evaluation methods for topic models. ICML.
Strehl and Ghosh (2002). Cluster ensembles. JMLR 3, 583-617.
Scott and Baldridge (2013). A recursive estimate for the predictive likelihood in a topic model. AISTATS.
May, Clemmer and Van Durme (2014). Particle filter rejuvenation and latent Dirichlet allocation. ACL.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numba
import numpy as np

from topicflow._typing import FloatArray, IndexArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import (
    DocBlock,
    OrderedBlock,
    block_from_csr,
    expand_entries_into,
    expand_tokens,
    token_docs,
)
from topicflow.models.common.rng import STREAM_SPLIT, counter_key, uniform_from_key
from topicflow.models.common.validation import parse_dirichlet_prior
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.models.lda.vb.layout import (
    PreparedTopics,
    as_block_mapping,
    as_prepared_topics,
    check_blocks,
)
from topicflow.models.lda.vb.params import VBParams

if TYPE_CHECKING:  # scipy.sparse costs a few tenths of a second to import; a fit never needs it
    import scipy.sparse as sp


def _add_exact(partials: list[float], value: float) -> None:
    """Add ``value`` to the exact sum held by ``partials`` (Shewchuk 1997; the recipe behind ``math.fsum``).

    ``partials`` are nonoverlapping floats in increasing magnitude whose exact (unrounded) sum is the
    running total; adding to it is exact, so the total does not depend on the order of the additions.
    """
    i = 0
    for other in partials:
        if abs(value) < abs(other):
            value, other = other, value
        high = value + other
        low = other - (high - value)
        if low:
            partials[i] = low
            i += 1
        value = high
    partials[i:] = [value]


@dataclass(frozen=True, slots=True)
class HeldoutStats:
    """Mergeable held-out log likelihood of some documents: an exact sum, token and document counts.

    ``merge`` is associative and commutative *exactly* (the sum is kept as Shewchuk's nonoverlapping
    partials, not as one rounded float), and :meth:`zeros` is its identity, so the total is the same
    bits whatever the partitioning of the documents, the reduction tree or the number of workers.

    Attributes
    ----------
    log_lik_partials : tuple of float
        Nonoverlapping partials whose exact sum is the sum of the finite per-document log likelihoods.
    n_docs : int
        Documents read (including those with no scored token).
    n_tokens : int
        Tokens scored.
    n_impossible : int
        Documents with a scored token of probability 0 (log likelihood ``-inf``).

    Examples
    --------
    >>> a = HeldoutStats.from_documents(np.array([0.1, 1e20]), np.array([1, 2]))
    >>> b = HeldoutStats.from_documents(np.array([-1e20, 0.2]), np.array([3, 0]))
    >>> a.merge(b).log_lik == 0.1 + 0.2, a.merge(b).n_tokens
    (True, 6)
    """

    log_lik_partials: tuple[float, ...] = ()
    n_docs: int = 0
    n_tokens: int = 0
    n_impossible: int = 0

    @classmethod
    def zeros(cls) -> HeldoutStats:
        """Return the identity of :meth:`merge` (no document).

        Returns
        -------
        HeldoutStats
        """
        return cls()

    @classmethod
    def from_documents(cls, doc_log_lik: FloatArray, doc_tokens: IntArray) -> HeldoutStats:
        """Gather per-document log likelihoods and scored-token counts.

        Parameters
        ----------
        doc_log_lik : ndarray of shape (n_docs,), float64
            Finite, or ``-inf`` for a document with an impossible token.
        doc_tokens : ndarray of shape (n_docs,), int
            Tokens scored per document.

        Returns
        -------
        HeldoutStats

        Raises
        ------
        InvalidParameterError
            Shapes differ, or a value is NaN or ``+inf``.
        """
        values = np.asarray(doc_log_lik, dtype=np.float64)
        tokens = np.asarray(doc_tokens, dtype=np.int64)
        if values.shape != tokens.shape or values.ndim != 1:
            raise InvalidParameterError(
                f"doc_log_lik and doc_tokens must be 1-d of equal length, got {values.shape!r} and {tokens.shape!r}"
            )
        impossible = values == -np.inf
        if np.any(np.isnan(values) | (values == np.inf)):
            raise InvalidParameterError("a document's log likelihood is NaN or +inf")
        partials: list[float] = []
        for value in values[~impossible].tolist():
            _add_exact(partials, value)
        return cls(tuple(partials), int(values.shape[0]), int(tokens.sum()), int(impossible.sum()))

    def merge(self, other: HeldoutStats) -> HeldoutStats:
        """Return the statistics of both sets of documents.

        Parameters
        ----------
        other : HeldoutStats

        Returns
        -------
        HeldoutStats
        """
        partials = list(self.log_lik_partials)
        for value in other.log_lik_partials:
            _add_exact(partials, value)
        return HeldoutStats(tuple(partials), self.n_docs + other.n_docs, self.n_tokens + other.n_tokens,
                            self.n_impossible + other.n_impossible)

    @property
    def log_lik(self) -> float:
        """The sum of the per-document log likelihoods, exactly rounded (``-inf`` if one is impossible)."""
        return -math.inf if self.n_impossible else math.fsum(self.log_lik_partials)

    @property
    def log_lik_per_token(self) -> float:
        """``log_lik / n_tokens`` in nats per token (NaN when no token was scored)."""
        return self.log_lik / self.n_tokens if self.n_tokens else math.nan

    @property
    def perplexity(self) -> float:
        """``exp(-log_lik_per_token)`` (NaN when no token was scored, ``inf`` beyond the float range)."""
        if not self.n_tokens:
            return math.nan
        return math.exp(-self.log_lik_per_token) if -self.log_lik_per_token < 709.0 else math.inf


def merge_heldout_stats(*parts: HeldoutStats) -> HeldoutStats:
    """Merge any number of :class:`HeldoutStats` left to right (a tree node; module-level so it pickles).

    Parameters
    ----------
    *parts : HeldoutStats

    Returns
    -------
    HeldoutStats
        :meth:`HeldoutStats.zeros` for no part.

    Examples
    --------
    >>> merge_heldout_stats(HeldoutStats(n_docs=1), HeldoutStats(n_docs=2)).n_docs
    3
    """
    total = HeldoutStats.zeros()
    for part in parts:
        total = total.merge(part)
    return total


@numba.njit(nogil=True, cache=True)
def _split_counts(indptr, counts, first_doc, seed, fraction, observed):
    """observed[j] = tokens of entry j drawn into the observed part (partial Fisher-Yates per doc)."""
    max_len = 0
    for d in range(indptr.shape[0] - 1):
        n = 0
        for j in range(indptr[d], indptr[d + 1]):
            n += counts[j]
        max_len = max(max_len, n)
    owner = np.empty(max_len, dtype=np.int64)
    entries = np.arange(indptr[indptr.shape[0] - 1])
    for d in range(indptr.shape[0] - 1):
        n = expand_entries_into(entries, counts, indptr[d], indptr[d + 1], owner, 0)
        n_observed = int(math.floor(fraction * n + 0.5))
        key = counter_key(seed, STREAM_SPLIT, 0, first_doc + d)
        for i in range(n_observed):
            pick = i + int(uniform_from_key(key, i) * (n - i))
            owner[i], owner[pick] = owner[pick], owner[i]
            observed[owner[i]] += 1


def _subblock(block: DocBlock, counts: IntArray) -> DocBlock:
    """``block`` with new counts per entry, dropping entries whose count is 0."""
    keep = counts > 0
    rows = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=block.n_docs))]).astype(np.int64)
    return DocBlock(
        indptr=indptr, term_ids=block.term_ids[keep], counts=counts[keep].astype(np.int32),
        doc_ids=block.doc_ids, first_doc=block.first_doc, n_terms=block.n_terms, language=block.language,
        labels=block.labels, timestamps=block.timestamps,
    )


def split_doc_tokens(block: DocBlock, *, seed: int, fraction: float = 0.5) -> tuple[DocBlock, DocBlock]:
    """Split every document's tokens at random into an observed and a held-out part.

    Parameters
    ----------
    block : DocBlock
    seed : int
    fraction : float, default 0.5
        Share of each document's tokens that go to the observed part, in (0, 1); a document of N
        tokens gets ``floor(fraction * N + 0.5)`` observed tokens.

    Returns
    -------
    observed : DocBlock
        Same documents (rows, ids, ``first_doc``) as ``block``, with the observed tokens.
    heldout : DocBlock
        Same documents as ``block``, with the other tokens; ``observed`` and ``heldout`` counts add up
        to ``block``'s.

    Raises
    ------
    InvalidParameterError
        ``fraction`` outside (0, 1).

    Notes
    -----
    The draw for a document depends only on ``(seed, first_doc + row)`` through
    ``counter_key(seed, STREAM_SPLIT, 0, doc)``, so a document is split the same way in any block.
    NumPy equivalent per document: ``tokens = np.repeat(term_ids, counts)``; take the first
    ``n_observed`` tokens of a (counter-RNG) permutation as observed, the rest as held out.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.array([[3, 0, 1], [0, 2, 0]])))
    >>> observed, heldout = split_doc_tokens(block, seed=0)
    >>> (observed.to_csr() + heldout.to_csr()).toarray().tolist()
    [[3, 0, 1], [0, 2, 0]]
    """
    if not (0.0 < fraction < 1.0):
        raise InvalidParameterError(f"fraction must be in (0, 1), got {fraction!r}")
    observed = np.zeros(block.counts.shape[0], dtype=np.int64)
    _split_counts(block.indptr.astype(np.int64), block.counts.astype(np.int64), block.first_doc, seed,
                  float(fraction), observed)
    heldout = block.counts.astype(np.int64) - observed
    return _subblock(block, observed), _subblock(block, heldout)


def ordered_term_ids(ordered: OrderedBlock, term_map: IndexArray | None = None) -> tuple[IntArray, IntArray]:
    """Each document's in-vocabulary tokens in reading order, in a model's term ids.

    Parameters
    ----------
    ordered : OrderedBlock
        The ordered-token layer of one shard of one language.
    term_map : ndarray of shape (n_terms,), int, optional
        Store term id -> model term id, -1 for a term the model lacks; None when the ids agree. It
        may cover more terms than ``ordered.n_terms`` (the store's vocabulary grew since the shard).

    Returns
    -------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_kept,), int64
        The tokens kept, in reading order: out-of-vocabulary tokens (negative codes) and terms the
        model lacks are dropped, as the bag of words drops them.

    Raises
    ------
    InvalidParameterError
        A term id at or beyond ``ordered.n_terms`` or a map of the wrong length.

    Examples
    --------
    >>> block = OrderedBlock(np.array([0, 4]), np.array([2, -1, 0, 2], dtype=np.int32),
    ...                      np.array(["xyz"], dtype=object), np.array(["a"], dtype=object), 0, 3)
    >>> [a.tolist() for a in ordered_term_ids(block, np.array([-1, 0, 1]))]
    [[0, 2], [1, 1]]
    """
    tokens = np.asarray(ordered.tokens, dtype=np.int64)
    if tokens.size and tokens.max() >= ordered.n_terms:
        raise InvalidParameterError(
            f"ordered tokens of documents from position {ordered.first_doc} hold term id {int(tokens.max())} "
            f"but the vocabulary has {ordered.n_terms} terms"
        )
    if term_map is not None:
        term_map = np.asarray(term_map, dtype=np.int64)
        if term_map.ndim != 1 or term_map.shape[0] < ordered.n_terms:
            raise InvalidParameterError(f"term_map must cover the {ordered.n_terms} terms, got shape {term_map.shape!r}")
        tokens = np.where(tokens >= 0, term_map[np.maximum(tokens, 0)], -1)
    keep = tokens >= 0
    docs = token_docs(ordered.indptr)
    counts = np.bincount(docs[keep], minlength=ordered.n_docs)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), tokens[keep]


def split_ordered_tokens(
    token_indptr: IntArray, token_terms: IntArray, bag: DocBlock, *, fraction: float = 0.5
) -> tuple[DocBlock, DocBlock]:
    """Split every document's tokens in reading order into its first part (observed) and the rest.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int
    token_terms : ndarray of shape (n_tokens,), int
        Each document's tokens in reading order, in the term ids of ``bag`` (see :func:`ordered_term_ids`).
    bag : DocBlock
        The same documents as a bag of words, whose counts the tokens are (the store's reader
        checks that). Its ids, ``first_doc``, vocabulary size, language and labels are carried over.
    fraction : float, default 0.5
        Share of each document's tokens that are observed, in (0, 1); a document of N tokens has
        its first ``floor(fraction * N + 0.5)`` tokens observed, as :func:`split_doc_tokens` counts them.

    Returns
    -------
    observed : DocBlock
        The first tokens of every document, as counts.
    heldout : DocBlock
        The remaining tokens; with ``observed`` they add up to ``bag``.

    Raises
    ------
    InvalidParameterError
        ``fraction`` outside (0, 1), or tokens that do not fit the bag's documents and vocabulary.

    Notes
    -----
    Document completion with the first half observed (the split of Wallach et al. 2009's document
    completion). NumPy equivalent per document: ``n_obs = floor(f * N + 0.5)``;
    ``observed = np.bincount(tokens[:n_obs])``, ``heldout = np.bincount(tokens[n_obs:])``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> bag = block_from_csr(sp.csr_matrix(np.array([[2, 1, 1]])))
    >>> observed, heldout = split_ordered_tokens(np.array([0, 4]), np.array([2, 0, 1, 0]), bag)
    >>> observed.to_csr().toarray().tolist(), heldout.to_csr().toarray().tolist()
    ([[1, 0, 1]], [[1, 1, 0]])
    """
    import scipy.sparse as sp

    if not (0.0 < fraction < 1.0):
        raise InvalidParameterError(f"fraction must be in (0, 1), got {fraction!r}")
    indptr = np.asarray(token_indptr, dtype=np.int64)
    terms = np.asarray(token_terms, dtype=np.int64)
    shape = (bag.n_docs, bag.n_terms)
    if indptr.shape != (bag.n_docs + 1,) or (terms.size and (terms.min() < 0 or terms.max() >= bag.n_terms)):
        raise InvalidParameterError(
            f"ordered tokens of {indptr.shape[0] - 1} documents do not fit the bag of {bag.n_docs} documents "
            f"over {bag.n_terms} terms"
        )
    docs = token_docs(indptr)
    lengths = np.diff(indptr)
    n_observed = np.floor(fraction * lengths + 0.5).astype(np.int64)
    first = (np.arange(terms.shape[0]) - indptr[docs]) < n_observed[docs]
    ones = np.ones(terms.shape[0], dtype=np.int64)
    observed = sp.csr_matrix((ones[first], (docs[first], terms[first])), shape=shape)
    heldout = sp.csr_matrix((ones[~first], (docs[~first], terms[~first])), shape=shape)

    def as_block(matrix: sp.csr_matrix) -> DocBlock:
        return block_from_csr(matrix, doc_ids=bag.doc_ids, first_doc=bag.first_doc, language=bag.language,
                              labels=bag.labels)

    return as_block(observed), as_block(heldout)


def bag_token_sequences(blocks: Mapping[str, DocBlock], topics: PreparedTopics) -> tuple[IntArray, IntArray]:
    """Each document's tokens of every language as one sequence of stacked term ids, in CSR order.

    Parameters
    ----------
    blocks : mapping of str to DocBlock
        The same documents in each language (a subset of ``topics.languages``).
    topics : PreparedTopics
        Gives the language order and the offset of each language's ids.

    Returns
    -------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int64
        Document d's tokens: its terms of the first language in ascending id order, each repeated
        by its count (:func:`~topicflow.models.common.blocks.expand_tokens`), then those of the next
        language, ids shifted by the language's offset.

    Examples
    --------
    >>> from topicflow.models.lda.vb.layout import prepare_topics
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.array([[0, 2, 1]])))
    >>> [a.tolist() for a in bag_token_sequences({"default": block}, prepare_topics({"default": np.ones((1, 3))}))]
    [[0, 3], [1, 1, 2]]
    """
    sequences = {lang: expand_tokens(block) for lang, block in blocks.items()}
    return join_language_sequences(sequences, topics)


def join_language_sequences(
    sequences: Mapping[str, tuple[IntArray, IndexArray]], topics: PreparedTopics
) -> tuple[IntArray, IntArray]:
    """Concatenate, per document, the token sequences of its languages in ``topics.languages`` order.

    Parameters
    ----------
    sequences : mapping of str to (token_indptr, token_terms)
        Per language, the same documents' tokens in that language's term ids.
    topics : PreparedTopics
        Language order and offsets of the stacked term ids.

    Returns
    -------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int64
        Stacked ids (a language's id plus its offset).

    Raises
    ------
    InvalidParameterError
        No language, a language the topics lack, or languages holding different numbers of documents.

    Examples
    --------
    >>> from topicflow.models.lda.vb.layout import prepare_topics
    >>> topics = prepare_topics({"en": np.ones((1, 3)), "de": np.ones((1, 2))})
    >>> seqs = {"de": (np.array([0, 1, 1]), np.array([1])), "en": (np.array([0, 1, 3]), np.array([2, 0, 1]))}
    >>> [a.tolist() for a in join_language_sequences(seqs, topics)]
    [[0, 2, 4], [2, 4, 0, 1]]
    """
    unknown = sorted(set(sequences) - set(topics.languages))
    if not sequences or unknown:
        raise InvalidParameterError(
            f"token sequences of languages {sorted(sequences)} do not fit the topics' {list(topics.languages)}"
        )
    langs = [lang for lang in topics.languages if lang in sequences]
    sizes = {lang: np.asarray(sequences[lang][0]).shape[0] - 1 for lang in langs}
    if len(set(sizes.values())) != 1:
        raise InvalidParameterError(f"languages hold different numbers of documents: {sizes!r}")
    docs, terms, order = [], [], []
    for rank, lang in enumerate(langs):
        indptr, ids = (np.asarray(a, dtype=np.int64) for a in sequences[lang])
        docs.append(token_docs(indptr))
        terms.append(ids + topics.offsets[topics.languages.index(lang)])
        order.append(np.full(ids.shape[0], rank, dtype=np.int64))
    all_docs = np.concatenate(docs)
    by_doc = np.lexsort((np.concatenate(order), all_docs))  # stable: keeps each language's order
    counts = np.bincount(all_docs, minlength=sizes[langs[0]])
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), np.concatenate(terms)[by_doc]


@numba.njit(nogil=True, cache=True)
def _heldout_doc_log_lik(indptr, term_ids, counts, theta, term_topic, out):
    """out[d] += sum_w n_dw log(sum_k theta_dk beta_kw) for every document d of one language."""
    for d in range(indptr.shape[0] - 1):
        total = 0.0
        for j in range(indptr[d], indptr[d + 1]):
            prob = 0.0
            for k in range(theta.shape[1]):
                prob += theta[d, k] * term_topic[term_ids[j], k]
            total += counts[j] * math.log(prob) if prob > 0.0 else -math.inf
        out[d] += total


def completion_doc_log_likelihood(
    observed_blocks: Mapping[str, DocBlock] | DocBlock,
    heldout_blocks: Mapping[str, DocBlock] | DocBlock,
    topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
) -> tuple[FloatArray, IntArray]:
    """Document-completion log-likelihood of every document's held-out tokens given its observed ones.

    Parameters
    ----------
    observed_blocks, heldout_blocks : mapping of str to DocBlock, or DocBlock
        The observed and the scored tokens of the same documents per language (the two outputs of
        :func:`split_doc_tokens` or :func:`split_ordered_tokens`).
    topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), float64, or PreparedTopics
        Row-normalized topic-word probabilities beta of any system (ours, gensim, sklearn, ...).
        When scoring many blocks, pass ``prepare_topics(topic_word)`` once instead of the mapping.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha of that system.
    params : VBParams
        Fold-in settings (``max_doc_iter``, ``doc_tol``).

    Returns
    -------
    doc_log_lik : ndarray of shape (n_docs,), float64
        Per document, the sum over its held-out tokens (of every language) of
        log sum_k theta_dk beta_kw; ``-inf`` if one has probability 0 under the model.
    doc_tokens : ndarray of shape (n_docs,), int64
        Held-out tokens per document.

    Raises
    ------
    InvalidParameterError
        Languages, shapes or priors do not fit (see :func:`topicflow.models.lda.vb.estep.fold_in_block`),
        or the observed and held-out blocks hold different numbers of documents.

    Notes
    -----
    theta_d is gamma_d normalized, from a VB fold-in on the observed tokens with beta held fixed as a
    point estimate (``topic_word`` is passed where exp(E[log beta]) would go), so every system is
    scored from beta and alpha alone (Wallach et al. 2009, document completion). A polylingual
    document has one theta for all its languages, folded in from the observed tokens of all of them.
    A document's value depends on that document only, never on the block it is read in. NumPy
    equivalent: ``sum(n_dw * np.log(theta[d] @ topic_word[:, w]))`` over held-out entries of d.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.array([[2, 2], [1, 3]])))
    >>> obs, held = split_doc_tokens(block, seed=1)
    >>> ll, n = completion_doc_log_likelihood(obs, held, {"default": np.full((1, 2), 0.5)}, 1.0, VBParams(1))
    >>> np.round(ll / np.log(0.5), 12).tolist(), n.tolist()
    ([2.0, 2.0], [2, 2])
    """
    observed = as_block_mapping(observed_blocks)
    heldout = as_block_mapping(heldout_blocks)
    topics = as_prepared_topics(topic_word)
    theta = fold_in_block(observed, topics, doc_topic_prior, params)
    if check_blocks(heldout, topics) != theta.shape[0]:
        raise InvalidParameterError(
            f"held-out blocks hold {check_blocks(heldout, topics)} documents but the observed blocks hold "
            f"{theta.shape[0]}; pass the two outputs of split_doc_tokens for the same block"
        )
    doc_log_lik = np.zeros(theta.shape[0], dtype=np.float64)
    doc_tokens = np.zeros(theta.shape[0], dtype=np.int64)
    for lang in topics.languages:
        if lang not in heldout:
            continue
        block = heldout[lang]
        offset = topics.offsets[topics.languages.index(lang)]
        _heldout_doc_log_lik(block.indptr, block.term_ids.astype(np.int64) + offset, block.counts,
                             theta, topics.term_topic, doc_log_lik)
        doc_tokens += block.doc_lengths()
    return doc_log_lik, doc_tokens


def completion_log_likelihood(
    observed_blocks: Mapping[str, DocBlock] | DocBlock,
    heldout_blocks: Mapping[str, DocBlock] | DocBlock,
    topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
) -> tuple[float, int]:
    """Document-completion log-likelihood of held-out tokens given the observed ones, summed.

    Parameters
    ----------
    observed_blocks, heldout_blocks : mapping of str to DocBlock, or DocBlock
        Output of :func:`split_doc_tokens` per language (same documents).
    topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), float64, or PreparedTopics
        Row-normalized topic-word probabilities beta of any system (ours, gensim, sklearn, ...).
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha of that system.
    params : VBParams
        Fold-in settings (``max_doc_iter``, ``doc_tol``).

    Returns
    -------
    log_lik : float
        Sum over held-out tokens of log sum_k theta_dk beta_kw (the exactly rounded sum of
        :func:`completion_doc_log_likelihood`); ``-inf`` if a held-out token has probability 0.
    n_heldout_tokens : int
        Perplexity is ``exp(-log_lik / n_heldout_tokens)``.

    Raises
    ------
    InvalidParameterError
        As :func:`completion_doc_log_likelihood`.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.array([[2, 2]])))
    >>> obs, held = split_doc_tokens(block, seed=1)
    >>> ll, n = completion_log_likelihood(obs, held, {"default": np.full((1, 2), 0.5)}, 1.0, VBParams(1))
    >>> round(float(np.exp(-ll / n)), 6), n
    (2.0, 2)
    """
    stats = HeldoutStats.from_documents(
        *completion_doc_log_likelihood(observed_blocks, heldout_blocks, topic_word, doc_topic_prior, params)
    )
    return stats.log_lik, stats.n_tokens


@numba.njit(nogil=True, cache=True)
def _is_held_out(seed, fraction, doc):
    """``uniform_from_key(counter_key(seed, STREAM_SPLIT, 1, doc), 0) < fraction`` for global document ``doc``."""
    return uniform_from_key(counter_key(seed, STREAM_SPLIT, 1, doc), 0) < fraction


@numba.njit(nogil=True, cache=True)
def _held_out_mask(seed, fraction, first_doc, held_out):
    """held_out[d] = whether document ``first_doc + d`` is held out; returns how many before ``first_doc`` are."""
    before = 0
    for doc in range(first_doc):
        before += 1 if _is_held_out(seed, fraction, doc) else 0
    for d in range(held_out.shape[0]):
        held_out[d] = _is_held_out(seed, fraction, first_doc + d)
    return before


def _document_split(block: DocBlock, held_out_fraction: float, seed: int) -> tuple[np.ndarray, int]:
    """Validated held-out mask of the block and the number of held-out documents before it."""
    if not (0.0 < held_out_fraction < 1.0):
        raise InvalidParameterError(f"held_out_fraction must be in (0, 1), got {held_out_fraction!r}")
    if not (0 <= int(seed) < 2**63):
        raise InvalidParameterError(f"seed must be in [0, 2**63), got {seed!r}")
    held_out = np.zeros(block.n_docs, dtype=np.bool_)
    before = _held_out_mask(int(seed), float(held_out_fraction), int(block.first_doc), held_out)
    return held_out, int(before)


def _select_documents(block: DocBlock, rows: IntArray, first_doc: int) -> DocBlock:
    """Rows ``rows`` of ``block`` (ascending) as a new block whose first document sits at ``first_doc``."""
    lengths = np.diff(block.indptr)[rows]
    entries = np.concatenate([np.arange(block.indptr[r], block.indptr[r + 1]) for r in rows]) if rows.size else \
        np.zeros(0, dtype=np.int64)
    return DocBlock(
        indptr=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        term_ids=block.term_ids[entries], counts=block.counts[entries], doc_ids=block.doc_ids[rows],
        first_doc=first_doc, n_terms=block.n_terms, language=block.language,
        labels=None if block.labels is None else block.labels[rows],
        timestamps=None if block.timestamps is None else block.timestamps[rows],
    )


def document_split_positions(
    block: DocBlock, *, held_out_fraction: float = 0.2, seed: int = 0
) -> tuple[IntArray, IntArray]:
    """Global positions of the documents :func:`split_documents` keeps for training and holds out.

    Parameters
    ----------
    block : DocBlock
    held_out_fraction : float, default 0.2
        Probability that a document is held out, in (0, 1).
    seed : int, default 0
        In [0, 2**63).

    Returns
    -------
    train_positions : ndarray of shape (n_train,), int64
        Ascending positions ``block.first_doc + row`` in the source corpus of the training documents.
    held_out_positions : ndarray of shape (n_held_out,), int64
        Ascending positions of the held-out documents; with ``train_positions`` they are all of the
        block's positions.

    Raises
    ------
    InvalidParameterError
        ``held_out_fraction`` outside (0, 1) or seed out of range.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.ones((6, 2), dtype=np.int64)), first_doc=10)
    >>> train, held = document_split_positions(block, held_out_fraction=0.5, seed=0)
    >>> sorted(train.tolist() + held.tolist())
    [10, 11, 12, 13, 14, 15]
    """
    held_out, _ = _document_split(block, held_out_fraction, seed)
    positions = block.first_doc + np.arange(block.n_docs, dtype=np.int64)
    return positions[~held_out], positions[held_out]


def split_documents(
    block: DocBlock, *, held_out_fraction: float = 0.2, seed: int = 0
) -> tuple[DocBlock, DocBlock]:
    """Split whole documents at random into a training and a held-out stream.

    Parameters
    ----------
    block : DocBlock
        Consecutive documents of a corpus, from global position ``block.first_doc``.
    held_out_fraction : float, default 0.2
        Probability that a document is held out, in (0, 1).
    seed : int, default 0
        In [0, 2**63).

    Returns
    -------
    train : DocBlock
        The kept documents in their original order, with ``doc_ids``, ``labels`` and ``timestamps``
        carried along.
    held_out : DocBlock
        The held-out documents, likewise. Each of the two parts is numbered as its own stream: its
        ``first_doc`` is the number of documents of that part before ``block.first_doc`` in the source
        corpus, so block-wise splits of a corpus concatenate (:func:`~topicflow.models.common.blocks.concat_blocks`)
        into the split of the whole corpus, and keys derived from ``first_doc + row`` never collide within
        a part. The source positions are given by :func:`document_split_positions`.

    Raises
    ------
    InvalidParameterError
        ``held_out_fraction`` outside (0, 1) or seed out of range.

    Notes
    -----
    Document at global position ``doc`` is held out iff
    ``uniform_from_key(counter_key(seed, STREAM_SPLIT, 1, doc), 0) < held_out_fraction``, a function of
    its position only (epoch 1 of STREAM_SPLIT keeps it apart from :func:`split_doc_tokens`). Computing a
    part's ``first_doc`` re-evaluates that draw for the ``block.first_doc`` earlier positions, which costs
    a few nanoseconds each. NumPy equivalent: ``mask = u < f``; ``train = csr[~mask]``, ``held = csr[mask]``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.ones((10, 3), dtype=np.int64)))
    >>> train, held = split_documents(block, held_out_fraction=0.3, seed=1)
    >>> train.n_docs + held.n_docs, train.first_doc, held.first_doc
    (10, 0, 0)
    """
    held_out, held_before = _document_split(block, held_out_fraction, seed)
    rows = np.arange(block.n_docs, dtype=np.int64)
    train_before = block.first_doc - held_before
    return (_select_documents(block, rows[~held_out], train_before),
            _select_documents(block, rows[held_out], held_before))


@numba.njit(nogil=True, cache=True)
def _particle_learning_csr(
    indptr, term_ids, counts, term_topic, alpha, expected_counts
):
    """Sum over documents and tokens of log p(w_i | w_<i); ``expected_counts`` is a (n_topics,) scratch buffer."""
    n_topics = alpha.shape[0]
    alpha_sum = 0.0
    for k in range(n_topics):
        alpha_sum += alpha[k]
    probs = np.empty(n_topics, dtype=np.float64)
    total = 0.0
    for d in range(indptr.shape[0] - 1):
        expected_counts[:] = 0.0
        n_before = 0
        for j in range(indptr[d], indptr[d + 1]):
            w = term_ids[j]
            for _ in range(counts[j]):
                norm = 0.0
                for k in range(n_topics):
                    probs[k] = term_topic[w, k] * (expected_counts[k] + alpha[k])
                    norm += probs[k]
                if norm <= 0.0:
                    total = -math.inf
                else:
                    total += math.log(norm / (n_before + alpha_sum))
                    for k in range(n_topics):
                        expected_counts[k] += probs[k] / norm
                n_before += 1
    return total


def particle_learning_log_likelihood(
    block: DocBlock, topic_word: FloatArray, doc_topic_prior: FloatArray | float
) -> tuple[float, int]:
    """Held-out log-likelihood by the first-moment particle-learning approximation.

    Parameters
    ----------
    block : DocBlock
        Held-out documents (e.g. the second output of :func:`split_documents`).
    topic_word : ndarray of shape (n_topics, n_terms), float64
        Row-normalized topic-word probabilities phi, held fixed; ``n_terms >= block.n_terms``.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha, positive.

    Returns
    -------
    log_lik : float
        Sum over documents and tokens of log p(w_i | w_<i, phi, alpha); ``-inf`` if a token has
        probability 0 under ``topic_word``.
    n_tokens : int
        Tokens scored; perplexity is ``exp(-log_lik / n_tokens)``.

    Raises
    ------
    InvalidParameterError
        ``topic_word`` not 2-d, non-finite, negative or too narrow for the block's terms; prior not
        positive or of the wrong length.

    Notes
    -----
    Scott and Baldridge (2013), as used by May, Clemmer and Van Durme (2014) to pick initializations:
    a document's tokens are visited in CSR order (terms ascending, a term with count c visited c times
    in a row) while the expected topic counts m_dk are tracked. Token i scores
    ``p(w_i) = sum_k phi[k, w_i] (m_dk + alpha_k) / (n_{d,<i} + sum_k alpha_k)``, then
    ``m_d += phi[:, w_i] * (m_d + alpha) / sum(...)`` (the token's posterior over topics). No randomness.
    NumPy equivalent per token: ``p = phi[:, w] * (m + alpha)``; ``ll += log(p.sum() / (i + alpha.sum()))``;
    ``m += p / p.sum()``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> import scipy.sparse as sp
    >>> block = block_from_csr(sp.csr_matrix(np.array([[2, 1]])))
    >>> ll, n = particle_learning_log_likelihood(block, np.full((3, 2), 0.5), 0.1)
    >>> round(float(np.exp(-ll / n)), 12), n
    (2.0, 3)
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    if phi.ndim != 2 or phi.shape[0] == 0 or phi.shape[1] < block.n_terms:
        raise InvalidParameterError(
            f"topic_word must be of shape (n_topics, n_terms) with n_terms >= {block.n_terms} (the block's "
            f"vocabulary), got shape {phi.shape!r}"
        )
    if not (np.all(np.isfinite(phi)) and np.all(phi >= 0.0)):
        raise InvalidParameterError("topic_word must be finite and nonnegative")
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, phi.shape[0])
    term_topic = np.ascontiguousarray(phi.T)
    log_lik = _particle_learning_csr(block.indptr.astype(np.int64), block.term_ids.astype(np.int64),
                                     block.counts.astype(np.int64), term_topic, alpha,
                                     np.zeros(phi.shape[0], dtype=np.float64))
    return float(log_lik), block.n_tokens
