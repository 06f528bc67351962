"""Graph builders for held-out evaluation: fold-in and document completion."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import dask
import numpy as np

from topicflow.metrics import heldout as evaluation
from topicflow.models.common.blocks import DocBlock
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.models.lda.vb.layout import PreparedTopics
from topicflow.models.lda.vb.params import VBParams
from topicflow.tasks.reduce import tree_reduce


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
    doc_topic_prior: np.ndarray, params: VBParams, seed: int,
) -> tuple[float, int]:
    observed, heldout = {}, {}
    for lang, block in blocks.items():
        observed[lang], heldout[lang] = evaluation.split_doc_tokens(block, seed=seed)
    return evaluation.completion_log_likelihood(observed, heldout, topic_word, doc_topic_prior, params)


def _sum_pairs(*pairs: tuple[float, int]) -> tuple[float, int]:
    return (float(sum(p[0] for p in pairs)), int(sum(p[1] for p in pairs)))


def map_completion(
    blocks: Sequence[Any], topic_word: Any, doc_topic_prior: np.ndarray, params: VBParams,
    *, seed: int, split_every: int, token: str,
) -> Any:
    """Held-out log likelihood by document completion, tree-summed: ``Delayed[(log_lik, n_tokens)]``."""
    task = dask.delayed(_completion_task, pure=True)
    parts = [
        task(block, topic_word, doc_topic_prior, params, seed, dask_key_name=f"completion-{token}-{i}")
        for i, block in enumerate(blocks)
    ]
    return tree_reduce(parts, _sum_pairs, split_every=split_every, name=f"sum-{token}")
