"""A Dask worker killed in the middle of an iteration does not change the result.

Partition tasks are pure functions of their inputs (counter-based randomness, no worker state), so
the scheduler's recomputation of the lost tasks gives identical statistics, and the fixed reduction
tree sums them in the same order.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.pipeline.vb.online import OnlineConfig, fit_online
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=3000, n_topics=10, n_terms=400, doc_length=80, alpha=0.2, seed=4)
    return write_test_store(tmp_path_factory.mktemp("fault") / "c.zarr", truth.counts, shard_size=100)


def kill_worker(client: Any, address: str) -> None:
    """SIGKILL the worker process at ``address`` (its nanny starts a new one)."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)


class WorkerKiller:
    """Once armed, kills the first worker seen running an E-step task (its nanny starts a new one)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.armed = threading.Event()
        self.killed: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.armed.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for address, keys in self.client.processing().items():
                if any("estep" in str(key) for key in keys):
                    kill_worker(self.client, address)
                    self.killed.append(address)
                    return
            time.sleep(0.005)


def run_with_killer(fit: Callable[[Any, Callable[..., None]], Any]) -> tuple[Any, list[str]]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            killer = WorkerKiller(client)

            def arm_after_first(record: Any, state: Any) -> None:
                killer.armed.set()

            result = fit(client, arm_after_first)
            killer.thread.join(timeout=1)
    return result, killer.killed


def test_batch_fit_survives_a_killed_worker(store: Path) -> None:
    config = VBConfig(n_topics=10, max_iter=4, tol=0.0, seed=1)
    reference = fit_batch_vb(Corpus.open(store), config).state
    result, killed = run_with_killer(
        lambda client, hook: fit_batch_vb(Corpus.open(store), config, client=client, on_iteration=hook)
    )
    assert killed, "no worker was killed mid-iteration"
    np.testing.assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])
    np.testing.assert_array_equal(result.state.doc_topic_prior, reference.doc_topic_prior)


def test_online_fit_survives_a_killed_worker(store: Path) -> None:
    config = VBConfig(n_topics=10, seed=2)
    online = OnlineConfig(batch_size=1000, pieces=8, executor="tasks")
    reference = fit_online(Corpus.open(store), config, online).state
    result, killed = run_with_killer(
        lambda client, hook: fit_online(Corpus.open(store), config, online, client=client, on_minibatch=hook)
    )
    assert killed, "no worker was killed mid-minibatch"
    np.testing.assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])


def test_online_e_step_servers_are_replaced_when_their_worker_dies(store: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The E-step actors die with their worker; the minibatch is rerun on new ones, same result."""
    from distributed import Client, LocalCluster

    config = VBConfig(n_topics=10, seed=5)
    online = OnlineConfig(batch_size=500, executor="servers")
    reference = fit_online(Corpus.open(store), config, online).state
    killed = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:

            def kill_one_worker(record: Any, state: Any) -> None:
                if record.t == 2:
                    address = sorted(client.scheduler_info()["workers"])[0]
                    kill_worker(client, address)
                    killed.append(address)

            with caplog.at_level("WARNING", logger="topicflow.pipeline.vb.estep_servers"):
                state = fit_online(Corpus.open(store), config, online, client=client, on_minibatch=kill_one_worker).state
    assert killed and "restarting servers" in caplog.text
    np.testing.assert_array_equal(state.topic_word_var["default"], reference.topic_word_var["default"])
    np.testing.assert_array_equal(state.doc_topic_prior, reference.doc_topic_prior)


