"""The local cluster's dashboard (and the workers' HTTP endpoints) listen on loopback unless asked otherwise."""
from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlparse

import click
import psutil
from click.testing import CliRunner

from topicflow.cli._common import cluster_options
from topicflow.errors import CorruptShardError, ModelFormatError
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.worker_logging import QuietTopicflowTaskErrors

LOOPBACK = "127.0.0.1"


def parsed(args: list[str]) -> ClusterConfig:
    seen: list[ClusterConfig] = []

    @click.command()
    @cluster_options
    def probe(cluster: ClusterConfig) -> None:
        seen.append(cluster)

    result = CliRunner().invoke(probe, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return seen[0]


def test_dashboard_address_option_defaults_to_loopback() -> None:
    assert parsed([]).dashboard_address == "127.0.0.1:0" == ClusterConfig().dashboard_address
    assert parsed(["--dashboard-address", ":8787"]).dashboard_address == ":8787"
    assert parsed(["--workers", "2"]) == ClusterConfig(workers=2)


def listening_hosts(ports: set[int]) -> set[str]:
    """Hosts this process listens on at ``ports`` (the in-process cluster's servers are ours)."""
    return {conn.laddr.ip for conn in psutil.Process().net_connections(kind="inet")
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port in ports}


def test_local_cluster_dashboard_listens_on_loopback_only(tmp_path: Path) -> None:
    with connect(ClusterConfig(workers=1, threads_per_worker=1, executor="threads")) as client:
        dashboard_port = urlparse(client.dashboard_link).port
        worker_ports = set(client.run(lambda dask_worker: dask_worker.http_server.port).values())
        assert dashboard_port is not None and len(worker_ports) == 1
        assert listening_hosts({dashboard_port}) == {LOOPBACK}
        assert listening_hosts(worker_ports) == {LOOPBACK}


def test_only_compute_failed_records_of_topicflow_errors_are_dropped() -> None:
    quiet = QuietTopicflowTaskErrors()

    def record(message: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, message, args, None)

    failed = "Compute Failed\nKey: %s\nState: %s\nTask: %s\nException: %r\nTraceback: %r\n"
    shard_error = repr(CorruptShardError("shard 1 ..."))
    assert shard_error == "topicflow.errors.CorruptShardError('shard 1 ...')"
    assert not quiet.filter(record(failed, "k", "executing", "t", shard_error, "tb"))
    assert not quiet.filter(record(failed, "k", "executing", "t", repr(ModelFormatError("model ...")), "tb"))
    assert quiet.filter(record(failed, "k", "executing", "t", 'ZeroDivisionError("division by zero")', "tb"))
    # Another library's error of the same name as one of topicflow's is not topicflow's own.
    assert quiet.filter(record(failed, "k", "executing", "t", 'InputError("not ours")', "tb"))
    assert quiet.filter(record("Worker %s failed", "w"))
