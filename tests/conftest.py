"""Shared fixtures: one in-process Dask cluster per session and the scheduler matrix."""
from __future__ import annotations

import sys
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis judges examples by their properties, never by how long they take: no per-example deadline
# (200 ms by default) and no "too slow" health check, either of which fails on a slow or loaded machine.
settings.register_profile("topicflow", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("topicflow")


@pytest.fixture(autouse=True)
def no_default_client_left_behind() -> Iterator[None]:
    """Fail the test that leaves a distributed Client registered as the default and not closed.

    Code that is given no client uses the default one (``distributed.get_client``), so a client left
    behind by one test is picked up by later tests on the same xdist worker: if its cluster is gone,
    their computations wait for ever. The leaked client is closed and the test that leaked it fails.
    """
    from topicflow.pipeline.cluster import default_client_keys, default_clients_since

    before = default_client_keys() if "distributed.client" in sys.modules else set()
    yield
    if "distributed.client" not in sys.modules:
        return
    leaked = default_clients_since(before)
    for c in leaked:
        c.close()
    if leaked:
        pytest.fail(f"the test left {len(leaked)} default distributed client(s) open: {leaked}; close them "
                    "(a `with Client(...)` block) or make them with set_as_default=False")


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[object]:
    """Two in-process workers; tests attach their own Client to it."""
    from distributed import LocalCluster

    # ":0": any free port; a fixed one (the default 8787) clashes with other test sessions on the machine.
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
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


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The documentation site, built once per session (tests/docs_site.py); its tests share one xdist group."""
    from tests.docs_site import build_site

    return build_site(tmp_path_factory.mktemp("docs"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """moto's standalone S3 server on 127.0.0.1 (tests/objstore.py), one per test process."""
    from tests.objstore import start_server

    yield from start_server()


@pytest.fixture
def s3_bucket(s3_server: object) -> Iterator[str]:
    """A fresh bucket on the test S3 server, with ``topicflow.storage-options`` pointing at the server.

    The setting is in dask.config while the test runs, so a local cluster started inside the test
    passes it on to its worker processes.
    """
    import dask.config

    from tests.objstore import S3Server

    server = s3_server
    assert isinstance(server, S3Server)
    with dask.config.set({"topicflow.storage-options": server.storage_options}):
        yield server.new_bucket()