class KillAfterFirstPoint:
    """A progress reporter that SIGKILLs one worker once the stream has passed its first evaluation point."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.killed: list[str] = []

    def track(self, items: Any, *, total: int | None, desc: str, unit: str) -> Any:
        for index, item in enumerate(items):
            if index == 1:
                address = sorted(self.client.scheduler_info()["workers"])[0]
                kill_worker(self.client, address)
                self.killed.append(address)
            yield item

    def message(self, text: str) -> None:
        return None


def test_stream_survives_a_killed_worker(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    from topicflow.pipeline.streaming.config import StreamConfig
    from topicflow.pipeline.streaming import run_stream

    truth = draw_planted_corpus(n_docs=400, n_topics=3, n_terms=60, doc_length=30, alpha=0.1, seed=6)
    labels = [f"t{k}" for k in np.argmax(truth.doc_topic, axis=1)]
    store = write_test_store(tmp_path / "s.zarr", truth.counts, shard_size=100, labels=labels)
    config = StreamConfig.create(algorithm="pf", n_topics=3, n_particles=16, rejuvenation_steps=10, reservoir_size=300,
                          init_docs=40, init_sweeps=20, runs=3, eval_every=40, seed=2)
    reference = run_stream(Corpus.open(store), config, client=None)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            killer = KillAfterFirstPoint(client)
            result = run_stream(Corpus.open(store), config, client=client, recovery_every=3, progress=killer)
    assert killer.killed, "no worker was killed"
    strip = lambda records: [{k: v for k, v in r.items() if k != "seconds"} for r in records]  # noqa: E731
    assert strip(result.records) == strip(reference.records)
    np.testing.assert_array_equal(result.model.state.topic_word_var["default"],
                                  reference.model.state.topic_word_var["default"])


def kill_when_loop_runs(client: Any, address: str, killed: list[str]) -> threading.Thread:
    """A thread that SIGKILLs worker ``address`` once a DSGS loop has run on it for a second."""

    def run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any("dsgs-loop" in str(key) for key in client.processing().get(address, ())):
                time.sleep(1.0)
                kill_worker(client, address)
                killed.append(address)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_dsgs_survives_a_killed_sampler_worker(store: Path) -> None:
    """A loop killed with its worker is rerun; its unpushed minibatch is handed out again, none is lost
    or counted twice. With staleness 0 (sequential) the result must still equal SGS exactly."""
    from distributed import Client, LocalCluster

    from topicflow.models.lda.streaming.sgs import SGSParams
    from topicflow.pipeline.streaming.dsgs import run_dsgs
    from topicflow.pipeline.streaming.sgs import run_sgs

    params = SGSParams(n_topics=10, doc_topic_prior=0.1, topic_word_prior=0.05, decay=0.9, max_iter=40, patience=40,
                       seed=3)
    reference = run_sgs(Corpus.open(store), params, batch_size=100)
    killed: list[str] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            sampler_worker = sorted(client.scheduler_info()["workers"])[1]  # the server lives on the first
            killer = kill_when_loop_runs(client, sampler_worker, killed)
            result = run_dsgs(Corpus.open(store), params, batch_size=100, client=client, n_workers=2, staleness=0)
            killer.join(timeout=1)
    assert killed, "no worker was killed"
    assert result.server_stats["push_order"] == list(range(30))
    np.testing.assert_array_equal(result.state.term_topic_counts, reference.state.term_topic_counts)
    np.testing.assert_array_equal(result.state.topic_counts, reference.state.topic_counts)
    assert result.state.tokens_seen == reference.state.tokens_seen


def test_dsgs_reports_a_lost_parameter_server(store: Path) -> None:
    from distributed import Client, LocalCluster

    from topicflow.models.lda.streaming.sgs import SGSParams
    from topicflow.errors import ParameterServerLost
    from topicflow.pipeline.streaming.dsgs import run_dsgs

    params = SGSParams(n_topics=10, doc_topic_prior=0.1, topic_word_prior=0.05, decay=0.9, max_iter=40, patience=40,
                       seed=3)
    killed: list[str] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            server_worker = sorted(client.scheduler_info()["workers"])[0]
            killer = kill_when_loop_runs(client, server_worker, killed)
            with pytest.raises(ParameterServerLost, match="lost with its worker"):
                run_dsgs(Corpus.open(store), params, batch_size=100, client=client, n_workers=2)
            killer.join(timeout=1)
    assert killed
