"""Remote schedulers over TLS (``--scheduler tls://... --tls-ca-file --tls-cert --tls-key``), and the local cluster on loopback.

A self-signed CA is made with the ``openssl`` command line (the ``cryptography`` package, which
``distributed.Security.temporary`` needs, is not a dependency); it signs the certificates of an
in-process TLS scheduler and its two workers on 127.0.0.1, of a client, and another CA signs an
intruder's certificate.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import dask.config
import psutil
import pytest
from click.testing import CliRunner, Result
from numpy.testing import assert_array_equal

from topicflow import LDA
from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.models.store import load_model
from topicflow.pipeline.cluster import (
    LOCAL_CLUSTER_HOST,
    ClusterConfig,
    SchedulerConnectionError,
    client_security,
    connect,
    worker_addresses,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

LOOPBACK = "127.0.0.1"
FIT = ["--topics", "3", "--max-iter", "8", "--seed", "3"]


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA and the certificates it signs (scheduler, worker, client), plus an intruder signed by another CA."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    key_options = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", *key_options, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN={ca}")
    for name, ca in (("scheduler", "ca"), ("worker", "ca"), ("client", "ca"), ("intruder", "other-ca")):
        openssl("req", *key_options, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2")
    return {path.stem if path.suffix == ".pem" else path.name: path for path in directory.iterdir()}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_scheduler(certs: dict[str, Path]) -> Iterator[str]:
    """The address of a TLS scheduler with two TLS workers (in-process, on 127.0.0.1)."""
    from distributed import LocalCluster, Security

    security = Security(
        tls_ca_file=str(certs["ca"]), require_encryption=True,
        tls_scheduler_cert=str(certs["scheduler"]), tls_scheduler_key=str(certs["scheduler.key"]),
        tls_worker_cert=str(certs["worker"]), tls_worker_key=str(certs["worker.key"]),
        tls_client_cert=str(certs["client"]), tls_client_key=str(certs["client.key"]),
    )
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tls", host=LOOPBACK,
                      security=security, dashboard_address=f"{LOOPBACK}:0") as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=5)
    return write_test_store(tmp_path_factory.mktemp("tls-store") / "train.zarr", truth.counts, shard_size=30)


def tls_options(certs: dict[str, Path], client: str = "client", ca: str = "ca") -> list[str]:
    return ["--tls-ca-file", str(certs[ca]), "--tls-cert", str(certs[client]), "--tls-key", str(certs[f"{client}.key"])]


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_fit_on_a_tls_scheduler_equals_a_local_fit(store: Path, tls_scheduler: str, certs: dict[str, Path],
                                                   tmp_path: Path) -> None:
    assert tls_scheduler.startswith(f"tls://{LOOPBACK}:")
    model = tmp_path / "model"
    result = run(["fit", str(store), "--model", str(model), *FIT, "--scheduler", tls_scheduler, *tls_options(certs)])
    assert result.exit_code == 0, result.output
    saved = load_model(model).state.topic_word_var["default"]

    local = LDA(n_topics=3, max_iter=8, seed=3).fit(str(store))  # Dask's threaded scheduler
    assert_array_equal(saved, local.components_)

    # The Python API: the same TLS settings as a security object, through the same connect().
    from distributed import Security

    security = Security(tls_ca_file=str(certs["ca"]), tls_client_cert=str(certs["client"]),
                        tls_client_key=str(certs["client.key"]), require_encryption=True)
    with connect(ClusterConfig(scheduler=tls_scheduler, security=security)) as client:
        assert client.scheduler.address == tls_scheduler
        remote = LDA(n_topics=3, max_iter=8, seed=3).fit(str(store), client=client)
    assert_array_equal(remote.components_, local.components_)


def test_tls_settings_from_the_dask_config(tls_scheduler: str, certs: dict[str, Path]) -> None:
    settings = {"distributed.comm.tls.ca-file": str(certs["ca"]),
                "distributed.comm.tls.client.cert": str(certs["client"]),
                "distributed.comm.tls.client.key": str(certs["client.key"])}
    with dask.config.set(settings), connect(ClusterConfig(scheduler=tls_scheduler)) as client:
        assert client.submit(sum, [1, 2, 3]).result() == 6
        assert {address.split("://")[0] for address in worker_addresses(client)} == {"tls"}
    # An option given on the command line wins; the files not given come from the config.
    settings["distributed.comm.tls.ca-file"] = str(certs["other-ca"])
    with dask.config.set(settings), connect(ClusterConfig(scheduler=tls_scheduler, tls_ca_file=str(certs["ca"]))) as client:
        assert client.submit(sum, [1, 2]).result() == 3


def test_a_client_certificate_from_another_ca_is_refused_by_the_scheduler(
        store: Path, tls_scheduler: str, certs: dict[str, Path], tmp_path: Path) -> None:
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), *FIT, "--scheduler", tls_scheduler,
                  *tls_options(certs, client="intruder")])
    assert result.exit_code == 2
    assert f"the scheduler at '{tls_scheduler}' refused this client's TLS certificate" in result.output
    assert str(certs["intruder"]) in result.output
    assert "Traceback" not in result.output and not (tmp_path / "m").exists()


def test_a_scheduler_certificate_from_another_ca_is_refused_by_the_client(
        tls_scheduler: str, certs: dict[str, Path]) -> None:
    config = ClusterConfig(scheduler=tls_scheduler, tls_ca_file=str(certs["other-ca"]),
                           tls_cert=str(certs["intruder"]), tls_key=str(certs["intruder.key"]))
    with pytest.raises(SchedulerConnectionError, match="this client refused the certificate of the scheduler") as info:
        with connect(config):
            pass
    assert str(certs["other-ca"]) in str(info.value) and "CERTIFICATE_VERIFY_FAILED" in str(info.value)


def test_a_tcp_client_of_a_tls_scheduler_is_told_to_use_tls(tls_scheduler: str) -> None:
    tcp = tls_scheduler.replace("tls://", "tcp://")
    with pytest.raises(SchedulerConnectionError, match=f"connect to {tls_scheduler} with --tls-ca-file"):
        with connect(ClusterConfig(scheduler=tcp)):
            pass


def test_a_tls_client_of_a_plain_scheduler_is_told_it_does_not_speak_tls(certs: dict[str, Path]) -> None:
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host=LOOPBACK, dashboard_address=None) as plain:
        address = plain.scheduler_address.replace("tcp://", "tls://")
        config = ClusterConfig(scheduler=address, tls_ca_file=str(certs["ca"]), tls_cert=str(certs["client"]),
                               tls_key=str(certs["client.key"]))
        with pytest.raises(SchedulerConnectionError, match="does not speak TLS"):
            with connect(config):
                pass
    # The failed client registered itself as the default before connecting; left open, it would be what
    # every later computation of this process without a client of its own waits on, for ever.
    from distributed import get_client

    with pytest.raises(ValueError, match="No global client found"):
        get_client()


@pytest.mark.parametrize("options, message", [
    ([], "uses TLS, but no CA file was given: pass --tls-ca-file CA.pem --tls-cert CLIENT.pem --tls-key CLIENT.key"),
    (["--tls-ca-file", "{ca}"], "uses TLS, but no client certificate was given"),
    (["--tls-ca-file", "{ca}", "--tls-cert", "{dir}/missing.pem"],
     "cannot read the TLS client certificate '{dir}/missing.pem': No such file or directory"),
    (["--tls-ca-file", "{ca_key}", "--tls-cert", "{client}"],
     "the TLS CA file '{ca_key}' holds no PEM certificate"),
    (["--tls-ca-file", "{ca}", "--tls-cert", "{client}", "--tls-key", "{intruder_key}"],
     "the TLS client certificate '{client}' and key '{intruder_key}' do not load"),
])
def test_tls_address_with_missing_or_bad_files_is_refused_before_connecting(
        store: Path, certs: dict[str, Path], options: list[str], message: str) -> None:
    names = {"ca": certs["ca"], "ca_key": certs["ca.key"], "client": certs["client"],
             "intruder_key": certs["intruder.key"], "dir": certs["ca"].parent}
    # Port 1 has no scheduler: the settings are checked before any connection is tried.
    args = ["fit", str(store), "--model", str(store.parent / "never"), *FIT, "--scheduler", "tls://127.0.0.1:1"]
    result = run(args + [option.format(**names) for option in options])
    assert result.exit_code == 2
    error = result.output.split("topicflow: error: ", 1)[1]
    assert message.format(**names) in error and "Traceback" not in result.output


def test_tls_files_for_a_tcp_scheduler_or_a_local_cluster_are_refused(store: Path, certs: dict[str, Path]) -> None:
    result = run(["fit", str(store), "--model", str(store.parent / "never"), *FIT,
                  "--scheduler", "tcp://127.0.0.1:1", *tls_options(certs)])
    assert result.exit_code == 2
    assert "--tls-ca-file, --tls-cert, --tls-key given, but the scheduler address 'tcp://127.0.0.1:1' is tcp://" \
        in result.output
    with pytest.raises(InvalidParameterError, match="given without --scheduler"):
        client_security(ClusterConfig(tls_ca_file=str(certs["ca"])))


def test_local_worker_processes_and_their_scheduler_listen_on_loopback_only() -> None:
    with connect(ClusterConfig(workers=1, threads_per_worker=1, executor="processes", memory_limit="1GiB")) as client:
        scheduler = client.scheduler.address
        addresses = [scheduler, *worker_addresses(client)]
        assert {address.split("://")[1].rsplit(":", 1)[0] for address in addresses} == {LOCAL_CLUSTER_HOST}
        workers = {psutil.Process(pid) for pid in client.run(lambda: __import__("os").getpid()).values()}
        listening = {conn.laddr.ip for worker in workers for conn in worker.net_connections(kind="inet")
                     if conn.status == psutil.CONN_LISTEN}
        scheduler_ports = {int(scheduler.rsplit(":", 1)[1])}
        own = {conn.laddr.ip for conn in psutil.Process().net_connections(kind="inet")
               if conn.status == psutil.CONN_LISTEN and conn.laddr.port in scheduler_ports}
    assert listening == {LOCAL_CLUSTER_HOST} and own == {LOCAL_CLUSTER_HOST}
