"""More fault-matrix cells (docs/reliability.md, "Fault matrix"; issue 26.5), chosen for protection per second.

1. Concurrent writers on object storage (the moto server of tests/objstore.py), for the commands
   whose local race is proven elsewhere:

   * ``ingest``: ingest A is between two partitions of its counting pass (an event of the run,
     :class:`~topicflow.testing.faults.OnItem`) when ingest B of other documents starts on the same
     new URL and publishes a store there. B wins; A ends with ``StoreExistsError`` naming the URL,
     and the published store is B's, whole: its vocabulary is the one its shards were encoded with,
     and no object of A's run is left. **Found here**: B took A's objects for an interrupted ingest's
     leftovers and removed them (expected without a lock on object storage), but A then wrote its
     vocabulary over the store B had published and failed with a raw ``FileNotFoundError`` for its
     token objects. Fixed in :mod:`topicflow.pipeline.ingest.ingest` (the ``.ingest-run`` marker).
   * ``infer``: infer B (another model) starts on the same new URL while infer A is between parts.
     A must not commit and ends with one error line naming OUT; B commits its whole output or fails
     the same way (which one depends on the threads); OUT is never a mixture. **Found here**: A
     committed an output missing the part B had removed. Fixed in :mod:`topicflow.io.outputs.doc_topics`
     (the pending object names its writer, checked before the root is put).

2. The disk full inside ``fit --preset zhai2014-hybrid``'s run: ENOSPC at the middle write of a run that
   checkpoints after every minibatch (a write count, :func:`~topicflow.testing.diskfull.disk_full`).

No sleep and no deadline decides an outcome.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.conftest import NO_STOP
from topicflow.cli import main
from topicflow.errors import StoreExistsError, StoreNotFoundError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import default_checkpoint_path
from topicflow.io.models.store import load_model
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.vb.infer import infer_doc_topics
from topicflow.testing.corpora import (
    draw_planted_corpus,
    write_planted_jsonl,
    write_test_store,
)
from topicflow.testing.diskfull import disk_full
from topicflow.testing.faults import OnItem


def vocabulary_of_shards(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """Document and corpus frequency of every term id, counted from the store's shards."""
    n_terms = len(corpus.vocabulary().terms)
    doc_freq, corpus_freq = np.zeros(n_terms, dtype=np.int64), np.zeros(n_terms, dtype=np.int64)
    for block in corpus.iter_blocks():
        np.add.at(doc_freq, block.term_ids, 1)
        np.add.at(corpus_freq, block.term_ids, block.counts)
    return doc_freq, corpus_freq


def test_of_two_ingests_into_one_new_s3_store_the_later_wins_whole_and_the_other_fails_clean(
        s3_bucket: str, s3_server: Any, local_cluster: Any, tmp_path: Path) -> None:
    from distributed import Client

    counts = draw_planted_corpus(n_docs=45, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=9).counts["default"]
    first = [write_planted_jsonl(tmp_path / f"a{i}.jsonl", counts, 15 * i, 15 * i + 15) for i in (0, 1)]
    other = [write_planted_jsonl(tmp_path / "b.jsonl", counts, 30, 45)]
    out = f"s3://{s3_bucket}/c.zarr"
    won: list[Any] = []
    race = OnItem("counting", 1, lambda: won.append(ingest_corpus(other, out, tokenizer=NO_STOP, client=None)))
    with Client(local_cluster) as client:
        with pytest.raises(StoreExistsError, match=f"{out!r} was taken over by another ingest"):
            ingest_corpus(first, out, tokenizer=NO_STOP, shard_size=15, client=client, progress=race)
    assert race.fired and won and won[0].n_kept == 15
    corpus = Corpus.open(out)
    assert list(corpus.doc_ids()) == [f"d{d}" for d in range(30, 45)] and corpus.verify() == []
    vocab = corpus.vocabulary()  # B's vocabulary, not one A wrote over it after B published
    doc_freq, corpus_freq = vocabulary_of_shards(corpus)
    np.testing.assert_array_equal(vocab.doc_freq, doc_freq)
    np.testing.assert_array_equal(vocab.corpus_freq, corpus_freq)
    names = [name.split("/c.zarr/", 1)[1] for name in s3_server.filesystem().find(f"{s3_bucket}/c.zarr")]
    shards = {name.split("/")[1] for name in names if name.startswith("shards/") and name.count("/") > 1}
    assert shards == {s.shard_id for s in corpus.shards}  # none of A's shards or tokens left
    assert not [name for name in names if ".tokens-" in name or ".ingest-run" in name]


