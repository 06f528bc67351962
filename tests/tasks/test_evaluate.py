"""Graphs of the held-out protocols and of topic features: lazy, readable keys, the math they call."""
from __future__ import annotations

import dataclasses
from typing import Any

import dask
import numpy as np
import pytest
from dask.core import get_dependencies

from tests.tasks.test_estep import (
    ALPHA,
    N_TERMS,
    PARAMS,
    TOPIC_WORD,
    TOPICS,
    corpus_blocks,
    delayed_blocks,
    delayed_value,
    graph_of,
    refuse_to_compute,
    step_of,
)
from topicflow.metrics import heldout as metrics_heldout
from topicflow.metrics.heldout import (
    HeldoutStats,
    completion_doc_log_likelihood,
    split_ordered_tokens,
)
from topicflow.metrics.left_to_right import left_to_right_log_likelihood
from topicflow.models.common.blocks import (
    DocBlock,
    OrderedBlock,
    concat_blocks,
    expand_tokens,
)
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.tasks import evaluate as tasks_evaluate
from topicflow.tasks.evaluate import (
    map_first_half_completion,
    map_left_to_right,
    map_topic_features,
)


def ordered_layer(block: DocBlock, seed: int) -> OrderedBlock:
    """The block's tokens shuffled within each document (a reading order), with one OOV token per document."""
    rng = np.random.default_rng(seed)
    indptr, terms = expand_tokens(block)
    docs = []
    for d in range(block.n_docs):
        docs.append(np.concatenate([rng.permutation(terms[indptr[d]:indptr[d + 1]]), [-1]]))
    return OrderedBlock(indptr=np.concatenate([[0], np.cumsum([len(t) for t in docs])]).astype(np.int64),
                        tokens=np.concatenate(docs).astype(np.int32), oov_terms=np.array(["zz"], dtype=object),
                        doc_ids=block.doc_ids, first_doc=block.first_doc, n_terms=block.n_terms)


def labeled(blocks: list[dict[str, DocBlock]]) -> list[dict[str, DocBlock]]:
    return [{lang: dataclasses.replace(b, labels=np.array([f"y{b.first_doc + d}" for d in range(b.n_docs)],
                                                          dtype=object)) for lang, b in block.items()}
            for block in blocks]


def builders(blocks: list[dict[str, DocBlock]], token: str) -> list[Any]:
    delayed = delayed_blocks(blocks)
    layers = [{"default": delayed_value(ordered_layer(b["default"], i), f"ordered-{i}")} for i, b in enumerate(blocks)]
    topic_word = delayed_value(TOPIC_WORD, "topic-word")
    rows = [np.array([0, 2]), np.array([], dtype=np.int64), np.arange(4)][:len(blocks)]
    return [
        map_left_to_right(delayed, topic_word, ALPHA, n_particles=2, seed=1, split_every=2, token=token),
        map_left_to_right(delayed, topic_word, ALPHA, n_particles=2, seed=1, split_every=2, token=f"{token}o",
                          ordered=layers, term_maps={"default": None}),
        map_first_half_completion(delayed, layers, {"default": None}, topic_word, ALPHA, PARAMS, fraction=0.5,
                                  split_every=2, token=token),
        *map_topic_features(delayed, delayed, delayed_value(TOPICS, "topics"), ALPHA, PARAMS, rows, token=token),
    ]


def test_building_computes_nothing_and_keys_name_their_step(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("left_to_right_log_likelihood", "fold_in_block"):
        monkeypatch.setattr(tasks_evaluate, name, lambda *a, **k: pytest.fail("a builder computed"))
    for name in ("completion_doc_log_likelihood", "split_ordered_tokens", "ordered_term_ids"):
        monkeypatch.setattr(metrics_heldout, name, lambda *a, **k: pytest.fail("a builder computed"))
    with dask.config.set(scheduler=refuse_to_compute):
        graphs = builders(labeled(corpus_blocks(3)), "lazy")
    graph = graph_of(*graphs)
    steps = {step_of(k, "lazy") for k in graph} | {step_of(k, "lazyo") for k in graph}
    assert {"left-to-right", "first-half", "features", "sum-left-to-right", "sum-first-half"} <= steps
    assert [g.key for g in graphs[3:]] == ["features-lazy-0", "features-lazy-2"]  # shard 1 has no chosen row
    assert get_dependencies(graph, "first-half-lazy-1") >= {"block-1", "ordered-1", "topic-word"}


def test_tasks_compute_what_the_metrics_give() -> None:
    blocks = labeled(corpus_blocks(3, seed=4))
    ltr_bag, ltr_ordered, first_half, *features = dask.compute(*builders(blocks, "c"), scheduler="sync")
    whole = concat_blocks([b["default"] for b in blocks])
    indptr, terms = expand_tokens(whole)
    want = left_to_right_log_likelihood(indptr, terms, TOPIC_WORD, ALPHA, n_particles=2, seed=1)
    assert ltr_bag == HeldoutStats.from_documents(want, np.diff(indptr))
    # Reading order: each layer's permuted tokens, its OOV token dropped.
    sequences = [metrics_heldout.ordered_term_ids(ordered_layer(b["default"], i)) for i, b in enumerate(blocks)]
    parts = [left_to_right_log_likelihood(ip, t, TOPIC_WORD, ALPHA, n_particles=2, seed=1, first_doc=b["default"].first_doc)
             for (ip, t), b in zip(sequences, blocks)]
    assert ltr_ordered.log_lik == HeldoutStats.from_documents(np.concatenate(parts), np.diff(indptr)).log_lik
    direct = []
    for (ip, t), b in zip(sequences, blocks):
        observed, heldout = split_ordered_tokens(ip, t, b["default"])
        direct.append(HeldoutStats.from_documents(*completion_doc_log_likelihood(observed, heldout, TOPIC_WORD,
                                                                                  ALPHA, PARAMS)))
    assert first_half.log_lik == metrics_heldout.merge_heldout_stats(*direct).log_lik
    theta, labels, counts = features[1]
    assert counts.shape == (4, N_TERMS) and labels.tolist() == ["y8", "y9", "y10", "y11"]
    np.testing.assert_array_equal(theta, fold_in_block(blocks[2]["default"], TOPICS, ALPHA, PARAMS))
    theta, _, counts = features[0]
    np.testing.assert_array_equal(counts.toarray(), blocks[0]["default"].to_csr()[[0, 2]].toarray())
