"""pipeline.cluster.actor_of / actor_result with several clients in one process.

distributed gives an actor handle the process's default client and a future of that client. When the
submitting client is another one, and the default one is closed, nothing holds the actor's key: the
scheduler releases it, the worker deletes the actor, and the next call on the handle never ends
(the worker raises KeyError, which distributed does not turn into the call's result). This hung the
suite (tests/pipeline/test_fault_matrix_cluster.py had to run apart for it).
"""
from __future__ import annotations

import gc
import threading
from typing import Any

import pytest

from topicflow.pipeline.cluster import (
    ActorLostError,
    actor_of,
    actor_result,
    worker_addresses,
)


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def increment(self) -> int:
        self.n += 1
        return self.n


def test_the_handle_holds_its_actor_when_the_default_client_closes(local_cluster: Any) -> None:
    from distributed import Client

    with Client(local_cluster, set_as_default=False) as submitting:
        other = Client(local_cluster)  # the default client while the actor is made
        future = submitting.submit(Counter, actor=True, pure=False)
        key = future.key
        actor = actor_of(future)
        assert actor._client is submitting and actor._future is future
        other.close()
        del future
        gc.collect()
        assert key in submitting.who_has(), "the actor's key was released though its handle is alive"
        assert actor_result(submitting, actor, actor.increment()) == 1
        assert actor_result(submitting, actor, actor.increment()) == 2


def _drop_actor(key: Any, dask_worker: Any = None) -> None:
    del dask_worker.state.actors[key]


def test_a_released_actor_is_reported_lost_not_waited_for(local_cluster: Any) -> None:
    from distributed import Client

    with Client(local_cluster, set_as_default=False) as client:
        actor = actor_of(client.submit(Counter, actor=True, pure=False))
        call = actor.increment()
        assert actor_result(client, actor, call) == 1
        # As when nothing held the key: the worker deleted the actor (a call would never end).
        client.run(_drop_actor, actor.key, workers=[actor._address])
        with pytest.raises(ActorLostError, match="no longer holds the actor"):
            actor_result(client, actor, actor.increment(), poll=0.05)


#: Released by the test once the waiting driver has asked the scheduler for its workers a few times.
_GATE = threading.Event()


class Gate:
    def wait(self) -> str:
        _GATE.wait()
        return "opened"


def test_an_actor_call_outlives_the_clients_own_totals_only_refresh(local_cluster: Any, monkeypatch: Any) -> None:
    """The client refreshes its copy of scheduler_info on its own thread without workers; a waiting call must not take that for a lost worker."""
    from distributed import Client

    refresh = Client._update_scheduler_info

    async def totals_only(self: Any, n_workers: int = 0) -> None:  # what the periodic refresh stores
        await refresh(self, n_workers=0)

    asked = []
    nthreads = Client.nthreads

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(1)
        if len(asked) >= 3:
            _GATE.set()
        return nthreads(self, *args, **kwargs)

    _GATE.clear()
    with Client(local_cluster, set_as_default=False) as client:
        monkeypatch.setattr(Client, "_update_scheduler_info", totals_only)
        assert client.scheduler_info()["workers"] == {}  # the copy the race leaves behind
        assert worker_addresses(client) == sorted(local_cluster.scheduler_info["workers"])
        assert len(worker_addresses(client)) == 2
        monkeypatch.setattr(Client, "nthreads", counted)
        actor = actor_of(client.submit(Gate, actor=True, pure=False))
        try:
            assert actor_result(client, actor, actor.wait(), poll=0.01) == "opened"
        finally:
            _GATE.set()
        assert len(asked) >= 3
