"""Batch VB reruns an iteration whose scattered topics the workers lost (issue 23 part 5).

A worker restarted by its nanny (for passing 95% of its memory limit) loses the topics scattered to
it; with one worker there is no replica and every E-step task of the iteration is cancelled. The
driver scatters the topics again and reruns the iteration; the E-step is pure, so the model equals an
undisturbed fit. Faults are triggered by events of the run (a task being assigned), never by time.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distributed.diagnostics.plugin import SchedulerPlugin

from topicflow.errors import TopicflowError
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.vb import batch
from topicflow.pipeline.vb.batch import (
    MAX_ATTEMPTS,
    VBConfig,
    WorkersLostError,
    fit_batch_vb,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store
from topicflow.testing.faults import TaskKiller


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=600, n_topics=6, n_terms=200, doc_length=40, alpha=0.2, seed=23)
    return write_test_store(tmp_path_factory.mktemp("lost") / "c.zarr", truth.counts, shard_size=100)


CONFIG = VBConfig(n_topics=6, max_iter=3, tol=0.0, seed=3)


def test_iteration_is_rerun_when_the_only_worker_dies(store: Path, caplog: pytest.LogCaptureFixture) -> None:
    """One worker process: killing it when iteration 1's first E-step task is assigned loses the
    scattered topics (no replica); the iteration is rerun and the model is the undisturbed one."""
    from distributed import Client, LocalCluster

    reference = fit_batch_vb(Corpus.open(store), CONFIG).state
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            killer = TaskKiller(client, "estep")
            with caplog.at_level("WARNING", logger="topicflow.pipeline.vb.batch"):
                result = fit_batch_vb(Corpus.open(store), CONFIG, client=client,
                                      on_iteration=lambda record, state: killer.arm())
            killed = killer.killed()
    assert killed and killed[0]["key"].startswith("estep-")
    assert "scattering the topics again" in caplog.text
    assert [r.iteration for r in result.trace] == [0, 1, 2]
    np.testing.assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])
    np.testing.assert_array_equal(result.state.doc_topic_prior, reference.doc_topic_prior)


class CancelTopics(SchedulerPlugin):
    """Once armed, force-cancels the scattered data an E-step task needs each time one is assigned.

    The cancel runs in the scheduler's loop right after the transition (not inside it); it cancels
    the topics and every task depending on them, as the loss of a worker's only replica does.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.armed = False
        self.cancelled: list[str] = []
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if not self.armed or finish != "processing" or not str(key).startswith("estep-"):
            return
        task = self.scheduler.tasks.get(key)
        data = [dep for dep in (task.dependencies if task is not None else ()) if dep.run_spec is None]
        for dep in data:
            if dep.key in self.cancelled or not dep.who_wants:
                continue
            self.cancelled.append(dep.key)
            client = next(iter(dep.who_wants)).client_key
            self.scheduler.loop.add_callback(self.scheduler.stimulus_cancel, [dep.key], client, True,
                                             "test", "the test cancelled the scattered topics")


def _arm(name: str, dask_scheduler: Any = None) -> None:
    dask_scheduler.plugins[name].armed = True


def _cancelled(name: str, dask_scheduler: Any = None) -> list[str]:
    return list(dask_scheduler.plugins[name].cancelled)


def test_a_clear_error_after_the_last_attempt(store: Path, local_cluster: Any) -> None:
    """Every attempt of iteration 1 loses its topics: a TopicflowError naming docs/cluster.md, not a
    raw FutureCancelledError."""
    from distributed import Client

    with Client(local_cluster) as client:
        name = "topicflow-test-cancel-topics"
        client.register_plugin(CancelTopics(name))
        try:
            with pytest.raises(WorkersLostError) as caught:
                fit_batch_vb(Corpus.open(store), CONFIG, client=client,
                             on_iteration=lambda record, state: client.run_on_scheduler(_arm, name))
            cancelled = client.run_on_scheduler(_cancelled, name)
        finally:
            client.unregister_scheduler_plugin(name)
    assert isinstance(caught.value, TopicflowError)
    assert len(cancelled) == MAX_ATTEMPTS  # one fresh scatter per attempt, each lost
    message = str(caught.value)
    assert f"iteration 1 failed on all {MAX_ATTEMPTS} attempts" in message
    assert 'docs/cluster.md, "Worker memory"' in message and "--split-every 2" in message


def test_other_failures_are_not_retried(store: Path, local_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error of the computation itself is raised at once, not rerun."""
    from distributed import Client

    calls: list[str] = []

    def failing(*graphs: Any, client: Any = None) -> Any:
        calls.append("compute")
        raise ValueError("a bug in a task")

    monkeypatch.setattr(batch, "compute", failing)
    with Client(local_cluster) as client:
        with pytest.raises(ValueError, match="a bug in a task"):
            fit_batch_vb(Corpus.open(store), CONFIG, client=client)
    assert calls == ["compute"]


def test_merge_fan_in_depends_on_the_model_size_only() -> None:
    """Fan-in 2 from 8 K V >= 256 MB on; the configured fan-in below it; an explicit one always."""
    import dask

    from topicflow.pipeline.vb.batch import merge_fan_in

    assert merge_fan_in(100, 100_000) == 8  # 80 MB: the shipped topicflow.split-every
    assert merge_fan_in(1000, 31_999) == 8  # just under 256 MB
    assert merge_fan_in(1000, 32_000) == 2  # 256 MB
    assert merge_fan_in(1000, 100_000, 8) == 8  # --split-every 8 is kept
    with dask.config.set({"topicflow.split-every": 5}):
        assert merge_fan_in(10, 1000) == 5
        assert merge_fan_in(1000, 100_000) == 2
    with dask.config.set({"topicflow.split-every": 2}):
        assert merge_fan_in(1000, 100_000) == 2


def test_online_minibatch_is_rerun_when_the_only_worker_dies(store: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Online VB's task-graph E-step: one worker process, killed when minibatch 1's first E-step task is
    assigned, loses the scattered topics (no replica: as a worker that joined after the scatter has
    none). The minibatch is rerun and the model is the undisturbed one (the fault matrix's ``update``
    cell failed with FutureCancelledError in a loaded fresh-clone run before this)."""
    from distributed import Client, LocalCluster

    from topicflow.pipeline.vb.online import OnlineConfig, fit_online

    online = OnlineConfig(batch_size=150, executor="tasks")
    reference = fit_online(Corpus.open(store), CONFIG, online).state
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            killer = TaskKiller(client, "estep")
            seen: list[int] = []

            def arm_once(record: Any, state: Any) -> None:  # after the first minibatch only
                seen.append(record.t)
                if len(seen) == 1:
                    killer.arm()

            with caplog.at_level("WARNING", logger="topicflow.pipeline.vb.online"):
                result = fit_online(Corpus.open(store), CONFIG, online, client=client, on_minibatch=arm_once)
            killed = killer.killed()
    assert killed and killed[0]["key"].startswith("estep-")
    assert "scattering the topics again" in caplog.text
    np.testing.assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])
