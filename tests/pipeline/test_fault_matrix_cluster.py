"""Fault-matrix cells proven through a cluster: worker processes killed, concurrent writers, lost schedulers.

Cells of the fault matrix (docs/reliability.md, "Fault matrix") that no other test covered.

1. The scheduler lost during a command given ``--scheduler`` (``fit``, ``update``, ``ingest``, ``append``,
   ``infer``, ``stream``): an in-process cluster (scheduler over TCP) is closed when the command's
   progress reporter is asked for its next item (an event of the run,
   :class:`~topicflow.testing.faults.OnItem`). The command must end with one ``topicflow: error:``
   line naming the scheduler's address, and nothing may be half-written: the model's current version,
   the store, or the absent output stay as they were.
2. The whole command SIGKILLed (with its process group) in a child process that stopped itself
   (SIGSTOP) at an item of its loop: ``fit --method online`` then ``--resume``, ``infer`` then rerun. The result equals an uninterrupted run.
3. A worker process SIGKILLed (one module-scoped cluster of two worker processes): ``infer`` and
   ``update --executor tasks`` through ``--scheduler`` (the worker the next task goes to dies holding
   it), streams through the API (an SGS run's task; the worker of a gibbs run's actor).
4. Concurrent writers: the second writer of a new store, model or stream output, started at an event
   of the first, either wins and the first fails clean, or is refused.

No sleep and no deadline decides an outcome. Dask's client waits for a lost scheduler for
``distributed.comm.timeouts.connect`` before it gives up; the tests shorten that window to keep
the suite fast (the outcome is the same with any window: the scheduler never comes back).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.conftest import NO_STOP
from tests.pipeline.test_fault_matrix_faults import assert_one_error_naming, listing
from topicflow.api.lda import LDA
from topicflow.cli import main
from topicflow.errors import StoreExistsError
from topicflow.io.corpus.reader import Corpus, read_manifest
from topicflow.io.models.store import load_model
from topicflow.io.models.versions import list_versions
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.pipeline.cluster import worker_addresses
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.streaming import run_stream
from topicflow.pipeline.streaming.config import StreamConfig
from topicflow.pipeline.vb.infer import infer_doc_topics
from topicflow.testing.corpora import draw_planted_corpus, write_planted_jsonl
from topicflow.testing.faults import (
    OnItem,
    TaskKiller,
    kill_once_suspended,
    kill_worker,
    restore_workers,
    workers_with_actors,
)

#: One xdist worker runs the module, so its store, model and cluster of worker processes are built once.
pytestmark = pytest.mark.xdist_group("fault-matrix")

#: Part of the key of append's per-partition task that encodes and writes a shard.
APPEND_TASK = "ingest-encode"


#: The killed run: the real command line in a child process that stops itself (SIGSTOP) when the
#: command's progress reporter is asked for item ``argv[2]`` of the loop ``argv[1]``.
STOP_AT_ITEM = (
    "import sys\n"
    "from topicflow.cli import main\n"
    "from topicflow.testing.faults import OnItem, suspend_this_process\n"
    "main(sys.argv[3:], obj=OnItem(sys.argv[1], int(sys.argv[2]), suspend_this_process))\n"
)


def run_until_killed(desc: str, index: int, args: list[str]) -> None:
    """Run ``topicflow ARGS`` in a child, SIGKILL its process group once it stopped before item ``index`` of ``desc``."""
    kill_once_suspended([sys.executable, "-c", STOP_AT_ITEM, desc, str(index), *args])


# ----------------------------------------------------------------------------- a worker process killed


@pytest.fixture(scope="module")
def worker_processes() -> Iterator[Any]:
    """One cluster of two worker processes for this module's worker-kill tests (each kills one; its
    nanny starts a new one), reached by the commands through ``--scheduler`` as a remote one is."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster, set_as_default=False) as client:  # not the default: other modules interleave
            yield client


@pytest.fixture
def workers(worker_processes: Any) -> Any:
    """The module's client once its cluster has two workers again (the event of the nanny's restart)."""
    restore_workers(worker_processes, 2)  # (warns when a nanny had given up and was replaced)
    return worker_processes