# ----------------------------------------------------------------------------- fit hybrid: the disk full mid-run


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 documents in 4 shards of 50 (3 planted topics, 30 terms)."""
    truth = draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=7)
    return write_test_store(tmp_path_factory.mktemp("more") / "c.zarr", truth.counts, shard_size=50)


HYBRID = ["--preset", "zhai2014-hybrid", "--topics", "3", "--batch-size", "50", "--seed", "5",
          "--checkpoint-every", "1", "--local-cluster", "threads", "--workers", "1"]


def test_hybrid_fit_meeting_a_full_disk_at_a_checkpoint_ends_clean_and_resumes_to_the_uninterrupted_model(
        store: Path, tmp_path: Path) -> None:
    """The hybrid fit checkpoints after every minibatch; the write in the middle of all its writes (one of
    a checkpoint's, mid-run) fails with ENOSPC. The command ends with one line naming the checkpoint, no
    model is written, the last complete checkpoint stays readable, and ``--resume`` (space freed) ends
    with the model of a fit that never met the fault (counted in a first, fault-free run)."""
    out = tmp_path / "out"
    out.mkdir()
    plain = out / "plain"
    with disk_full(out) as counter:
        done = CliRunner().invoke(main, ["fit", str(store), "--model", str(plain), *HYBRID])
    assert done.exit_code == 0, done.output
    model = out / "model"
    checkpoint = default_checkpoint_path(model)
    args = ["fit", str(store), "--model", str(model), *HYBRID]
    with disk_full(out, at=counter.writes // 2) as failing:
        full = CliRunner().invoke(main, args)
    assert failing.failed and failing.failed[0].startswith(str(checkpoint)), failing.failed
    assert full.exit_code == 2, full.output
    errors = [line for line in full.output.splitlines() if line.startswith("topicflow: error:")]
    assert len(errors) == 1 and "Traceback" not in full.output, full.output
    assert f"{str(checkpoint)!r} could not be written: no space left on device" in errors[0]
    assert not model.exists()
    latest = json.loads(Path(str(checkpoint), "latest.json").read_text())
    assert 1 <= latest["position"]["t"] < load_model(plain).info.online["t"], latest  # an earlier checkpoint,
    assert sorted(p.name for p in Path(str(checkpoint)).iterdir()) == sorted(["latest.json", latest["slot"]])  # whole
    resumed = CliRunner().invoke(main, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "resuming from checkpoint" in resumed.output
    after, uninterrupted = load_model(model), load_model(plain)
    assert after.info.settings.get("estep") == "hybrid" and after.info.online == uninterrupted.info.online
    np.testing.assert_array_equal(after.state.topic_word_var["default"], uninterrupted.state.topic_word_var["default"])
    np.testing.assert_array_equal(after.state.doc_topic_prior, uninterrupted.state.doc_topic_prior)


# ----------------------------------------------------------------------------- infer on s3: a concurrent writer


@pytest.fixture(scope="module")
def models(store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two models of ``store`` that differ (seeds), so their document topics tell the writers apart."""
    from topicflow.api.lda import LDA

    root = tmp_path_factory.mktemp("more-models")
    for seed in (1, 2):
        LDA(3, max_iter=2, tol=0.0, seed=seed).fit(store).save(root / f"m{seed}")
    return root / "m1", root / "m2"


def test_of_two_infers_into_one_new_s3_out_none_commits_a_mixed_output_and_the_first_fails_clean(
        store: Path, models: tuple[Path, Path], s3_bucket: str, tmp_path: Path) -> None:
    """Infer A (model 1) has written its first part when infer B (model 2), given the same new s3 OUT,
    starts: B takes A's parts for an interrupted write's leftovers and removes them. A must then not
    commit (it did, before the fix, an output missing the removed part) and ends with one line naming
    OUT. B either commits its own whole output or, when one of A's parts still running landed on a part
    name of B's, ends with the same clean line; which one depends on the threads, so both are accepted,
    and in neither case is OUT a mixture."""
    out = f"s3://{s3_bucket}/dt.zarr"
    common = [str(store), "--out", out, "--local-cluster", "threads", "--workers", "1"]
    second: list[Any] = []
    race = OnItem("infer", 1, lambda: second.append(CliRunner().invoke(main, ["infer", str(models[1]), *common])))
    first = CliRunner().invoke(main, ["infer", str(models[0]), *common], obj=race)
    assert race.fired and first.exit_code == 2, first.output
    taken_over = f"document-topic output {out!r} was taken over by another writer while this one ran"
    for result in (first, *([] if second[0].exit_code == 0 else second)):
        errors = [line for line in result.output.splitlines() if line.startswith("topicflow: error:")]
        assert result.exit_code == 2 and len(errors) == 1 and "Traceback" not in result.output, result.output
        assert taken_over in errors[0]
    if second[0].exit_code != 0:
        with pytest.raises(StoreNotFoundError):
            DocTopics.open(out)
        return
    infer_doc_topics(load_model(models[1]), Corpus.open(store), tmp_path / "reference.zarr", client=None)
    for (ids, theta), (ids_ref, theta_ref) in zip(DocTopics.open(out), DocTopics.open(tmp_path / "reference.zarr"),
                                                  strict=True):
        np.testing.assert_array_equal(ids, ids_ref)
        np.testing.assert_array_equal(theta, theta_ref)
