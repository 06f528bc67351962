"""Building prior trees from dictionaries and hierarchies (Zhai 2014, sec. 5.1; spec sections 2.1, 2.7).

Two inputs give a :class:`~topicflow.models.tree_lda.tree.PriorTree` over given vocabularies:

* translation or synonym **pairs** (:func:`build_tree_from_pairs`): one concept node per dictionary
  pair (``merge="pairs"``, [Z] Fig. 5.1), or one per connected component of the pair graph
  (``merge="transitive"``, as tree-TM's ``mergeML``). A word in several concepts gets several paths
  (senses); words in no concept hang from the root. Pairs may join two languages (ptLDA) or stay within
  one (tLDA synonyms, must-links).
* a nested **hierarchy** (:func:`build_tree_from_hierarchy`): nodes with a name, children and an
  optional ``beta``, for WordNet-like resources of any depth.

Leaves are (language, term): the same spelling in two languages gives two leaves (P3). Every term of
every vocabulary gets at least one path.

Edge priors (P1), two conventions:

``"per-leaf"`` (default)
    The edge from the root into a child carries ``root_beta`` times the number of leaves (paths) below
    the child (1 for a word). The edges leaving any other internal node share ``concept_beta`` in
    proportion to the leaves below each child (equally among the words of a two-level concept).
    Reason: by the aggregation property of the Dirichlet, the root's Dirichlet then puts mass
    ``root_beta`` on every leaf, so the prior mean of every path is that of LDA with ``beta = root_beta``
    per word, and a tree without concepts *is* :func:`~topicflow.models.tree_lda.tree.flat_tree` with
    ``beta = root_beta`` (array for array). With ``concept_beta = root_beta * leaves`` the nested
    Dirichlets are exactly one ``Dir(root_beta, ..., root_beta)`` over the leaves (LDA); a larger
    ``concept_beta`` only ties a concept's words together.
``"tree-tm"``
    MALLET tree-TM's ``Node.normalizePrior`` / kzhai ``priortree.py``: each internal node has a scalar
    (``root_beta`` for the root, tree-TM's ``NL_``; ``concept_beta`` for the others, ``ML_``), its total
    Dirichlet mass, split over its children in proportion to their hyponym counts. A leaf counts
    ``1/c`` when its word has ``c`` leaves, an internal node the sum of its leaves. tree-TM's standard
    file has ``NL_ 0.01`` and ``ML_ 100``; the root's whole mass is then 0.01, so a flat tree is *not*
    LDA with beta 0.01 per word.

This module is pure: normalization of dictionary words is a callable the caller passes (the store's
tokenizer, :func:`topicflow.io.trees.build_tree_for_store`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.models.tree_lda.tree import PriorTree

Merge = Literal["pairs", "transitive"]
Convention = Literal["per-leaf", "tree-tm"]
#: Valid values of ``merge`` and ``convention``.
MERGES: tuple[str, ...] = ("pairs", "transitive")
CONVENTIONS: tuple[str, ...] = ("per-leaf", "tree-tm")
#: Default scalars (tree-TM's standard hyperparameter file: ``NL_ 0.01``, ``ML_ 100``).
DEFAULT_ROOT_BETA = 0.01
DEFAULT_CONCEPT_BETA = 100.0

#: One side of a pair: (language, word as written in the dictionary).
Word = tuple[str, str]


@dataclass(frozen=True)
class TreeCoverage:
    """How much of a dictionary or hierarchy made it into the tree.

    Attributes
    ----------
    pairs_read : int
        Pairs (or hierarchy leaves) read.
    pairs_not_single_token : int
        Pairs with a word that does not normalize to exactly one token (skipped).
    pairs_out_of_vocabulary : int
        Pairs (after normalization) with a word in no vocabulary (skipped).
    pairs_in_vocabulary : int
        Pairs with both words in the vocabularies (self-pairs and duplicates included).
    pairs_used : int
        Distinct pairs of two different leaves that link words in the tree.
    concepts : int
        Internal nodes other than the root.
    words_in_concepts : int
        Distinct (language, term) leaves below some concept.
    words_multi_path : int
        Words with more than one path.
    largest_concept : int
        Leaves directly below the largest concept (0 without concepts).
    largest_concept_words : tuple of str
        Up to 20 ``language:term`` of the largest concept.
    words_per_language : dict of str to int
        Per language, the words below some concept.
    """

    pairs_read: int = 0
    pairs_not_single_token: int = 0
    pairs_out_of_vocabulary: int = 0
    pairs_in_vocabulary: int = 0
    pairs_used: int = 0
    concepts: int = 0
    words_in_concepts: int = 0
    words_multi_path: int = 0
    largest_concept: int = 0
    largest_concept_words: tuple[str, ...] = ()
    words_per_language: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The statistics as a JSON-ready dict."""
        return {
            "pairs_read": self.pairs_read, "pairs_not_single_token": self.pairs_not_single_token,
            "pairs_out_of_vocabulary": self.pairs_out_of_vocabulary,
            "pairs_in_vocabulary": self.pairs_in_vocabulary, "pairs_used": self.pairs_used,
            "concepts": self.concepts, "words_in_concepts": self.words_in_concepts,
            "words_multi_path": self.words_multi_path, "largest_concept": self.largest_concept,
            "largest_concept_words": list(self.largest_concept_words),
            "words_per_language": dict(self.words_per_language),
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> TreeCoverage:
        """Inverse of :meth:`to_dict`."""
        values = dict(payload)
        values["largest_concept_words"] = tuple(str(w) for w in values.get("largest_concept_words", ()))
        values["words_per_language"] = {str(k): int(v) for k, v in dict(values.get("words_per_language", {})).items()}
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class HierarchyNode:
    """An internal node of a hierarchy given to :func:`build_tree_from_hierarchy`.

    Attributes
    ----------
    name : str
    children : list of HierarchyNode or HierarchyLeaf
    beta : float or None
        Prior of the edge into this node; None: from the convention.
    """

    name: str
    children: list[HierarchyNode | HierarchyLeaf] = field(default_factory=list)
    beta: float | None = None


@dataclass
class HierarchyLeaf:
    """A leaf of a hierarchy: a word of one language.

    Attributes
    ----------
    language : str
    term : str
        As written; normalized like the pairs' words.
    beta : float or None
        Prior of the edge into this leaf; None: from the convention.
    """

    language: str
    term: str
    beta: float | None = None


def _check_settings(convention: str, root_beta: float, concept_beta: float) -> None:
    if convention not in CONVENTIONS:
        raise InvalidParameterError(f"unknown tree prior convention {convention!r}; use one of {list(CONVENTIONS)}.")
    for name, value in (("root_beta", root_beta), ("concept_beta", concept_beta)):
        if not (np.isfinite(value) and value > 0):
            raise InvalidParameterError(f"{name} must be a positive number, got {value!r}.")


#: ``word -> tokens`` for every language, or one per language (a store with per-language stop lists).
Normalize = Callable[[str], list[str]] | Mapping[str, Callable[[str], list[str]]]


def _normalizer(normalize: Normalize | None) -> Callable[[str, str], str | None]:
    """``(language, word) -> term`` (None: the word is not exactly one token of its language)."""
    def one(language: str, word: str) -> str | None:
        if normalize is None:
            return word
        tokenize = normalize.get(language) if isinstance(normalize, Mapping) else normalize
        if tokenize is None:
            return word
        tokens = tokenize(word)
        return tokens[0] if len(tokens) == 1 else None
    return one


def _indexes(languages: Sequence[str], vocabularies: Mapping[str, Sequence[str]]) -> list[dict[str, int]]:
    missing = [lang for lang in languages if lang not in vocabularies]
    if missing:
        raise InvalidParameterError(f"no vocabulary for language(s) {missing}; vocabularies are given for "
                                    f"{sorted(vocabularies)}.")
    return [{str(t): i for i, t in enumerate(vocabularies[lang])} for lang in languages]


def build_tree_from_pairs(
    pairs: Sequence[tuple[Word, Word]],
    languages: Sequence[str],
    vocabularies: Mapping[str, Sequence[str]],
    *,
    merge: str = "pairs",
    convention: str = "per-leaf",
    root_beta: float = DEFAULT_ROOT_BETA,
    concept_beta: float = DEFAULT_CONCEPT_BETA,
    normalize: Normalize | None = None,
) -> tuple[PriorTree, TreeCoverage]:
    """A two-level prior tree from translation or synonym pairs ([Z] sec. 5.1, Fig. 5.1).

    Parameters
    ----------
    pairs : sequence of ((language, word), (language, word))
        Dictionary pairs; both sides may have the same language (synonyms, tLDA).
    languages : sequence of str
        Languages of the tree, in order (leaves of other languages are an error).
    vocabularies : mapping of str to sequence of str
        The terms of each language in term-id order (the store's vocabularies).
    merge : {"pairs", "transitive"}, default "pairs"
        One concept per distinct pair, or one per connected component of the pairs (tree-TM ``mergeML``).
    convention : {"per-leaf", "tree-tm"}, default "per-leaf"
        How edge priors follow from ``root_beta`` and ``concept_beta`` (module docstring).
    root_beta : float, default 0.01
        Per-leaf: prior per leaf below the root; tree-tm: the root's total mass.
    concept_beta : float, default 100
        Total prior mass of each concept's child edges.
    normalize : callable or mapping of str to callable, optional
        ``word -> tokens`` (the store's tokenizer), or one per language (a store with per-language stop
        lists; a language it does not name keeps its words as they are); a word must give exactly one
        token, else its pair is skipped and counted. None: words are used as they are.

    Returns
    -------
    tree : PriorTree
    coverage : TreeCoverage

    Raises
    ------
    InvalidParameterError
        Unknown ``merge`` or ``convention``, a non-positive beta, or a pair of a language not in
        ``languages``.

    Examples
    --------
    >>> tree, cov = build_tree_from_pairs([(("de", "haus"), ("en", "house"))], ["de", "en"],
    ...                                   {"de": ["haus", "katze"], "en": ["house"]})
    >>> tree.node_names[1], cov.concepts, tree.word_paths("de", 0).tolist()
    ('de:haus|en:house', 1, [0])
    """
    if merge not in MERGES:
        raise InvalidParameterError(f"unknown merge {merge!r}; use one of {list(MERGES)}.")
    _check_settings(convention, root_beta, concept_beta)
    languages = tuple(languages)
    index = _indexes(languages, vocabularies)
    norm = _normalizer(normalize)
    lang_pos = {lang: i for i, lang in enumerate(languages)}
    n_read = n_not_token = n_oov = n_in = 0
    edges: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    for (lang_a, word_a), (lang_b, word_b) in pairs:
        n_read += 1
        for lang in (lang_a, lang_b):
            if lang not in lang_pos:
                raise InvalidParameterError(f"a dictionary pair has language {lang!r}, which the tree does not have "
                                            f"(languages {list(languages)}).")
        a, b = norm(lang_a, word_a), norm(lang_b, word_b)
        if a is None or b is None:
            n_not_token += 1
            continue
        ia, ib = index[lang_pos[lang_a]].get(a), index[lang_pos[lang_b]].get(b)
        if ia is None or ib is None:
            n_oov += 1
            continue
        n_in += 1
        leaf_a, leaf_b = (lang_pos[lang_a], ia), (lang_pos[lang_b], ib)
        if leaf_a != leaf_b:
            edges.add((min(leaf_a, leaf_b), max(leaf_a, leaf_b)))
    if merge == "pairs":
        groups = [list(e) for e in sorted(edges)]
    else:
        groups = _components(sorted(edges))
    concepts = [HierarchyNode(_concept_name(g, languages, vocabularies), [HierarchyLeaf(languages[li], str(vocabularies[languages[li]][t]))
                                                                          for li, t in g]) for g in groups]
    tree = _assemble(languages, [len(vocabularies[lang]) for lang in languages], index, concepts,
                     convention=convention, root_beta=root_beta, concept_beta=concept_beta, normalize=None)
    coverage = _coverage(tree, vocabularies, pairs_read=n_read, pairs_not_single_token=n_not_token, pairs_out_of_vocabulary=n_oov,
                         pairs_in_vocabulary=n_in, pairs_used=len(edges))
    return tree, coverage


def _components(edges: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[list[tuple[int, int]]]:
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for x in sorted(parent):
        groups.setdefault(find(x), []).append(x)
    return sorted(groups.values())


def _concept_name(group: Sequence[tuple[int, int]], languages: Sequence[str],
                  vocabularies: Mapping[str, Sequence[str]]) -> str:
    words = [f"{languages[li]}:{vocabularies[languages[li]][t]}" for li, t in group]
    return "|".join(words[:4]) + (f"|+{len(words) - 4}" if len(words) > 4 else "")


def build_tree_from_hierarchy(
    root: HierarchyNode,
    languages: Sequence[str],
    vocabularies: Mapping[str, Sequence[str]],
    *,
    convention: str = "per-leaf",
    root_beta: float = DEFAULT_ROOT_BETA,
    concept_beta: float = DEFAULT_CONCEPT_BETA,
    normalize: Normalize | None = None,
) -> tuple[PriorTree, TreeCoverage]:
    """A prior tree from a nested hierarchy of any depth (WordNet-like resources, must-link sets).

    Leaves whose word is not a single token or not in its vocabulary are dropped, then internal nodes
    left without leaves; words of the vocabularies that the hierarchy lacks hang from the root. A
    ``beta`` on a node or leaf sets the prior of the edge into it; the others follow ``convention``
    (module docstring; below the root, ``concept_beta`` is every internal node's total mass).

    Parameters
    ----------
    root : HierarchyNode
        The root (its name and beta are ignored).
    languages : sequence of str
    vocabularies : mapping of str to sequence of str
        The terms of each language in term-id order.
    convention : {"per-leaf", "tree-tm"}, default "per-leaf"
    root_beta : float, default 0.01
    concept_beta : float, default 100
    normalize : callable or mapping of str to callable, optional
        ``word -> tokens``, or one per language; words that are not exactly one token are dropped and
        counted.

    Returns
    -------
    tree : PriorTree
    coverage : TreeCoverage
        Hierarchy leaves count as ``pairs_read``; those kept as ``pairs_in_vocabulary``.

    Examples
    --------
    >>> root = HierarchyNode("ROOT", [HierarchyNode("pet", [HierarchyLeaf("en", "cat"), HierarchyLeaf("en", "dog")])])
    >>> tree, cov = build_tree_from_hierarchy(root, ["en"], {"en": ["cat", "dog", "car"]})
    >>> tree.n_nodes, tree.n_paths, cov.largest_concept
    (2, 3, 2)
    """
    _check_settings(convention, root_beta, concept_beta)
    languages = tuple(languages)
    index = _indexes(languages, vocabularies)
    counts = {"read": 0, "not_token": 0, "oov": 0}
    tree = _assemble(languages, [len(vocabularies[lang]) for lang in languages], index, list(root.children),
                     convention=convention, root_beta=root_beta, concept_beta=concept_beta,
                     normalize=_normalizer(normalize), counts=counts)
    kept = counts["read"] - counts["not_token"] - counts["oov"]
    return tree, _coverage(tree, vocabularies, pairs_read=counts["read"], pairs_not_single_token=counts["not_token"],
                           pairs_out_of_vocabulary=counts["oov"], pairs_in_vocabulary=kept, pairs_used=kept)


@dataclass
class _Built:
    """A hierarchy node resolved to leaf ids: children are _Built or (language index, term, beta)."""

    name: str
    beta: float | None
    children: list[_Built | tuple[int, int, float | None]]


def _resolve(node: HierarchyNode, lang_pos: Mapping[str, int], index: Sequence[Mapping[str, int]],
             normalize: Callable[[str, str], str | None] | None, counts: dict[str, int]) -> _Built | None:
    children: list[_Built | tuple[int, int, float | None]] = []
    seen: set[tuple[int, int]] = set()
    for child in node.children:
        if isinstance(child, HierarchyNode):
            built = _resolve(child, lang_pos, index, normalize, counts)
            if built is not None:
                children.append(built)
            continue
        counts["read"] = counts.get("read", 0) + 1
        if child.language not in lang_pos:
            raise InvalidParameterError(f"hierarchy leaf {child.term!r} has language {child.language!r}, which the "
                                        f"tree does not have (languages {list(lang_pos)}).")
        term = normalize(child.language, child.term) if normalize is not None else child.term
        if term is None:
            counts["not_token"] = counts.get("not_token", 0) + 1
            continue
        li = lang_pos[child.language]
        tid = index[li].get(term)
        if tid is None:
            counts["oov"] = counts.get("oov", 0) + 1
            continue
        if (li, tid) not in seen:  # the same word twice under one node is one leaf
            seen.add((li, tid))
            children.append((li, tid, child.beta))
    if not children:
        return None
    return _Built(node.name, node.beta, children)


def _assemble(
    languages: Sequence[str], n_terms: Sequence[int], index: Sequence[Mapping[str, int]],
    top: Sequence[HierarchyNode | HierarchyLeaf], *, convention: str, root_beta: float, concept_beta: float,
    normalize: Callable[[str, str], str | None] | None, counts: dict[str, int] | None = None,
) -> PriorTree:
    """The PriorTree of ``top`` (the root's children) plus every uncovered word under the root."""
    counts = {} if counts is None else counts
    lang_pos = {lang: i for i, lang in enumerate(languages)}
    root = _resolve(HierarchyNode("ROOT", list(top)), lang_pos, index, normalize, counts)
    root = root if root is not None else _Built("ROOT", None, [])
    covered = np.zeros(int(sum(n_terms)), dtype=bool)
    offsets = np.concatenate(([0], np.cumsum(n_terms))).astype(np.int64)
    leaf_count = np.zeros(int(sum(n_terms)), dtype=np.int64)  # leaves per word (its number of paths)

    def scan(node: _Built) -> None:
        for child in node.children:
            if isinstance(child, _Built):
                scan(child)
            else:
                leaf_count[offsets[child[0]] + child[1]] += 1

    scan(root)
    covered = leaf_count > 0
    for li in range(len(languages)):  # uncorrelated words: leaves directly under the root
        for t in np.flatnonzero(~covered[offsets[li]:offsets[li + 1]]):
            root.children.append((li, int(t), None))
            leaf_count[offsets[li] + t] += 1

    def size(node: _Built) -> tuple[int, float]:  # (leaves, hyponym count) below node
        leaves, hyponyms = 0, 0.0
        for child in node.children:
            if isinstance(child, _Built):
                sub = size(child)
                leaves, hyponyms = leaves + sub[0], hyponyms + sub[1]
            else:
                leaves, hyponyms = leaves + 1, hyponyms + 1.0 / leaf_count[offsets[child[0]] + child[1]]
        return leaves, hyponyms

    names: list[str] = []
    parents: list[int] = []
    childs: list[int] = []
    priors: list[float] = []
    paths: list[tuple[int, int, list[int]]] = []
    sizes: dict[int, tuple[int, float]] = {}

    def measure(node: _Built) -> tuple[int, float]:
        key = id(node)
        if key not in sizes:
            sizes[key] = size(node)
        return sizes[key]

    def visit(node: _Built, prefix: list[int], depth: int) -> None:
        nid = len(names)
        names.append(node.name if depth else "ROOT")
        leaves, hyponyms = measure(node)
        scalar = root_beta if depth == 0 else concept_beta
        for child in node.children:
            if isinstance(child, _Built):
                c_leaves, c_hyp = measure(child)
                given = child.beta
            else:
                c_leaves, c_hyp = 1, 1.0 / leaf_count[offsets[child[0]] + child[1]]
                given = child[2]
            if given is not None:
                prior = float(given)
            elif convention == "per-leaf":
                prior = root_beta * c_leaves if depth == 0 else concept_beta * c_leaves / leaves
            else:
                prior = scalar * c_hyp / hyponyms
            edge = len(parents)
            parents.append(nid)
            priors.append(prior)
            if isinstance(child, _Built):
                childs.append(len(names))
                visit(child, prefix + [edge], depth + 1)
            else:
                childs.append(-1)
                paths.append((child[0], child[1], prefix + [edge]))

    visit(root, [], 0)
    order = sorted(range(len(paths)), key=lambda p: (paths[p][0], paths[p][1], p))
    lengths = [len(paths[p][2]) for p in order]
    path_edges = [e for p in order for e in paths[p][2]]
    for value in priors:
        if not (np.isfinite(value) and value > 0):
            raise InvalidParameterError(f"every edge prior must be a positive number; a hierarchy beta is {value!r}.")
    return PriorTree(
        languages=tuple(languages), n_terms=tuple(int(n) for n in n_terms), node_names=tuple(names),
        edge_parent=np.asarray(parents, dtype=np.int64), edge_child=np.asarray(childs, dtype=np.int64),
        edge_prior=np.asarray(priors, dtype=np.float64),
        path_indptr=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        path_edges=np.asarray(path_edges, dtype=np.int64),
        path_language=np.asarray([paths[p][0] for p in order], dtype=np.int64),
        path_term=np.asarray([paths[p][1] for p in order], dtype=np.int64),
    )


def _coverage(tree: PriorTree, vocabularies: Mapping[str, Sequence[str]], **counts: int) -> TreeCoverage:
    leaf_edge = tree.path_edges[tree.path_indptr[1:] - 1]
    parent = tree.edge_parent[leaf_edge]
    in_concept = parent != 0
    word_key = tree.path_language * (max(tree.n_terms, default=0) + 1) + tree.path_term
    words_in = np.unique(word_key[in_concept])
    _, n_paths = np.unique(word_key, return_counts=True)
    per_node = np.bincount(parent[in_concept], minlength=tree.n_nodes)
    largest = int(per_node.max(initial=0))
    words: tuple[str, ...] = ()
    if largest:
        node = int(np.argmax(per_node))
        members = np.flatnonzero(in_concept & (parent == node))[:20]
        words = tuple(f"{tree.languages[tree.path_language[p]]}:{vocabularies[tree.languages[tree.path_language[p]]][tree.path_term[p]]}"
                      for p in members)
    per_language = {lang: int(np.unique(tree.path_term[in_concept & (tree.path_language == li)]).size)
                    for li, lang in enumerate(tree.languages)}
    return TreeCoverage(concepts=tree.n_nodes - 1, words_in_concepts=int(words_in.size),
                        words_multi_path=int(np.sum(n_paths > 1)), largest_concept=largest,
                        largest_concept_words=words, words_per_language=per_language, **counts)
