"""Workers without a shared disk: every command on a process cluster whose workers cannot see the driver's files.

The cluster (two worker processes, one thread each, shared by the module) starts each worker in its
own temporary directory: a preload moves the process into the worker's ``local_directory`` (also
after a nanny restarts a killed worker), so a relative or otherwise driver-local path that leaks to a
worker fails there; the first test proves it does. The corpus store and the models live on moto's S3
server (tests/objstore.py); the cluster's workers get its settings from the dask config they start
with. Ingest (JSONL, parquet) writes its shards from the workers straight into the s3:// store; batch
and online VB, collapsed Gibbs and PCVB0 (whose per-token state z, q the tasks keep in a run directory
beside the store, here on s3), batch VB's warm start (gamma, in the same kind of run directory), infer and
export run with store and model on s3://; a worker killed in the middle of a batch-VB iteration or of a Gibbs
sweep on s3 does not change the model, and a failed Gibbs fit leaves nothing beside the store.
"""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Iterator

import dask.config
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.io.outputs import assignment_layer, assignment_scratch
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.io.storage import StoragePath
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.testing.faults import TaskKiller, restore_workers

WORDS = [["apple", "banana", "cherry", "grape"], ["dog", "cat", "mouse", "horse"], ["red", "green", "blue", "black"]]

#: Worker preload (the text of a module, which distributed imports in every worker process it starts):
#: run in the worker's own scratch directory, never in the directory the test was started from.
SANDBOX = """
import os


def dask_setup(worker):
    os.chdir(worker.local_directory)
"""


