"""Nightly updates: only unseen shards, continued schedule, grown vocabulary, versions, lock, crash."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.errors import LockedError, VocabularyMismatchError
from topicflow.io.models.store import load_model
from topicflow.io.models.versions import list_versions
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline import update as update_module
from topicflow.cli import main
from topicflow.api.lda import LDA
from topicflow.pipeline.vb.batch import VBConfig
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.vb.online import OnlineConfig, fit_online
from topicflow.pipeline.update import update_model
from topicflow.testing.corpora import draw_planted_corpus

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())
ONLINE = dict(method="online", batch_size=50, tau0=1.0, kappa=0.6, seed=3)


def write_docs(path: Path, counts: object, start: int, stop: int, extra_words: dict[int, str] | None = None) -> Path:
    """Planted documents as JSON Lines text; ``extra_words`` adds a word to some documents."""
    lines = []
    for d in range(start, stop):
        row = counts[d].toarray().ravel()  # type: ignore[index]
        words = [f"w{w:03d}" for w in np.flatnonzero(row) for _ in range(row[w])]
        if extra_words and d in extra_words:
            words += [extra_words[d]] * 3
        lines.append(json.dumps({"id": f"d{d}", "text": " ".join(words)}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def truth() -> object:
    return draw_planted_corpus(n_docs=500, n_topics=4, n_terms=40, doc_length=30, alpha=0.3, seed=7)


@pytest.fixture
def grown(tmp_path: Path, truth: object) -> tuple[Path, Path]:
    """A store of 400 documents with an online model on it; 100 more documents wait in ``new.jsonl``."""
    counts = truth.counts["default"]  # type: ignore[attr-defined]
    store = tmp_path / "corpus.zarr"
    ingest_corpus([write_docs(tmp_path / "base.jsonl", counts, 0, 400)], store, tokenizer=NO_STOP, shard_size=100)
    LDA(4, **ONLINE).fit(store).save(tmp_path / "model")  # type: ignore[arg-type]
    extra = {d: "zebra" for d in range(400, 430)}
    write_docs(tmp_path / "new.jsonl", counts, 400, 500, extra_words=extra)
    return store, tmp_path / "model"


def test_update_processes_only_new_shards_and_continues_the_schedule(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, model_path = grown
    before = load_model(model_path)
    append_corpus(store, [tmp_path / "new.jsonl"])
    corpus = Corpus.open(store)
    result = update_model(model_path, store)
    assert result.version == 2 and result.new_docs == 100
    assert result.new_shards == tuple(s.shard_id for s in corpus.shards[4:])
    after = load_model(model_path)
    assert after.info.online["t"] == before.info.online["t"] + 2
    assert [s["id"] for s in after.info.corpus["shards"]] == [s.shard_id for s in corpus.shards]
    # Exactly the continuation of the old model over the new shards, with D = the store's size.
    config = VBConfig.from_dict(before.info.settings)
    online = OnlineConfig.from_dict(before.info.online["config"])
    expected = fit_online(corpus, config, online, state=before.state, t=before.info.online["t"],
                          shards=[4], docs_seen=400)
    np.testing.assert_array_equal(after.state.topic_word_var["default"], expected.state.topic_word_var["default"])
    # Nothing new: no new version.
    again = update_model(model_path, store)
    assert again.version is None and again.new_docs == 0
    assert [v.version for v in list_versions(model_path)] == [1, 2]
    np.testing.assert_array_equal(load_model(model_path, version=1).state.topic_word_var["default"],
                                  before.state.topic_word_var["default"])


def test_update_grows_the_vocabulary_with_promoted_terms(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, model_path = grown
    n_terms = load_model(model_path).state.n_terms("default")
    append_corpus(store, [tmp_path / "new.jsonl"], promote_min_df=5)
    result = update_model(model_path, store)
    assert result.new_terms == {"default": 1}
    model = load_model(model_path)
    vocab = model.vocabularies["default"]
    assert len(vocab) == n_terms + 1 and vocab.term_of(n_terms) == "zebra"
    lam = model.state.topic_word_var["default"]
    assert lam.shape == (4, n_terms + 1)
    assert lam[:, n_terms].max() > 10 * 0.01  # the new term collected statistics beyond its prior


def test_update_of_a_batch_model_starts_its_schedule_after_the_corpus(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, _ = grown
    model_path = tmp_path / "batch-model"
    LDA(4, max_iter=5, seed=1).fit(store).save(model_path)
    append_corpus(store, [tmp_path / "new.jsonl"])
    update_model(model_path, store, online=OnlineConfig(batch_size=50))
    model = load_model(model_path)
    assert model.info.method == "online"
    assert model.info.online["t"] == 400 // 50 + 2


def test_update_refuses_another_store(grown: tuple[Path, Path], tmp_path: Path, truth: object) -> None:
    _, model_path = grown
    counts = truth.counts["default"]  # type: ignore[attr-defined]
    other = tmp_path / "other.zarr"
    ingest_corpus([write_docs(tmp_path / "o.jsonl", counts, 100, 300)], other, tokenizer=NO_STOP, shard_size=100)
    with pytest.raises(VocabularyMismatchError):
        update_model(model_path, other)


def test_crashed_update_leaves_the_previous_version_and_reruns(
    grown: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, model_path = grown
    append_corpus(store, [tmp_path / "new.jsonl"])

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the driver dies after fitting, before the commit

    with monkeypatch.context() as patched:
        patched.setattr(update_module, "commit_version", crash)
        with pytest.raises(KeyboardInterrupt):
            update_model(model_path, store)
    assert [v.version for v in list_versions(model_path)] == [1]
    assert load_model(model_path).info.online["t"] == 8
    assert update_model(model_path, store).version == 2


def test_a_second_update_of_the_same_model_is_refused(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, model_path = grown
    # The holder keeps the lock until it is killed (it waits on its stdin, not on a clock), and the
    # lock is gone once the kernel has reaped it: no sleeps either side.
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\nfrom topicflow.io.models.versions import model_lock\n"
         f"with model_lock({str(model_path)!r}, action='update'):\n    print('locked', flush=True)\n"
         "    sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockedError, match="locked"):
            update_model(model_path, store)
    finally:
        holder.kill()
        holder.communicate()
    assert update_model(model_path, store).version is None  # the lock died with its process


def test_cli_update_and_versions(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, model_path = grown
    runner = CliRunner()
    assert runner.invoke(main, ["append", str(store), str(tmp_path / "new.jsonl"), "--promote-min-df", "5"]).exit_code == 0
    result = runner.invoke(main, ["update", str(model_path), str(store), "--workers", "1", "--keep", "5",
                                  "--executor", "threads"])
    assert result.exit_code == 0, result.output
    assert "version 2: 1 new shards, 100 documents" in result.output and "default +1" in result.output
    again = runner.invoke(main, ["update", str(model_path), str(store), "--workers", "1"])
    assert again.exit_code == 0 and "nothing to do" in again.output
    listing = runner.invoke(main, ["versions", str(model_path), "--format", "json"])
    assert listing.exit_code == 0, listing.output
    payload = json.loads(listing.output)
    assert payload["current"] == 2 and [v["version"] for v in payload["versions"]] == [1, 2]
    assert payload["versions"][1]["summary"]["new_docs"] == 100


def test_partial_fit_continues_like_an_update(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, model_path = grown
    append_corpus(store, [tmp_path / "new.jsonl"])
    estimator = LDA.load(model_path)
    t0 = estimator.n_iter_
    estimator.partial_fit(store)  # unseen shards only
    assert estimator.n_iter_ == t0 + 2 and estimator.n_docs_seen_ == 500
    update_model(model_path, store)
    np.testing.assert_array_equal(estimator.components_, load_model(model_path).state.topic_word_var["default"])
