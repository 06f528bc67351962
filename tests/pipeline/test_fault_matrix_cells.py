"""Fault-matrix cells of ``fit`` hybrid and DSGS (docs/reliability.md, "Fault matrix"; issue 26.5).

1. ``fit --preset zhai2014-hybrid`` (online VB with the hybrid Gibbs-within-VB E-step):

   * a damaged shard ends the command with one ``topicflow: error:`` line naming the shard, and no model;
   * stopped by an exception right after the checkpoint of minibatch 2 (an event of the run,
     :class:`~topicflow.testing.faults.OnItem`), then ``--resume``d: the model equals an uninterrupted
     fit's, bit for bit (the hybrid sampler's draws are keyed by seed, minibatch and document, so a
     resumed pass draws what the uninterrupted one drew).

2. DSGS (``stream --algo dsgs``, without a cluster: the parameter server and its loops in threads):

   * a damaged shard ends the run at once with :class:`~topicflow.errors.CorruptShardError` naming the
     shard, and nothing is written. With a staleness bound this waited for ``dsgs-wait-timeout``
     (600 s) and then reported a timeout instead (fixed in :mod:`topicflow.pipeline.streaming.dsgs`:
     a loop that raises tells the server, and the other loops stop);
   * a stream stopped at a state save (``max_docs``) and resumed equals the uninterrupted one (with
     staleness 0, where DSGS is deterministic; a hogwild DSGS run depends on the loops' interleaving).

3. ``infer``: of two infers into one new OUT, the first to commit wins and the other ends with one
   error line naming OUT (the same directory commit as ``ingest``'s).

Other cells are parametrizations of existing fault tests (the lost scheduler of ``fit`` online and
hybrid, of ``stream --algo dsgs`` and ``gibbs``; the stream output lock with dsgs; a worker killed in
a hybrid fit; incgibbs resumed). No sleep and no deadline decides an outcome.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest
from click.testing import CliRunner

from tests.io.corpus.test_corrupt_shards import chunk_file, flip_bytes
from topicflow.api.lda import LDA
from topicflow.cli import main
from topicflow.errors import CorruptShardError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import default_checkpoint_path
from topicflow.io.models.store import load_model
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.pipeline.streaming import run_stream
from topicflow.pipeline.streaming.config import StreamConfig, sgs_params
from topicflow.pipeline.streaming.dsgs import run_dsgs
from topicflow.pipeline.vb.infer import infer_doc_topics
from topicflow.testing.corpora import draw_planted_corpus, write_test_store
from topicflow.testing.faults import HANG_GUARD_SECONDS, OnItem


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 documents in 4 shards of 50 (3 planted topics, 30 terms)."""
    truth = draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=7)
    return write_test_store(tmp_path_factory.mktemp("cells") / "c.zarr", truth.counts, shard_size=50)


@pytest.fixture
def damaged(store: Path, tmp_path: Path) -> Path:
    """A copy of ``store`` whose shard 000001 has flipped bytes in its counts."""
    copy = Path(shutil.copytree(store, tmp_path / "damaged.zarr"))
    flip_bytes(chunk_file(copy, "000001", "default/counts"))
    return copy


# ----------------------------------------------------------------------------- fit hybrid

HYBRID = ["--preset", "zhai2014-hybrid", "--topics", "3", "--batch-size", "50", "--seed", "5",
          "--local-cluster", "threads", "--workers", "1"]