def documents(n: int, prefix: str, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = [WORDS[i % 3][j] for j in rng.integers(0, 4, size=12)] + [f"w{int(rng.integers(0, 8))}"]
        docs.append({"id": f"{prefix}{i}", "text": " ".join(words)})
    return docs


@pytest.fixture(scope="module")
def setting(s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A bucket with the inputs, the S3 settings in dask.config, and the sandboxed process cluster."""
    from distributed import Client, LocalCluster

    fs = s3_server.filesystem()
    bucket = s3_server.new_bucket()
    local = tmp_path_factory.mktemp("driver")
    jsonl = "\n".join(json.dumps(d) for d in documents(45, "j", 1)).encode()
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(documents(30, "p", 2)), sink, row_group_size=7)
    for name, data in {"in.jsonl": jsonl, "in.parquet": sink.getvalue().to_pybytes()}.items():
        fs.pipe(f"{bucket}/input/{name}", data)
        (local / name).write_bytes(data)
    workers = tmp_path_factory.mktemp("workers")
    with dask.config.set({"topicflow.storage-options": s3_server.storage_options}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                          local_directory=str(workers), preload=[SANDBOX]) as cluster:
            with Client(cluster) as client:
                yield {"bucket": bucket, "fs": fs, "local": local, "client": client, "workers": workers,
                       "address": cluster.scheduler_address}


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def test_workers_cannot_see_driver_relative_paths(setting: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    client = setting["client"]
    monkeypatch.chdir(setting["local"])
    directories = client.run(os.getcwd)
    assert len(set(directories.values())) == 2
    assert all(Path(d).is_relative_to(setting["workers"]) for d in directories.values())
    assert _read("in.jsonl")  # the driver reads it; a worker, in its own directory, does not find it
    with pytest.raises(FileNotFoundError):
        client.submit(_read, "in.jsonl", pure=False).result()
    # So ingest sends the workers its local inputs as absolute paths: a relative one works.
    store = f"s3://{setting['bucket']}/stores/relative.zarr"
    assert ingest_corpus(["in.jsonl"], store, shard_size=100, client=client).n_kept == 45


def run(*args: str) -> Any:
    from topicflow.cli import main

    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def stores(setting: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One store ingested from s3:// JSONL and parquet by the workers into s3://, and the same on local disk."""
    bucket, local, client = setting["bucket"], setting["local"], setting["client"]
    store, here = f"s3://{bucket}/stores/news.zarr", tmp_path_factory.mktemp("local") / "news.zarr"
    inputs = [f"s3://{bucket}/input/in.jsonl", f"s3://{bucket}/input/in.parquet"]
    result = ingest_corpus(inputs, store, shard_size=15, client=client)
    reference = ingest_corpus([local / "in.jsonl", local / "in.parquet"], here, shard_size=15)
    return {"store": store, "local": here, "result": result, "reference": reference}


def test_ingest_from_s3_jsonl_and_parquet_by_the_workers(setting: dict[str, Any], stores: dict[str, Any]) -> None:
    corpus, reference = Corpus.open(stores["store"]), Corpus.open(stores["local"])
    assert stores["result"].n_kept == stores["reference"].n_kept == 75 and corpus.n_shards == 5
    assert [s.checksum for s in corpus.shards] == [s.checksum for s in reference.shards]
    assert corpus.verify() == []
    # Only the listed shards remain: the run's token files and any lost attempt's shards were removed.
    prefix = stores["store"].removeprefix("s3://")
    left = {Path(p).name for p in setting["fs"].ls(f"{prefix}/shards", detail=False, refresh=True)}
    assert left - {"zarr.json"} == {s.shard_id for s in corpus.shards}


def _die_at_second_shard(flag: str) -> None:
    """On this worker: at the first object write of its second shard, SIGKILL itself (once per test run).

    The first worker to get there claims ``flag`` (created exclusively) and writes into it the name of the
    shard it finished before, whose result dies with it, so the scheduler must write that shard again.
    """
    from topicflow.io import storage

    done: list[str] = []

    def hook(url: str) -> None:
        if "/shards/" not in url or "/.tokens-" in url:
            return
        shard = url.split("/shards/", 1)[1].split("/", 1)[0]
        if done and shard != done[-1]:
            try:
                handle = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(handle, done[-1].encode())
            os.close(handle)
            os.kill(os.getpid(), signal.SIGKILL)
        if not done or done[-1] != shard:
            done.append(shard)

    storage.before_write = hook


def _no_hook() -> None:
    from topicflow.io import storage

    storage.before_write = None


def test_worker_killed_while_ingest_writes_shards_leaves_only_the_winning_attempts(
        setting: dict[str, Any], stores: dict[str, Any], tmp_path: Path) -> None:
    """A worker dies as it starts writing its second shard; its first shard is complete on s3, but that
    task's result died with it, so the shard is written again under a new attempt name. The manifest
    lists the new attempt, the stale one is removed after the commit, and the store equals local disk.
    Then the workers append to it."""
    client, bucket = setting["client"], setting["bucket"]
    flag = str(tmp_path / "killed")
    client.run(_die_at_second_shard, flag)
    try:
        store = f"s3://{bucket}/stores/killed-ingest.zarr"
        ingest_corpus([f"s3://{bucket}/input/in.jsonl"], store, shard_size=5, client=client)
    finally:
        restore_workers(client, 2)  # the nanny restarts the killed worker (or is replaced, with a warning)
        client.run(_no_hook)
    stale = Path(flag).read_text()  # the kill happened: the first worker to reach a second shard died
    reference = ingest_corpus([setting["local"] / "in.jsonl"], tmp_path / "here.zarr", shard_size=5)
    corpus = Corpus.open(store)
    assert len(corpus) == reference.n_kept == 45 and corpus.verify() == []
    assert [s.checksum for s in corpus.shards] == [s.checksum for s in Corpus.open(tmp_path / "here.zarr").shards]
    left = {Path(p).name for p in setting["fs"].ls(f"{bucket}/stores/killed-ingest.zarr/shards", detail=False,
                                                   refresh=True)}
    assert left - {"zarr.json"} == {s.shard_id for s in corpus.shards} and stale not in left
    assert stale.rsplit("-", 1)[0] in {s.shard_id.rsplit("-", 1)[0] for s in corpus.shards}  # same partition

    # An append by the same workers: its shards, too, go straight into the store; same result as on local disk.
    appended = append_corpus(store, [f"s3://{bucket}/input/in.parquet"], client=client)
    expected = append_corpus(tmp_path / "here.zarr", [setting["local"] / "in.parquet"])
    assert (appended.n_kept, appended.n_shards, appended.vocab_version) == (
        expected.n_kept, expected.n_shards, expected.vocab_version)
    corpus, here = Corpus.open(store), Corpus.open(tmp_path / "here.zarr")
    assert [s.checksum for s in corpus.shards] == [s.checksum for s in here.shards] and corpus.verify() == []


def test_fit_infer_export_with_store_and_model_on_s3(setting: dict[str, Any], stores: dict[str, Any],
                                                     tmp_path: Path) -> None:
    bucket, store, here = setting["bucket"], stores["store"], str(stores["local"])
    batch, online = f"s3://{bucket}/models/batch", f"s3://{bucket}/models/online"
    scheduler, threads = ["--scheduler", setting["address"]], ["--local-cluster", "threads"]
    fit_batch = ["--topics", "3", "--max-iter", "2", "--seed", "5"]
    fit_online = ["--method", "online", "--batch-size", "40", "--topics", "3", "--seed", "5"]
    run("fit", store, "--model", batch, *fit_batch, *scheduler)
    run("fit", here, "--model", str(tmp_path / "batch"), *fit_batch, *threads)
    run("fit", store, "--model", online, *fit_online, *scheduler)
    run("fit", here, "--model", str(tmp_path / "online"), *fit_online, *threads)
    for remote_model, local_model in ((batch, tmp_path / "batch"), (online, tmp_path / "online")):
        assert_array_equal(load_model(remote_model).state.topic_word_var["default"],
                           load_model(local_model).state.topic_word_var["default"])

    run("infer", batch, store, "--out", str(tmp_path / "theta.zarr"), *scheduler)
    run("infer", str(tmp_path / "batch"), here, "--out", str(tmp_path / "theta-local.zarr"), *threads)
    for (ids, theta), (local_ids, local_theta) in zip(DocTopics.open(tmp_path / "theta.zarr"),
                                                      DocTopics.open(tmp_path / "theta-local.zarr"), strict=True):
        assert list(ids) == list(local_ids)
        assert_array_equal(theta, local_theta)
    run("export", batch, "--out", str(tmp_path / "m.npz"))
    with np.load(tmp_path / "m.npz") as exported:
        assert_array_equal(exported["topic_word"].shape, (3, len(Corpus.open(store).vocabulary())))


def test_worker_killed_mid_fit_on_s3_gives_the_same_model(setting: dict[str, Any], stores: dict[str, Any]) -> None:
    """After the first iteration a scheduler plugin is armed; it SIGKILLs the worker the next E-step task
    is assigned to, so the worker dies holding a task of iteration 2 (an event, not a timer). The nanny
    starts a new worker, again in its own directory; the lost tasks run again, reading their shards from
    s3, and the model equals the uninterrupted fit bit for bit (the bar of tests/pipeline/test_fault_tolerance.py)."""
    client = setting["client"]
    config = VBConfig(n_topics=3, max_iter=3, tol=0.0, seed=2)
    reference = fit_batch_vb(Corpus.open(stores["local"]), config).state  # the same shards on local disk, threads
    killer = TaskKiller(client, "estep")
    result = fit_batch_vb(Corpus.open(stores["store"]), config, client=client,
                          on_iteration=lambda record, state: killer.arm())
    assert killer.killed(), "no worker was killed mid-iteration"
    assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])
    assert_array_equal(result.state.doc_topic_prior, reference.doc_topic_prior)
    restore_workers(client, 2)  # the nanny restarts the killed worker (or is replaced, with a warning)
    assert all(Path(d).is_relative_to(setting["workers"]) for d in client.run(os.getcwd).values())