def test_a_nanny_that_gave_up_is_replaced(worker_processes: Any) -> None:
    """What the ``workers`` fixture does when a killed worker's nanny closed instead of restarting it."""
    cluster = worker_processes.cluster
    restore_workers(worker_processes, 2)
    name = sorted(cluster.workers)[0]
    cluster.sync(cluster.workers[name].close)
    with pytest.warns(UserWarning, match="gave up after a kill and was replaced"):
        assert restore_workers(worker_processes, 2) == [str(name)]
    assert len(worker_addresses(worker_processes)) == 2 and name in cluster.workers
    # the state a full-suite run showed: the closed nanny no longer in the cluster's list at all
    name = sorted(cluster.workers)[0]
    cluster.sync(cluster.workers[name].close)
    del cluster.workers[name]
    with pytest.warns(UserWarning, match="gave up after a kill and was replaced"):
        assert restore_workers(worker_processes, 2) == [str(name)]
    assert len(worker_addresses(worker_processes)) == 2  # (the cluster lists the new nanny once it has started)


def doc_topics_of(path: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    return list(DocTopics.open(path))


def assert_same_doc_topics(path: Path, reference: Path) -> None:
    for (ids, theta), (ids_ref, theta_ref) in zip(doc_topics_of(path), doc_topics_of(reference), strict=True):
        np.testing.assert_array_equal(ids, ids_ref)
        np.testing.assert_array_equal(theta, theta_ref)


def test_cli_infer_with_a_worker_killed_writes_what_an_uninterrupted_run_writes(
        grown: tuple[Path, Path], workers: Any, tmp_path: Path) -> None:
    """The worker the first fold-in task is assigned to is SIGKILLed holding it; the task reruns elsewhere."""
    store, model = grown
    infer_doc_topics(load_model(model), Corpus.open(store), tmp_path / "reference.zarr", client=None)
    killer = TaskKiller(workers, "fold-in")
    killer.arm()
    result = CliRunner().invoke(main, ["infer", str(model), str(store), "--out", str(tmp_path / "dt.zarr"),
                                       "--scheduler", workers.scheduler.address])
    assert result.exit_code == 0, result.output
    assert killer.killed(), "no worker was killed mid-infer"
    assert_same_doc_topics(tmp_path / "dt.zarr", tmp_path / "reference.zarr")


def test_cli_update_with_a_worker_killed_equals_an_uninterrupted_update(
        grown: tuple[Path, Path], workers: Any, tmp_path: Path) -> None:
    """``update`` through ``--scheduler``, a worker SIGKILLed after the first minibatch, on both executors:
    ``--executor tasks`` (the worker the next E-step task is assigned to dies holding it) and the default
    E-step servers (actors; a worker holding servers dies, the servers are replaced). Both commit the
    uninterrupted update's version. The servers' case hung before actor calls were watched
    (docs/reliability.md, "Fault matrix")."""
    store, model = grown
    shutil.copytree(model, tmp_path / "plain")
    plain = CliRunner().invoke(main, ["update", str(tmp_path / "plain"), str(store), "--local-cluster", "threads",
                                      "--workers", "1"])
    assert plain.exit_code == 0, plain.output
    reference = load_model(tmp_path / "plain")
    killed: list[str] = []

    def kill_a_server_worker() -> None:
        address = worker_addresses(workers)[0]
        kill_worker(workers, address)
        killed.append(address)

    killer = TaskKiller(workers, "estep")
    for name, executor, hook in (("tasks", ["--executor", "tasks"], killer.arm), ("servers", [], kill_a_server_worker)):
        restore_workers(workers, 2)
        shutil.copytree(model, tmp_path / name)
        result = CliRunner().invoke(main, ["update", str(tmp_path / name), str(store), *executor, "--scheduler",
                                           workers.scheduler.address], obj=OnItem("online", 1, hook))
        assert result.exit_code == 0, result.output
        assert [(v.version, v.is_current) for v in list_versions(tmp_path / name)] == [(1, False), (2, True)]
        updated = load_model(tmp_path / name)
        np.testing.assert_array_equal(updated.state.topic_word_var["default"],
                                      reference.state.topic_word_var["default"])
        np.testing.assert_array_equal(updated.state.doc_topic_prior, reference.state.doc_topic_prior)
    assert killer.killed(), "no worker was killed mid-update (tasks)"
    assert killed, "no worker was killed mid-update (servers)"


def test_cli_hybrid_fit_with_a_worker_killed_equals_an_uninterrupted_fit(grown: tuple[Path, Path], workers: Any,
                                                                          tmp_path: Path) -> None:
    """``fit --preset zhai2014-hybrid --executor tasks`` through ``--scheduler``: after the first minibatch,
    the worker the next hybrid E-step task is assigned to dies holding it; the task reruns elsewhere and
    draws what it drew (keyed by seed, minibatch and document), so the model equals a local fit's."""
    store, _ = grown
    args = ["fit", str(store), "--preset", "zhai2014-hybrid", "--topics", "3", "--batch-size", "50", "--seed", "5"]
    plain = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "plain"), "--local-cluster", "threads",
                                      "--workers", "1"])
    assert plain.exit_code == 0, plain.output
    killer = TaskKiller(workers, "estep")
    result = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "m"), "--executor", "tasks", "--scheduler",
                                       workers.scheduler.address], obj=OnItem("online", 1, killer.arm))
    assert result.exit_code == 0, result.output
    assert killer.killed(), "no worker was killed mid-fit"
    fitted, reference = load_model(tmp_path / "m"), load_model(tmp_path / "plain")
    assert fitted.info.settings.get("estep") == "hybrid" and fitted.info.online is not None
    assert reference.info.online is not None and fitted.info.online["t"] == reference.info.online["t"] == 4
    np.testing.assert_array_equal(fitted.state.topic_word_var["default"], reference.state.topic_word_var["default"])
    np.testing.assert_array_equal(fitted.state.doc_topic_prior, reference.state.doc_topic_prior)


