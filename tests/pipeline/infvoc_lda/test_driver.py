"""The infvoc Dask driver against a plain loop over the pure functions, across schedulers and partitions."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.infvoc_lda.reference import reference_fit, same_state
from tests.pipeline.infvoc_lda.stores import topic_texts
from topicflow.errors import InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.g0 import default_g0
from topicflow.io.models.infvoc import read_doc_topics
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig
from topicflow.models.infvoc_lda import InfVocParams, expected_topic_words
from topicflow.pipeline.infvoc_lda import (
    InfVocPlan,
    WordIndex,
    fit_infvoc,
    ordered_language,
)
from topicflow.pipeline.ingest.ingest import ingest_corpus

PARAMS = InfVocParams(n_topics=3, truncation=12, reorder_every=2, burn_in=2, samples=2, seed=5)


def test_driver_equals_plain_loop_bit_for_bit(ordered_store: Path, client: object) -> None:
    corpus = Corpus.open(ordered_store)
    plan = InfVocPlan(batch_size=16, pieces=3, min_piece_docs=4)
    result = fit_infvoc(corpus, PARAMS, plan, client=client)
    state, index, _ = reference_fit(corpus, PARAMS, plan, g0=default_g0())
    assert same_state(result.state, state)
    assert result.word_index == index
    assert (result.i, result.docs_seen) == (6, 96)
    assert [r.i for r in result.trace] == [1, 2, 3, 4, 5, 6]
    assert np.all(np.isneginf(result.log_g0[np.array([len(w) < 3 for w in index.words])]))  # "qq": G0 = 0


def test_word_ids_are_first_seen_order_of_the_raw_text(ordered_store: Path) -> None:
    # Independent of the store: the tokens of the source texts (no stop words, all of length >= 2).
    corpus = Corpus.open(ordered_store)
    result = fit_infvoc(corpus, PARAMS, InfVocPlan(batch_size=16, pieces=5, min_piece_docs=2), g0=None)
    tokens = " ".join(topic_texts(96, seed=1)).split()
    assert result.word_index.words == tuple(dict.fromkeys(tokens))
    assert sum(r.new_words for r in result.trace) == len(result.word_index) == result.trace[-1].n_words
    assert sum(r.tokens for r in result.trace) == len(tokens)


@pytest.mark.parametrize("pieces, min_piece_docs, split_every", [(1, 64, 2), (7, 1, 2), (4, 3, 8)])
def test_model_does_not_depend_on_pieces_or_merge_tree(ordered_store: Path, client: object, pieces: int,
                                                       min_piece_docs: int, split_every: int) -> None:
    # In store order the pieces only split the minibatches: every split gives the one-piece loop's model.
    corpus = Corpus.open(ordered_store)
    plan = InfVocPlan(batch_size=20, passes=2, pieces=pieces, min_piece_docs=min_piece_docs)
    result = fit_infvoc(corpus, PARAMS, plan, client=client, split_every=split_every, g0=None)
    state, index, _ = reference_fit(corpus, PARAMS, InfVocPlan(batch_size=20, passes=2, pieces=1), g0=None)
    assert same_state(result.state, state) and result.word_index == index


def test_shuffled_passes_equal_the_loop(ordered_store: Path, client: object) -> None:
    # A shuffle window visits runs of piece_docs documents in a seeded order (the plan of online LDA).
    corpus = Corpus.open(ordered_store)
    plan = InfVocPlan(batch_size=20, passes=2, shuffle_window=40, pieces=4, min_piece_docs=3)
    result = fit_infvoc(corpus, PARAMS, plan, client=client, split_every=3, g0=None)
    state, index, _ = reference_fit(corpus, PARAMS, plan, g0=None)
    assert same_state(result.state, state) and result.word_index == index


def test_doc_topics_written_per_minibatch_equal_the_loops(ordered_store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(ordered_store)
    plan = InfVocPlan(batch_size=16, shuffle_window=32, pieces=2, min_piece_docs=4)
    fit_infvoc(corpus, PARAMS, plan, g0=None, doc_topics=tmp_path / "dt.zarr")
    _, _, gammas = reference_fit(corpus, PARAMS, plan, g0=None)
    out = read_doc_topics(tmp_path / "dt.zarr")
    np.testing.assert_array_equal(out["doc_topic"], np.array(gammas))
    assert sorted(out["doc"].tolist()) == list(range(96))
    assert out["minibatch"].tolist() == [i for i in range(1, 7) for _ in range(16)]
    # alpha + n_dk of the last sweep: each row sums to K alpha + the document's length
    lengths = np.diff(Corpus.open(ordered_store).read_ordered(0).indptr)
    first = out["doc"] < 24
    np.testing.assert_allclose(out["doc_topic"][first].sum(axis=1), 3 * PARAMS.alpha + lengths[out["doc"][first]])


def test_tracked_word_ranks_are_tos_positions(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    result = fit_infvoc(corpus, PARAMS, InfVocPlan(batch_size=16), g0=None, track_words=["kakaka", "nosuchword"])
    ranks = result.word_ranks()
    assert ranks["kakaka"].shape == (6, 3) and np.all(ranks["nosuchword"] == -1)
    word = result.word_index.ids(["kakaka"])[0]
    for k in range(3):
        words, _, _ = expected_topic_words(result.state, k)
        where = np.flatnonzero(words == word)
        assert ranks["kakaka"][-1, k] == (int(where[0]) if where.size else -1)
    assert all(max(r.tos_sizes) <= PARAMS.truncation for r in result.trace if r.i % PARAMS.reorder_every == 0)
    assert [r.n_scored for r in result.trace] == sorted(r.n_scored for r in result.trace)  # R only grows
    assert result.trace[-1].n_scored == result.state.rank_words.shape[0]


def test_continuing_from_a_state_equals_one_run(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    plan = InfVocPlan(batch_size=16)
    first = fit_infvoc(corpus, PARAMS, plan, shards=[0, 1])
    rest = fit_infvoc(corpus, PARAMS, plan, shards=[2, 3], state=first.state, word_index=first.word_index,
                      i=first.i, docs_seen=first.docs_seen)
    whole = fit_infvoc(corpus, PARAMS, plan)
    assert same_state(rest.state, whole.state) and rest.word_index == whole.word_index
    assert len(first.word_index) < len(rest.word_index)  # the given index was copied, not grown in place
    with pytest.raises(InvalidParameterError, match="has applied 3 minibatches"):
        fit_infvoc(corpus, PARAMS, plan, state=first.state, word_index=first.word_index, i=0)
    with pytest.raises(InvalidParameterError, match="word index"):
        fit_infvoc(corpus, PARAMS, plan, state=first.state)


def test_store_without_order_is_refused(plain_store: Path) -> None:
    with pytest.raises(OrderNotKeptError, match="--keep-order"):
        fit_infvoc(Corpus.open(plain_store), PARAMS)


def test_unknown_language_is_refused(ordered_store: Path) -> None:
    with pytest.raises(InvalidParameterError, match="no language 'xx'"):
        ordered_language(Corpus.open(ordered_store), "xx")


def test_multilingual_store_needs_a_language(tmp_path: Path) -> None:
    texts = topic_texts(12, seed=4)
    src = tmp_path / "bi.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "en": t, "de": t.upper()}) + "\n" for i, t in enumerate(texts)))
    ingest_corpus([src], tmp_path / "bi.zarr", fields=FieldSpec(lang_fields=(("en", "en"), ("de", "de"))),
                  shard_size=6, prune=PruneConfig(min_df=2), keep_order=True)
    corpus = Corpus.open(tmp_path / "bi.zarr")
    with pytest.raises(InvalidParameterError, match="language="):
        fit_infvoc(corpus, PARAMS)
    result = fit_infvoc(corpus, PARAMS, InfVocPlan(batch_size=6), language="de", g0=None)
    assert result.word_index.words == tuple(dict.fromkeys(" ".join(texts).split()))  # lowercased by the tokenizer


def test_word_index_round_trip_and_refusals() -> None:
    index = WordIndex(["straße", "日本", "a"])
    assert index.add(["a", "ω", "日本", "ω"]).tolist() == [2, 3, 1, 3]
    again = WordIndex.from_arrays(index.to_arrays())
    assert again == index and again.words == ("straße", "日本", "a", "ω")
    assert index.ids(["ω", "zz"]).tolist() == [3, -1]
    with pytest.raises(InvalidParameterError, match="twice"):
        WordIndex(["a", "a"])
    arrays = index.to_arrays()
    arrays["offsets"] = arrays["offsets"][:-1]
    with pytest.raises(InvalidParameterError, match="offsets"):
        WordIndex.from_arrays(arrays)
