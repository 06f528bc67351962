"""`topicflow update` of an infvoc model: the stream continues over the unseen shards."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.infvoc_lda.reference import same_state
from tests.pipeline.infvoc_lda.stores import topic_texts, write_store
from topicflow.cli import main
from topicflow.errors import OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.models.infvoc_lda import InfVocParams, InfVocState, top_words
from topicflow.pipeline.continuation import CONTINUERS
from topicflow.pipeline.infvoc_lda import (
    InfVocPlan,
    WordIndex,
    continue_infvoc,
    fit_infvoc,
    infvoc_result_model,
    saved_infvoc,
)
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.update import update_model
from topicflow.pipeline.vb import OnlineConfig

PARAMS = InfVocParams(n_topics=3, truncation=12, reorder_every=2, burn_in=2, samples=2, seed=5)
PLAN = InfVocPlan(batch_size=16, pieces=3, min_piece_docs=4)
PLANTED = InfVocParams(n_topics=3, stick_concentration=5.0, truncation=12, reorder_every=2, seed=5)


def fitted_on_first_half(store: Path, path: Path, track_words: tuple[str, ...] = ()) -> Path:
    corpus = Corpus.open(store)
    result = fit_infvoc(corpus, PARAMS, PLAN, shards=[0, 1], track_words=track_words)
    save_model(path, infvoc_result_model(corpus, result, PARAMS, PLAN, shards=[0, 1]))
    return path


def test_update_equals_one_pass(ordered_store: Path, tmp_path: Path, client: object) -> None:
    path = fitted_on_first_half(ordered_store, tmp_path / "m")
    done = update_model(path, Corpus.open(ordered_store), client=client)
    assert (done.version, done.new_docs, done.minibatches) == (2, 48, 3)
    whole = fit_infvoc(Corpus.open(ordered_store), PARAMS, PLAN)
    model = load_model(path)
    _, state, index, position = saved_infvoc(model)
    assert same_state(state, whole.state) and index == whole.word_index
    assert (position.i, position.docs_seen, position.plan) == (6, 96, PLAN)
    assert [r["i"] for r in model.info.trace] == [1, 2, 3, 4, 5, 6]
    assert update_model(path, Corpus.open(ordered_store)).version is None  # nothing new


def test_update_goes_on_tracking_the_models_words(ordered_store: Path, tmp_path: Path) -> None:
    # Figure 7.1 across nights: the words the fit tracked are tracked by the update too, as in one pass.
    path = fitted_on_first_half(ordered_store, tmp_path / "m", track_words=("kalolo", "neverseen"))
    update_model(path, Corpus.open(ordered_store))
    whole = fit_infvoc(Corpus.open(ordered_store), PARAMS, PLAN, track_words=("kalolo", "neverseen"))
    assert [r["word_ranks"] for r in load_model(path).info.trace] == [r.word_ranks for r in whole.trace]
    assert all(r.word_ranks and r.word_ranks["neverseen"] == [-1, -1, -1] for r in whole.trace)
    assert len({json.dumps(r.word_ranks) for r in whole.trace}) > 1  # the ranks move


def test_update_from_the_command_line(ordered_store: Path, tmp_path: Path, local_cluster: object) -> None:
    path = fitted_on_first_half(ordered_store, tmp_path / "m")
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    out = CliRunner().invoke(main, ["update", str(path), str(ordered_store), "--scheduler", address])
    assert out.exit_code == 0, out.output
    assert same_state(saved_infvoc(load_model(path))[1], fit_infvoc(Corpus.open(ordered_store), PARAMS, PLAN).state)


def test_saved_model_reads_as_an_lda_model(ordered_store: Path, tmp_path: Path) -> None:
    # The LDA view lets commands that read LDA models read an infvoc model.
    path = fitted_on_first_half(ordered_store, tmp_path / "m")
    # (`topics` has its own listing for infvoc models; `export` reads the LDA view like any LDA model.)
    out = CliRunner().invoke(main, ["export", str(path), "--out", str(tmp_path / "e.npz")])
    assert out.exit_code == 0, out.output
    _, state, index, _ = saved_infvoc(load_model(path))
    view_words = set(index.strings(np.unique(state.tos_words)))
    with np.load(tmp_path / "e.npz", allow_pickle=False) as exported:
        assert set(exported["vocab"].tolist()) == view_words
        assert exported["topic_word"].shape == (PARAMS.n_topics, len(view_words))
        np.testing.assert_allclose(exported["topic_word"].sum(axis=1), 1.0, rtol=1e-9)


def test_crashed_update_leaves_previous_version(ordered_store: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = fitted_on_first_half(ordered_store, tmp_path / "m")
    before = saved_infvoc(load_model(path))[1]
    import topicflow.pipeline.infvoc_lda.driver as driver

    calls = []
    real = driver.update_minibatch

    def failing(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected crash in the second minibatch")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(driver, "update_minibatch", failing)
    with pytest.raises(RuntimeError, match="injected"):
        update_model(path, Corpus.open(ordered_store))
    model = load_model(path)
    assert model.version == 1 and same_state(saved_infvoc(model)[1], before)
    monkeypatch.setattr(driver, "update_minibatch", real)
    assert update_model(path, Corpus.open(ordered_store)).version == 2  # rerunning redoes the work


def test_update_with_a_store_without_order_is_refused(tmp_path: Path) -> None:
    store = write_store(tmp_path, topic_texts(24, seed=3), shard_size=12, name="o")
    corpus = Corpus.open(store)
    result = fit_infvoc(corpus, PARAMS, PLAN, shards=[0])
    save_model(tmp_path / "m", infvoc_result_model(corpus, result, PARAMS, PLAN, shards=[0]))
    plain = write_store(tmp_path, topic_texts(24, seed=3), shard_size=12, keep_order=False, name="p")
    with pytest.raises(OrderNotKeptError, match="--keep-order"):
        continue_infvoc(load_model(tmp_path / "m"), Corpus.open(plain), shards=[1])
    with pytest.raises(OrderNotKeptError, match="--keep-order"):
        CONTINUERS["infvoc"].check(load_model(tmp_path / "m"), Corpus.open(plain), tmp_path / "m")


def planted_texts(n_docs: int, *, seed: int) -> list[str]:
    """Documents of one topic each; the first topic's also hold the new word 'zorblat' five times."""
    rng = np.random.default_rng(seed)
    texts = []
    for d in range(n_docs):
        words = topic_texts(1, seed=seed * 1000 + d, n_topics=3)[0].split()
        block = [w for w in words if w[:2] == ["ka", "lo", "mi"][d % 3]] or words
        chosen = [block[int(j)] for j in rng.integers(len(block), size=20)]
        texts.append(" ".join(chosen + (["zorblat"] * 5 if d % 3 == 0 else [])))
    return texts



