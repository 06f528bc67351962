"""Collapsed Gibbs sampling for tLDA / ptLDA over (topic, path) pairs (Zhai 2014, sec. 5.2.1, eq. 5.2).

This module owns the sampler's state, its sweep kernel, its scores and read-outs, and fold-in of
held-out documents with the topics fixed. Pure NumPy + numba: it must not import dask, distributed,
zarr or logging, and does no I/O. The prior tree is a :class:`~topicflow.models.tree_lda.tree.PriorTree`.

Every token carries a topic z and a path y (root to one of its word's leaves). The conditional of
token i of document d with word w is

    p(z = k, y = s | rest) ∝ (N_dk + alpha_k) prod_{e in s} (N_ke + beta_e) / (G_k,g(e,s) + B_g(e,s))

for the paths s ending at w, with every count excluding token i. g(e, s) is the normalization group
of edge e as used on path s, G_kg the sum of N_ke over the member edges of group g and B_g the sum of
their beta. The groups are those of :func:`topicflow.models.tree_lda.vb.tree_vb_layout` (one
definition for VB, hybrid and Gibbs): ``normalization="node"`` (the chapter's eq. 5.2) has one group
per internal node (g(e, s) = parent(e), G = N_k,parent(e)); ``"node_language"`` has one per (internal
node, language of the path's leaf), so that a flat multilingual tree is polylingual LDA exactly. An
edge whose subtree has leaves of several languages (root -> concept) is a member of one group per
language, and its count N_ke (both languages' tokens) enters each of them; the kernel keeps G
incrementally through an edge -> groups CSR. With such shared edges the "node_language" conditional
is not that of a generative model (the VB objective of that normalization is a surrogate too; see
:func:`joint_log_likelihood`); with no shared edge (a flat tree, or concepts within one language) it
is exact.

The sampler is the naive one: it evaluates all K x S_w weights of a token (O(K S_w depth) per draw;
spec 2.8 says it is enough at the K of the experiments). The sparse bucket decomposition of Hu and
Boyd-Graber (2012) is not implemented. The kernels work on edge-major copies of the counts
((n_edges, K), (n_groups, K)) so that the loop over topics is contiguous; the state keeps them
topic-major. Optional pseudo-counts M_ke (the edge counts of tokens outside the state: other shards,
earlier minibatches) join the conditional's counts, so a shard can be swept against the rest of the
corpus.

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
    group: a normalization group: an internal node ("node") or an (internal node, language) pair
        ("node_language"); member: an (edge, group) pair with the edge in the group
    group_topic_counts (G_kg, (n_topics, n_groups)): the sum of N_ke over the member edges of group g
        (under "node" the groups are the internal nodes: N_ki, the tokens of topic k passing through i)
    edge_prior (beta_e, (n_edges,)); group_prior_sum (B_g = sum of beta over g's member edges, (n_groups,))
    doc_topic_prior (alpha, (n_topics,))
    edge_topic (pi, (n_topics, n_members)): the posterior mean (N_ke + beta_e) / (G_kg + B_g) per member
        (e, g); under "node" a member is an edge ((n_topics, n_edges))

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

from topicflow._typing import FloatArray, Int32Array, IntArray, TreeNormalization
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
from topicflow.models.tree_lda.vb import TREE_NORMALIZATIONS, tree_vb_layout

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
    normalization : {"node", "node_language"}, default "node"
        The normalization groups of the edges' Dirichlets (module docstring): "node" is the chapter's
        one Dirichlet per internal node; "node_language" one per (node, language of the leaf), with
        which a flat multilingual tree is polylingual LDA.

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
    normalization: TreeNormalization = "node"

    def __post_init__(self) -> None:
        if self.normalization not in TREE_NORMALIZATIONS:
            raise InvalidParameterError(
                f"TreeGibbsParams.normalization must be one of {list(TREE_NORMALIZATIONS)}, got {self.normalization!r}")
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
        return {"n_topics": self.n_topics, "seed": self.seed, "normalization": self.normalization,
                "doc_topic_prior": prior if isinstance(prior, float) else [float(a) for a in prior]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TreeGibbsParams:
        """Inverse of :meth:`to_dict` (a dict without ``normalization`` is the "node" sampler's)."""
        prior = data["doc_topic_prior"]
        return cls(n_topics=data["n_topics"], doc_topic_prior=prior if np.ndim(prior) == 0 else np.asarray(prior),
                   seed=data["seed"], normalization=data.get("normalization", "node"))


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
    group_topic_counts : ndarray of shape (n_topics, n_groups), int64
        G_kg, the sum of N_ke over the member edges of each normalization group (under "node": N_ki,
        one column per internal node).
    first_doc : int
        Global position of document 0; the random numbers are keyed by ``first_doc + d``.
    doc_topic_prior : ndarray of shape (n_topics,), float64
        Current alpha (changes when it is optimized).
    sweeps_done : int
        Sweeps run since the initialization.
    normalization : {"node", "node_language"}, default "node"
        The groups of ``group_topic_counts`` (that of the :class:`TreeGibbsParams` the state was started
        with); the read-outs and scores use it.

    Raises
    ------
    InvalidParameterError
        Shapes that do not fit together, or an unknown normalization.
    """

    token_indptr: IntArray
    token_words: Int32Array
    topics: Int32Array
    paths: Int32Array
    doc_topic_counts: Int32Array
    edge_topic_counts: Int32Array
    group_topic_counts: IntArray
    first_doc: int
    doc_topic_prior: FloatArray
    sweeps_done: int
    normalization: TreeNormalization = "node"

    def __post_init__(self) -> None:
        for name, dtype in STATE_ARRAYS.items():
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        n_tokens, n_docs = self.token_words.shape[0], self.token_indptr.shape[0] - 1
        n_topics = self.doc_topic_prior.shape[0]
        expected = {"topics": (n_tokens,), "paths": (n_tokens,), "doc_topic_counts": (n_docs, n_topics)}
        problems = [f"{name} has shape {getattr(self, name).shape!r}, expected {shape!r}"
                    for name, shape in expected.items() if getattr(self, name).shape != shape]
        if self.normalization not in TREE_NORMALIZATIONS:
            problems.append(f"normalization must be one of {list(TREE_NORMALIZATIONS)}, got {self.normalization!r}")
        for name in ("edge_topic_counts", "group_topic_counts"):
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

    @property
    def node_topic_counts(self) -> IntArray:
        """``group_topic_counts`` under its former name (N_ki under "node", G_kg under "node_language")."""
        return self.group_topic_counts


#: The arrays of a :class:`TreeGibbsState` snapshot and their dtypes.
STATE_ARRAYS: dict[str, type] = {
    "token_indptr": np.int64, "token_words": np.int32, "topics": np.int32, "paths": np.int32,
    "doc_topic_counts": np.int32, "edge_topic_counts": np.int32, "group_topic_counts": np.int64,
    "doc_topic_prior": np.float64,
}


# ----------------------------------------------------------------------------- tree and tokens


@dataclass(frozen=True, slots=True)
class TreeArrays:
    """The tree and its normalization groups as the kernels read them.

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
    normalization : {"node", "node_language"}
    pair_group : ndarray of shape (len(path_edges),), int64
        g(e, s): the group of each entry of ``path_edges`` (the edge as used on that path).
    member_edge, member_group : ndarray of shape (n_members,), int64
        The (edge, group) memberships, sorted by edge then group
        (:class:`~topicflow.models.tree_lda.vb.TreeVBLayout`'s).
    edge_group_indptr : ndarray of shape (n_edges + 1,), int64
        Edge e's groups are ``member_group[edge_group_indptr[e]:edge_group_indptr[e + 1]]`` (the CSR
        the kernel updates G through).
    pair_member : ndarray of shape (len(path_edges),), int64
        The member (e, g(e, s)) of each entry of ``path_edges``.
    group_prior_sum : ndarray of shape (n_groups,), float64
        B_g, the sum of beta over the group's member edges.
    max_paths : int
        Largest number of paths of one word.
    """

    word_offset: IntArray
    word_path_indptr: IntArray
    path_indptr: IntArray
    path_edges: IntArray
    edge_parent: IntArray
    edge_prior: FloatArray
    normalization: TreeNormalization
    pair_group: IntArray
    member_edge: IntArray
    member_group: IntArray
    edge_group_indptr: IntArray
    pair_member: IntArray
    group_prior_sum: FloatArray
    max_paths: int

    @property
    def n_groups(self) -> int:
        return int(self.group_prior_sum.shape[0])

    @property
    def n_members(self) -> int:
        return int(self.member_edge.shape[0])


def tree_arrays(tree: PriorTree, normalization: TreeNormalization = "node") -> TreeArrays:
    """The kernel view of ``tree`` (words numbered over all languages, the groups and their prior sums).

    Parameters
    ----------
    tree : PriorTree
    normalization : {"node", "node_language"}, default "node"
        The groups are :func:`~topicflow.models.tree_lda.vb.tree_vb_layout`'s for this normalization.

    Returns
    -------
    TreeArrays

    Raises
    ------
    InvalidParameterError
        Unknown ``normalization``.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> arrays = tree_arrays(flat_tree(["en", "de"], [2, 3], 0.5))
    >>> arrays.word_offset.tolist(), arrays.group_prior_sum.tolist()
    ([0, 2, 5], [2.5])
    >>> tree_arrays(flat_tree(["en", "de"], [2, 3], 0.5), "node_language").group_prior_sum.tolist()
    [1.0, 1.5]
    """
    layout = tree_vb_layout(tree, normalization)
    word_offset = np.concatenate(([0], np.cumsum(tree.n_terms))).astype(np.int64)
    path_word = word_offset[tree.path_language] + tree.path_term
    per_word = np.bincount(path_word, minlength=int(word_offset[-1]))
    member_edge, member_group = layout.member_edge, layout.member_group
    edge_prior = np.ascontiguousarray(tree.edge_prior, dtype=np.float64)
    # in edge order within each group (as np.bincount adds): for "node" the sums of the chapter's sampler
    group_prior_sum = np.bincount(member_group, weights=edge_prior[member_edge], minlength=layout.n_groups)
    path_edges = np.ascontiguousarray(tree.path_edges, dtype=np.int64)
    member_key = member_edge * layout.n_groups + member_group
    pair_member = np.searchsorted(member_key, path_edges * layout.n_groups + layout.pair_group)
    return TreeArrays(
        word_offset=word_offset, word_path_indptr=np.concatenate(([0], np.cumsum(per_word))).astype(np.int64),
        path_indptr=np.ascontiguousarray(tree.path_indptr, dtype=np.int64), path_edges=path_edges,
        edge_parent=np.ascontiguousarray(tree.edge_parent, dtype=np.int64), edge_prior=edge_prior,
        normalization=normalization, pair_group=np.ascontiguousarray(layout.pair_group, dtype=np.int64),
        member_edge=np.ascontiguousarray(member_edge), member_group=np.ascontiguousarray(member_group),
        edge_group_indptr=np.concatenate(([0], np.cumsum(np.bincount(member_edge, minlength=tree.n_edges))))
        .astype(np.int64),
        pair_member=pair_member.astype(np.int64), group_prior_sum=group_prior_sum.astype(np.float64),
        max_paths=int(per_word.max(initial=1)),
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
def _token_weights(d, word, doc_topic, edge_topic, group_topic, alpha, word_path_indptr, path_indptr,
                   path_edges, pair_group, edge_prior, group_prior_sum, out):
    """Fill ``out[k * S + j]`` with the unnormalized conditional weight of (k, the j-th path of ``word``).

    Edge-major layout, so that the inner loop over topics is contiguous: ``edge_topic`` (n_edges,
    n_topics), ``group_topic`` (n_groups, n_topics), ``edge_prior`` (beta_e plus any pseudo-counts,
    (n_edges, n_topics)) and ``group_prior_sum`` (its sums per group, (n_groups, n_topics)). The
    counts must already exclude the token. Each weight is ``(N_dk + alpha_k)`` times the path's edge
    ratios ``(N_ke + beta_e) / (G_kg + B_g)``, g = ``pair_group`` of the path entry, in root-to-leaf
    order. Returns S, the number of the word's paths.
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
            g = pair_group[i]
            for k in range(n_topics):
                out[k * n_paths + j] *= (edge_topic[e, k] + edge_prior[e, k]) / (
                    group_topic[g, k] + group_prior_sum[g, k])
    return n_paths


@numba.njit(nogil=True, cache=True, inline="always")
def _move(k, s, d, delta, doc_topic, edge_topic, group_topic, path_indptr, path_edges, edge_group_indptr,
          member_group):
    """Add ``delta`` (+1 or -1) for a token of document d with topic k on path s to every count.

    ``edge_topic`` and ``group_topic`` are edge- and group-major: (n_edges, n_topics), (n_groups,
    n_topics); every group edge e is a member of (``member_group[edge_group_indptr[e]:...]``, one per
    language below e under "node_language") changes with N_ke.
    """
    doc_topic[d, k] += delta
    for i in range(path_indptr[s], path_indptr[s + 1]):
        e = path_edges[i]
        edge_topic[e, k] += delta
        for m in range(edge_group_indptr[e], edge_group_indptr[e + 1]):
            group_topic[member_group[m], k] += delta


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
def _recount(token_indptr, topics, paths, doc_topic, edge_topic, group_topic, path_indptr, path_edges,
             edge_group_indptr, member_group):
    """Add every token's (z, y) to N_dk, N_ek and G_gk (edge- and group-major; zero on entry)."""
    for d in range(token_indptr.shape[0] - 1):
        for t in range(token_indptr[d], token_indptr[d + 1]):
            _move(topics[t], paths[t], d, 1, doc_topic, edge_topic, group_topic, path_indptr, path_edges,
                  edge_group_indptr, member_group)


@numba.njit(nogil=True, cache=True)
def _sweep(token_indptr, token_words, topics, paths, doc_topic, edge_topic, group_topic, alpha,
           word_path_indptr, path_indptr, path_edges, pair_group, edge_group_indptr, member_group, edge_prior,
           group_prior_sum, seed, sweep, first_doc, weights):
    """One sweep of the conditional over every token, in document then token order (see :func:`run_sweeps`)."""
    for d in range(token_indptr.shape[0] - 1):
        key = counter_key(seed, STREAM_GIBBS, sweep, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            w = token_words[t]
            _move(topics[t], paths[t], d, -1, doc_topic, edge_topic, group_topic, path_indptr, path_edges,
                  edge_group_indptr, member_group)
            n_paths = _token_weights(d, w, doc_topic, edge_topic, group_topic, alpha, word_path_indptr,
                                     path_indptr, path_edges, pair_group, edge_prior, group_prior_sum, weights)
            index, _ = draw_dense(weights[: n_paths * doc_topic.shape[1]], uniform_from_key(key, t - lo))
            k, s = index // n_paths, word_path_indptr[w] + index % n_paths
            topics[t], paths[t] = k, s
            _move(k, s, d, 1, doc_topic, edge_topic, group_topic, path_indptr, path_edges, edge_group_indptr,
                  member_group)


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
    """beta_e + M_ke and its sums per group, edge- and group-major ((n_edges, K), (n_groups, K)), for the kernels.

    Without M: beta and B repeated over the topics. M's group sums are added in member (edge) order,
    as B's.
    """
    edge_prior = np.repeat(arrays.edge_prior[:, None], n_topics, axis=1)
    group_prior = np.repeat(arrays.group_prior_sum[:, None], n_topics, axis=1)
    if pseudo_counts is None:
        return edge_prior, group_prior
    extra = np.asarray(pseudo_counts, dtype=np.float64)
    if extra.shape != (n_topics, tree.n_edges) or not np.all(np.isfinite(extra)) or extra.min(initial=0) < 0:
        raise InvalidParameterError(
            f"pseudo_counts must be finite, >= 0 and of shape ({n_topics}, {tree.n_edges}) (topics x edges); "
            f"got shape {extra.shape!r}"
        )
    group_extra = np.zeros((n_topics, arrays.n_groups))
    for k in range(n_topics):
        group_extra[k] = np.bincount(arrays.member_group, weights=extra[k, arrays.member_edge],
                                     minlength=arrays.n_groups)
    return np.ascontiguousarray(edge_prior + extra.T), np.ascontiguousarray(group_prior + group_extra.T)


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
        Gives K, alpha and the normalization (of the group counts).
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
    arrays = tree_arrays(tree, params.normalization)
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
    group_major = np.zeros((arrays.n_groups, params.n_topics), dtype=np.int64)
    _recount(token_indptr, topics, paths, doc_topic, edge_major, group_major, arrays.path_indptr, arrays.path_edges,
             arrays.edge_group_indptr, arrays.member_group)
    return TreeGibbsState(token_indptr, token_words, topics, paths, doc_topic, edge_major.T, group_major.T, first_doc,
                          params.alpha, sweeps_done, params.normalization)


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
    arrays = tree_arrays(tree, params.normalization)
    topics = np.zeros(token_words.shape[0], dtype=np.int32)
    paths = np.zeros(token_words.shape[0], dtype=np.int32)
    _random_start(token_indptr, token_words, arrays.word_path_indptr, params.n_topics, params.seed, STREAM_GIBBS,
                  first_doc, topics, paths)
    return state_from_assignments(token_indptr, token_words, topics, paths, tree, params, first_doc=first_doc)


def _check_state(state: TreeGibbsState, tree: PriorTree, params: TreeGibbsParams | None = None) -> TreeArrays:
    """The kernel view of ``tree`` under the state's normalization; raise if the state is not of this tree."""
    if params is not None and params.normalization != state.normalization:
        raise InvalidParameterError(
            f"params.normalization is {params.normalization!r} but the state was started with "
            f"{state.normalization!r}: continue a chain with the normalization it was started with"
        )
    arrays = tree_arrays(tree, state.normalization)
    if state.edge_topic_counts.shape[1] != tree.n_edges or state.group_topic_counts.shape[1] != arrays.n_groups:
        raise InvalidParameterError(
            f"the state counts {state.edge_topic_counts.shape[1]} edges and {state.group_topic_counts.shape[1]} "
            f"{state.normalization!r} groups but the tree has {tree.n_edges} and {arrays.n_groups}; use the tree "
            "the state was started with"
        )
    if params is not None and params.n_topics != state.n_topics:
        raise InvalidParameterError(f"params.n_topics is {params.n_topics} but the state has {state.n_topics} topics")
    return arrays


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
        Gives the seed; ``n_topics`` and ``normalization`` must equal the state's.
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
        Mismatched K, normalization or tree, or negative counts of sweeps.

    Notes
    -----
    Zhai (2014), eq. 5.2 with normalization groups: token t of document d is removed from the counts
    and (z, y) redrawn from

        p(z = k, y = s) ∝ (N_dk + alpha_k) prod_{e in s} (N_ke + beta_e) / (G_k,g(e,s) + B_g(e,s))

    (under "node": g(e, s) = parent(e), the chapter's eq. 5.2)
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
    arrays = _check_state(state, tree, params)
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    optimize_every = parse_int("optimize_every", optimize_every, 0)
    burn_in = parse_int("burn_in", burn_in, 0)
    edge_prior, group_prior = _topic_priors(arrays, state.n_topics, tree, pseudo_counts)
    topics, paths = state.topics.copy(), state.paths.copy()
    doc_topic = state.doc_topic_counts.copy()
    edge_topic = state.edge_topic_counts.T.copy()  # edge-major copies for the kernel
    group_topic = state.group_topic_counts.T.copy()
    alpha = np.array(state.doc_topic_prior, dtype=np.float64)
    weights = np.empty(state.n_topics * arrays.max_paths)
    for s in range(n_sweeps):
        sweep = state.sweeps_done + s + 1
        _sweep(state.token_indptr, state.token_words, topics, paths, doc_topic, edge_topic, group_topic, alpha,
               arrays.word_path_indptr, arrays.path_indptr, arrays.path_edges, arrays.pair_group,
               arrays.edge_group_indptr, arrays.member_group, edge_prior, group_prior, params.seed, sweep,
               state.first_doc, weights)
        if optimize_every and sweep > burn_in and (sweep - burn_in) % optimize_every == 0:
            _alpha_fixed_point(doc_topic, np.diff(state.token_indptr), alpha, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    return TreeGibbsState(state.token_indptr, state.token_words, topics, paths, doc_topic, edge_topic.T,
                          group_topic.T, state.first_doc, alpha, state.sweeps_done + n_sweeps, state.normalization)


# ----------------------------------------------------------------------------- scores and read-outs


def token_conditional(
    state: TreeGibbsState, tree: PriorTree, token: int, *, pseudo_counts: FloatArray | None = None,
) -> FloatArray:
    """The normalized conditional (eq. 5.2, with the state's groups) of one token, its own (z, y) removed.

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
    arrays = _check_state(state, tree)
    token = parse_int("token", token, 0, state.n_tokens)
    edge_prior, group_prior = _topic_priors(arrays, state.n_topics, tree, pseudo_counts)
    d = int(np.searchsorted(state.token_indptr, token, side="right") - 1)
    doc_topic = state.doc_topic_counts.copy()
    edge_topic = state.edge_topic_counts.T.copy()
    group_topic = state.group_topic_counts.T.copy()
    _move(int(state.topics[token]), int(state.paths[token]), d, -1, doc_topic, edge_topic, group_topic,
          arrays.path_indptr, arrays.path_edges, arrays.edge_group_indptr, arrays.member_group)
    out = np.empty(state.n_topics * arrays.max_paths)
    n_paths = _token_weights(d, int(state.token_words[token]), doc_topic, edge_topic, group_topic,
                             np.asarray(state.doc_topic_prior, np.float64), arrays.word_path_indptr,
                             arrays.path_indptr, arrays.path_edges, arrays.pair_group, edge_prior, group_prior, out)
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
    One Dirichlet-multinomial per document and one per (topic, normalization group) (w is fixed by y)::

        sum_d [lgamma(A) - lgamma(N_d + A) + sum_k lgamma(N_dk + alpha_k) - lgamma(alpha_k)]
        + sum_{k,g} [lgamma(B_g) - lgamma(G_kg + B_g) + sum_{e in g} lgamma(N_ke + beta_e) - lgamma(beta_e)]

    Under "node" (groups = internal nodes) this is the exact collapsed joint of the chapter's model.
    Under "node_language" it is exact where no edge is in two groups: a flat multilingual tree (where
    it is polylingual LDA's joint) or a tree whose concepts stay within one language. An edge with
    leaves of several languages below it (root -> cross-lingual concept) enters the sum once per
    group with its pooled count N_ke, and the sampler's conditional is not the ratio of two such
    joints: the value is then a surrogate (a monitor of the chain, as the VB objective of that
    normalization is), not the log-probability of a generative model.
    """
    arrays = _check_state(state, tree)
    alpha = np.asarray(state.doc_topic_prior, dtype=np.float64)
    n_d = np.diff(state.token_indptr)
    doc = (state.n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum()) - gammaln(n_d + alpha.sum()).sum()
           + gammaln(state.doc_topic_counts + alpha).sum())
    members, big_b = arrays.member_edge, arrays.group_prior_sum
    beta = arrays.edge_prior[members]
    topic = (state.n_topics * (gammaln(big_b).sum() - gammaln(beta).sum())
             - gammaln(state.group_topic_counts + big_b).sum()
             + gammaln(state.edge_topic_counts[:, members] + beta).sum())
    return float(doc + topic)


def edge_posterior_mean(state: TreeGibbsState, tree: PriorTree) -> FloatArray:
    """Posterior mean of pi per member (e, g): ``(N_ke + beta_e) / (G_kg + B_g)``.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    ndarray of shape (n_topics, n_members), float64
        Under "node" a member is an edge: shape (n_topics, n_edges), the entries of a node's edges
        sum to 1. Under "node_language", column m is edge ``member_edge[m]`` in group
        ``member_group[m]`` (:func:`tree_arrays`; an edge with leaves of two languages below it has
        two columns), and the entries of each group sum to 1.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> tree, params = flat_tree(["en", "de"], [1, 1], 1.0), TreeGibbsParams(n_topics=1)
    >>> state = state_from_assignments(np.array([0, 1]), np.array([0], np.int32), np.array([0]), np.array([0]),
    ...                                tree, params)
    >>> edge_posterior_mean(state, tree).tolist()
    [[0.6666666666666666, 0.3333333333333333]]
    """
    arrays = _check_state(state, tree)
    e, g = arrays.member_edge, arrays.member_group  # under "node": every edge once, in edge order
    denominator = state.group_topic_counts[:, g] + arrays.group_prior_sum[g]
    return np.asarray((state.edge_topic_counts[:, e] + arrays.edge_prior[e]) / denominator, dtype=np.float64)


def edge_posterior_params(state: TreeGibbsState, tree: PriorTree) -> FloatArray:
    """The Dirichlet parameters of pi given the counts, ``N_ke + beta_e``, in VB's lambda layout.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
        As ``edge_var`` of :mod:`topicflow.models.tree_lda.vb`'s read-outs with
        ``tree_vb_layout(tree, state.normalization)``: their group sums are ``G_kg + B_g``, so e.g.
        ``vb.topic_word`` of it gives the same word distributions as :func:`topic_word_distribution`.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> tree, params = flat_tree(["en"], [2], 0.5), TreeGibbsParams(n_topics=1)
    >>> state = state_from_assignments(np.array([0, 1]), np.array([1], np.int32), np.array([0]), np.array([1]),
    ...                                tree, params)
    >>> edge_posterior_params(state, tree).tolist()
    [[0.5, 1.5]]
    """
    _check_state(state, tree)
    return np.asarray(state.edge_topic_counts + tree.edge_prior[None, :], dtype=np.float64)


def path_probabilities(edge_topic: FloatArray, tree: PriorTree, normalization: TreeNormalization = "node") -> FloatArray:
    """Probability of every path under every topic: the product of its edges' pi (in the path's groups).

    Parameters
    ----------
    edge_topic : ndarray of shape (n_topics, n_members), float64
        The topics' pi per member (e, g), e.g. :func:`edge_posterior_mean`: under "node" one column
        per edge, (n_topics, n_edges).
    tree : PriorTree
    normalization : {"node", "node_language"}, default "node"
        The groups ``edge_topic``'s columns are members of; path s uses member (e, g(e, s)).

    Returns
    -------
    ndarray of shape (n_topics, n_paths), float64

    Raises
    ------
    InvalidParameterError
        ``edge_topic`` of another shape.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> path_probabilities(np.array([[0.25, 0.75]]), flat_tree(["en"], [2])).tolist()
    [[0.25, 0.75]]
    """
    edge_topic = np.asarray(edge_topic, dtype=np.float64)
    if normalization == "node":
        if edge_topic.ndim != 2 or edge_topic.shape[1] != tree.n_edges:
            raise InvalidParameterError(
                f"edge_topic must have shape (n_topics, {tree.n_edges}) (one column per edge), got {edge_topic.shape!r}")
        return tree.path_products(edge_topic[:, tree.path_edges])
    arrays = tree_arrays(tree, normalization)
    if edge_topic.ndim != 2 or edge_topic.shape[1] != arrays.n_members:
        raise InvalidParameterError(
            f"edge_topic must have shape (n_topics, {arrays.n_members}) (one column per (edge, group) member of "
            f"the {normalization!r} groups), got {edge_topic.shape!r}")
    return tree.path_products(edge_topic[:, arrays.pair_member])


def topic_word_distribution(state: TreeGibbsState, tree: PriorTree) -> dict[str, FloatArray]:
    """Each topic's word distribution per language: the sum over a word's paths of the path probability.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    dict of str to ndarray of shape (n_topics, n_terms), float64
        One entry per language of the tree; rows sum to 1 within each language.

    Notes
    -----
    ``phi[k, w] = sum_{s in paths(w)} prod_{e in s} pi_k,(e, g(e,s))`` with pi from
    :func:`edge_posterior_mean`, divided by its sum over the language's words. Under "node_language"
    the paths of one language already sum to 1 (each of its groups is a distribution over the edges
    toward its leaves) and the division only removes rounding; for a flat multilingual tree this is
    polylingual LDA's ``(n_wk + beta_w) / (n_k,lang + sum of the language's beta)``. Under "node" the
    tree also generates the language (the leaves of all languages share one distribution per topic)
    and a language's words are read given the language; for a flat monolingual tree both are LDA's
    ``(n_wk + beta_w) / (n_k + sum beta)``.
    """
    pi = edge_posterior_mean(state, tree)
    per_word = tree.word_sums(path_probabilities(pi, tree, state.normalization))
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
    arrays = _check_state(state, tree)
    counts = np.zeros((state.n_topics, int(arrays.word_offset[-1])), dtype=np.int64)
    np.add.at(counts, (state.topics.astype(np.int64), state.token_words.astype(np.int64)), 1)
    return {language: counts[:, arrays.word_offset[li]: arrays.word_offset[li + 1]].copy()
            for li, language in enumerate(tree.languages)}


# ----------------------------------------------------------------------------- fold-in


def fold_in(
    blocks: DocBlock | Mapping[str, DocBlock], tree: PriorTree, edge_topic: FloatArray,
    doc_topic_prior: float | FloatArray, *, n_sweeps: int = 5, seed: int = 0,
    normalization: TreeNormalization = "node",
) -> Int32Array:
    """Topic counts of held-out documents by Gibbs sampling over (z, y) with the topics fixed.

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
        Held-out documents, one block per language (aligned).
    tree : PriorTree
    edge_topic : ndarray of shape (n_topics, n_members), float64
        The topics' pi per (edge, group) member (e.g. :func:`edge_posterior_mean` of a trained state;
        under "node" one column per edge); finite and >= 0.
    doc_topic_prior : float or ndarray of shape (n_topics,)
    n_sweeps : int, default 5
        Sweeps after the random start; 0 returns the random start's counts.
    seed : int, default 0
    normalization : {"node", "node_language"}, default "node"
        The groups of ``edge_topic``'s columns (the trained state's ``normalization``).

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
    document g from ``p(k, s) ∝ (N_dk + alpha_k) prod_{e in s} pi_k,(e, g(e,s))`` (k-major, inverse CDF) with
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
    if normalization not in TREE_NORMALIZATIONS:
        raise InvalidParameterError(f"normalization must be one of {list(TREE_NORMALIZATIONS)}, got {normalization!r}")
    arrays = tree_arrays(tree, normalization)
    width = tree.n_edges if normalization == "node" else arrays.n_members
    if pi.ndim != 2 or pi.shape[1] != width or not np.all(np.isfinite(pi)) or pi.min(initial=0) < 0:
        raise InvalidParameterError(
            f"edge_topic must be finite, >= 0 and of shape (n_topics, {width}) (one column per "
            f"{'edge' if normalization == 'node' else 'member of the node_language groups'}); got shape {pi.shape!r}"
        )
    n_topics = pi.shape[0]
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, n_topics)
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    seed = parse_int("seed", seed, 0, _MAX_SEED - 1)
    token_indptr, token_words, first_doc = tokens_from_blocks(blocks, tree)
    topics = np.zeros(token_words.shape[0], dtype=np.int32)
    paths = np.zeros(token_words.shape[0], dtype=np.int32)
    _random_start(token_indptr, token_words, arrays.word_path_indptr, n_topics, seed, STREAM_FOLD_IN, first_doc,
                  topics, paths)
    out = np.zeros((token_indptr.shape[0] - 1, n_topics), dtype=np.int32)
    path_topic = np.ascontiguousarray(path_probabilities(pi, tree, normalization).T)
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
        ``first_doc``, ``sweeps_done`` and ``normalization``.
    """
    arrays = {name: np.asarray(getattr(state, name)) for name in STATE_ARRAYS}
    return arrays, {"first_doc": int(state.first_doc), "sweeps_done": int(state.sweeps_done),
                    "normalization": state.normalization}


def from_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> TreeGibbsState:
    """Rebuild the state :func:`to_arrays` split: ``from_arrays(*to_arrays(s))`` equals ``s``.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        Every name of :data:`STATE_ARRAYS` (a snapshot of an earlier version, with ``node_topic_counts``
        in the place of ``group_topic_counts``, is read as a "node" state).
    meta : mapping of str to Any
        ``first_doc``, ``sweeps_done`` and ``normalization`` (default "node").

    Returns
    -------
    TreeGibbsState
    """
    fields = {name: np.asarray(arrays[name if name in arrays or name != "group_topic_counts" else "node_topic_counts"])
              for name in STATE_ARRAYS}
    return TreeGibbsState(**fields, first_doc=int(meta["first_doc"]), sweeps_done=int(meta["sweeps_done"]),
                          normalization=meta.get("normalization", "node"))