def two_copies_to_append(store: Path, tmp_path: Path) -> tuple[list[str], Path, Path]:
    """Two JSONL inputs of 20 new documents each, and two copies of ``store`` (killed, plain) to append them to."""
    counts = draw_planted_corpus(n_docs=240, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=11).counts["default"]
    inputs = [str(write_planted_jsonl(tmp_path / f"in{i}.jsonl", counts, 200 + 20 * i, 220 + 20 * i)) for i in (0, 1)]
    killed, plain = tmp_path / "killed.zarr", tmp_path / "plain.zarr"
    shutil.copytree(store, killed)
    shutil.copytree(store, plain)
    return inputs, killed, plain


def assert_same_documents(store: Path, reference: Path) -> None:
    assert list(Corpus.open(store).doc_ids()) == list(Corpus.open(reference).doc_ids())
    assert Corpus.open(store).n_tokens == Corpus.open(reference).n_tokens


def test_cli_append_with_a_worker_killed_equals_an_uninterrupted_append(grown: tuple[Path, Path], workers: Any,
                                                                       tmp_path: Path) -> None:
    """``append --scheduler``: the worker the first shard-encoding task is assigned to dies holding it; the
    task reruns elsewhere, and the store ends as one undisturbed append leaves it (no shard of the lost
    attempt left)."""
    store, _ = grown
    inputs, killed, plain = two_copies_to_append(store, tmp_path)
    append_corpus(plain, inputs)
    killer = TaskKiller(workers, APPEND_TASK)
    killer.arm()
    result = CliRunner().invoke(main, ["append", str(killed), *inputs, "--scheduler", workers.scheduler.address])
    assert result.exit_code == 0, result.output
    assert killer.killed(), "no worker was killed mid-append"
    assert listing(killed) == listing(plain)
    assert_same_documents(killed, plain)


def stream_config(algorithm: str, **changes: Any) -> StreamConfig:
    """A small stream of ``algorithm`` over the ``grown`` store (200 documents, 3 topics)."""
    settings: dict[str, Any] = dict(algorithm=algorithm, n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.05,
                                    batch_size=50, max_iter=20, runs=2, eval_every=100, seed=4, sweeps=4,
                                    n_particles=4, rejuvenation_steps=2, reservoir_size=50, init_docs=20,
                                    init_sweeps=5)
    settings.update(changes)
    names = StreamConfig.setting_names(algorithm)
    return StreamConfig.create(**{name: value for name, value in settings.items() if name in names})


