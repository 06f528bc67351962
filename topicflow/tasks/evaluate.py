"""Graph builders for evaluation: fold-in, document completion, the left-to-right estimator, topic features.

Each held-out protocol is one task per shard that returns :class:`~topicflow.metrics.heldout.HeldoutStats`
(an exact sum, so the total does not depend on the partitioning) and one tree reduction. The math is
in :mod:`topicflow.metrics`; nothing here computes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import dask
import numpy as np

from topicflow.metrics import heldout as evaluation
from topicflow.metrics.left_to_right import left_to_right_log_likelihood
from topicflow.models.common.blocks import DocBlock, OrderedBlock, block_from_csr
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.models.lda.vb.layout import PreparedTopics
from topicflow.models.lda.vb.params import VBParams
from topicflow.tasks.reduce import tree_reduce

if TYPE_CHECKING:  # scipy.sparse costs a few tenths of a second to import; a fit never needs it
    import scipy.sparse as sp


def _fold_in_task(
    blocks: Mapping[str, DocBlock], topics: PreparedTopics,
    doc_topic_prior: np.ndarray, params: VBParams,
) -> np.ndarray:
    return fold_in_block(blocks, topics, doc_topic_prior, params)


def map_fold_in(
    blocks: Sequence[Any], topics: Any, doc_topic_prior: np.ndarray,
    params: VBParams, *, token: str,
) -> list[Any]:
    """Normalized document-topic proportions per block, ``Delayed[ndarray (n_docs, n_topics)]``."""
    task = dask.delayed(_fold_in_task, pure=True)
    return [
        task(block, topics, doc_topic_prior, params, dask_key_name=f"fold-in-{token}-{i}")
        for i, block in enumerate(blocks)
    ]


def _completion_task(
    blocks: Mapping[str, DocBlock], topic_word: PreparedTopics,
    doc_topic_prior: np.ndarray, params: VBParams, seed: int, fraction: float,
) -> evaluation.HeldoutStats:
    observed, heldout = {}, {}
    for lang, block in blocks.items():
        observed[lang], heldout[lang] = evaluation.split_doc_tokens(block, seed=seed, fraction=fraction)
    return evaluation.HeldoutStats.from_documents(
        *evaluation.completion_doc_log_likelihood(observed, heldout, topic_word, doc_topic_prior, params)
    )


def map_completion(
    blocks: Sequence[Any], topic_word: Any, doc_topic_prior: np.ndarray, params: VBParams,
    *, seed: int, split_every: int, token: str, fraction: float = 0.5,
) -> Any:
    """Held-out log likelihood by document completion with a random part observed, tree-merged.

    Parameters
    ----------
    blocks : sequence of Delayed[dict of str to DocBlock]
        The shards, in the model's term ids.
    topic_word : PreparedTopics or Delayed of it
        The model's point-estimate topics.
    doc_topic_prior : ndarray of shape (n_topics,)
    params : VBParams
        Fold-in settings.
    seed : int
        Seed of :func:`~topicflow.metrics.heldout.split_doc_tokens`.
    split_every : int
        Fan-in of the reduction.
    token : str
        Names the keys ``completion-<token>-<i>`` and ``sum-<token>-...``.
    fraction : float, default 0.5
        Share of each document's tokens observed.

    Returns
    -------
    Delayed[HeldoutStats]
    """
    task = dask.delayed(_completion_task, pure=True)
    parts = [
        task(block, topic_word, doc_topic_prior, params, seed, fraction, dask_key_name=f"completion-{token}-{i}")
        for i, block in enumerate(blocks)
    ]
    return tree_reduce(parts, evaluation.merge_heldout_stats, split_every=split_every, name=f"sum-{token}")


def _ordered_sequences(
    ordered: Mapping[str, OrderedBlock], term_maps: Mapping[str, np.ndarray | None], languages: Sequence[str],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {lang: evaluation.ordered_term_ids(ordered[lang], term_maps.get(lang)) for lang in languages}


def _first_half_task(
    blocks: Mapping[str, DocBlock], ordered: Mapping[str, OrderedBlock], term_maps: Mapping[str, np.ndarray | None],
    topic_word: PreparedTopics, doc_topic_prior: np.ndarray, params: VBParams, fraction: float,
) -> evaluation.HeldoutStats:
    observed, heldout = {}, {}
    for lang, (indptr, terms) in _ordered_sequences(ordered, term_maps, list(blocks)).items():
        observed[lang], heldout[lang] = evaluation.split_ordered_tokens(indptr, terms, blocks[lang],
                                                                        fraction=fraction)
    return evaluation.HeldoutStats.from_documents(
        *evaluation.completion_doc_log_likelihood(observed, heldout, topic_word, doc_topic_prior, params)
    )


def map_first_half_completion(
    blocks: Sequence[Any], ordered: Sequence[Any], term_maps: Any, topic_word: Any, doc_topic_prior: np.ndarray,
    params: VBParams, *, fraction: float, split_every: int, token: str,
) -> Any:
    """Held-out log likelihood by document completion with the first part (reading order) observed.

    Parameters
    ----------
    blocks : sequence of Delayed[dict of str to DocBlock]
        The shards as bags, in the model's term ids (their tokens are checked against ``ordered``).
    ordered : sequence of dict of str to Delayed[OrderedBlock]
        The same shards' ordered-token layer per language, in the store's term ids.
    term_maps : dict of str to (ndarray or None), or Delayed of it
        Store term id -> model term id per language (None where they agree).
    topic_word : PreparedTopics or Delayed of it
    doc_topic_prior : ndarray of shape (n_topics,)
    params : VBParams
    fraction : float
        Share of each document's tokens observed (its first ones).
    split_every : int
    token : str
        Names the keys ``first-half-<token>-<i>`` and ``sum-first-half-<token>-...``.

    Returns
    -------
    Delayed[HeldoutStats]
    """
    task = dask.delayed(_first_half_task, pure=True)
    parts = [
        task(block, layer, term_maps, topic_word, doc_topic_prior, params, fraction,
             dask_key_name=f"first-half-{token}-{i}")
        for i, (block, layer) in enumerate(zip(blocks, ordered, strict=True))
    ]
    return tree_reduce(parts, evaluation.merge_heldout_stats, split_every=split_every, name=f"sum-first-half-{token}")


def _left_to_right_task(
    blocks: Mapping[str, DocBlock], ordered: Mapping[str, OrderedBlock] | None,
    term_maps: Mapping[str, np.ndarray | None] | None, topic_word: PreparedTopics,
    doc_topic_prior: np.ndarray, n_particles: int, seed: int,
) -> evaluation.HeldoutStats:
    if ordered is None:
        indptr, terms = evaluation.bag_token_sequences(blocks, topic_word)
    else:
        sequences = _ordered_sequences(ordered, term_maps or {}, list(blocks))
        indptr, terms = evaluation.join_language_sequences(sequences, topic_word)
    first_doc = next(iter(blocks.values())).first_doc
    doc_log_lik = left_to_right_log_likelihood(indptr, terms, topic_word, doc_topic_prior,
                                               n_particles=n_particles, seed=seed, first_doc=first_doc)
    return evaluation.HeldoutStats.from_documents(doc_log_lik, np.diff(indptr))


def map_left_to_right(
    blocks: Sequence[Any], topic_word: Any, doc_topic_prior: np.ndarray, *, n_particles: int, seed: int,
    split_every: int, token: str, ordered: Sequence[Any] | None = None, term_maps: Any = None,
) -> Any:
    """Held-out log likelihood of whole documents by the left-to-right estimator, tree-merged.

    Parameters
    ----------
    blocks : sequence of Delayed[dict of str to DocBlock]
        The shards, in the model's term ids.
    topic_word : PreparedTopics or Delayed of it
        The model's point-estimate topics (all languages stacked).
    doc_topic_prior : ndarray of shape (n_topics,)
    n_particles : int
        R.
    seed : int
    split_every : int
    token : str
        Names the keys ``left-to-right-<token>-<i>`` and ``sum-left-to-right-<token>-...``.
    ordered : sequence of dict of str to Delayed[OrderedBlock], optional
        The ordered-token layer of the same shards: tokens are scored in reading order. Without it,
        in the bag's CSR order (:func:`~topicflow.metrics.heldout.bag_token_sequences`).
    term_maps : dict of str to (ndarray or None), or Delayed of it, optional
        With ``ordered``: store term id -> model term id per language.

    Returns
    -------
    Delayed[HeldoutStats]
    """
    task = dask.delayed(_left_to_right_task, pure=True)
    layers: Sequence[Any] = ordered if ordered is not None else [None] * len(blocks)
    parts = [
        task(block, layer, term_maps, topic_word, doc_topic_prior, n_particles, seed,
             dask_key_name=f"left-to-right-{token}-{i}")
        for i, (block, layer) in enumerate(zip(blocks, layers, strict=True))
    ]
    return tree_reduce(parts, evaluation.merge_heldout_stats, split_every=split_every,
                       name=f"sum-left-to-right-{token}")


def _features_task(
    store_blocks: Mapping[str, DocBlock], blocks: Mapping[str, DocBlock], topics: PreparedTopics,
    doc_topic_prior: np.ndarray, params: VBParams, rows: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
    import scipy.sparse as sp

    def chosen(block: DocBlock) -> DocBlock:
        return block_from_csr(block.to_csr()[rows], doc_ids=block.doc_ids[rows], first_doc=block.first_doc,
                              language=block.language)

    theta = fold_in_block({lang: chosen(block) for lang, block in blocks.items()}, topics, doc_topic_prior, params)
    first = next(iter(store_blocks.values()))
    labels = np.asarray(first.labels, dtype=object)[rows]
    counts = sp.hstack([store_blocks[lang].to_csr()[rows] for lang in sorted(store_blocks)], format="csr")
    return theta, labels, counts


def map_topic_features(
    store_blocks: Sequence[Any], blocks: Sequence[Any], topics: Any, doc_topic_prior: np.ndarray,
    params: VBParams, rows: Sequence[np.ndarray], *, token: str,
) -> list[Any]:
    """Document-topic proportions, labels and counts of chosen documents of every shard.

    Parameters
    ----------
    store_blocks : sequence of Delayed[dict of str to DocBlock]
        The shards in the store's own term ids, with labels.
    blocks : sequence of Delayed[dict of str to DocBlock]
        The same shards in the model's term ids.
    topics : PreparedTopics or Delayed of it
        The model's exp(E[log beta]) (the fold-in's input).
    doc_topic_prior : ndarray of shape (n_topics,)
    params : VBParams
        Fold-in settings.
    rows : sequence of ndarray of int
        Per shard, the rows (ascending) to keep; shards with none are left out.
    token : str
        Names the keys ``features-<token>-<i>``.

    Returns
    -------
    list of Delayed[(ndarray (n_rows, n_topics), ndarray (n_rows,) of labels, csr_matrix (n_rows, n_terms))]
        One per shard with chosen rows, in shard order; the counts stack the store's languages in
        sorted language order.
    """
    task = dask.delayed(_features_task, pure=True)
    return [
        task(store_block, block, topics, doc_topic_prior, params, chosen, dask_key_name=f"features-{token}-{i}")
        for i, (store_block, block, chosen) in enumerate(zip(store_blocks, blocks, rows, strict=True))
        if len(chosen)
    ]