def update_after_append(tmp_path: Path, promote: int | None) -> tuple[InfVocState, WordIndex]:
    """Fit on 48 documents, append 48 with the new word 'zorblat' (promoted to a term or not), update."""
    first = [" ".join(w for w in t.split() if w != "zorblat") for t in planted_texts(48, seed=7)]
    store = write_store(tmp_path, first, shard_size=24, name=f"base{promote}")
    plan = InfVocPlan(batch_size=12)
    corpus = Corpus.open(store)
    result = fit_infvoc(corpus, PLANTED, plan, g0=None)
    save_model(tmp_path / f"m{promote}", infvoc_result_model(corpus, result, PLANTED, plan))
    extra = tmp_path / "more.jsonl"
    extra.write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n"
                             for i, t in enumerate(planted_texts(48, seed=8))))
    append_corpus(store, [extra], promote_min_df=promote)
    grown = Corpus.open(store)
    assert ("zorblat" in set(grown.vocabulary().terms)) == (promote is not None)
    update_model(tmp_path / f"m{promote}", grown, online=OnlineConfig(batch_size=12))
    _, state, index, position = saved_infvoc(load_model(tmp_path / f"m{promote}"))
    assert (position.i, position.docs_seen) == (8, 96)
    return state, index


def test_planted_new_word_of_appended_documents_enters_its_topic(tmp_path: Path) -> None:
    # The appended documents hold a string the store never saw (out of vocabulary, or promoted to a new
    # term): the update maps it through its string, so both stores give the same model, and the word
    # reaches the top 10 of the topic of its documents (spec 3.11).
    state, index = update_after_append(tmp_path, None)
    promoted_state, promoted_index = update_after_append(tmp_path, 2)
    assert same_state(state, promoted_state) and index == promoted_index
    zorblat = int(index.ids(["zorblat"])[0])
    tops = [index.strings(words) for words, _ in top_words(state, 10)]
    ka_topic = max(tops, key=lambda top: sum(word.startswith("ka") for word in top))
    assert zorblat >= 0 and sum(word.startswith("ka") for word in ka_topic) >= 5
    assert "zorblat" in ka_topic  # in the top 10 of the topic of the documents that hold it
