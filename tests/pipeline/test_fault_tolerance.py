"""A Dask worker killed in the middle of an iteration does not change the result.

Partition tasks are pure functions of their inputs (counter-based randomness, no worker state), so
the scheduler's recomputation of the lost tasks gives identical statistics, and the fixed reduction
tree sums them in the same order.

Every fault here is triggered by an event of the run, never by elapsed time (see
:mod:`topicflow.testing.faults`): a task being assigned to a worker, a driver callback, the
progress reporter being asked for the next evaluation point, or a DSGS loop reporting that it
claimed a minibatch (and waiting there until the test has killed the worker and the scheduler has
removed it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.cluster import worker_addresses
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.pipeline.vb.online import OnlineConfig, fit_online
from topicflow.testing.corpora import draw_planted_corpus, write_test_store
from topicflow.testing.faults import (
    Barrier,
    Hooks,
    InBackground,
    OnItem,
    PauseAt,
    TaskKiller,
    kill_worker,
    restore_workers,
    workers_with_actors,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=3000, n_topics=10, n_terms=400, doc_length=80, alpha=0.2, seed=4)
    return write_test_store(tmp_path_factory.mktemp("fault") / "c.zarr", truth.counts, shard_size=100)


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[Any]:
    """One cluster of two worker processes for the module (starting one costs seconds of the suite).

    Each test kills a worker; its nanny starts a new one, and the ``client`` fixture waits for it."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster, set_as_default=False) as client:  # not the default: other modules interleave
            yield client


@pytest.fixture(name="client")
def process_client(cluster_client: Any) -> Any:
    """The module's client (in place of conftest's threaded one), once the cluster has its two workers
    again (the event of the nanny's restart)."""
    restore_workers(cluster_client, 2)
    return cluster_client


def run_with_killer(client: Any, fit: Callable[[Any, Callable[..., None]], Any]) -> tuple[Any, list[dict[str, str]]]:
    """Run ``fit(client, hook)`` on the two worker processes. The first call of ``hook`` (after the first
    iteration or minibatch) arms a scheduler plugin that kills the worker the next E-step task is
    assigned to, so that worker dies holding a task of the next iteration."""
    killer = TaskKiller(client, "estep")

    def arm_after_first(record: Any, state: Any) -> None:
        killer.arm()

    result = fit(client, arm_after_first)
    return result, killer.killed()


def test_batch_fit_survives_a_killed_worker(store: Path, client: Any) -> None:
    config = VBConfig(n_topics=10, max_iter=4, tol=0.0, seed=1)
    reference = fit_batch_vb(Corpus.open(store), config).state
    result, killed = run_with_killer(
        client,
        lambda client, hook: fit_batch_vb(Corpus.open(store), config, client=client, on_iteration=hook)
    )
    assert killed, "no worker was killed mid-iteration"
    np.testing.assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])
    np.testing.assert_array_equal(result.state.doc_topic_prior, reference.doc_topic_prior)


def test_online_fit_survives_a_killed_worker(store: Path, client: Any) -> None:
    config = VBConfig(n_topics=10, seed=2)
    online = OnlineConfig(batch_size=1000, pieces=8, executor="tasks")
    reference = fit_online(Corpus.open(store), config, online).state
    result, killed = run_with_killer(
        client,
        lambda client, hook: fit_online(Corpus.open(store), config, online, client=client, on_minibatch=hook)
    )
    assert killed, "no worker was killed mid-minibatch"
    np.testing.assert_array_equal(result.state.topic_word_var["default"], reference.topic_word_var["default"])


