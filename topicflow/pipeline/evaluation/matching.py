"""Cross-language document matching of a polylingual model on an aligned store (Mimno et al. 2009).

Each document of the store is folded into the model twice, once from its ``query_language`` side
alone and once from its ``candidate_language`` side alone (VB fold-in with the topics fixed, the path
of ``topicflow infer``), shard by shard on the cluster; the two theta matrices are collected on the
driver and scored by :mod:`topicflow.metrics.matching` (every query ranks every candidate by topic
divergence; precision at 1 and mean reciprocal rank of its own partner).

Memory: the driver holds ``2 x 8 n_docs n_topics`` bytes of theta and an ``n_docs x n_docs`` distance
matrix computed one row at a time (the ranks need only the row), so an aligned store of tens of
thousands of pairs is fine; for more, score a sample.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import as_corpus
from topicflow.io.models.store import SavedModel
from topicflow.metrics.matching import (
    MatchingDivergence,
    MatchingScores,
    matching_scores,
)
from topicflow.pipeline.cluster import compute_list, current_client
from topicflow.pipeline.vb import fold_in_params, model_token, share, term_maps
from topicflow.tasks.estep import graph_token
from topicflow.tasks.evaluate import map_fold_in
from topicflow.tasks.transform import map_remap


def language_doc_topics(model: SavedModel, store: Any, language: str, *, client: Any = None) -> np.ndarray:
    """Fold every document of ``store`` into ``model`` from its ``language`` side alone.

    Parameters
    ----------
    model : SavedModel
        A (polylingual) variational LDA model with ``language``.
    store : str, os.PathLike or Corpus
        A store with ``language``; its other languages are ignored.
    language : str
        The language whose tokens theta is inferred from.
    client : distributed.Client, optional

    Returns
    -------
    ndarray of shape (n_docs, n_topics), float64
        Normalized gamma, one row per document in store order (a document without a known token in
        ``language`` gets the normalized prior).

    Raises
    ------
    InvalidParameterError
        The model or the store lacks ``language``.
    """
    corpus = as_corpus(store)
    for what, languages in (("model", model.state.languages), ("store", corpus.languages)):
        if language not in languages:
            raise InvalidParameterError(
                f"the {what} has languages {list(languages)}, not {language!r}; give a language both share")
    client = current_client(client)
    token = graph_token(corpus.token(), model_token(model), "match", language)
    maps = {language: term_maps(model, corpus)[language]}
    blocks = map_remap(corpus.to_delayed_multi(), maps, {language: model.state.n_terms(language)}, token=token)
    topics = share(model.state.prepared_topics([language]), client, name=f"topics-{token}")
    thetas = map_fold_in(blocks, topics, model.state.doc_topic_prior, fold_in_params(model), token=token)
    parts = compute_list(thetas, client=client)
    if not parts:
        raise InvalidParameterError(f"store {str(corpus.path)!r} has no documents to match")
    return np.concatenate(parts)


def document_matching(
    model: SavedModel, store: Any, *, query_language: str, candidate_language: str,
    divergence: MatchingDivergence = "jensen-shannon", client: Any = None,
) -> MatchingScores:
    """Find each document's other-language side by topic divergence: precision at 1 and MRR.

    Parameters
    ----------
    model : SavedModel
        A polylingual variational LDA model.
    store : str, os.PathLike or Corpus
        Aligned documents (each document has both languages), usually held out from training.
    query_language, candidate_language : str
        Theta of the queries is inferred from the first language only, of the candidates from the
        second only.
    divergence : {"jensen-shannon", "hellinger"}, default "jensen-shannon"
    client : distributed.Client, optional

    Returns
    -------
    MatchingScores

    Raises
    ------
    InvalidParameterError
        The same language twice, or a language the model or store lacks.
    """
    if query_language == candidate_language:
        raise InvalidParameterError(f"query and candidate language are both {query_language!r}; give two")
    queries = language_doc_topics(model, store, query_language, client=client)
    candidates = language_doc_topics(model, store, candidate_language, client=client)
    return matching_scores(queries, candidates, divergence=divergence)
