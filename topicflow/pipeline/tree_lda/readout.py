"""Read-outs of saved tree-LDA models: topics with their concept paths, the tree's facts, the export.

The math (path probabilities, concept masses, edge means per language) is
:func:`topicflow.models.tree_lda.view.tree_topic_paths`; this module reads it out of a saved model
(:func:`~topicflow.pipeline.tree_lda.model.saved_tree_state`) into JSON-able listings, report facts and
export arrays. It does not render text (``topicflow topics`` does) and writes files only through
:mod:`topicflow.io`.

Glossary: a *concept* is an internal node other than the root; a word's *paths* are its root-to-leaf
paths (one per sense: one per concept it is in, or one straight from the root).
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, cast

import numpy as np

from topicflow.io._atomic import atomic_write_bytes, temporary_sibling
from topicflow.io.models.store import SavedModel, export_npz
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.view import (
    TreeTopicPaths,
    path_node_incidence,
    tree_topic_paths,
)
from topicflow.pipeline.tree_lda.model import saved_tree_state

#: Concepts listed per topic by default (``topicflow topics --concepts``).
DEFAULT_CONCEPTS = 5
#: Words of each language listed per concept.
CONCEPT_WORDS = 5


def model_topic_paths(model: SavedModel) -> tuple[TreeTopicPaths, PriorTree]:
    """The path read-out of a saved tree model, and its tree.

    Parameters
    ----------
    model : SavedModel
        A model of the ``tree_lda`` family.

    Returns
    -------
    paths : TreeTopicPaths
    tree : PriorTree

    Raises
    ------
    ModelFormatError
        Not a tree model, or its tree arrays are missing.
    """
    state, layout = saved_tree_state(model)
    return tree_topic_paths(state.edge_var, layout), layout.tree


def short_concept_name(name: str, languages: tuple[str, ...]) -> str:
    """A dictionary concept's name without its language prefixes (``en:home|de:haus`` -> ``home|haus``).

    Parameters
    ----------
    name : str
        The node name the tree builder gave.
    languages : tuple of str
        The tree's languages; names of other shapes (a hierarchy's own names) are kept.

    Returns
    -------
    str

    Examples
    --------
    >>> short_concept_name("en:home|de:haus", ("de", "en")), short_concept_name("animal", ("en",))
    ('home|haus', 'animal')
    """
    parts = name.split("|")
    pattern = re.compile(r"^(%s):(.+)$" % "|".join(re.escape(lang) for lang in languages))
    matches = [pattern.match(part) for part in parts]
    if all(match is not None for match in matches):
        return "|".join(match.group(2) for match in matches if match is not None)
    return name


def tree_summary(model: SavedModel) -> dict[str, Any]:
    """What the prior tree of a saved tree model is, as JSON-able data.

    Parameters
    ----------
    model : SavedModel
        A model of the ``tree_lda`` family.

    Returns
    -------
    dict of str to Any
        ``source`` (the tree file it was fitted with, or None), ``languages``, ``n_concepts`` (internal
        nodes but the root), ``n_edges``, ``n_paths``, ``words_multi_path`` (words with more than one
        path), ``normalization``, ``inference`` (the E-step: ``vb`` or ``hybrid``; ``gibbs`` for a
        collapsed Gibbs fit) and ``method``.
    """
    _, layout = saved_tree_state(model)
    tree = layout.tree
    multi = 0
    for lang in tree.languages:
        multi += int(np.count_nonzero(np.diff(tree.word_path_indptr(lang)) > 1))
    recorded = model.info.extra.get("tree", {})
    settings = model.info.settings
    method = model.info.method or "batch"
    return {"source": recorded.get("source") if isinstance(recorded, dict) else None,
            "languages": list(tree.languages), "n_concepts": tree.n_nodes - 1, "n_edges": tree.n_edges,
            "n_paths": tree.n_paths, "words_multi_path": multi,
            "normalization": str(settings.get("normalization", layout.normalization)),
            "inference": "gibbs" if method == "gibbs" else str(settings.get("estep", "vb")), "method": method}


def describe_tree_method(summary: dict[str, Any]) -> str:
    """How a tree model was fitted, in words.

    Parameters
    ----------
    summary : dict
        :func:`tree_summary` of the model.

    Returns
    -------
    str
        For example ``"batch variational Bayes"``, ``"online variational Bayes, hybrid (Gibbs within VB)
        E-step"`` or ``"collapsed Gibbs sampling"``.

    Examples
    --------
    >>> describe_tree_method({"method": "online", "inference": "hybrid"})
    'online variational Bayes, hybrid (Gibbs within VB) E-step'
    """
    if summary["inference"] == "gibbs" or summary["method"] == "gibbs":
        return "collapsed Gibbs sampling"
    text = f"{summary['method']} variational Bayes"
    return text + (", hybrid (Gibbs within VB) E-step" if summary["inference"] == "hybrid" else "")


def tree_facts(model: SavedModel) -> list[tuple[str, str]]:
    """The overview lines a report shows about a tree model's prior tree.

    Parameters
    ----------
    model : SavedModel
        A model of the ``tree_lda`` family.

    Returns
    -------
    list of (str, str)
        ``method`` (:func:`describe_tree_method`), ``model family`` (ptLDA or tLDA and the
        normalization) and ``prior tree`` (its file, concepts, paths and words on several paths).
    """
    summary = tree_summary(model)
    kind = "ptLDA (polylingual tree LDA)" if len(summary["languages"]) > 1 else "tLDA (tree LDA)"
    source = summary["source"] or "a PriorTree object (no file)"
    return [("method", describe_tree_method(summary)),
            ("model family", f"{kind}, normalization {summary['normalization']}"),
            ("prior tree", (f"{source}: {summary['n_concepts']:,} concepts, {summary['n_paths']:,} paths, "
                            f"{summary['words_multi_path']:,} words on more than one path"))]


def _path_entry(tree: PriorTree, paths: TreeTopicPaths, topic: int, path: int) -> dict[str, Any]:
    edges = tree.path_edges[tree.path_indptr[path]:tree.path_indptr[path + 1]]
    lang = tree.languages[int(tree.path_language[path])]
    nodes = [int(n) for n in tree.edge_child[edges[:-1]]]
    return {"path": int(path), "p": float(paths.path_prob[topic, path]),
            "nodes": [tree.node_names[n] for n in nodes],
            "concept": tree.node_names[nodes[-1]] if nodes else None,
            "edge_means": [float(paths.edge_mean[lang][topic, e]) for e in edges]}


def word_paths(paths: TreeTopicPaths, tree: PriorTree, topic: int, language: str, term: int) -> list[dict[str, Any]]:
    """The paths of one word in one topic, most probable first.

    Parameters
    ----------
    paths : TreeTopicPaths
        A tree model's read-out (:func:`model_topic_paths`).
    tree : PriorTree
    topic : int
    language : str
    term : int
        Term id in ``language``.

    Returns
    -------
    list of dict
        Per path: ``path`` (index), ``p`` (its probability in the topic; the word's probability is the
        sum over its paths), ``nodes`` (the internal nodes below the root it passes, by name),
        ``concept`` (the node the word hangs from, None under the root) and ``edge_means`` (the
        posterior mean of each edge, root first).
    """
    found = [_path_entry(tree, paths, topic, int(p)) for p in tree.word_paths(language, term)]
    return sorted(found, key=lambda entry: -entry["p"])


def concept_scores(paths: TreeTopicPaths, tree: PriorTree, topic: int) -> np.ndarray:
    """Each concept's mass in ``topic``, the mean over the languages, shape (n_nodes - 1,) (root left out).

    Parameters
    ----------
    paths : TreeTopicPaths
    tree : PriorTree
    topic : int

    Returns
    -------
    ndarray of float64
    """
    return np.asarray(np.mean([paths.node_mass[lang][topic, 1:] for lang in tree.languages], axis=0))


def top_concepts(paths: TreeTopicPaths, tree: PriorTree, vocabularies: dict[str, Any], topic: int,
                 n: int) -> list[dict[str, Any]]:
    """The ``n`` concepts with the most mass in a topic, with their words in every language.

    Parameters
    ----------
    paths : TreeTopicPaths
    tree : PriorTree
    vocabularies : dict of str to Vocabulary
    topic : int
    n : int

    Returns
    -------
    list of dict
        By decreasing mean over the languages of the concept's mass: ``node``, ``name``, ``mass``
        (per language, the share of the topic's probability in that language whose paths pass
        through the concept), ``edge_mean`` (per language, the posterior mean of the edge into the
        concept) and ``words`` (per language, up to five leaves below the concept, most probable
        first, with ``p``, the probability of the word's path through the concept, and ``edge_mean``,
        that of the edge into the leaf).
    """
    if tree.n_nodes < 2:
        return []
    best = 1 + np.argsort(-concept_scores(paths, tree, topic), kind="stable")[:n]
    into = {int(c): int(e) for e, c in enumerate(tree.edge_child) if c >= 0}
    leaf_edge = tree.path_edges[tree.path_indptr[1:] - 1]
    by_node = path_node_incidence(tree).tocsc()
    out = []
    for node in (int(b) for b in best):
        through = np.sort(by_node.indices[by_node.indptr[node]:by_node.indptr[node + 1]]).astype(np.int64)
        words: dict[str, list[dict[str, Any]]] = {}
        for li, lang in enumerate(tree.languages):
            mine = through[tree.path_language[through] == li]
            mine = mine[np.argsort(-paths.path_prob[topic, mine], kind="stable")][:CONCEPT_WORDS]
            words[lang] = [{"term": vocabularies[lang].term_of(int(tree.path_term[p])),
                            "p": float(paths.path_prob[topic, p]),
                            "edge_mean": float(paths.edge_mean[lang][topic, leaf_edge[p]])} for p in mine]
        out.append({"node": node, "name": tree.node_names[node],
                    "mass": {lang: float(paths.node_mass[lang][topic, node]) for lang in tree.languages},
                    "edge_mean": {lang: float(paths.edge_mean[lang][topic, into[node]]) for lang in tree.languages},
                    "words": words})
    return out



def add_tree_paths(model: SavedModel, listing: dict[str, Any], *, concepts: int = DEFAULT_CONCEPTS) -> dict[str, Any]:
    """Add the concept paths of every listed word and each topic's top concepts to a topics listing.

    Parameters
    ----------
    model : SavedModel
        A model of the ``tree_lda`` family.
    listing : dict
        What ``topicflow topics`` lists (``languages`` and ``topics``, each topic with its ``topic``
        id and, per language, terms with ``term`` and ``p``).
    concepts : int, default 5
        Concepts listed per topic (0: none).

    Returns
    -------
    dict
        A copy of ``listing`` with ``family`` (``"tree_lda"``) and ``tree`` (:func:`tree_summary`); in
        every topic each term gets ``paths`` (:func:`word_paths`), whose ``p`` add up to the term's
        ``p``, and the topic gets ``concepts`` (:func:`top_concepts`).
    """
    paths, tree = model_topic_paths(model)
    topics = []
    for entry in listing["topics"]:
        topic = int(entry["topic"])
        entry = dict(entry)
        for lang in listing["languages"]:
            vocab = model.vocabularies[lang]
            entry[lang] = [{**term, "paths": word_paths(paths, tree, topic, lang, vocab.index[term["term"]])}
                           for term in entry[lang]]
        entry["concepts"] = top_concepts(paths, tree, dict(model.vocabularies), topic, concepts)
        topics.append(entry)
    return {**listing, "family": "tree_lda", "tree": tree_summary(model), "topics": topics}


def tree_export_arrays(model: SavedModel) -> dict[str, np.ndarray]:
    """The tree arrays ``topicflow export`` adds for a tree model (layout in docs/tree-lda.md).

    Parameters
    ----------
    model : SavedModel
        A model of the ``tree_lda`` family.

    Returns
    -------
    dict of str to ndarray
        ``edge_var`` (lambda, (n_topics, n_edges)), ``edge_prior``, ``edge_parent``, ``edge_child``,
        ``node_names``, ``path_indptr``, ``path_edges``, ``path_language``, ``path_term``,
        ``tree_languages``, ``path_prob`` ((n_topics, n_paths), conditional on the path's language),
        and per language (suffix ``_<lang>`` when the model has several) ``edge_mean``
        ((n_topics, n_edges), NaN where the language does not use the edge) and ``node_mass``
        ((n_topics, n_nodes)).
    """
    state, layout = saved_tree_state(model)
    tree = layout.tree
    paths = tree_topic_paths(state.edge_var, layout)
    arrays: dict[str, np.ndarray] = {
        "edge_var": np.asarray(state.edge_var, dtype=np.float64), "edge_prior": tree.edge_prior,
        "edge_parent": tree.edge_parent, "edge_child": tree.edge_child,
        "node_names": np.asarray(tree.node_names, dtype=str), "path_indptr": tree.path_indptr,
        "path_edges": tree.path_edges, "path_language": tree.path_language, "path_term": tree.path_term,
        "tree_languages": np.asarray(tree.languages, dtype=str), "path_prob": paths.path_prob,
    }
    multi = len(tree.languages) > 1
    for lang in tree.languages:
        suffix = f"_{lang}" if multi else ""
        arrays[f"edge_mean{suffix}"] = paths.edge_mean[lang]
        arrays[f"node_mass{suffix}"] = paths.node_mass[lang]
    return arrays


def export_tree_npz(path: Path, model: SavedModel) -> dict[str, tuple[int, ...]]:
    """Write a tree model's export ``.npz``: the model export's arrays plus the tree's.

    The arrays are those of :func:`~topicflow.io.models.store.export_npz` (written by that function)
    and of :func:`tree_export_arrays`, in one file written atomically; nothing is pickled.

    Parameters
    ----------
    path : Path
        The ``.npz`` file to write.
    model : SavedModel
        A model of the ``tree_lda`` family.

    Returns
    -------
    dict of str to tuple of int
        The names and shapes written.
    """
    path = Path(path)
    extra = tree_export_arrays(model)
    base = temporary_sibling(path, "base")
    try:
        export_npz(base, model)  # the arrays every model exports, written by their one writer
        with np.load(base, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
    finally:
        base.unlink(missing_ok=True)
    clash = sorted(set(arrays) & set(extra))
    if clash:
        raise ValueError(f"tree export arrays {clash} clash with the model export's")
    arrays.update(extra)
    buffer = io.BytesIO()
    np.savez(buffer, **cast(dict[str, Any], arrays))  # savez's stubs type **kwds like allow_pickle
    atomic_write_bytes(path, buffer.getvalue())
    return {name: tuple(a.shape) for name, a in arrays.items()}


def topic_concept_weights(model: SavedModel, n: int) -> list[tuple[tuple[str, ...], tuple[float, ...]]]:
    """Each topic's ``n`` top concepts with their mass (the mean over the languages), for charts.

    Parameters
    ----------
    model : SavedModel
        A model of the ``tree_lda`` family.
    n : int
        Concepts per topic.

    Returns
    -------
    list of (tuple of str, tuple of float)
        In topic order: short concept names (:func:`short_concept_name`) and their mean mass over the
        languages, largest first; empty for a tree without concepts.
    """
    paths, tree = model_topic_paths(model)
    out: list[tuple[tuple[str, ...], tuple[float, ...]]] = []
    for topic in range(paths.path_prob.shape[0]):
        if tree.n_nodes < 2:
            out.append(((), ()))
            continue
        score = concept_scores(paths, tree, topic)
        best = np.argsort(-score, kind="stable")[:n]
        out.append((tuple(short_concept_name(tree.node_names[1 + int(b)], tree.languages) for b in best),
                    tuple(float(score[b]) for b in best)))
    return out
