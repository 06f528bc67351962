"""Worker memory and throughput of batch VB on a cluster of worker processes (issue 23 part 5).

The cluster is a ``distributed.LocalCluster`` of worker *processes* started by this script on
127.0.0.1 (``--workers`` x ``--threads``, ``--memory-limit`` each, Dask's default spill / pause /
terminate fractions 0.6 / 0.7 / 0.8 / 0.95). Each fit is ``topicflow fit STORE --scheduler ADDRESS``
in a subprocess, as a user runs it against a remote scheduler: the subprocess is the *driver*
(it holds lambda, runs the M-step), the workers run the E-step tasks and the statistics' tree merge.

Measured per fit (a fresh cluster each time, so every peak belongs to that fit):

* ``worker_peak_mb``: the largest resident memory of any worker process, sampled every 50 ms
  from outside (psutil) and, for workers still alive at the end, the kernel's high-water mark
  (``ru_maxrss``) -- the larger of the two is reported;
* ``driver_peak_mb``: the same for the ``topicflow fit`` process;
* what distributed did about memory: bytes spilled to disk, "Pausing worker" warnings, workers
  restarted by their nanny (``exceeded 95% memory budget``), and whether the fit finished;
* ``tokens_per_second``: best iteration after the first (the first loads numba's cached kernels).

The store is drawn by ``topicflow synth`` (not measured): ``--docs`` documents of about
``--doc-length`` tokens over a ``--vocab`` vocabulary, in shards of ``--shard-size`` documents.

Usage (one command per table; ``nice`` it on a shared machine)::

    nice .venv/bin/python benchmarks/bench_cluster.py memory --topics 100 1000
    nice .venv/bin/python benchmarks/bench_cluster.py throughput --workers 1 2 --repeat 3
    nice .venv/bin/python benchmarks/bench_cluster.py throughput --workers 2 --repeat 3 --tls --no-anchor

``memory``: one fit per K (``--iterations``, default 2) at V = 100,000 terms, 2 workers x 1 thread,
4 GiB each. ``throughput``: K = 100 fits with each number of worker processes, best of
``--repeat``, and in the same run the anchor: the same fit on topicflow's local threads cluster
(``--local-cluster threads``, no scheduler), which sends nothing between processes. ``--tls`` runs the cluster over TLS (certificates made with
``openssl`` under the work directory) and passes ``--tls-ca-file/--tls-cert/--tls-key`` to the fit.

Prints one JSON object per fit and then a table.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

#: Where the worker processes' memory is sampled from (seconds).
SAMPLE_EVERY = 0.05


class Sampler:
    """Peak RSS of every process below this one, by pid, sampled every ``SAMPLE_EVERY`` seconds."""

    def __init__(self) -> None:
        self.peaks: dict[int, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._done.is_set():
            for proc in me.children(recursive=True):
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), rss)
            self._done.wait(SAMPLE_EVERY)

    def peak_of(self, pids: set[int]) -> int:
        return max((self.peaks.get(pid, 0) for pid in pids), default=0)


class Captured(logging.Handler):
    """The nannies' records (they run in this process): restarts of workers that exceeded their memory."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _worker_report(dask_worker: Any) -> dict[str, Any]:
    """Run on each worker at the end: its pid, kernel peak RSS and the bytes it spilled to disk."""
    spilled = sum(value for key, value in dask_worker.digests_total.items()
                  if isinstance(key, tuple) and "disk-write" in key and key[-1] == "bytes")
    return {"pid": os.getpid(), "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "spilled_bytes": int(spilled)}


def make_store(args: argparse.Namespace) -> Path:
    """The generated store (drawn once, reused across runs with the same settings)."""
    store = args.work_dir / f"synth-{args.docs}x{args.doc_length}-V{args.vocab}-s{args.shard_size}.zarr"
    if not store.exists():
        subprocess.run([sys.executable, "-m", "topicflow", "-q", "synth", "--out", str(store), "--docs", str(args.docs),
                        "--topics", "50", "--vocab", str(args.vocab), "--doc-length", str(args.doc_length),
                        "--shard-size", str(args.shard_size), "--seed", "7", "--workers", "2"], check=True)
    return store


def store_facts(store: Path) -> dict[str, Any]:
    """Documents, tokens, shards, vocabulary and the mean number of distinct terms per shard."""
    import numpy as np

    from topicflow.io.corpus.reader import Corpus

    corpus = Corpus.open(store)
    distinct = []
    for block in corpus.to_delayed_multi():
        doc_block = next(iter(block.compute().values()))
        distinct.append(len(np.unique(doc_block.term_ids)))
    return {"n_docs": len(corpus), "n_tokens": corpus.n_tokens, "n_shards": corpus.n_shards,
            "n_terms": len(corpus.vocabulary(corpus.languages[0])),
            "distinct_terms_per_shard": float(np.mean(distinct))}


def make_certificates(directory: Path) -> dict[str, str]:
    """A self-signed CA and the scheduler's, workers' and client's certificates (the ``openssl`` command line)."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench-ca")
    for name in ("scheduler", "worker", "client"):
        openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2")
    return {name: str(directory / name) for name in
            ("ca.pem", "scheduler.pem", "scheduler.key", "worker.pem", "worker.key", "client.pem", "client.key")}


def cluster_security(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """With ``--tls``: the cluster's ``distributed.Security`` and the fit's ``--tls-*`` options; else (None, [])."""
    if not args.tls:
        return None, []
    from distributed import Security

    files = make_certificates(args.work_dir / "tls")
    security = Security(tls_ca_file=files["ca.pem"], require_encryption=True,
                        tls_scheduler_cert=files["scheduler.pem"], tls_scheduler_key=files["scheduler.key"],
                        tls_worker_cert=files["worker.pem"], tls_worker_key=files["worker.key"],
                        tls_client_cert=files["client.pem"], tls_client_key=files["client.key"])
    return security, ["--tls-ca-file", files["ca.pem"], "--tls-cert", files["client.pem"],
                      "--tls-key", files["client.key"]]


def fit_command(store: Path, model: Path, args: argparse.Namespace, n_topics: int) -> list[str]:
    return [sys.executable, "-m", "topicflow", "fit", str(store), "--model", str(model), "--topics", str(n_topics),
            "--max-iter", str(args.iterations), "--tol", "0", "--max-doc-iter", str(args.max_doc_iter),
            "--seed", "1", "--overwrite"] + (["--split-every", str(args.split_every)] if args.split_every else [])


def run_on_cluster(store: Path, args: argparse.Namespace, n_topics: int, n_workers: int) -> dict[str, Any]:
    """One fit against a fresh cluster of ``n_workers`` worker processes; its memory and speed."""
    from distributed import Client, LocalCluster

    captured = Captured()
    logging.getLogger("distributed").addHandler(captured)
    model = args.work_dir / f"model-K{n_topics}-w{n_workers}"
    security, tls_options = cluster_security(args)
    with LocalCluster(n_workers=n_workers, threads_per_worker=args.threads, processes=True, host="127.0.0.1",
                      memory_limit=args.memory_limit, dashboard_address="127.0.0.1:0", security=security,
                      protocol="tls" if args.tls else "tcp",
                      local_directory=str(args.work_dir / "dask-worker-space")) as cluster, \
            Client(cluster) as client, Sampler() as sampler:
        first_pids = set(client.run(os.getpid).values())
        command = fit_command(store, model, args, n_topics) + ["--scheduler", cluster.scheduler_address, *tls_options]
        started = time.perf_counter()
        driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = driver.communicate()
        wall = time.perf_counter() - started
        client.wait_for_workers(n_workers, timeout=120)  # a worker restarted by its nanny comes back
        reports = list(client.run(_worker_report).values())
        logs = [line for records in client.get_worker_logs().values() for _, line in records]
    logging.getLogger("distributed").removeHandler(captured)
    driver_pids = {driver.pid}
    # Workers: the first ones, those alive at the end, and any other process this script started (a restarted worker).
    worker_pids = (first_pids | {r["pid"] for r in reports} | set(sampler.peaks)) - driver_pids
    worker_peak = max([sampler.peak_of(worker_pids)] + [r["maxrss_bytes"] for r in reports])
    row: dict[str, Any] = {
        "n_topics": n_topics, "workers": n_workers, "threads_per_worker": args.threads,
        "split_every": args.split_every or "default",
        "memory_limit": args.memory_limit, "finished": driver.returncode == 0, "wall_seconds": round(wall, 1),
        "worker_peak_mb": round(worker_peak / 1e6), "driver_peak_mb": round(sampler.peak_of(driver_pids) / 1e6),
        "spilled_mb": round(sum(r["spilled_bytes"] for r in reports) / 1e6),
        "pauses": sum("Pausing worker" in line for line in logs),
        "restarts": sum("exceeded" in line and "memory budget" in line for line in captured.lines),
        "workers_replaced": len({r["pid"] for r in reports} - first_pids),
    }
    if driver.returncode != 0:
        errors = [line for line in stderr.strip().splitlines() if "rror" in line]
        row["error"] = (errors or stderr.strip().splitlines() or ["?"])[-1][:400]
    else:
        row.update(_speed(model))
    shutil.rmtree(model, ignore_errors=True)
    return row


def run_threads_anchor(store: Path, args: argparse.Namespace, n_topics: int, n_workers: int) -> dict[str, Any]:
    """The same fit on topicflow's local threads cluster (no scheduler address): nothing crosses processes."""
    model = args.work_dir / f"model-K{n_topics}-threads{n_workers}"
    command = fit_command(store, model, args, n_topics) + ["--local-cluster", "threads", "--workers", str(n_workers)]
    with Sampler() as sampler:
        driver = subprocess.run(command, capture_output=True, text=True)
    if driver.returncode != 0:
        raise RuntimeError(driver.stderr[-2000:])
    # (The threads cluster lives in the driver: its peak is the whole fit's.)
    row = {"n_topics": n_topics, "workers": n_workers, "threads_per_worker": 1, "executor": "local threads",
           "finished": True, "driver_peak_mb": round(max(sampler.peaks.values(), default=0) / 1e6), **_speed(model)}
    shutil.rmtree(model, ignore_errors=True)
    return row


def _speed(model: Path) -> dict[str, Any]:
    """Best iteration after the first (numba loads its cached kernels in the first) from the model's trace."""
    from topicflow.io.models.store import read_model_info

    trace = read_model_info(model).trace
    later = trace[1:] or trace
    best = min(later, key=lambda r: r["seconds"])
    return {"seconds_per_iteration": round(best["seconds"], 2), "tokens_per_second": round(best["tokens_per_second"]),
            "first_iteration_seconds": round(trace[0]["seconds"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["memory", "throughput"])
    parser.add_argument("--topics", type=int, nargs="+", default=None,
                        help="memory: K values (default 100 1000); throughput: one K (default 100)")
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="worker processes (memory default 2; throughput default 1 2)")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker process")
    parser.add_argument("--memory-limit", default="4GiB")
    parser.add_argument("--docs", type=int, default=8000)
    parser.add_argument("--doc-length", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--shard-size", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=None, help="default: memory 2, throughput 4")
    parser.add_argument("--max-doc-iter", type=int, default=20,
                        help="E-step iterations per document (caps the E-step's time; memory does not depend on it)")
    parser.add_argument("--split-every", type=int, default=None,
                        help="fan-in of the statistics' tree merge (default: topicflow.split-every, 8)")
    parser.add_argument("--repeat", type=int, default=1, help="throughput: best of this many fits")
    parser.add_argument("--tls", action="store_true",
                        help="a TLS cluster (a self-signed CA made with openssl) and fits with --tls-* options")
    parser.add_argument("--no-anchor", action="store_true", help="throughput: skip the local threads anchor")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bench-cluster"))
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    memory = args.mode == "memory"
    args.iterations = args.iterations or (2 if memory else 4)
    topics = args.topics or ([100, 1000] if memory else [100])
    workers = args.workers or ([2] if memory else [1, 2])

    store = make_store(args)
    facts = store_facts(store)
    print(json.dumps({"store": str(store), **facts}), flush=True)
    rows = []
    for n_topics in topics:
        for n_workers in workers:
            runs = [run_on_cluster(store, args, n_topics, n_workers) for _ in range(args.repeat)]
            finished = [r for r in runs if r["finished"]]
            row = max(finished, key=lambda r: r["tokens_per_second"]) if finished else runs[-1]
            row["executor"] = "processes via --scheduler" + (" tls://" if args.tls else "")
            row["model_mb"] = round(8 * n_topics * facts["n_terms"] / 1e6)
            # The fan-in the fit used: the one asked for, else batch VB's rule by model size.
            from topicflow.pipeline.vb.batch import merge_fan_in
            row["split_every"] = merge_fan_in(n_topics, facts["n_terms"], args.split_every)
            print(json.dumps(row), flush=True)
            rows.append(row)
        if not memory and not args.no_anchor:
            for n_workers in workers:
                anchor = max((run_threads_anchor(store, args, n_topics, n_workers) for _ in range(args.repeat)),
                             key=lambda r: r["tokens_per_second"])
                print(json.dumps(anchor), flush=True)
                rows.append(anchor)
    print()
    print(f"store: {facts['n_docs']} docs, {facts['n_tokens']:,} tokens, {facts['n_shards']} shards, "
          f"V = {facts['n_terms']:,}, {facts['distinct_terms_per_shard']:,.0f} distinct terms per shard")
    print(f"{'K':>5} {'executor':>32} {'workers':>7} {'threads':>7} {'fan-in':>7} {'K x V MB':>8} {'worker peak MB':>14} {'driver peak MB':>14} "
          f"{'spilled MB':>10} {'pauses':>6} {'restarts':>8} {'s/iter':>7} {'tokens/s':>9}  finished")
    for row in rows:
        print(f"{row['n_topics']:>5} {row['executor']:>32} {row['workers']:>7} {row['threads_per_worker']:>7} "
              f"{row.get('split_every', ''):>7} {row.get('model_mb', ''):>8} "
              f"{row.get('worker_peak_mb', ''):>14} {row['driver_peak_mb']:>14} {row.get('spilled_mb', ''):>10} "
              f"{row.get('pauses', ''):>6} {row.get('restarts', ''):>8} {row.get('seconds_per_iteration', ''):>7} "
              f"{row.get('tokens_per_second', ''):>9}  {'yes' if row['finished'] else 'no: ' + row.get('error', '')}")


if __name__ == "__main__":
    main()