def without_seconds(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def test_sgs_stream_with_a_worker_killed_equals_the_uninterrupted_one(grown: tuple[Path, Path], workers: Any) -> None:
    """Each SGS run is one task: the worker the first is assigned to is SIGKILLed holding it, and the
    rerun (a pure function of the run's seed and the stream) gives the same trace and counts."""
    store, _ = grown
    config = stream_config("sgs")
    reference = run_stream(Corpus.open(store), config, client=None)
    killer = TaskKiller(workers, "sgs_run")
    killer.arm()
    result = run_stream(Corpus.open(store), config, client=workers)
    assert killer.killed(), "no worker was killed mid-stream"
    assert without_seconds(result.records) == without_seconds(reference.records)
    for run in (0, 1):
        np.testing.assert_array_equal(result.snapshots[run][0]["term_topic_counts"],
                                      reference.snapshots[run][0]["term_topic_counts"])


# ----------------------------------------------------------------------------- concurrent writers


def siblings(path: Path) -> list[str]:
    """Names beside ``path`` (a writer's temporary siblings would show here)."""
    return sorted(p.name for p in path.parent.iterdir())


def test_of_two_ingests_into_one_new_store_the_first_to_commit_wins_and_the_other_fails_clean(
        local_cluster: Any, tmp_path: Path) -> None:
    """Ingest A is between two partitions of its counting pass when ingest B of other documents
    starts and commits into the same new path; A then fails naming the store, and removes its build."""
    from distributed import Client

    counts = draw_planted_corpus(n_docs=60, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=9).counts["default"]
    inputs = tmp_path / "in"
    inputs.mkdir()
    first = [write_planted_jsonl(inputs / f"a{i}.jsonl", counts, 20 * i, 20 * i + 20) for i in (0, 1)]
    other = [write_planted_jsonl(inputs / "b.jsonl", counts, 40, 60)]
    out = tmp_path / "out" / "c.zarr"
    out.parent.mkdir()
    won: list[Any] = []
    race = OnItem("counting", 1, lambda: won.append(ingest_corpus(other, out, tokenizer=NO_STOP, client=None)))
    with Client(local_cluster) as client:
        with pytest.raises(StoreExistsError, match=str(out)):
            ingest_corpus(first, out, tokenizer=NO_STOP, shard_size=20, client=client, progress=race)
    assert race.fired and won and won[0].n_kept == 20
    assert siblings(out) == ["c.zarr"]  # no build directory of the loser left beside it
    corpus = Corpus.open(out)
    assert len(corpus) == 20 and list(corpus.doc_ids()) == [f"d{d}" for d in range(40, 60)]


def test_of_two_fits_to_one_new_model_the_first_to_save_wins_and_the_other_fails_clean(
        grown: tuple[Path, Path], tmp_path: Path) -> None:
    """``fit --model M`` is after its first iteration when another fit saves a model at M; the first
    fit then ends with one error line naming M, and the other's model is what M holds."""
    store, _ = grown
    model = tmp_path / "m"
    winner = LDA(3, max_iter=2, tol=0.0, seed=8).fit(store)
    race = OnItem("fit", 1, lambda: winner.save(model))
    result = CliRunner().invoke(main, ["fit", str(store), "--model", str(model), "--topics", "3", "--max-iter", "3",
                                       "--tol", "0", "--local-cluster", "threads", "--workers", "1"], obj=race)
    assert race.fired and result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("topicflow: error:")]
    assert len(errors) == 1 and str(model) in errors[0] and "exists" in errors[0], result.output
    assert siblings(model) == ["m"]
    np.testing.assert_array_equal(load_model(model).state.topic_word_var["default"],
                                  winner.model_.state.topic_word_var["default"])


# ----------------------------------------------------------------------------- the scheduler lost


def lost_scheduler_command(command: str, store: Path, model: Path, tmp_path: Path) -> tuple[list[str], OnItem, Path]:
    """The command line, the event that closes the scheduler (given later) and the output path to check."""
    counts = draw_planted_corpus(n_docs=240, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=10).counts["default"]
    inputs = [str(write_planted_jsonl(tmp_path / f"in{i}.jsonl", counts, 200 + 20 * i, 220 + 20 * i)) for i in (0, 1)]
    if command == "ingest":
        out = tmp_path / "out" / "c.zarr"
        return ["ingest", *inputs, "--out", str(out), "--stop-words", "none", "--shard-size", "20"], \
            OnItem("counting", 1, lambda: None), out
    if command == "append":
        copy = tmp_path / "out" / "c.zarr"
        shutil.copytree(store, copy)
        return ["append", str(copy), *inputs], OnItem("writing shards", 1, lambda: None), copy
    if command == "infer":
        out = tmp_path / "out" / "dt.zarr"
        return ["infer", str(model), str(store), "--out", str(out)], OnItem("infer", 1, lambda: None), out
    out = tmp_path / "out" / "stream"
    if command == "stream-dsgs":  # a parameter server (an actor) and its sampler loops, run after run
        return ["stream", str(store), "--out", str(out), "--algo", "dsgs", "--topics", "3", "--runs", "2",
                "--batch-size", "50", "--max-iter", "20"], OnItem("dsgs", 1, lambda: None), out  # after run 0
    if command == "stream-gibbs":  # a run held by an actor, asked for its evaluation points
        return ["stream", str(store), "--out", str(out), "--algo", "gibbs", "--topics", "3", "--runs", "1",
                "--sweeps", "4", "--eval-every", "2"], OnItem("stream gibbs", 1, lambda: None), out  # after point 0
    return ["stream", str(store), "--out", str(out), "--algo", "sgs", "--topics", "3", "--runs", "3",
            "--batch-size", "50", "--max-iter", "20"], OnItem("sgs", 1, lambda: None), out  # before run 2's result