def test_hybrid_fit_on_a_damaged_shard_ends_in_one_line_naming_it(damaged: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fit", str(damaged), "--model", str(tmp_path / "m"), *HYBRID])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("topicflow: error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert f"shard 000001 of '{damaged}' is corrupt" in errors[0]
    assert "re-ingest the store or restore the shard from a backup" in errors[0]
    assert not (tmp_path / "m").exists()


class Stop(Exception):
    """Raised by the test in the driver's loop, as an interruption would end it."""


def stop() -> None:
    raise Stop("stopped by the test")


def test_hybrid_fit_stopped_after_a_checkpoint_then_resumed_equals_uninterrupted(store: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    args = ["fit", str(store), "--model", str(model), *HYBRID]
    stopped = CliRunner().invoke(main, [*args, "--checkpoint-every", "1"], obj=OnItem("online", 3, stop))
    assert isinstance(stopped.exception, Stop), stopped.output
    checkpoint = json.loads(Path(str(default_checkpoint_path(model)), "latest.json").read_text())
    assert checkpoint["position"]["t"] == 3, checkpoint  # minibatches 0, 1 and 2 done
    assert not model.exists()
    resumed = CliRunner().invoke(main, [*args, "--checkpoint-every", "1", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "resuming from checkpoint" in resumed.output
    assert not default_checkpoint_path(model).exists()
    plain = CliRunner().invoke(main, ["fit", str(store), "--model", str(tmp_path / "plain"), *HYBRID])
    assert plain.exit_code == 0, plain.output
    after, uninterrupted = load_model(model), load_model(tmp_path / "plain")
    assert after.info.settings.get("estep") == "hybrid" and after.info.online is not None
    assert after.info.online == uninterrupted.info.online
    np.testing.assert_array_equal(after.state.topic_word_var["default"], uninterrupted.state.topic_word_var["default"])
    np.testing.assert_array_equal(after.state.doc_topic_prior, uninterrupted.state.doc_topic_prior)


# ----------------------------------------------------------------------------- DSGS


def dsgs_config(**changes: Any) -> StreamConfig:
    settings: dict[str, Any] = dict(algorithm="dsgs", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.05,
                                    batch_size=25, max_iter=20, runs=2, eval_every=50, seed=4, staleness=0,
                                    n_workers=2)
    settings.update(changes)
    return StreamConfig.create(**settings)


class Events:
    """Records the DSGS loops' events (they run in threads of this process)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def __call__(self, event: str, /, **where: int) -> None:
        if event in ("dsgs-claimed", "dsgs-stopped"):
            self.seen.append((event, where["loop"], where["minibatch"]))


def test_dsgs_on_a_damaged_shard_ends_at_once_naming_it_and_writes_nothing(damaged: Path, tmp_path: Path) -> None:
    """Minibatch 1 (of 50 documents) is shard 000001: the loop that claims it raises, the other loop,
    which holds minibatch 0 and then waits for minibatch 1 before its next one (staleness 0), stops.
    Before the fix the other loop waited out ``dsgs-wait-timeout`` (here the hang guard) and the run
    reported that timeout when it was loop 0's."""
    events = Events()
    with dask.config.set({"topicflow.dsgs-wait-timeout": HANG_GUARD_SECONDS}):
        with pytest.raises(CorruptShardError, match="shard 000001 of .* is corrupt") as info:
            run_dsgs(Corpus.open(damaged), sgs_params(dsgs_config(batch_size=50), 4), batch_size=50, client=None,
                     n_workers=2, staleness=0, hook=events)
    assert info.value.shard == "000001"
    (failed,) = {loop for event, loop, minibatch in events.seen if event == "dsgs-claimed" and minibatch == 1}
    assert [e for e in events.seen if e[1] == failed][-1] == ("dsgs-claimed", failed, 1)  # nothing after its error
    last = [e for e in events.seen if e[1] != failed][-1]  # the other loop ended: no minibatch left for it,
    assert last[0] == "dsgs-stopped" or last[2] == -1, events.seen  # or it stopped waiting


def test_dsgs_stream_on_a_damaged_shard_writes_nothing(damaged: Path, tmp_path: Path) -> None:
    with pytest.raises(CorruptShardError, match="shard 000001 of .* is corrupt"):
        run_stream(Corpus.open(damaged), dsgs_config(), client=None, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


#: Fields of a DSGS record that depend on which loop took a minibatch, or on the clock.
UNORDERED = {"worker", "seconds", "tokens_per_s"}


def test_resumed_dsgs_stream_equals_the_uninterrupted_one(store: Path, tmp_path: Path) -> None:
    whole = run_stream(Corpus.open(store), dsgs_config(), client=None)
    run_stream(Corpus.open(store), dsgs_config(max_docs=100), client=None, out=tmp_path / "out")
    resumed = run_stream(Corpus.open(store), dsgs_config(), client=None, out=tmp_path / "out", resume=True)
    for run in (0, 1):
        np.testing.assert_array_equal(resumed.snapshots[run][0]["term_topic_counts"],
                                      whole.snapshots[run][0]["term_topic_counts"])
        assert resumed.snapshots[run][1]["docs_seen"] == 200
    # The records on disk, both invocations': the same as one run's but for the stopped run's top
    # terms at its last point, 100 (a DSGS run reports them when it ends).
    strip = lambda records: [{k: v for k, v in r.items()  # noqa: E731
                              if k not in UNORDERED and (k != "top_terms" or r["point"] != 100)} for r in records]
    assert [r["point"] for r in resumed.records if r["run"] == 0] == [25, 50, 75, 100, 125, 150, 175, 200]
    assert strip(resumed.records) == strip(whole.records)


# ----------------------------------------------------------------------------- infer: a concurrent writer


@pytest.fixture(scope="module")
def model(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cells-model") / "model"
    LDA(3, max_iter=2, tol=0.0, seed=1).fit(store).save(path)
    return path


def test_of_two_infers_into_one_new_out_the_first_to_commit_wins_and_the_other_fails_clean(
        store: Path, model: Path, tmp_path: Path) -> None:
    """Infer A has written its first part when infer B, given the same new OUT, runs and commits; A then
    ends with one error line naming OUT, removes its temporary directory, and OUT holds B's result."""
    out = tmp_path / "dt.zarr"
    args = ["infer", str(model), str(store), "--out", str(out), "--local-cluster", "threads", "--workers", "1"]
    second: list[Any] = []
    race = OnItem("infer", 1, lambda: second.append(CliRunner().invoke(main, args)))
    first = CliRunner().invoke(main, args, obj=race)
    assert race.fired and second[0].exit_code == 0, second[0].output
    assert first.exit_code == 2, first.output
    errors = [line for line in first.output.splitlines() if line.startswith("topicflow: error:")]
    assert len(errors) == 1 and "Traceback" not in first.output, first.output
    assert f"document-topic output path {str(out)!r} exists already" in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dt.zarr"]  # no temporary directory of A left
    infer_doc_topics(load_model(model), Corpus.open(store), tmp_path / "reference.zarr", client=None)
    for (ids, theta), (ids_ref, theta_ref) in zip(DocTopics.open(out), DocTopics.open(tmp_path / "reference.zarr"),
                                                  strict=True):
        np.testing.assert_array_equal(ids, ids_ref)
        np.testing.assert_array_equal(theta, theta_ref)
