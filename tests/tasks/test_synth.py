"""The synth graph builders are lazy and name their keys readably."""
from __future__ import annotations

from typing import Any

import dask
import pytest

from topicflow.models.lda.synth import SynthParams
from topicflow.tasks.synth import (
    map_shard_infos,
    map_topic_word,
    map_write_shards,
    plan_shards,
    synth_token,
    tree_merge_frequencies,
)


def refuse_to_compute(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a graph builder computed something")


def test_builders_do_not_compute_and_keys_are_readable(tmp_path: Any) -> None:
    params = SynthParams(n_docs=25, n_topics=2, n_terms=10, doc_length=5.0, doc_topic_prior=(0.5,),
                         topic_word_prior=0.5, n_langs=2)
    plans = plan_shards(25, 4)
    token = synth_token(params, str(tmp_path), 4)
    with dask.config.set(scheduler=refuse_to_compute):
        topics = map_topic_word(params, token=token)
        outcomes = map_write_shards(str(tmp_path), params, topics, plans, token=token)
        infos = map_shard_infos(outcomes, token=token)
        merged = tree_merge_frequencies(outcomes, token=token, split_every=3)
    assert list(tmp_path.iterdir()) == []
    assert [o.key for o in outcomes] == [f"synth-shard-{token}-{i}" for i in range(7)]
    assert infos[6].key == f"synth-info-{token}-6"
    assert set(topics) == {"l0", "l1"} and topics["l1"].key == f"synth-topic-word-{token}-l1"
    # 7 leaves with fan-in 3: levels of 3 and 1 nodes.
    assert merged.key == f"synth-freqs-{token}-1-0"
    keys = set(merged.__dask_graph__().keys())
    assert sum(1 for k in keys if str(k).startswith(f"synth-freqs-{token}-0-")) == 3


def test_plan_covers_every_document_once() -> None:
    plans = plan_shards(1001, 100)
    assert len(plans) == 11 and plans[-1].n_docs == 1
    assert [p.first_doc for p in plans] == list(range(0, 1001, 100))


def test_tree_merge_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        tree_merge_frequencies([], token="t")