def test_online_e_step_servers_are_replaced_when_their_worker_dies(store: Path, client: Any,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """The E-step actors die with their worker; the minibatch is rerun on new ones, same result.

    The driver's callback after minibatch 2 kills a worker and returns once the scheduler has removed
    it, so minibatch 3 finds one of its servers gone."""
    config = VBConfig(n_topics=10, seed=5)
    online = OnlineConfig(batch_size=500, executor="servers")
    reference = fit_online(Corpus.open(store), config, online).state
    killed = []

    def kill_one_worker(record: Any, state: Any) -> None:
        if record.t == 2:
            address = worker_addresses(client)[0]
            kill_worker(client, address)
            killed.append(address)

    with caplog.at_level("WARNING", logger="topicflow.pipeline.vb.estep_servers"):
        state = fit_online(Corpus.open(store), config, online, client=client, on_minibatch=kill_one_worker).state
    assert killed and "restarting servers" in caplog.text
    np.testing.assert_array_equal(state.topic_word_var["default"], reference.topic_word_var["default"])
    np.testing.assert_array_equal(state.doc_topic_prior, reference.doc_topic_prior)


def test_stream_survives_a_killed_worker(tmp_path: Path, client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """When the driver asks for its second evaluation point, a worker holding run actors is killed
    (and removed); the lost runs are rebuilt from their snapshots and replayed: same trace and model."""
    from topicflow.pipeline.streaming import run_stream
    from topicflow.pipeline.streaming.config import StreamConfig

    truth = draw_planted_corpus(n_docs=400, n_topics=3, n_terms=60, doc_length=30, alpha=0.1, seed=6)
    labels = [f"t{k}" for k in np.argmax(truth.doc_topic, axis=1)]
    store = write_test_store(tmp_path / "s.zarr", truth.counts, shard_size=100, labels=labels)
    config = StreamConfig.create(algorithm="pf", n_topics=3, n_particles=16, rejuvenation_steps=10, reservoir_size=300,
                          init_docs=40, init_sweeps=20, runs=3, eval_every=40, seed=2)
    reference = run_stream(Corpus.open(store), config, client=None)
    killed: list[str] = []

    def kill_an_actor_worker() -> None:
        address = workers_with_actors(client)[0]
        kill_worker(client, address)
        killed.append(address)

    killer = OnItem("stream pf", 1, kill_an_actor_worker)
    with caplog.at_level("WARNING", logger="topicflow.pipeline.streaming.particles"):
        result = run_stream(Corpus.open(store), config, client=client, recovery_every=3, progress=killer)
    assert killed, "no worker was killed"
    assert "lost its actor" in caplog.text
    strip = lambda records: [{k: v for k, v in r.items() if k != "seconds"} for r in records]  # noqa: E731
    assert strip(result.records) == strip(reference.records)
    np.testing.assert_array_equal(result.model.state.topic_word_var["default"],
                                  reference.model.state.topic_word_var["default"])


def dsgs_params() -> Any:
    from topicflow.models.lda.streaming.sgs import SGSParams

    return SGSParams(n_topics=10, doc_topic_prior=0.1, topic_word_prior=0.05, decay=0.9, max_iter=40, patience=40,
                     seed=3)


def test_dsgs_survives_a_killed_sampler_worker(store: Path, client: Any) -> None:
    """A loop killed with its worker is rerun; its unpushed minibatch is handed out again, none is lost
    or counted twice. With staleness 0 (sequential) the result must still equal SGS exactly.

    Both loops claim a first minibatch before either goes on (so both take part, and with staleness
    0 they alternate); loop 1 is held right after it claims minibatch 4 or later, its worker is
    killed and removed, then it is released: the rerun claims the same minibatch again."""
    from topicflow.pipeline.streaming.dsgs import run_dsgs
    from topicflow.pipeline.streaming.sgs import run_sgs

    params = dsgs_params()
    reference = run_sgs(Corpus.open(store), params, batch_size=100)
    killed: list[str] = []
    server_worker = worker_addresses(client)[0]  # run_dsgs puts the server there
    pause = PauseAt(client, "dsgs-claimed", match={"loop": 1}, at_least={"minibatch": 4})
    hook = Hooks(Barrier(client, "dsgs-claimed", key="loop", parties=2), pause)

    def kill_the_held_loop() -> dict[str, Any]:
        try:
            where = pause.reached()
            if where["worker"] != server_worker:
                kill_worker(client, where["worker"])
                killed.append(where["worker"])
            return where
        finally:
            pause.release()

    fault = InBackground(kill_the_held_loop)
    result = run_dsgs(Corpus.open(store), params, batch_size=100, client=client, n_workers=2, staleness=0,
                      hook=hook)
    held = fault.join()
    assert held["worker"] != server_worker, f"loop 1 ran beside the parameter server: {held}"
    assert killed == [held["worker"]]
    assert result.server_stats["reissued_claims"] == 1  # the rerun got its claimed, unpushed minibatch back
    assert result.server_stats["push_order"] == list(range(30))
    np.testing.assert_array_equal(result.state.term_topic_counts, reference.state.term_topic_counts)
    np.testing.assert_array_equal(result.state.topic_counts, reference.state.topic_counts)
    assert result.state.tokens_seen == reference.state.tokens_seen


def test_dsgs_reports_a_lost_parameter_server(store: Path, client: Any) -> None:
    """A loop is held right after it claims minibatch 4 or later (so the run cannot have ended); the
    server's worker is killed and removed, then the loop is released and the run stops with an error."""
    from topicflow.errors import ParameterServerLost
    from topicflow.pipeline.streaming.dsgs import run_dsgs

    killed: list[str] = []
    server_worker = worker_addresses(client)[0]  # run_dsgs puts the server there
    pause = PauseAt(client, "dsgs-claimed", at_least={"minibatch": 4})

    def kill_the_server() -> None:
        try:
            pause.reached()
            kill_worker(client, server_worker)
            killed.append(server_worker)
        finally:
            pause.release()

    fault = InBackground(kill_the_server)
    with pytest.raises(ParameterServerLost, match="lost with its worker"):
        run_dsgs(Corpus.open(store), dsgs_params(), batch_size=100, client=client, n_workers=2, hook=pause)
    fault.join()
    assert killed == [server_worker]
