"""Graph builders that adapt blocks to a model and write per-block outputs. Lazy only."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import dask
import numpy as np

from topicflow.io.outputs.doc_topics import write_doc_topic_part
from topicflow.models.common.blocks import DocBlock, remap_terms


def _remap_task(
    blocks: Mapping[str, DocBlock], term_maps: Mapping[str, np.ndarray | None], n_terms: Mapping[str, int]
) -> dict[str, DocBlock]:
    out = {}
    for lang, block in blocks.items():
        if lang not in n_terms:
            continue
        term_map = term_maps.get(lang)
        out[lang] = block if term_map is None else remap_terms(block, term_map, n_terms[lang])
    return out


def map_remap(
    blocks: Sequence[Any], term_maps: Any, n_terms: Mapping[str, int], *, token: str
) -> list[Any]:
    """Re-encode blocks with a model's term ids, one task each (languages the model lacks are dropped)."""
    task = dask.delayed(_remap_task, pure=True)
    return [
        task(block, term_maps, dict(n_terms), dask_key_name=f"remap-{token}-{i}")
        for i, block in enumerate(blocks)
    ]


def _write_part_task(blocks: Mapping[str, DocBlock], doc_topic: np.ndarray, tmp: str, shard_id: str) -> int:
    doc_ids = next(iter(blocks.values())).doc_ids
    return write_doc_topic_part(tmp, shard_id, doc_ids, doc_topic)


def map_write_doc_topics(
    blocks: Sequence[Any], doc_topics: Sequence[Any], tmp: str, shard_ids: Sequence[str], *, token: str
) -> list[Any]:
    """Each block's normalized document-topic rows written by the task that holds them."""
    task = dask.delayed(_write_part_task, pure=False)
    return [
        task(block, theta, tmp, shard_id, dask_key_name=f"write-doc-topics-{token}-{i}")
        for i, (block, theta, shard_id) in enumerate(zip(blocks, doc_topics, shard_ids))
    ]