def test_gibbs_and_pcvb0_keep_their_per_token_state_on_s3(setting: dict[str, Any], stores: dict[str, Any],
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tasks on the sandboxed workers read and write z (Gibbs) and q (PCVB0) in a run directory beside the
    s3 store, never on the driver's disk; it is gone afterwards, and the models equal the local fits."""
    bucket, store, here = setting["bucket"], stores["store"], str(stores["local"])
    runs: list[Any] = []

    def recording(make: Any) -> Any:
        def scratch_location(*args: Any) -> Any:
            runs.append(make(*args))
            return runs[-1]
        return scratch_location

    monkeypatch.setattr(assignment_layer, "scratch_location", recording(assignment_layer.scratch_location))
    monkeypatch.setattr(assignment_scratch, "scratch_location", recording(assignment_scratch.scratch_location))
    methods = {"gibbs": (["--method", "gibbs", "--topics", "2", "--max-iter", "2"], ["--executor", "threads"]),
               # the SCVB0 start keeps each block's N^theta rows in the run directory between its pass and draw
               "gibbs-scvb0": (["--method", "gibbs", "--topics", "2", "--max-iter", "2", "--gibbs-start", "scvb0"],
                               ["--executor", "threads"]),
               "pcvb0": (["--family", "hdp", "--method", "pcvb0", "--truncation", "4", "--passes", "2"],
                         ["--local-cluster", "threads"])}
    for name, (options, threads) in methods.items():
        remote = f"s3://{bucket}/models/{name}"
        run("fit", store, "--model", remote, *options, "--seed", "3", "--scheduler", setting["address"])
        run("fit", here, "--model", str(tmp_path / name), *options, "--seed", "3", *threads)
        got, expected = load_model(remote), load_model(tmp_path / name)
        assert_array_equal(got.state.topic_word_var["default"], expected.state.topic_word_var["default"])
        assert_array_equal(np.asarray(got.state.doc_topic_prior), np.asarray(expected.state.doc_topic_prior))
    remote_runs = [r for r in runs if isinstance(r, StoragePath)]
    assert len(remote_runs) == 3 and all(r.url.startswith(f"s3://{bucket}/stores/.topicflow-scratch-")
                                         for r in remote_runs)
    assert not any(r.exists() for r in remote_runs)  # removed when the fit ended


def _scratch_objects(fs: Any, prefix: str) -> list[str]:
    """The objects under ``prefix`` (a bucket-relative key), read afresh (the workers wrote them)."""
    fs.invalidate_cache()
    return sorted(str(p)[len(prefix) + 1:] for p in fs.find(prefix))


def test_warm_start_keeps_gamma_on_s3_beside_the_store(setting: dict[str, Any], stores: dict[str, Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch VB's warm start: the sandboxed workers write and read each shard's gamma under a prefix beside the
    s3 store (never on a disk of theirs), one iteration at a time; the model equals the local warm-start fit
    bit for bit, and the prefix is gone when the fit ends, also when it fails."""
    from topicflow.pipeline.vb import batch

    client, fs = setting["client"], setting["fs"]
    locations: list[Any] = []

    def recording(*args: Any) -> Any:
        locations.append(batch.scratch_location.__wrapped__(*args))  # type: ignore[attr-defined]
        return locations[-1]

    recording.__wrapped__ = batch.scratch_location  # type: ignore[attr-defined]
    monkeypatch.setattr(batch, "scratch_location", recording)
    config = VBConfig(n_topics=3, max_iter=3, tol=0.0, seed=4, warm_start=True, cold_iterations=1)
    with monkeypatch.context() as patch:  # the references on threads of this process, not the module's cluster
        patch.setattr(batch, "current_client", lambda client=None: client)
        warm_local = fit_batch_vb(Corpus.open(stores["local"]), config).state
        cold_local = fit_batch_vb(Corpus.open(stores["local"]), VBConfig(n_topics=3, max_iter=3, tol=0.0,
                                                                         seed=4)).state
    assert isinstance(locations[0], Path)  # the reference's gamma: beside the local store
    assert not np.array_equal(warm_local.topic_word_var["default"], cold_local.topic_word_var["default"])

    seen: dict[int, list[str]] = {}
    shards = [s.shard_id for s in Corpus.open(stores["store"]).shards]

    def look(record: Any, state: Any) -> None:
        seen[record.iteration] = _scratch_objects(fs, locations[-1].url.removeprefix("s3://"))

    result = fit_batch_vb(Corpus.open(stores["store"]), config, client=client, on_iteration=look)
    remote = locations[-1]
    assert isinstance(remote, StoragePath) and remote.url.startswith(f"s3://{setting['bucket']}/stores/.topicflow-")
    # Cold iteration 0 writes nothing; iterations 1 and 2 write every shard's gamma, the older one dropped.
    assert seen == {0: [], 1: [f"iter-1/{s}.npy" for s in shards], 2: [f"iter-2/{s}.npy" for s in shards]}
    assert_array_equal(result.state.topic_word_var["default"], warm_local.topic_word_var["default"])
    assert_array_equal(result.state.doc_topic_prior, warm_local.doc_topic_prior)
    assert not remote.exists()

    def fail_after_warm_iteration(record: Any, state: Any) -> None:
        if record.iteration == 1:
            seen[-1] = _scratch_objects(fs, locations[-1].url.removeprefix("s3://"))
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        fit_batch_vb(Corpus.open(stores["store"]), config, client=client, on_iteration=fail_after_warm_iteration)
    assert seen[-1] == [f"iter-1/{s}.npy" for s in shards] and not locations[-1].exists()


GIBBS = {"n_topics": 2, "sweeps": 3, "block_size": 15, "seed": 3}  # five blocks: five tasks a sweep


def _local_gibbs(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The reference Gibbs fit on threads of this process (not on the module's cluster)."""
    from topicflow.pipeline.gibbs import fit as gibbs_fit

    with monkeypatch.context() as patch:
        patch.setattr(gibbs_fit, "current_client", lambda client=None: client)
        return gibbs_fit.fit_gibbs(corpus, gibbs_fit.GibbsConfig(**GIBBS))


def test_worker_killed_mid_gibbs_sweep_on_s3_gives_the_same_chain(
        setting: dict[str, Any], stores: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """After sweep 1 the scheduler plugin is armed and SIGKILLs the worker the next partition task goes to (a
    task of sweep 2, event-triggered). The scheduler runs it again on the other worker, which reads the
    block's z of sweep 1 from s3 and writes the same z of sweep 2; the chain's counts and the model equal
    the undisturbed fit on local disk bit for bit."""
    from topicflow.pipeline.gibbs.fit import GibbsConfig, fit_gibbs

    client = setting["client"]
    reference = _local_gibbs(Corpus.open(stores["local"]), monkeypatch)
    killer = TaskKiller(client, "gibbs-part")
    try:
        result = fit_gibbs(Corpus.open(stores["store"]), GibbsConfig(**GIBBS), client=client,
                           on_sweep=lambda record, state: killer.arm() if record.sweep == 1 else None)
    finally:
        restore_workers(client, 2)  # the nanny restarts the killed worker (or is replaced, with a warning)
    assert killer.killed() and "-2-" in killer.killed()[0]["key"], killer.killed()
    assert_array_equal(result.term_topic, reference.term_topic)
    assert_array_equal(result.topic_counts, reference.topic_counts)
    assert_array_equal(result.state.topic_word_var["default"], reference.state.topic_word_var["default"])
    assert [r.log_likelihood for r in result.trace] == [r.log_likelihood for r in reference.trace]


def test_worker_killed_mid_pcvb0_iteration_on_s3_gives_the_same_model(
        setting: dict[str, Any], stores: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """PCVB0 keeps each token's q in a run directory beside the s3 store. After the first iteration the
    scheduler plugin is armed and SIGKILLs the worker the next sweep task goes to (one of the second
    iteration). The task runs again on the other worker, reads the first iteration's q from s3 and writes
    the same q again;
    the model equals the undisturbed fit on local disk (threads of this process) bit for bit."""
    from topicflow.models.hdp.params import HDPParams
    from topicflow.pipeline.collapsed import batch as pcvb0
    from topicflow.pipeline.collapsed.config import CollapsedConfig

    config = CollapsedConfig(method="pcvb0", passes=3, params=HDPParams(truncation=4, seed=3))
    with monkeypatch.context() as patch:  # the reference: not on the module's cluster
        patch.setattr(pcvb0, "current_client", lambda client=None: client)
        reference = pcvb0.run_pcvb0(Corpus.open(stores["local"]), config)
    client = setting["client"]
    killer = TaskKiller(client, "pcvb0-sweep")
    try:
        result = pcvb0.run_pcvb0(Corpus.open(stores["store"]), config, client=client,
                                 on_iteration=lambda record, state: killer.arm() if record.iteration == 0 else None)
    finally:
        restore_workers(client, 2)  # the nanny restarts the killed worker (or is replaced, with a warning)
    assert killer.killed() and "-1-" in killer.killed()[0]["key"], killer.killed()  # iterations count from 0
    assert_array_equal(result.state.topic_word, reference.state.topic_word)
    assert_array_equal(result.state.tables, reference.state.tables)
    assert [r.log_likelihood for r in result.trace] == [r.log_likelihood for r in reference.trace]


def _fail_first_sweep_writer(flag: str) -> None:
    """On this worker: the first task to write a block's z of the start (claiming ``flag``) raises there, while
    the other worker's start task is running on."""
    from topicflow.io import storage

    def hook(url: str) -> None:
        if "/z.zarr/sweep-0/" not in url:
            return
        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        raise OSError(f"injected write failure at {url}")

    storage.before_write = hook


def test_failed_gibbs_fit_on_s3_leaves_nothing_beside_the_store(
        setting: dict[str, Any], stores: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition task of the start (sweep 0) fails while the other worker's runs: the fit raises only
    once no task of it runs any more, and then removes its run prefix, so nothing is left beside the store
    (before, a still-running task could write its block after the removal: seen once in two runs here)."""
    from topicflow.io.outputs import assignment_layer as layer
    from topicflow.pipeline.gibbs.fit import GibbsConfig, fit_gibbs

    client, fs = setting["client"], setting["fs"]
    runs: list[Any] = []
    make = layer.scratch_location
    monkeypatch.setattr(layer, "scratch_location", lambda *args: runs.append(make(*args)) or runs[-1])
    client.run(_fail_first_sweep_writer, str(tmp_path / "claimed"))
    try:
        with pytest.raises(Exception, match="injected write failure"):
            fit_gibbs(Corpus.open(stores["store"]), GibbsConfig(**GIBBS), client=client)
    finally:
        client.run(_no_hook)
    assert len(runs) == 1 and isinstance(runs[0], StoragePath)
    fs.invalidate_cache()
    assert fs.find(runs[0].url.removeprefix("s3://")) == []
