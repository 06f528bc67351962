"""Cells of the fault matrix (docs/reliability.md, "Fault matrix") that no other test covered.

1. The scheduler lost during a command given ``--scheduler``: an in-process cluster (scheduler over
   TCP) is closed when the command's progress reporter is asked for the next minibatch or iteration
   (an event of the run, :class:`~topicflow.testing.faults.OnItem`). The command must end with one
   ``topicflow: error:`` line naming the scheduler's address, and nothing may be half-written: the
   model's current version (``update``) or the absent model (``fit``) stays as it was.
2. ``topicflow fit --method online`` SIGKILLed (with its process group) right after a checkpoint, then
   ``--resume``d: the model equals an uninterrupted fit. The child stops itself (SIGSTOP) when its
   reporter is asked for minibatch 3, the parent learns of it from the kernel and kills it.

No sleep and no deadline decides an outcome. Dask's client waits for a lost scheduler for
``distributed.comm.timeouts.connect`` before it gives up; the tests shorten that window to keep
the suite fast (the outcome is the same with any window: the scheduler never comes back).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.io.models.checkpoint import default_checkpoint_path
from topicflow.io.models.store import load_model
from topicflow.io.models.versions import list_versions
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.testing.corpora import draw_planted_corpus, write_planted_jsonl
from topicflow.testing.faults import OnItem, kill_once_suspended


def listing(path: Path) -> list[str]:
    """Every file and directory under ``path`` but the lock file (which stays, empty, once made)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.name != ".lock")


def assert_one_error_naming(output: str, address: str) -> None:
    errors = [line for line in output.splitlines() if line.startswith("topicflow: error:")]
    assert len(errors) == 1, output
    assert f"lost the Dask scheduler at '{address}'" in errors[0] and "nothing was committed" in errors[0]
    assert output.rstrip().splitlines()[-1] == errors[0]  # the last word, no traceback after it
    assert "Traceback" not in output


def test_update_with_its_scheduler_lost_ends_clearly_and_keeps_the_current_version(
        grown: tuple[Path, Path], doomed_cluster: Any) -> None:
    store, model = grown
    before, files = load_model(model), listing(model)
    address = doomed_cluster.scheduler_address
    lose = OnItem("online", 1, doomed_cluster.close)  # after update's first minibatch
    result = CliRunner().invoke(main, ["update", str(model), str(store), "--scheduler", address], obj=lose)
    assert lose.fired and result.exit_code == 2, result.output
    assert_one_error_naming(result.output, address)
    assert [(v.version, v.is_current) for v in list_versions(model)] == [(1, True)]
    assert listing(model) == files  # no half-written version left behind
    np.testing.assert_array_equal(load_model(model).state.topic_word_var["default"],
                                  before.state.topic_word_var["default"])


#: How each ``fit`` is run, and the event that loses its scheduler: after batch VB's second iteration,
#: after online VB's first minibatch (of 8), the same for online VB with the hybrid E-step.
FITS = {
    "batch": (["--max-iter", "20", "--tol", "0"], ("fit", 2)),
    "online": (["--method", "online", "--batch-size", "25"], ("online", 1)),
    "hybrid": (["--preset", "zhai2014-hybrid", "--batch-size", "25"], ("online", 1)),
}


@pytest.mark.parametrize("method", list(FITS))
def test_fit_with_its_scheduler_lost_ends_clearly_and_writes_nothing(method: str, grown: tuple[Path, Path],
                                                                     doomed_cluster: Any, tmp_path: Path) -> None:
    store, _ = grown
    address = doomed_cluster.scheduler_address
    options, (loop, index) = FITS[method]
    lose = OnItem(loop, index, doomed_cluster.close)
    result = CliRunner().invoke(main, ["fit", str(store), "--model", str(tmp_path / "m"), "--topics", "3", *options,
                                       "--scheduler", address], obj=lose)
    assert lose.fired and result.exit_code == 2, result.output
    assert_one_error_naming(result.output, address)
    assert list(tmp_path.iterdir()) == []


#: The killed run: the real command line in a child process that stops itself (SIGSTOP) when online
#: VB asks for minibatch 3, i.e. right after the checkpoint of minibatch 2 (counted from 0).
STOP_AFTER_MINIBATCH_2 = (
    "import sys\n"
    "from topicflow.cli import main\n"
    "from topicflow.testing.faults import OnItem, suspend_this_process\n"
    "main(sys.argv[1:], obj=OnItem('online', 3, suspend_this_process))\n"
)


def test_cli_online_fit_killed_then_resumed_equals_uninterrupted(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, _ = grown
    model = tmp_path / "model"
    args = [str(store), "--model", str(model), "--method", "online", "--topics", "3", "--batch-size", "25",
            "--seed", "5", "--checkpoint-every", "1", "--local-cluster", "threads", "--workers", "1"]
    kill_once_suspended([sys.executable, "-c", STOP_AFTER_MINIBATCH_2, "fit", *args])
    checkpoint = json.loads(Path(str(default_checkpoint_path(model)), "latest.json").read_text())
    assert checkpoint["position"]["t"] == 3, checkpoint  # minibatches 0, 1 and 2 done
    assert not model.exists()
    result = CliRunner().invoke(main, ["fit", *args, "--resume"])
    assert result.exit_code == 0, result.output
    assert "resuming from checkpoint" in result.output
    assert not default_checkpoint_path(model).exists()  # removed once the model is saved
    plain = [*args[:2], str(tmp_path / "plain"), *args[3:-2]]  # the same fit, no checkpoint, not killed
    assert CliRunner().invoke(main, ["fit", *plain]).exit_code == 0
    resumed, uninterrupted = load_model(model), load_model(tmp_path / "plain")
    assert resumed.info.online is not None and uninterrupted.info.online is not None
    assert resumed.info.online["t"] == uninterrupted.info.online["t"]
    np.testing.assert_array_equal(resumed.state.topic_word_var["default"], uninterrupted.state.topic_word_var["default"])
    np.testing.assert_array_equal(resumed.state.doc_topic_prior, uninterrupted.state.doc_topic_prior)


def test_append_while_another_writer_holds_the_store_is_refused_and_changes_nothing(
        grown: tuple[Path, Path], tmp_path: Path) -> None:
    """A second writer of a local store (here: the lock an append in progress holds, taken on another
    open file, as another process's would be) makes ``append`` fail at once, naming the store."""
    from topicflow.errors import LockedError
    from topicflow.io._atomic import exclusive_lock

    store, _ = grown
    files = listing(store)
    extra = draw_planted_corpus(n_docs=5, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=8).counts["default"]
    more = write_planted_jsonl(tmp_path / "more.jsonl", extra, 0, 5)
    with exclusive_lock(store / ".lock", what="a test holding the store"):
        with pytest.raises(LockedError, match=str(store)):
            append_corpus(store, [more])
    assert listing(store) == files
