"""The word-by-word driver: Algorithm 1 in one actor equals the serial loop in process, bit for bit."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.collapsed.helpers import (
    PARAMS,
    assert_same_state,
    config,
    initial,
    planted_store,
    reference_word_by_word,
)
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.models.hdp import pcsvb0
from topicflow.pipeline.collapsed import WordStream, fit_collapsed
from topicflow.pipeline.collapsed.actor import doc_state_rows
from topicflow.pipeline.collapsed.word_by_word import split_at_points


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_store(tmp_path_factory.mktemp("collapsed-wbw") / "c.zarr")


@pytest.mark.parametrize("method", ["pcsvb0", "scvb0"])
def test_actor_equals_the_serial_algorithm_bit_for_bit(store: Path, method: str, client: object) -> None:
    corpus = Corpus.open(store)
    cfg = config(method)
    result = fit_collapsed(corpus, cfg, client=client)
    assert_same_state(result.state, reference_word_by_word(corpus, cfg))
    assert result.state.t_topic_word == 2 * corpus.n_tokens  # one rho^c step per token, over two passes
    assert [(r["pass"], r["docs_seen"]) for r in result.trace] == [(0, 96), (1, 192)]


def test_evaluation_points_and_snapshots_leave_the_run_unchanged(store: Path, client: object) -> None:
    """Held-out scoring every 40 documents reads the actor's state between feeds, never changing it."""
    corpus = Corpus.open(store)
    cfg = config(eval_every=40, params=PARAMS)
    result = fit_collapsed(corpus, cfg, client=client, test=store)
    assert_same_state(result.state, reference_word_by_word(corpus, cfg))
    scored = [r["docs_seen"] for r in result.trace if r["heldout_perplexity"] is not None]
    assert scored == [40, 80, 120, 160, 192]  # every 40 documents seen, and the end
    assert [r["docs_seen"] for r in result.trace] == [40, 80, 96, 120, 160, 192]
    assert all(1.0 < r["heldout_perplexity"] < 30 for r in result.trace if r["heldout_perplexity"] is not None)


def test_kept_document_state_equals_the_serial_algorithm(store: Path, client: object) -> None:
    corpus = Corpus.open(store)
    cfg = config(params=replace(PARAMS, keep_doc_state=True))
    result = fit_collapsed(corpus, cfg, client=client)
    assert_same_state(result.state, reference_word_by_word(corpus, cfg))
    fresh = fit_collapsed(corpus, config()).state
    assert not np.array_equal(fresh.topic_word_counts(), result.state.topic_word_counts())


def test_document_state_has_a_stated_memory_limit() -> None:
    cfg = config(params=replace(PARAMS, keep_doc_state=True), extra={"doc_state_limit_bytes": 1000})
    with pytest.raises(InvalidParameterError, match="keep_doc_state needs .* above the limit"):
        doc_state_rows(cfg, 100)
    assert doc_state_rows(config(), 100) is None
    assert (doc_state_rows(cfg.__class__(params=cfg.params), 10) == -1).all()


def test_unbounded_stream_is_fed_block_by_block_and_snapshotted(store: Path, client: object) -> None:
    corpus = Corpus.open(store)
    cfg = config(passes=1)
    stream = WordStream(cfg, initial(corpus, cfg), client=client)
    reference = initial(corpus, cfg)
    for shard in range(corpus.n_shards):
        block = corpus.read_block(shard)
        summary = stream.feed(block)
        pcsvb0.run_word_by_word(reference, block, cfg.params)
        assert summary["docs_seen"] == reference.docs_seen
        assert_same_state(stream.snapshot(), reference)  # a snapshot leaves the stream as it was
    stream.close()


def test_feeds_are_cut_at_evaluation_points() -> None:
    pieces = [(0, 0, 30), (1, 0, 34)]
    assert list(split_at_points(pieces, 0, 0)) == [pieces]
    assert list(split_at_points(pieces, 10, 25)) == [[(0, 0, 15)], [(0, 15, 30), (1, 0, 10)], [(1, 10, 34)]]
    assert list(split_at_points([(2, 0, 10)], 5, 5)) == [[(2, 0, 5)], [(2, 5, 10)]]


def test_a_stream_in_the_minibatch_form_takes_each_block_as_one_minibatch(store: Path) -> None:
    corpus = Corpus.open(store)
    cfg = config(batch_size=32, passes=1)
    stream = WordStream(cfg, initial(corpus, cfg))
    reference = initial(corpus, cfg)
    for shard in range(corpus.n_shards):
        block = corpus.read_block(shard)
        stream.feed(block)
        pcsvb0.apply_minibatch(reference, pcsvb0.local_minibatch(pcsvb0.global_view(reference), block, cfg.params),
                               cfg.params)
    assert_same_state(stream.snapshot(), reference)
    stream.close()
