"""SGS and DSGS through `run_stream`, `topicflow stream` and `topicflow update` (continued night after night)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.models.lda.streaming import sgs
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.streaming import run_stream
from topicflow.pipeline.streaming.config import StreamConfig, sgs_params
from topicflow.pipeline.streaming.sgs import run_sgs
from topicflow.pipeline.update import update_model
from topicflow.testing.corpora import (
    draw_planted_corpus,
    write_planted_jsonl,
    write_test_store,
)

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    planted = draw_planted_corpus(n_docs=300, n_topics=3, n_terms=30, doc_length=25, alpha=0.1, seed=5)
    labels = [f"t{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    counts = planted.counts["default"]
    root = tmp_path_factory.mktemp("sgs")
    train = write_test_store(root / "train.zarr", {"default": counts[:240]}, shard_size=60, labels=labels[:240])
    test = write_test_store(root / "test.zarr", {"default": counts[240:]}, shard_size=60, labels=labels[240:])
    return train, test


def config(algorithm: str = "sgs", **changes: Any) -> StreamConfig:
    settings: dict[str, Any] = dict(algorithm=algorithm, n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.05,
                                    batch_size=40, max_iter=30, runs=2, eval_every=80, seed=4)
    settings.update(changes)
    names = StreamConfig.setting_names(settings["algorithm"])
    return StreamConfig.create(**{name: value for name, value in settings.items() if name in names})


def counts_of(result: Any, run: int = 0) -> np.ndarray:
    return result.snapshots[run][0]["term_topic_counts"]


def test_sgs_stream_traces_scores_and_keeps_its_exact_state(stores: tuple[Path, Path], client: object,
                                                            tmp_path: Path) -> None:
    train, test = stores
    result = run_stream(Corpus.open(train), config(), client=client, test_corpus=Corpus.open(test))
    assert [r["point"] for r in result.records if r["run"] == 0] == [40, 80, 120, 160, 200, 240]
    scored = [r for r in result.records if "perplexity_out" in r]
    assert {r["point"] for r in scored} == {80, 160, 240}
    final = result.summary[-1]
    assert final["runs"] == 2 and final["nmi_out_mean"] > 0.5 and final["perplexity_out_mean"] < 30
    direct = run_sgs(Corpus.open(train), sgs_params(config(), 4), batch_size=40)
    np.testing.assert_array_equal(counts_of(result), direct.state.term_topic_counts)
    save_model(tmp_path / "model", result.model)
    loaded = load_model(tmp_path / "model")
    np.testing.assert_array_equal(loaded.sampler_state["term_topic_counts"], direct.state.term_topic_counts)
    np.testing.assert_allclose(loaded.state.topic_word_var["default"], direct.state.term_topic_counts.T + 0.05)


def test_resumed_sgs_stream_equals_the_uninterrupted_one(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    whole = run_stream(Corpus.open(train), config(), client=None)
    run_stream(Corpus.open(train), config(max_docs=120), client=None, out=tmp_path / "out")
    resumed = run_stream(Corpus.open(train), config(), client=None, out=tmp_path / "out", resume=True)
    for run in (0, 1):
        np.testing.assert_array_equal(counts_of(resumed, run), counts_of(whole, run))
    strip = lambda records: [{k: v for k, v in r.items() if k != "seconds"} for r in records]  # noqa: E731
    assert strip([r for r in resumed.records if r["point"] > 120]) == strip([r for r in whole.records if r["point"] > 120])


def test_dsgs_with_staleness_zero_is_sgs(stores: tuple[Path, Path], client: object) -> None:
    train, _ = stores
    serial = run_stream(Corpus.open(train), config(runs=1), client=None)
    distributed = run_stream(Corpus.open(train), config("dsgs", runs=1, staleness=0, n_workers=2), client=client)
    np.testing.assert_array_equal(counts_of(distributed), counts_of(serial))
    last = distributed.records[-1]
    assert last["docs_seen"] == 240 and last["lag"] == 0 and last["bytes_pushed"] > 0


def test_bad_minibatch_settings_are_refused() -> None:
    with pytest.raises(InvalidParameterError):
        config(decay=0.0)
    with pytest.raises(InvalidParameterError):
        config(max_iter=0)



def test_update_continues_an_sgs_stream_as_if_it_had_never_stopped(tmp_path: Path) -> None:
    counts = draw_planted_corpus(n_docs=250, n_topics=3, n_terms=30, doc_length=20, alpha=0.2, seed=9).counts["default"]
    store = tmp_path / "corpus.zarr"
    base = write_planted_jsonl(tmp_path / "base.jsonl", counts, 0, 200)
    ingest_corpus([base], store, tokenizer=NO_STOP, shard_size=50)
    runner = CliRunner()
    first = runner.invoke(main, ["stream", str(store), "--out", str(tmp_path / "out"), "--algo", "sgs", "--topics", "3",
                                 "--batch-size", "50", "--max-iter", "20", "--workers", "1"], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    model_path = tmp_path / "out" / "model"
    append_corpus(store, [write_planted_jsonl(tmp_path / "new.jsonl", counts, 200, 250)])
    result = update_model(model_path, store)
    assert result.version == 2 and result.new_docs == 50 and result.minibatches == 1
    updated = load_model(model_path)
    assert updated.info.sgs_state["docs_seen"] == 250
    settings = StreamConfig.from_dict(updated.info.settings)
    uninterrupted = run_sgs(Corpus.open(store), sgs_params(settings, settings.run.seed), batch_size=50)
    np.testing.assert_array_equal(updated.sampler_state["term_topic_counts"], uninterrupted.state.term_topic_counts)
    assert update_model(model_path, store).version is None  # nothing new
    assert sgs.from_arrays(updated.sampler_state, updated.info.sgs_state).minibatches_done == 5


def test_dsgs_with_staleness_zero_is_sgs_under_the_other_readings(stores: tuple[Path, Path], client: object) -> None:
    """The per-document start and the decayed beta travel through DSGS's fetch and push unchanged."""
    train, _ = stores
    readings: dict[str, Any] = {"sgs_init": "posterior-document", "sgs_init_sweeps": 2, "decay": 0.7, "decay_beta": True,
                                "max_iter": 8}
    serial = run_stream(Corpus.open(train), config(runs=1, **readings), client=None)
    distributed = run_stream(Corpus.open(train), config("dsgs", runs=1, staleness=0, n_workers=2, **readings),
                             client=client)
    np.testing.assert_array_equal(counts_of(distributed), counts_of(serial))
    params = sgs_params(config(runs=1, **readings), 4)
    assert params.init == "posterior-document" and params.decay_beta
    beta = sgs.prior_beta(params, 6)  # 240 documents in minibatches of 40
    np.testing.assert_allclose(serial.model.state.topic_word_var["default"], counts_of(serial).T + beta)
    default = run_stream(Corpus.open(train), config(runs=1, max_iter=8, decay=0.7), client=None)
    assert not np.array_equal(counts_of(default), counts_of(serial))


def test_stream_cli_takes_the_reading_options(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    result = CliRunner().invoke(main, ["stream", str(train), "--out", str(tmp_path / "out"), "--algo", "sgs", "--topics", "3",
                                       "--batch-size", "60", "--max-iter", "5", "--sgs-init", "posterior-document",
                                       "--sgs-init-sweeps", "1", "--decay", "0.8", "--decay-beta", "--workers", "1",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    settings = load_model(tmp_path / "out" / "model").info.settings
    assert settings["sgs_init"] == "posterior-document" and settings["decay_beta"] is True
    assert settings["sgs_init_sweeps"] == 1
    assert StreamConfig.from_dict({**settings, "sgs_init": "posterior"}).minibatch.sgs_init == "posterior-token"
