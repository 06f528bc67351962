"""The prior tree of tLDA / ptLDA as pure arrays (Zhai 2014, sec. 5.1; spec section 2.1).

Glossary. Internal nodes are numbered 0..n_nodes-1 with the root 0. Every edge goes from an internal
node (``edge_parent``) to a child that is either another internal node (``edge_child`` >= 0) or a leaf
(``edge_child == -1``). A leaf is one (language, term) pair; a path is the sequence of edges from the
root to one leaf; a word on several paths (senses) has several leaves. Each edge has a Dirichlet
prior weight ``edge_prior`` (beta_{i->j}): for topic k and internal node i, pi_ki ~ Dir(beta_{i->.}).

The probability of a path s under topic k is ``prod_{e in s} pi_{k,e}``; a word's probability is the
sum over its paths. With every word a leaf under the root (:func:`flat_tree`), the model is LDA with
beta_w = the root-to-word edge's prior.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError


@dataclass(frozen=True)
class PriorTree:
    """A prior tree over the vocabularies of one or more languages.

    Attributes
    ----------
    languages : tuple of str
        The languages of the leaves, in the order of ``n_terms``.
    n_terms : tuple of int
        Vocabulary size per language (term ids are those of the store's vocabularies).
    node_names : tuple of str
        Name of each internal node (``"ROOT"`` first; concept nodes as the builder names them).
    edge_parent : ndarray of shape (n_edges,), int64
        Internal node each edge leaves.
    edge_child : ndarray of shape (n_edges,), int64
        Internal node each edge enters, or -1 for an edge into a leaf.
    edge_prior : ndarray of shape (n_edges,), float64
        beta of each edge; positive.
    path_indptr : ndarray of shape (n_paths + 1,), int64
        Path p's edges are ``path_edges[path_indptr[p]:path_indptr[p + 1]]``, root first.
    path_edges : ndarray of shape (total path length,), int64
    path_language : ndarray of shape (n_paths,), int64
        Index into ``languages`` of each path's leaf.
    path_term : ndarray of shape (n_paths,), int64
        Term id of each path's leaf in its language.

    Notes
    -----
    Paths are sorted by (language, term, path), so the paths of one word are consecutive
    (:meth:`word_paths`). Every term of every language has at least one path.
    """

    languages: tuple[str, ...]
    n_terms: tuple[int, ...]
    node_names: tuple[str, ...]
    edge_parent: IntArray
    edge_child: IntArray
    edge_prior: FloatArray
    path_indptr: IntArray
    path_edges: IntArray
    path_language: IntArray
    path_term: IntArray

    def __post_init__(self) -> None:
        problems = tree_problems(self)
        if problems:
            raise InvalidParameterError("invalid prior tree: " + "; ".join(problems[:5]))

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_edges(self) -> int:
        return int(self.edge_parent.shape[0])

    @property
    def n_paths(self) -> int:
        return int(self.path_language.shape[0])

    def word_path_indptr(self, language: str) -> IntArray:
        """CSR pointer of ``language``'s terms into the path list: term w's paths are
        ``offset + [indptr[w], indptr[w + 1])`` with ``offset = self.language_offset(language)``.

        Parameters
        ----------
        language : str

        Returns
        -------
        ndarray of shape (n_terms + 1,), int64
            Relative to the language's first path.
        """
        li = self.languages.index(language)
        mask = self.path_language == li
        counts = np.bincount(self.path_term[mask], minlength=self.n_terms[li])
        return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    def language_offset(self, language: str) -> int:
        """Index of the first path of ``language`` (paths are sorted by language)."""
        li = self.languages.index(language)
        return int(np.searchsorted(self.path_language, li, side="left"))

    def word_paths(self, language: str, term: int) -> IntArray:
        """The paths ending at ``term`` of ``language``, as indices into the path list."""
        indptr = self.word_path_indptr(language)
        offset = self.language_offset(language)
        return np.arange(offset + indptr[term], offset + indptr[term + 1], dtype=np.int64)

    def children(self, node: int) -> IntArray:
        """Edges leaving internal node ``node``."""
        return np.flatnonzero(self.edge_parent == node).astype(np.int64)

    def path_products(self, pair_values: FloatArray) -> FloatArray:
        """Multiply values along every path: the probability of a path is the product over its edges.

        Parameters
        ----------
        pair_values : ndarray of shape (n_rows, len(path_edges))
            One value per (path, edge) entry of ``path_edges`` (e.g. ``pi[:, path_edges]``).

        Returns
        -------
        ndarray of shape (n_rows, n_paths)
        """
        return np.multiply.reduceat(np.asarray(pair_values, dtype=np.float64), self.path_indptr[:-1], axis=1)

    def word_sums(self, path_values: FloatArray) -> dict[str, FloatArray]:
        """Sum values over each word's paths, per language: a word's probability is the sum over its senses.

        Parameters
        ----------
        path_values : ndarray of shape (n_rows, n_paths)

        Returns
        -------
        dict of str to ndarray of shape (n_rows, n_terms)
            One entry per language of the tree.
        """
        out: dict[str, FloatArray] = {}
        for language in self.languages:
            lo = self.language_offset(language)
            indptr = self.word_path_indptr(language)
            part = path_values[:, lo:lo + int(indptr[-1])]
            if np.all(np.diff(indptr) == 1):
                out[language] = np.ascontiguousarray(part)
            else:
                out[language] = np.add.reduceat(part, indptr[:-1], axis=1)
        return out

    def with_new_terms(self, n_terms: Sequence[int], root_beta: float) -> PriorTree:
        """The tree over grown vocabularies: every new term a leaf directly under the root.

        Existing edges, nodes and term ids keep their numbers (new edges come after the old ones,
        language by language), so lambda of the old edges stays in place and only new columns are added.

        Parameters
        ----------
        n_terms : sequence of int
            The new vocabulary size per language (in ``languages`` order), at least the current one.
        root_beta : float
            Prior of each new root-to-word edge (:func:`root_leaf_beta` of the tree).

        Returns
        -------
        PriorTree
            ``self`` when no language grew.

        Raises
        ------
        InvalidParameterError
            A vocabulary shrank, the sizes do not match the languages, or ``root_beta`` is not positive.

        Examples
        --------
        >>> grown = flat_tree(["en"], [2], beta=0.5).with_new_terms([3], 0.5)
        >>> grown.n_terms, grown.word_paths("en", 2).tolist(), grown.edge_prior.tolist()
        ((3,), [2], [0.5, 0.5, 0.5])
        """
        sizes = [int(n) for n in n_terms]
        if len(sizes) != len(self.n_terms) or any(new < old for new, old in zip(sizes, self.n_terms)):
            raise InvalidParameterError(
                f"the tree has vocabulary sizes {list(self.n_terms)} ({list(self.languages)}); it can only grow, "
                f"not become {sizes}")
        if not (np.isfinite(root_beta) and root_beta > 0):
            raise InvalidParameterError(f"root_beta must be a positive number, got {root_beta!r}")
        added = [new - old for new, old in zip(sizes, self.n_terms)]
        if not any(added):
            return self
        n_new = sum(added)
        new_edges = np.arange(self.n_edges, self.n_edges + n_new, dtype=np.int64)
        lengths = np.diff(self.path_indptr)
        path_blocks: list[list[IntArray]] = [[], [], [], []]  # lengths, edges, language, term
        first_new = 0
        for li, (old, extra) in enumerate(zip(self.n_terms, added)):
            mask = self.path_language == li
            old_paths = np.flatnonzero(mask)
            path_blocks[0].append(lengths[old_paths])
            path_blocks[1].extend(self.path_edges[self.path_indptr[p]:self.path_indptr[p + 1]] for p in old_paths)
            path_blocks[2].append(self.path_language[old_paths])
            path_blocks[3].append(self.path_term[old_paths])
            path_blocks[0].append(np.ones(extra, dtype=np.int64))
            path_blocks[1].append(new_edges[first_new:first_new + extra])
            path_blocks[2].append(np.full(extra, li, dtype=np.int64))
            path_blocks[3].append(np.arange(old, old + extra, dtype=np.int64))
            first_new += extra
        path_lengths = np.concatenate(path_blocks[0]).astype(np.int64)
        return PriorTree(
            languages=self.languages, n_terms=tuple(sizes), node_names=self.node_names,
            edge_parent=np.concatenate([self.edge_parent, np.zeros(n_new, dtype=np.int64)]),
            edge_child=np.concatenate([self.edge_child, np.full(n_new, -1, dtype=np.int64)]),
            edge_prior=np.concatenate([self.edge_prior, np.full(n_new, float(root_beta))]),
            path_indptr=np.concatenate([[0], np.cumsum(path_lengths)]).astype(np.int64),
            path_edges=np.concatenate(path_blocks[1]).astype(np.int64),
            path_language=np.concatenate(path_blocks[2]).astype(np.int64),
            path_term=np.concatenate(path_blocks[3]).astype(np.int64),
        )

    def path_edge_incidence(self) -> tuple[IntArray, IntArray]:
        """(path, edge) pairs of every path's edges, for scattering path counts onto edges.

        Returns
        -------
        rows : ndarray of int64
            Path index of each pair.
        cols : ndarray of int64
            Edge index of each pair.
        """
        lengths = np.diff(self.path_indptr)
        return np.repeat(np.arange(self.n_paths, dtype=np.int64), lengths), self.path_edges.astype(np.int64)


def root_leaf_beta(tree: PriorTree) -> float:
    """The prior a word hanging directly from the root has in ``tree`` (what a new word gets).

    The most frequent prior among the root's edges into leaves (under the "per-leaf" convention of
    :mod:`topicflow.models.tree_lda.build` every such edge carries ``root_beta``; under "tree-tm" a
    word of one sense does). Without such edges, the "per-leaf" value: the root's edge priors summed
    over the number of paths.

    Parameters
    ----------
    tree : PriorTree

    Returns
    -------
    float

    Examples
    --------
    >>> root_leaf_beta(flat_tree(["en"], [3], beta=0.02))
    0.02
    """
    leaf = (tree.edge_parent == 0) & (tree.edge_child == -1)
    if np.any(leaf):
        values, counts = np.unique(tree.edge_prior[leaf], return_counts=True)
        return float(values[np.argmax(counts)])
    return float(tree.edge_prior[tree.edge_parent == 0].sum() / max(tree.n_paths, 1))


def tree_problems(tree: PriorTree) -> list[str]:
    """Everything wrong with ``tree``'s arrays (empty when it is a valid tree)."""
    problems: list[str] = []
    if len(tree.languages) != len(tree.n_terms):
        problems.append("languages and n_terms differ in length")
    if not tree.node_names or tree.node_names[0] != "ROOT":
        problems.append("node 0 must be named ROOT")
    n_edges = tree.edge_parent.shape[0]
    if tree.edge_child.shape != (n_edges,) or tree.edge_prior.shape != (n_edges,):
        problems.append("edge arrays differ in length")
        return problems
    if n_edges and (tree.edge_parent.min() < 0 or tree.edge_parent.max() >= len(tree.node_names)):
        problems.append("an edge leaves a node that does not exist")
    if n_edges and tree.edge_child.max(initial=-1) >= len(tree.node_names):
        problems.append("an edge enters a node that does not exist")
    if not np.all(tree.edge_prior > 0):
        problems.append("every edge prior must be positive")
    if tree.path_indptr.shape[0] != tree.path_language.shape[0] + 1 or tree.path_term.shape != tree.path_language.shape:
        problems.append("path arrays differ in length")
        return problems
    for li, n in enumerate(tree.n_terms):
        terms = tree.path_term[tree.path_language == li]
        if terms.size and (terms.min() < 0 or terms.max() >= n):
            problems.append(f"language {tree.languages[li]!r} has a leaf outside its vocabulary")
        elif np.unique(terms).size != n:
            problems.append(f"language {tree.languages[li]!r}: {n - np.unique(terms).size} terms have no path")
    order = np.lexsort((tree.path_term, tree.path_language))
    if not np.array_equal(order, np.arange(order.size)):
        problems.append("paths must be sorted by (language, term)")
    return problems


