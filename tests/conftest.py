"""Shared fixtures: one in-process Dask cluster per session and the scheduler matrix."""
from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[object]:
    """Two in-process workers; tests attach their own Client to it."""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    yield cluster
    cluster.close()


@pytest.fixture(params=["threads", "distributed"])
def client(request: pytest.FixtureRequest, local_cluster: object) -> Iterator[object]:
    """None (Dask's threaded scheduler) or a distributed Client: every test using it runs on both."""
    if request.param == "threads":
        yield None
        return
    from distributed import Client

    with Client(local_cluster) as connected:  # type: ignore[arg-type]
        yield connected
