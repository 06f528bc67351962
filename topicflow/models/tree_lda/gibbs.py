"""Collapsed Gibbs sampling for tLDA / ptLDA over (topic, path) pairs (Zhai 2014, sec. 5.2.1, eq. 5.2).

This module owns the sampler's state, its sweep kernel, its scores and read-outs, and fold-in of
held-out documents with the topics fixed. Pure NumPy + numba: it must not import dask, distributed,
zarr or logging, and does no I/O. The prior tree is a :class:`~topicflow.models.tree_lda.tree.PriorTree`.

Every token carries a topic z and a path y (root to one of its word's leaves). The conditional of
token i of document d with word w is

    p(z = k, y = s | rest) ∝ (N_dk + alpha_k) prod_{e in s} (N_ke + beta_e) / (N_k,parent(e) + B_parent(e))

for the paths s ending at w, with every count excluding token i. The sampler is the naive one: it
evaluates all K x S_w weights of a token (O(K S_w depth) per draw; spec 2.8 says it is enough at the K
of the experiments). The sparse bucket decomposition of Hu and Boyd-Graber (2012) is not implemented.
The kernels work on edge-major copies of the counts ((n_edges, K), (n_nodes, K)) so that the loop over
topics is contiguous; the state keeps them topic-major. Optional pseudo-counts M_ke (the edge counts
of tokens outside the state: other shards, earlier minibatches) join the conditional's counts, so a
shard can be swept against the rest of the corpus.

Polylingual documents (ptLDA): the blocks of several languages of the same documents form one
document each; theta (N_dk) is shared by all languages, as in topicflow's polylingual VB, and each
token's paths are those of its (language, term) leaf. Within a document, the tokens are the
languages' tokens in the tree's language order, each language in CSR order.

Glossary (Zhai 2014, ch. 5; Boyd-Graber, Blei and Zhu 2007):
    word: a (language, term) pair, numbered ``word_offset[language] + term`` over the tree's languages
    token_indptr, token_words ((n_tokens,)): the documents' tokens as words
    topics (z, (n_tokens,)), paths (y, (n_tokens,)): each token's topic and path (index into the tree's paths)
    doc_topic_counts (N_dk, (n_docs, n_topics))
    edge_topic_counts (N_ke, (n_topics, n_edges)): tokens of topic k whose path uses edge e
    node_topic_counts (N_ki, (n_topics, n_nodes)): tokens of topic k whose path passes through internal
        node i (the sum of N_ke over the edges leaving i)
    edge_prior (beta_e, (n_edges,)); node_prior_sum (B_i = sum of beta over i's edges, (n_nodes,))
    doc_topic_prior (alpha, (n_topics,))
    edge_topic (pi, (n_topics, n_edges)): the posterior mean (N_ke + beta_e) / (N_k,parent(e) + B_parent(e))

References
----------
Zhai (2014). Online and distributed topic models (PhD thesis, University of Maryland), ch. 5.
Boyd-Graber, Blei and Zhu (2007). A topic model for word sense disambiguation. EMNLP.
Hu and Boyd-Graber (2012). Efficient tree-based topic modeling. ACL.
Minka (2000). Estimating a Dirichlet distribution. Technical report.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from scipy.special import gammaln

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock, expand_tokens
from topicflow.models.common.categorical import draw_dense, draw_uniform
from topicflow.models.common.rng import (
    STREAM_FOLD_IN,
    STREAM_GIBBS,
    counter_key,
    uniform_from_key,
)
from topicflow.models.common.validation import parse_dirichlet_prior, parse_int
from topicflow.models.lda.gibbs.chain import (
    HYPER_FLOOR,
    HYPER_MAX_ITER,
    HYPER_TOL,
    _alpha_fixed_point,
)
from topicflow.models.tree_lda.tree import PriorTree

_MAX_SEED = 2**63


@dataclass(frozen=True, slots=True)
class TreeGibbsParams:
    """Hyperparameters of the tree Gibbs sampler (the edge priors beta are the tree's).

    Attributes
    ----------
    n_topics : int
        Number of topics K, at least 1.
    doc_topic_prior : float or ndarray of shape (n_topics,), default 0.1
        alpha; :attr:`alpha` is always the ``(n_topics,)`` vector.
    seed : int, default 0
        Seed of the counter-based random numbers, in [0, 2**63).

    Raises
    ------
    InvalidParameterError
        A field is outside its allowed values.

    Examples
    --------
    >>> TreeGibbsParams(n_topics=2, doc_topic_prior=0.5).alpha
    array([0.5, 0.5])
    """

    n_topics: int
    doc_topic_prior: float | FloatArray = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_topics", parse_int("TreeGibbsParams.n_topics", self.n_topics, 1))
        object.__setattr__(self, "seed", parse_int("TreeGibbsParams.seed", self.seed, 0, _MAX_SEED - 1))
        alpha = parse_dirichlet_prior("TreeGibbsParams.doc_topic_prior", self.doc_topic_prior, self.n_topics)
        object.__setattr__(self, "doc_topic_prior",
                           float(alpha[0]) if np.ndim(self.doc_topic_prior) == 0 else alpha)

    @property
    def alpha(self) -> FloatArray:
        """alpha as a fresh ``(n_topics,)`` float64 vector."""
        return parse_dirichlet_prior("TreeGibbsParams.doc_topic_prior", self.doc_topic_prior, self.n_topics)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        prior = self.doc_topic_prior
        return {"n_topics": self.n_topics, "seed": self.seed,
                "doc_topic_prior": prior if isinstance(prior, float) else [float(a) for a in prior]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TreeGibbsParams:
        """Inverse of :meth:`to_dict`."""
        prior = data["doc_topic_prior"]
        return cls(n_topics=data["n_topics"], doc_topic_prior=prior if np.ndim(prior) == 0 else np.asarray(prior),
                   seed=data["seed"])


@dataclass(frozen=True, slots=True)
class TreeGibbsState:
    """Token assignments (z, y) and count arrays of one set of documents under the tree sampler.

    Attributes
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_words : ndarray of shape (n_tokens,), int32
        Word (``word_offset[language] + term``) of each token.
    topics : ndarray of shape (n_tokens,), int32
        z of each token.
    paths : ndarray of shape (n_tokens,), int32
        y of each token: a path of the tree that ends at the token's word.
    doc_topic_counts : ndarray of shape (n_docs, n_topics), int32
        N_dk.
    edge_topic_counts : ndarray of shape (n_topics, n_edges), int32
        N_ke.
    node_topic_counts : ndarray of shape (n_topics, n_nodes), int64
        N_ki.
    first_doc : int
        Global position of document 0; the random numbers are keyed by ``first_doc + d``.
    doc_topic_prior : ndarray of shape (n_topics,), float64
        Current alpha (changes when it is optimized).
    sweeps_done : int
        Sweeps run since the initialization.

    Raises
    ------
    InvalidParameterError
        Shapes that do not fit together.
    """

    token_indptr: IntArray
    token_words: Int32Array
    topics: Int32Array
    paths: Int32Array
    doc_topic_counts: Int32Array
    edge_topic_counts: Int32Array
    node_topic_counts: IntArray
    first_doc: int
    doc_topic_prior: FloatArray
    sweeps_done: int

    def __post_init__(self) -> None:
        for name, dtype in STATE_ARRAYS.items():
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        n_tokens, n_docs = self.token_words.shape[0], self.token_indptr.shape[0] - 1
        n_topics = self.doc_topic_prior.shape[0]
        expected = {"topics": (n_tokens,), "paths": (n_tokens,), "doc_topic_counts": (n_docs, n_topics)}
        problems = [f"{name} has shape {getattr(self, name).shape!r}, expected {shape!r}"
                    for name, shape in expected.items() if getattr(self, name).shape != shape]
        for name in ("edge_topic_counts", "node_topic_counts"):
            if getattr(self, name).ndim != 2 or getattr(self, name).shape[0] != n_topics:
                problems.append(f"{name} must have {n_topics} rows, got shape {getattr(self, name).shape!r}")
        if n_docs < 0 or self.token_indptr[-1] != n_tokens:
            problems.append(f"token_indptr must end at n_tokens={n_tokens}")
        if problems or n_topics < 1:
            raise InvalidParameterError("TreeGibbsState: " + "; ".join(problems or ["no topics"]))
        object.__setattr__(self, "first_doc", parse_int("TreeGibbsState.first_doc", self.first_doc, 0, _MAX_SEED))
        object.__setattr__(self, "sweeps_done",
                           parse_int("TreeGibbsState.sweeps_done", self.sweeps_done, 0, _MAX_SEED))

    @property
    def n_docs(self) -> int:
        return int(self.token_indptr.shape[0] - 1)

    @property
    def n_topics(self) -> int:
        return int(self.doc_topic_prior.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.token_words.shape[0])


#: The arrays of a :class:`TreeGibbsState` snapshot and their dtypes.
STATE_ARRAYS: dict[str, type] = {
    "token_indptr": np.int64, "token_words": np.int32, "topics": np.int32, "paths": np.int32,
    "doc_topic_counts": np.int32, "edge_topic_counts": np.int32, "node_topic_counts": np.int64,
    "doc_topic_prior": np.float64,
}


# ----------------------------------------------------------------------------- tree and tokens


@dataclass(frozen=True, slots=True)
class TreeArrays:
    """The tree as the kernels read it.

    Attributes
    ----------
    word_offset : ndarray of shape (n_langs + 1,), int64
        Word number of each language's term 0 (the last entry is the number of words).
    word_path_indptr : ndarray of shape (n_words + 1,), int64
        Word v's paths are ``word_path_indptr[v]:word_path_indptr[v + 1]``.
    path_indptr, path_edges : ndarray of int64
        As in :class:`PriorTree`.
    edge_parent : ndarray of shape (n_edges,), int64
    edge_prior : ndarray of shape (n_edges,), float64
    node_prior_sum : ndarray of shape (n_nodes,), float64
        B_i, the sum of beta over the edges leaving node i.
    max_paths : int
        Largest number of paths of one word.
    """

    word_offset: IntArray
    word_path_indptr: IntArray
    path_indptr: IntArray
    path_edges: IntArray
    edge_parent: IntArray
    edge_prior: FloatArray
    node_prior_sum: FloatArray
    max_paths: int


def tree_arrays(tree: PriorTree) -> TreeArrays:
    """The kernel view of ``tree`` (words numbered over all languages, prior sums per node).

    Parameters
    ----------
    tree : PriorTree

    Returns
    -------
    TreeArrays

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> arrays = tree_arrays(flat_tree(["en", "de"], [2, 3], 0.5))
    >>> arrays.word_offset.tolist(), arrays.node_prior_sum.tolist()
    ([0, 2, 5], [2.5])
    """
    word_offset = np.concatenate(([0], np.cumsum(tree.n_terms))).astype(np.int64)
    path_word = word_offset[tree.path_language] + tree.path_term
    per_word = np.bincount(path_word, minlength=int(word_offset[-1]))
    node_prior_sum = np.bincount(tree.edge_parent, weights=tree.edge_prior, minlength=tree.n_nodes)
    return TreeArrays(
        word_offset=word_offset, word_path_indptr=np.concatenate(([0], np.cumsum(per_word))).astype(np.int64),
        path_indptr=np.ascontiguousarray(tree.path_indptr, dtype=np.int64),
        path_edges=np.ascontiguousarray(tree.path_edges, dtype=np.int64),
        edge_parent=np.ascontiguousarray(tree.edge_parent, dtype=np.int64),
        edge_prior=np.ascontiguousarray(tree.edge_prior, dtype=np.float64),
        node_prior_sum=node_prior_sum.astype(np.float64), max_paths=int(per_word.max(initial=1)),
    )


def _language_blocks(blocks: DocBlock | Mapping[str, DocBlock], tree: PriorTree) -> dict[str, DocBlock]:
    """The blocks by language, checked against the tree and against each other."""
    if isinstance(blocks, DocBlock):
        language = blocks.language if blocks.language in tree.languages or len(tree.languages) != 1 \
            else tree.languages[0]
        blocks = {language: blocks}
    if not blocks:
        raise InvalidParameterError("no blocks given: pass one DocBlock per language of the documents")
    first = next(iter(blocks.values()))
    for language, block in blocks.items():
        if language not in tree.languages:
            raise InvalidParameterError(
                f"the block of documents {first.first_doc}.. is in language {language!r}, which the prior tree "
                f"does not have (its languages: {list(tree.languages)!r}); build the tree for this corpus's languages"
            )
        li = tree.languages.index(language)
        if block.n_docs != first.n_docs or block.first_doc != first.first_doc:
            raise InvalidParameterError(
                f"the {language!r} block holds documents {block.first_doc}..{block.first_doc + block.n_docs} but "
                f"another language holds {first.first_doc}..{first.first_doc + first.n_docs}; pass aligned blocks "
                "of the same documents"
            )
        if block.term_ids.size and (block.term_ids.min() < 0 or int(block.term_ids.max()) >= tree.n_terms[li]):
            raise InvalidParameterError(
                f"the {language!r} block starting at document {block.first_doc} has term id "
                f"{int(block.term_ids.max())} but the prior tree has {tree.n_terms[li]} {language!r} terms; "
                "build the tree from the store's current vocabulary"
            )
    return dict(blocks)


def tokens_from_blocks(
    blocks: DocBlock | Mapping[str, DocBlock], tree: PriorTree,
) -> tuple[IntArray, Int32Array, int]:
    """Expand aligned language blocks into tokens numbered as words of the tree, document by document.

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
        One block per language of the same documents (same ``first_doc`` and ``n_docs``). A single
        block is taken in its own language, or in the tree's only language.
    tree : PriorTree

    Returns
    -------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_words : ndarray of shape (n_tokens,), int32
        Within a document: the tree's languages in order, each in CSR order (terms repeated by count).
    first_doc : int

    Raises
    ------
    InvalidParameterError
        A language the tree lacks, unaligned blocks, or a term outside the tree's vocabulary.
    """
    by_language = _language_blocks(blocks, tree)
    word_offset = np.concatenate(([0], np.cumsum(tree.n_terms))).astype(np.int64)
    first = next(iter(by_language.values()))
    docs, words = [], []
    for li, language in enumerate(tree.languages):
        if language in by_language:
            indptr, terms = expand_tokens(by_language[language])
            docs.append(np.repeat(np.arange(first.n_docs, dtype=np.int64), np.diff(indptr)))
            words.append(terms.astype(np.int64) + word_offset[li])
    all_docs, all_words = np.concatenate(docs), np.concatenate(words)
    order = np.argsort(all_docs, kind="stable")
    lengths = np.bincount(all_docs, minlength=first.n_docs)
    token_indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return token_indptr, all_words[order].astype(np.int32), int(first.first_doc)


# ----------------------------------------------------------------------------- kernels


@numba.njit(nogil=True, cache=True)
def _token_weights(d, word, doc_topic, edge_topic, node_topic, alpha, word_path_indptr, path_indptr,
                   path_edges, edge_parent, edge_prior, node_prior_sum, out):
    """Fill ``out[k * S + j]`` with the unnormalized eq. 5.2 weight of (k, the j-th path of ``word``).

    Edge-major layout, so that the inner loop over topics is contiguous: ``edge_topic`` (n_edges,
    n_topics), ``node_topic`` (n_nodes, n_topics), ``edge_prior`` (beta_e plus any pseudo-counts,
    (n_edges, n_topics)) and ``node_prior_sum`` (its sums per node, (n_nodes, n_topics)). The counts
    must already exclude the token. Each weight is ``(N_dk + alpha_k)`` times the path's edge ratios in
    root-to-leaf order. Returns S, the number of the word's paths.
    """
    p_lo, p_hi = word_path_indptr[word], word_path_indptr[word + 1]
    n_paths = p_hi - p_lo
    n_topics = doc_topic.shape[1]
    for j in range(n_paths):
        for k in range(n_topics):
            out[k * n_paths + j] = doc_topic[d, k] + alpha[k]
        s = p_lo + j
        for i in range(path_indptr[s], path_indptr[s + 1]):
            e = path_edges[i]
            parent = edge_parent[e]
            for k in range(n_topics):
                out[k * n_paths + j] *= (edge_topic[e, k] + edge_prior[e, k]) / (
                    node_topic[parent, k] + node_prior_sum[parent, k])
    return n_paths


@numba.njit(nogil=True, cache=True, inline="always")
def _move(k, s, d, delta, doc_topic, edge_topic, node_topic, path_indptr, path_edges, edge_parent):
    """Add ``delta`` (+1 or -1) for a token of document d with topic k on path s to every count.

    ``edge_topic`` and ``node_topic`` are edge- and node-major: (n_edges, n_topics), (n_nodes, n_topics).
    """
    doc_topic[d, k] += delta
    for i in range(path_indptr[s], path_indptr[s + 1]):
        e = path_edges[i]
        edge_topic[e, k] += delta
        node_topic[edge_parent[e], k] += delta


@numba.njit(nogil=True, cache=True)
def _random_start(token_indptr, token_words, word_path_indptr, n_topics, seed, stream, first_doc, topics, paths):
    """z = floor(u_{2t} K), y = the floor(u_{2t+1} S_w)-th path of w, with u of key (seed, stream, 0, doc)."""
    for d in range(token_indptr.shape[0] - 1):
        key = counter_key(seed, stream, 0, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            w = token_words[t]
            topics[t] = draw_uniform(uniform_from_key(key, 2 * (t - lo)), n_topics)
            n_paths = word_path_indptr[w + 1] - word_path_indptr[w]
            paths[t] = word_path_indptr[w] + draw_uniform(uniform_from_key(key, 2 * (t - lo) + 1), n_paths)


@numba.njit(nogil=True, cache=True)
def _recount(token_indptr, topics, paths, doc_topic, edge_topic, node_topic, path_indptr, path_edges, edge_parent):
    """Add every token's (z, y) to N_dk, N_ek and N_ik (edge- and node-major; zero on entry)."""
    for d in range(token_indptr.shape[0] - 1):
        for t in range(token_indptr[d], token_indptr[d + 1]):
            _move(topics[t], paths[t], d, 1, doc_topic, edge_topic, node_topic, path_indptr, path_edges, edge_parent)


@numba.njit(nogil=True, cache=True)
def _sweep(token_indptr, token_words, topics, paths, doc_topic, edge_topic, node_topic, alpha,
           word_path_indptr, path_indptr, path_edges, edge_parent, edge_prior, node_prior_sum,
           seed, sweep, first_doc, weights):
    """One sweep of eq. 5.2 over every token, in document then token order (see :func:`run_sweeps`)."""
    for d in range(token_indptr.shape[0] - 1):
        key = counter_key(seed, STREAM_GIBBS, sweep, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            w = token_words[t]
            _move(topics[t], paths[t], d, -1, doc_topic, edge_topic, node_topic, path_indptr, path_edges,
                  edge_parent)
            n_paths = _token_weights(d, w, doc_topic, edge_topic, node_topic, alpha, word_path_indptr,
                                     path_indptr, path_edges, edge_parent, edge_prior, node_prior_sum, weights)
            index, _ = draw_dense(weights[: n_paths * doc_topic.shape[1]], uniform_from_key(key, t - lo))
            k, s = index // n_paths, word_path_indptr[w] + index % n_paths
            topics[t], paths[t] = k, s
            _move(k, s, d, 1, doc_topic, edge_topic, node_topic, path_indptr, path_edges, edge_parent)


@numba.njit(nogil=True, cache=True)
def _fold_in_sweeps(token_indptr, token_words, topics, paths, doc_topic, alpha, word_path_indptr, path_topic,
                    seed, first_doc, n_sweeps, weights):
    """Sweeps of p(z = k, y = s) ∝ (N_dk + alpha_k) path_topic[s, k] with the topics fixed."""
    n_topics = doc_topic.shape[1]
    for d in range(token_indptr.shape[0] - 1):
        lo, hi = token_indptr[d], token_indptr[d + 1]
        for t in range(lo, hi):
            doc_topic[d, topics[t]] += 1
        for sweep in range(1, n_sweeps + 1):
            key = counter_key(seed, STREAM_FOLD_IN, sweep, first_doc + d)
            for t in range(lo, hi):
                w = token_words[t]
                doc_topic[d, topics[t]] -= 1
                p_lo = word_path_indptr[w]
                n_paths = word_path_indptr[w + 1] - p_lo
                for k in range(n_topics):
                    for j in range(n_paths):
                        weights[k * n_paths + j] = (doc_topic[d, k] + alpha[k]) * path_topic[p_lo + j, k]
                index, _ = draw_dense(weights[: n_paths * n_topics], uniform_from_key(key, t - lo))
                topics[t], paths[t] = index // n_paths, p_lo + index % n_paths
                doc_topic[d, topics[t]] += 1


def _topic_priors(
    arrays: TreeArrays, n_topics: int, tree: PriorTree, pseudo_counts: FloatArray | None,
) -> tuple[FloatArray, FloatArray]:
    """beta_e + M_ke and its sums per node, edge- and node-major ((n_edges, K), (n_nodes, K)), for the kernels.

    Without M: beta and B repeated over the topics.
    """
    edge_prior = np.repeat(arrays.edge_prior[:, None], n_topics, axis=1)
    node_prior = np.repeat(arrays.node_prior_sum[:, None], n_topics, axis=1)
    if pseudo_counts is None:
        return edge_prior, node_prior
    extra = np.asarray(pseudo_counts, dtype=np.float64)
    if extra.shape != (n_topics, tree.n_edges) or not np.all(np.isfinite(extra)) or extra.min(initial=0) < 0:
        raise InvalidParameterError(
            f"pseudo_counts must be finite, >= 0 and of shape ({n_topics}, {tree.n_edges}) (topics x edges); "
            f"got shape {extra.shape!r}"
        )
    node_extra = np.zeros((n_topics, tree.n_nodes))
    for k in range(n_topics):
        node_extra[k] = np.bincount(arrays.edge_parent, weights=extra[k], minlength=tree.n_nodes)
    return np.ascontiguousarray(edge_prior + extra.T), np.ascontiguousarray(node_prior + node_extra.T)


# ----------------------------------------------------------------------------- state


def state_from_assignments(
    token_indptr: IntArray, token_words: Int32Array, topics: Int32Array, paths: Int32Array, tree: PriorTree,
    params: TreeGibbsParams, *, first_doc: int = 0, sweeps_done: int = 0,
) -> TreeGibbsState:
    """A state with the given (z, y) and the counts recounted from them.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_words : ndarray of shape (n_tokens,), int32
    topics : ndarray of shape (n_tokens,), int32
    paths : ndarray of shape (n_tokens,), int32
        Each a path of the tree ending at the token's word.
    tree : PriorTree
    params : TreeGibbsParams
    first_doc : int, default 0
    sweeps_done : int, default 0

    Returns
    -------
    TreeGibbsState

    Raises
    ------
    InvalidParameterError
        Ids out of range or a path that does not end at its token's word.
    """
    arrays = tree_arrays(tree)
    token_indptr = np.ascontiguousarray(token_indptr, dtype=np.int64)
    token_words = np.ascontiguousarray(token_words, dtype=np.int32)
    topics = np.ascontiguousarray(topics, dtype=np.int32)
    paths = np.ascontiguousarray(paths, dtype=np.int32)
    n_tokens = token_words.shape[0]
    if topics.shape != (n_tokens,) or paths.shape != (n_tokens,) or token_indptr[-1] != n_tokens:
        raise InvalidParameterError(f"topics, paths and token_indptr must describe {n_tokens} tokens")
    if n_tokens and (token_words.min() < 0 or token_words.max() >= arrays.word_offset[-1]):
        raise InvalidParameterError(f"token_words must lie in [0, {int(arrays.word_offset[-1])})")
    if n_tokens and (topics.min() < 0 or topics.max() >= params.n_topics):
        raise InvalidParameterError(f"topics must lie in [0, {params.n_topics})")
    lo, hi = arrays.word_path_indptr[token_words], arrays.word_path_indptr[token_words + 1]
    if np.any((paths < lo) | (paths >= hi)):
        raise InvalidParameterError("every token's path must end at the token's word (a leaf of its word)")
    doc_topic = np.zeros((token_indptr.shape[0] - 1, params.n_topics), dtype=np.int32)
    edge_major = np.zeros((tree.n_edges, params.n_topics), dtype=np.int32)
    node_major = np.zeros((tree.n_nodes, params.n_topics), dtype=np.int64)
    _recount(token_indptr, topics, paths, doc_topic, edge_major, node_major, arrays.path_indptr, arrays.path_edges,
             arrays.edge_parent)
    return TreeGibbsState(token_indptr, token_words, topics, paths, doc_topic, edge_major.T, node_major.T, first_doc,
                          params.alpha, sweeps_done)


def initial_state(
    blocks: DocBlock | Mapping[str, DocBlock], tree: PriorTree, params: TreeGibbsParams,
) -> TreeGibbsState:
    """The random start: every token's topic uniform on K, its path uniform on its word's paths.

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
        The documents, one block per language (aligned: same documents); see :func:`tokens_from_blocks`.
    tree : PriorTree
    params : TreeGibbsParams

    Returns
    -------
    TreeGibbsState
        ``sweeps_done = 0``.

    Raises
    ------
    InvalidParameterError
        As :func:`tokens_from_blocks`.

    Notes
    -----
    Token t of document d (global g = ``first_doc + d``) uses uniforms ``2t`` and ``2t + 1`` of
    ``counter_key(seed, STREAM_GIBBS, 0, g)``: ``z = floor(u_2t K)``, ``y = paths(w)[floor(u_2t+1 S_w)]``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> block = block_from_csr(sp.csr_matrix(np.array([[2, 1], [0, 3]])), language="en")
    >>> state = initial_state(block, flat_tree(["en"], [2]), TreeGibbsParams(n_topics=2))
    >>> state.n_tokens, int(state.edge_topic_counts.sum())
    (6, 6)
    """
    token_indptr, token_words, first_doc = tokens_from_blocks(blocks, tree)
    arrays = tree_arrays(tree)
    topics = np.zeros(token_words.shape[0], dtype=np.int32)
    paths = np.zeros(token_words.shape[0], dtype=np.int32)
    _random_start(token_indptr, token_words, arrays.word_path_indptr, params.n_topics, params.seed, STREAM_GIBBS,
                  first_doc, topics, paths)
    return state_from_assignments(token_indptr, token_words, topics, paths, tree, params, first_doc=first_doc)


def _check_state(state: TreeGibbsState, tree: PriorTree, params: TreeGibbsParams | None = None) -> None:
    if state.edge_topic_counts.shape[1] != tree.n_edges or state.node_topic_counts.shape[1] != tree.n_nodes:
        raise InvalidParameterError(
            f"the state counts {state.edge_topic_counts.shape[1]} edges and {state.node_topic_counts.shape[1]} nodes "
            f"but the tree has {tree.n_edges} and {tree.n_nodes}; use the tree the state was started with"
        )
    if params is not None and params.n_topics != state.n_topics:
        raise InvalidParameterError(f"params.n_topics is {params.n_topics} but the state has {state.n_topics} topics")


def optimize_doc_topic_prior(state: TreeGibbsState) -> FloatArray:
    """Estimate an asymmetric alpha from the state's N_dk by Minka's fixed point (as LDA's Gibbs sampler does).

    Parameters
    ----------
    state : TreeGibbsState
        Its alpha is the starting point.

    Returns
    -------
    ndarray of shape (n_topics,), float64

    Notes
    -----
    ``alpha_k <- alpha_k sum_d [psi(N_dk + alpha_k) - psi(alpha_k)] / sum_d [psi(N_d + alpha_sum) -
    psi(alpha_sum)]``, iterated by :mod:`topicflow.models.lda.gibbs.chain`'s solver (the same math as LDA:
    theta's part of the model does not see the tree).
    """
    alpha = np.array(state.doc_topic_prior, dtype=np.float64)
    _alpha_fixed_point(state.doc_topic_counts, np.diff(state.token_indptr), alpha, HYPER_MAX_ITER, HYPER_TOL,
                       HYPER_FLOOR)
    return alpha


def run_sweeps(
    state: TreeGibbsState, tree: PriorTree, params: TreeGibbsParams, n_sweeps: int, *, optimize_every: int = 0,
    burn_in: int = 0, pseudo_counts: FloatArray | None = None,
) -> TreeGibbsState:
    """Run ``n_sweeps`` collapsed Gibbs sweeps over every token's (z, y).

    Parameters
    ----------
    state : TreeGibbsState
        Not modified; its ``doc_topic_prior`` is the alpha used.
    tree : PriorTree
        The tree the state was started with.
    params : TreeGibbsParams
        Gives the seed; ``n_topics`` must equal the state's.
    n_sweeps : int
        At least 0.
    optimize_every : int, default 0
        If positive, re-estimate alpha (:func:`optimize_doc_topic_prior`) after chain sweep
        ``n > burn_in`` with ``(n - burn_in) % optimize_every == 0``.
    burn_in : int, default 0
    pseudo_counts : ndarray of shape (n_topics, n_edges), optional
        M_ke, edge counts of tokens the state does not hold (the other shards of a distributed sweep,
        or decayed counts of earlier minibatches), finite and >= 0; they join the counts of the
        conditional (N_ke + M_ke + beta_e over N_ki + M_ki + B_i, M_ki the sums per node) and never the
        state's own counts. Without them the sampler is the batch sampler.

    Returns
    -------
    TreeGibbsState
        ``sweeps_done`` increased by ``n_sweeps``.

    Raises
    ------
    InvalidParameterError
        Mismatched K or tree, or negative counts of sweeps.

    Notes
    -----
    Zhai (2014), eq. 5.2: token t of document d is removed from the counts and (z, y) redrawn from

        p(z = k, y = s) ∝ (N_dk + alpha_k) prod_{e in s} (N_ke + beta_e) / (N_k,parent(e) + B_parent(e))

    over the K x S_w pairs, laid out k-major (index ``k S_w + j`` for the j-th path of w), by inverse
    CDF with the t-th uniform of ``counter_key(seed, STREAM_GIBBS, sweeps_done + s + 1, first_doc + d)``
    in sweep s. A chain run in pieces equals the chain run at once. NumPy equivalent (plain loops, the
    same draws) in ``tests/reference/tree_gibbs.py``::

        w_ks = (n_dk + alpha)[:, None] * np.prod(pi_ke[:, path_edges], axis=-1)  # per path
        index = np.searchsorted(np.cumsum(w_ks.ravel()), u * w_ks.sum(), "right")

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> tree, params = flat_tree(["en"], [2]), TreeGibbsParams(n_topics=2, seed=3)
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[4, 0], [0, 4]])), language="en"), tree, params)
    >>> run_sweeps(state, tree, params, 10).sweeps_done
    10
    """
    _check_state(state, tree, params)
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    optimize_every = parse_int("optimize_every", optimize_every, 0)
    burn_in = parse_int("burn_in", burn_in, 0)
    arrays = tree_arrays(tree)
    edge_prior, node_prior = _topic_priors(arrays, state.n_topics, tree, pseudo_counts)
    topics, paths = state.topics.copy(), state.paths.copy()
    doc_topic = state.doc_topic_counts.copy()
    edge_topic = state.edge_topic_counts.T.copy()  # edge-major copies for the kernel
    node_topic = state.node_topic_counts.T.copy()
    alpha = np.array(state.doc_topic_prior, dtype=np.float64)
    weights = np.empty(state.n_topics * arrays.max_paths)
    for s in range(n_sweeps):
        sweep = state.sweeps_done + s + 1
        _sweep(state.token_indptr, state.token_words, topics, paths, doc_topic, edge_topic, node_topic, alpha,
               arrays.word_path_indptr, arrays.path_indptr, arrays.path_edges, arrays.edge_parent, edge_prior,
               node_prior, params.seed, sweep, state.first_doc, weights)
        if optimize_every and sweep > burn_in and (sweep - burn_in) % optimize_every == 0:
            _alpha_fixed_point(doc_topic, np.diff(state.token_indptr), alpha, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    return TreeGibbsState(state.token_indptr, state.token_words, topics, paths, doc_topic, edge_topic.T,
                          node_topic.T, state.first_doc, alpha, state.sweeps_done + n_sweeps)


# ----------------------------------------------------------------------------- scores and read-outs


def token_conditional(
    state: TreeGibbsState, tree: PriorTree, token: int, *, pseudo_counts: FloatArray | None = None,
) -> FloatArray:
    """The normalized conditional of eq. 5.2 for one token, its own (z, y) removed from the counts.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree
    token : int
        Position in the state's token list.
    pseudo_counts : ndarray of shape (n_topics, n_edges), optional
        Edge counts of tokens outside the state, as in :func:`run_sweeps`.

    Returns
    -------
    ndarray of shape (n_topics, S_w), float64
        Entry (k, j) is p(z = k, y = j-th path of the token's word | rest); sums to 1.

    Raises
    ------
    InvalidParameterError
        ``token`` out of range or a state of another tree.
    """
    _check_state(state, tree)
    token = parse_int("token", token, 0, state.n_tokens)
    arrays = tree_arrays(tree)
    edge_prior, node_prior = _topic_priors(arrays, state.n_topics, tree, pseudo_counts)
    d = int(np.searchsorted(state.token_indptr, token, side="right") - 1)
    doc_topic = state.doc_topic_counts.copy()
    edge_topic = state.edge_topic_counts.T.copy()
    node_topic = state.node_topic_counts.T.copy()
    _move(int(state.topics[token]), int(state.paths[token]), d, -1, doc_topic, edge_topic, node_topic,
          arrays.path_indptr, arrays.path_edges, arrays.edge_parent)
    out = np.empty(state.n_topics * arrays.max_paths)
    n_paths = _token_weights(d, int(state.token_words[token]), doc_topic, edge_topic, node_topic,
                             np.asarray(state.doc_topic_prior, np.float64), arrays.word_path_indptr,
                             arrays.path_indptr, arrays.path_edges, arrays.edge_parent, edge_prior, node_prior, out)
    weights = out[: state.n_topics * n_paths].reshape(state.n_topics, n_paths)
    return weights / weights.sum()


def joint_log_likelihood(state: TreeGibbsState, tree: PriorTree) -> float:
    """Compute log p(w, z, y) with theta and pi integrated out (the trace of a chain).

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    float

    Notes
    -----
    One Dirichlet-multinomial per document and one per (topic, internal node) (w is fixed by y)::

        sum_d [lgamma(A) - lgamma(N_d + A) + sum_k lgamma(N_dk + alpha_k) - lgamma(alpha_k)]
        + sum_{k,i} [lgamma(B_i) - lgamma(N_ki + B_i) + sum_{e from i} lgamma(N_ke + beta_e) - lgamma(beta_e)]
    """
    _check_state(state, tree)
    arrays = tree_arrays(tree)
    alpha = np.asarray(state.doc_topic_prior, dtype=np.float64)
    n_d = np.diff(state.token_indptr)
    doc = (state.n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum()) - gammaln(n_d + alpha.sum()).sum()
           + gammaln(state.doc_topic_counts + alpha).sum())
    beta, big_b = arrays.edge_prior, arrays.node_prior_sum
    topic = (state.n_topics * (gammaln(big_b).sum() - gammaln(beta).sum()) - gammaln(state.node_topic_counts + big_b).sum()
             + gammaln(state.edge_topic_counts + beta).sum())
    return float(doc + topic)


def edge_posterior_mean(state: TreeGibbsState, tree: PriorTree) -> FloatArray:
    """Posterior mean of pi per edge: ``(N_ke + beta_e) / (N_k,parent(e) + B_parent(e))``.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
        For every topic and internal node, the entries of the node's edges sum to 1.
    """
    _check_state(state, tree)
    arrays = tree_arrays(tree)
    denominator = state.node_topic_counts[:, arrays.edge_parent] + arrays.node_prior_sum[arrays.edge_parent]
    return np.asarray((state.edge_topic_counts + arrays.edge_prior) / denominator, dtype=np.float64)


def path_probabilities(edge_topic: FloatArray, tree: PriorTree) -> FloatArray:
    """Probability of every path under every topic: the product of its edges' pi.

    Parameters
    ----------
    edge_topic : ndarray of shape (n_topics, n_edges), float64
        The topics' pi, e.g. :func:`edge_posterior_mean`.
    tree : PriorTree

    Returns
    -------
    ndarray of shape (n_topics, n_paths), float64

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> path_probabilities(np.array([[0.25, 0.75]]), flat_tree(["en"], [2])).tolist()
    [[0.25, 0.75]]
    """
    edge_topic = np.asarray(edge_topic, dtype=np.float64)
    if edge_topic.ndim != 2 or edge_topic.shape[1] != tree.n_edges:
        raise InvalidParameterError(f"edge_topic must have shape (n_topics, {tree.n_edges}), got {edge_topic.shape!r}")
    return tree.path_products(edge_topic[:, tree.path_edges])


def topic_word_distribution(state: TreeGibbsState, tree: PriorTree) -> dict[str, FloatArray]:
    """Each topic's word distribution per language: the sum over a word's paths of the path probability.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    dict of str to ndarray of shape (n_topics, n_terms), float64
        One entry per language of the tree; rows normalized within the language (the leaves of all
        languages share one distribution per topic; a token's language is observed, so a language's
        words are read given the language).

    Notes
    -----
    ``phi[k, w] = sum_{s in paths(w)} prod_{e in s} pi_ke`` with pi from :func:`edge_posterior_mean`,
    divided by its sum over the language's words. For a flat monolingual tree this is LDA's
    ``(n_wk + beta_w) / (n_k + sum beta)``.
    """
    per_word = tree.word_sums(path_probabilities(edge_posterior_mean(state, tree), tree))
    return {language: block / block.sum(axis=1, keepdims=True) for language, block in per_word.items()}


def word_topic_counts(state: TreeGibbsState, tree: PriorTree) -> dict[str, IntArray]:
    """Count tokens per (topic, word) in every language, summing over the words' paths.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    dict of str to ndarray of shape (n_topics, n_terms), int64
        One entry per language of the tree.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> tree = flat_tree(["en", "de"], [2, 1])
    >>> state = state_from_assignments(np.array([0, 3]), np.array([1, 2, 1], np.int32), np.array([0, 1, 1]),
    ...                                np.array([1, 2, 1]), tree, TreeGibbsParams(n_topics=2))
    >>> {lang: c.tolist() for lang, c in word_topic_counts(state, tree).items()}
    {'en': [[0, 1], [0, 1]], 'de': [[0], [1]]}
    """
    _check_state(state, tree)
    arrays = tree_arrays(tree)
    counts = np.zeros((state.n_topics, int(arrays.word_offset[-1])), dtype=np.int64)
    np.add.at(counts, (state.topics.astype(np.int64), state.token_words.astype(np.int64)), 1)
    return {language: counts[:, arrays.word_offset[li]: arrays.word_offset[li + 1]].copy()
            for li, language in enumerate(tree.languages)}


# ----------------------------------------------------------------------------- fold-in


def fold_in(
    blocks: DocBlock | Mapping[str, DocBlock], tree: PriorTree, edge_topic: FloatArray,
    doc_topic_prior: float | FloatArray, *, n_sweeps: int = 5, seed: int = 0,
) -> Int32Array:
    """Topic counts of held-out documents by Gibbs sampling over (z, y) with the topics fixed.

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
        Held-out documents, one block per language (aligned).
    tree : PriorTree
    edge_topic : ndarray of shape (n_topics, n_edges), float64
        The topics' pi (e.g. :func:`edge_posterior_mean` of a trained state); finite and >= 0.
    doc_topic_prior : float or ndarray of shape (n_topics,)
    n_sweeps : int, default 5
        Sweeps after the random start; 0 returns the random start's counts.
    seed : int, default 0

    Returns
    -------
    ndarray of shape (n_docs, n_topics), int32
        N_dk after the last sweep.

    Raises
    ------
    InvalidParameterError
        Shapes, alpha, ``n_sweeps``, ``seed`` or non-finite / negative pi.

    Notes
    -----
    The random start of :func:`initial_state` on ``STREAM_FOLD_IN`` (epoch 0); sweep s draws token t of
    document g from ``p(k, s) ∝ (N_dk + alpha_k) prod_{e in s} pi_ke`` (k-major, inverse CDF) with
    the t-th uniform of ``counter_key(seed, STREAM_FOLD_IN, s, g)``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> block = block_from_csr(sp.csr_matrix(np.array([[5, 0], [0, 3]])), language="en")
    >>> fold_in(block, flat_tree(["en"], [2]), np.eye(2), 0.1).tolist()
    [[5, 0], [0, 3]]
    """
    pi = np.asarray(edge_topic, dtype=np.float64)
    if pi.ndim != 2 or pi.shape[1] != tree.n_edges or not np.all(np.isfinite(pi)) or pi.min(initial=0) < 0:
        raise InvalidParameterError(
            f"edge_topic must be finite, >= 0 and of shape (n_topics, {tree.n_edges}); got shape {pi.shape!r}"
        )
    n_topics = pi.shape[0]
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, n_topics)
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    seed = parse_int("seed", seed, 0, _MAX_SEED - 1)
    token_indptr, token_words, first_doc = tokens_from_blocks(blocks, tree)
    arrays = tree_arrays(tree)
    topics = np.zeros(token_words.shape[0], dtype=np.int32)
    paths = np.zeros(token_words.shape[0], dtype=np.int32)
    _random_start(token_indptr, token_words, arrays.word_path_indptr, n_topics, seed, STREAM_FOLD_IN, first_doc,
                  topics, paths)
    out = np.zeros((token_indptr.shape[0] - 1, n_topics), dtype=np.int32)
    path_topic = np.ascontiguousarray(path_probabilities(pi, tree).T)
    _fold_in_sweeps(token_indptr, token_words, topics, paths, out, alpha, arrays.word_path_indptr, path_topic,
                    seed, first_doc, n_sweeps, np.empty(n_topics * arrays.max_paths))
    return out


# ----------------------------------------------------------------------------- checkpoints


def to_arrays(state: TreeGibbsState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split a state into arrays and JSON-able scalars (a snapshot; never pickled).

    Parameters
    ----------
    state : TreeGibbsState

    Returns
    -------
    arrays : dict of str to ndarray
        The fields named in :data:`STATE_ARRAYS`.
    meta : dict of str to Any
        ``first_doc`` and ``sweeps_done``.
    """
    arrays = {name: np.asarray(getattr(state, name)) for name in STATE_ARRAYS}
    return arrays, {"first_doc": int(state.first_doc), "sweeps_done": int(state.sweeps_done)}


def from_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> TreeGibbsState:
    """Rebuild the state :func:`to_arrays` split: ``from_arrays(*to_arrays(s))`` equals ``s``.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        Every name of :data:`STATE_ARRAYS`.
    meta : mapping of str to Any
        ``first_doc`` and ``sweeps_done``.

    Returns
    -------
    TreeGibbsState
    """
    return TreeGibbsState(**{name: np.asarray(arrays[name]) for name in STATE_ARRAYS},
                          first_doc=int(meta["first_doc"]), sweeps_done=int(meta["sweeps_done"]))