def flat_tree(languages: Sequence[str], n_terms: Sequence[int], beta: float | Sequence[FloatArray] = 0.01) -> PriorTree:
    """Every word a leaf directly under the root: the tree of (polylingual) LDA.

    Parameters
    ----------
    languages : sequence of str
    n_terms : sequence of int
        Vocabulary size per language.
    beta : float or sequence of ndarray, default 0.01
        The prior of each root-to-word edge (a scalar, or one array per language).

    Returns
    -------
    PriorTree

    Examples
    --------
    >>> tree = flat_tree(["en"], [3])
    >>> tree.n_paths, tree.n_edges, tree.word_paths("en", 2).tolist()
    (3, 3, [2])
    """
    total = int(sum(n_terms))
    if np.isscalar(beta):
        priors = np.full(total, float(beta))  # type: ignore[arg-type]
    else:
        priors = np.concatenate([np.asarray(b, dtype=np.float64) for b in beta])  # type: ignore[union-attr]
    return PriorTree(
        languages=tuple(languages), n_terms=tuple(int(n) for n in n_terms), node_names=("ROOT",),
        edge_parent=np.zeros(total, dtype=np.int64), edge_child=np.full(total, -1, dtype=np.int64),
        edge_prior=priors, path_indptr=np.arange(total + 1, dtype=np.int64),
        path_edges=np.arange(total, dtype=np.int64),
        path_language=np.repeat(np.arange(len(n_terms), dtype=np.int64), list(n_terms)),
        path_term=np.concatenate([np.arange(n, dtype=np.int64) for n in n_terms]) if n_terms else np.zeros(0, np.int64),
    )
