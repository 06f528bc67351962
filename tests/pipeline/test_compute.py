"""pipeline.cluster.compute / compute_list: a failure is raised only once no task of the call still runs.

The clean-up after a failed ingest or append removes what its tasks wrote; a task still running when
the error reaches the caller would write after that clean-up (seen as a stray ``.tokens-*`` file).
Everything here is ordered by events between the tasks, never by time.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any

import dask
import pytest

from topicflow.pipeline.cluster import compute, compute_list, worker_addresses


class _Progress:
    """The part of topicflow's progress reporter compute_list uses."""

    def track(self, iterable: Any, **_: Any) -> Any:
        return iterable


_RUNS: dict[str, dict[str, Any]] = {}


def _slow(run: str) -> str:
    events = _RUNS[run]
    events["started"].set()
    events["released"].wait()  # set by the failing task just before it raises
    events["log"].append("slow ended")
    return "slow"


def _failing(run: str) -> str:
    events = _RUNS[run]
    events["started"].wait()
    events["released"].set()
    raise RuntimeError("the injected failure")


def _on_worker(client: Any, number: int, function: Any, run: str) -> Any:
    """``function(run)`` as a task, pinned to worker ``number`` of the test cluster (both must run at once)."""
    if client is None:
        return dask.delayed(function, pure=False)(run)
    with dask.annotate(workers=[worker_addresses(client)[number]], allow_other_workers=False):
        return dask.delayed(function, pure=False)(run)


@pytest.mark.parametrize("through", ["compute", "compute_list"])
def test_a_failure_is_raised_after_the_running_tasks_end(client: Any, through: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)  # the local pool needs both tasks running at once
    run = uuid.uuid4().hex  # the tasks find this run's events by name (in-process workers share the module)
    _RUNS[run] = {"started": threading.Event(), "released": threading.Event(), "log": []}
    graphs = [_on_worker(client, 0, _slow, run), _on_worker(client, 1, _failing, run)]
    with dask.config.set(scheduler="threads"), pytest.raises(RuntimeError, match="the injected failure"):
        if through == "compute":
            compute(*graphs, client=client)
        else:
            compute_list(graphs, client=client, progress=_Progress())
    assert _RUNS.pop(run)["log"] == ["slow ended"], "the error reached the caller while a task of the call still ran"


def test_sync_config_runs_every_task_in_this_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a cluster, whatever client another test of this process may have left as the default.
    monkeypatch.setattr("topicflow.pipeline.cluster.current_client", lambda client=None: client)
    threads = []

    def where() -> str:
        threads.append(threading.current_thread().name)
        return "here"

    with dask.config.set(scheduler="sync"):
        assert compute(dask.delayed(where, pure=False)(), dask.delayed(where, pure=False)()) == ("here", "here")
    assert threads == [threading.current_thread().name] * 2