@pytest.mark.parametrize("command", ["ingest", "append", "infer", "stream", "stream-dsgs", "stream-gibbs"])
def test_command_with_its_scheduler_lost_ends_clearly_and_changes_nothing(
        command: str, grown: tuple[Path, Path], doomed_cluster: Any, tmp_path: Path) -> None:
    store, model = grown
    args, lose, out = lost_scheduler_command(command, store, model, tmp_path)
    lose.action = doomed_cluster.close
    before = listing(out) if out.exists() else None
    address = doomed_cluster.scheduler_address
    result = CliRunner().invoke(main, [*args, "--scheduler", address], obj=lose)
    assert lose.fired and result.exit_code == 2, result.output
    assert_one_error_naming(result.output, address)
    if before is None:
        assert not (tmp_path / "out").exists() or siblings(out) == [], siblings(out)
    else:
        assert listing(out) == before


@pytest.mark.parametrize("algorithm", ["sgs", "dsgs"])
def test_a_second_stream_into_the_same_new_out_is_refused_while_the_first_runs(algorithm: str,
                                                                              grown: tuple[Path, Path],
                                                                              tmp_path: Path) -> None:
    """Stream B starts (and passes the check that OUT is new) while stream A, given the same new OUT,
    has its first run's result and waits for its second; B is refused at once naming OUT, A ends as
    it would alone."""
    store, _ = grown
    out = tmp_path / "out"
    args = ["stream", str(store), "--out", str(out), "--algo", algorithm, "--topics", "3", "--runs", "2",
            "--batch-size", "50", "--max-iter", "20", "--eval-every", "100", "--local-cluster", "threads",
            "--workers", "1"]
    second: list[Any] = []
    race = OnItem(algorithm, 1, lambda: second.append(CliRunner().invoke(main, args)))
    first = CliRunner().invoke(main, args, obj=race)
    assert race.fired and first.exit_code == 0, first.output
    loser = second[0]
    assert loser.exit_code == 2, loser.output
    errors = [line for line in loser.output.splitlines() if line.startswith("topicflow: error:")]
    assert len(errors) == 1 and str(out) in errors[0] and "locked by another topicflow process" in errors[0], loser.output
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert sorted({r["point"] for r in trace}) == [50, 100, 150, 200] and {r["run"] for r in trace} == {0, 1}
    assert load_model(out / "model").state.n_topics == 3


# ----------------------------------------------------------------------------- the whole command SIGKILLed


def test_ingest_killed_while_writing_shards_leaves_no_store_and_a_rerun_equals_an_uninterrupted_one(
        tmp_path: Path) -> None:
    """``topicflow ingest`` is SIGKILLed (with its process group) after it wrote its first shard: no store
    is at ``--out`` (the build is under a hidden temporary name, which stays), and the rerun ends as one
    ingest would."""
    counts = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=13).counts["default"]
    source = str(write_planted_jsonl(tmp_path / "in.jsonl", counts, 0, 120))
    out = tmp_path / "out" / "c.zarr"
    args = ["ingest", source, "--out", str(out), "--shard-size", "30", "--local-cluster", "threads", "--workers", "1"]
    run_until_killed("writing shards", 1, args)
    assert not out.exists()
    (left,) = siblings(out)  # the dead run's build, under a hidden name that no reader opens; as infer's,
    assert left.startswith(".c.zarr.tmp-")  # nothing removes it (a dead writer's cannot be told from a live one's)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    ingest_corpus([source], tmp_path / "plain.zarr", shard_size=30)
    assert listing(out) == listing(tmp_path / "plain.zarr")
    assert_same_documents(out, tmp_path / "plain.zarr")
    assert siblings(out) == [left, "c.zarr"]


def test_append_killed_between_shard_writes_leaves_the_store_and_a_rerun_equals_an_uninterrupted_one(
        grown: tuple[Path, Path], tmp_path: Path) -> None:
    """``topicflow append`` is SIGKILLed (with its process group) after it wrote its first shard; the
    store is as before, and the rerun removes the dead run's shards and ends as one append would."""
    store, _ = grown
    inputs, killed, plain = two_copies_to_append(store, tmp_path)
    before = (read_manifest(killed), list(Corpus.open(killed).doc_ids()))
    run_until_killed("writing shards", 1, ["append", str(killed), *inputs, "--local-cluster", "threads",
                                          "--workers", "1"])
    assert (read_manifest(killed), list(Corpus.open(killed).doc_ids())) == before
    append_corpus(killed, inputs)
    append_corpus(plain, inputs)
    assert listing(killed) == listing(plain)  # the killed run's shards are gone
    assert_same_documents(killed, plain)


def test_stream_killed_after_a_saved_state_resumes_to_the_uninterrupted_stream(grown: tuple[Path, Path],
                                                                              tmp_path: Path) -> None:
    """``topicflow stream --algo pf --checkpoint-every 1`` is SIGKILLed (with its process group) when it
    asks for its third evaluation point, after the state of the second was saved; ``--resume`` ends with
    the trace and model of an uninterrupted stream (records written after the saved state are replaced)."""
    store, _ = grown
    common = ["stream", str(store), "--algo", "pf", "--topics", "3", "--particles", "4", "--rejuv", "2",
              "--reservoir", "50", "--init-docs", "20", "--init-sweeps", "5", "--runs", "1", "--eval-every", "40",
              "--checkpoint-every", "1", "--seed", "4", "--local-cluster", "threads", "--workers", "1"]
    plain = CliRunner().invoke(main, [*common, "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    out = tmp_path / "killed"
    run_until_killed("stream pf", 2, [*common, "--out", str(out)])
    assert (out / "state").is_dir()
    resumed = CliRunner().invoke(main, [*common, "--out", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output

    def trace(path: Path) -> list[dict[str, Any]]:
        return without_seconds([json.loads(line) for line in (path / "trace.jsonl").read_text().splitlines()])
    assert trace(out) == trace(tmp_path / "plain")
    np.testing.assert_array_equal(load_model(out / "model").state.topic_word_var["default"],
                                  load_model(tmp_path / "plain" / "model").state.topic_word_var["default"])


def test_infer_killed_between_parts_writes_nothing_and_a_rerun_equals_an_uninterrupted_one(
        grown: tuple[Path, Path], tmp_path: Path) -> None:
    """``topicflow infer`` is SIGKILLed after its first part; OUT does not exist, the rerun writes what an
    uninterrupted run writes. The killed run's hidden temporary directory stays beside OUT."""
    store, model = grown
    out = tmp_path / "dt.zarr"
    args = ["infer", str(model), str(store), "--out", str(out), "--local-cluster", "threads", "--workers", "1"]
    run_until_killed("infer", 1, args)
    assert not out.exists()
    (left,) = siblings(out)  # the dead run's temporary directory, which nothing removes (no lock tells
    assert left.startswith(".dt.zarr.tmp-")  # a dead writer's from a running one's)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    infer_doc_topics(load_model(model), Corpus.open(store), tmp_path / "reference.zarr", client=None)
    assert_same_doc_topics(out, tmp_path / "reference.zarr")
    assert siblings(out) == [left, "dt.zarr", "reference.zarr"]


@pytest.mark.parametrize("algorithm", ["gibbs", "olda", "incgibbs"])
def test_actor_stream_with_a_worker_killed_equals_the_uninterrupted_one(algorithm: str, grown: tuple[Path, Path],
                                                                        workers: Any) -> None:
    """When the driver asks for its second evaluation point, the worker holding the run's actor is
    killed (and removed); the run is rebuilt from its snapshot and replayed: same trace and counts."""
    store, _ = grown
    config = stream_config(algorithm, runs=1, eval_every=2, sweeps=4)
    reference = run_stream(Corpus.open(store), config, client=None)
    killed: list[str] = []

    def kill_the_actor_worker() -> None:
        address = workers_with_actors(workers)[0]
        kill_worker(workers, address)
        killed.append(address)

    result = run_stream(Corpus.open(store), config, client=workers,
                        progress=OnItem(f"stream {algorithm}", 1, kill_the_actor_worker))
    assert killed, "no worker was killed"
    assert without_seconds(result.records) == without_seconds(reference.records)
    np.testing.assert_array_equal(result.model.state.topic_word_var["default"],
                                  reference.model.state.topic_word_var["default"])
