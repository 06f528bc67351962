"""Ingest and batch VB with the corpus store on a local S3 server against the same runs on local disk.

A corpus of ``--docs`` generated documents (``--terms`` terms drawn from a Zipf law, 50 to 150 tokens
each; terms ``w00042``) is written as one JSON Lines file, both to a local directory and to a bucket of
moto's standalone S3 server (``moto.server.ThreadedMotoServer``, started in this process on
127.0.0.1). On a local cluster of ``--workers`` worker processes (one thread each):

* ``ingest``: local JSONL into a local store, and s3:// JSONL into an s3:// store (read on the
  workers, built in a staging directory, uploaded with the manifest last: docs/storage.md);
* ``fit``: batch VB (``--topics``, exactly ``--iterations`` iterations: ``tol=0``) from each store,
  the workers reading every shard themselves each iteration.

Each run is repeated ``--repeats`` times (a fresh s3:// URL per ingest); the table shows the best,
the JSON every run. One untimed fit per store warms up numba and the workers' s3fs clients first.

The S3 server is moto's, a single-threaded Python server in the benchmark's own process: every request
costs a few milliseconds of Python and competes with the driver for the GIL, so the s3 numbers are a
pessimistic stand-in for S3 or MinIO, which answer from other machines or processes. The ratio
s3/local is what the run measures, not S3's own throughput.

Example::

    nice python benchmarks/bench_storage.py --docs 20000 --topics 20 --iterations 5 --repeats 3

Prints one JSON object (with the exact command), then a table.
"""
from __future__ import annotations

import argparse
import json
import shlex
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import dask.config
import numpy as np

from topicflow.api.lda import LDA
from topicflow.io.corpus.reader import Corpus
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.pipeline.ingest.ingest import ingest_corpus


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--terms", type=int, default=5000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--shard-size", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def write_corpus(path: Path, n_docs: int, n_terms: int, seed: int) -> int:
    """JSON Lines of generated documents; returns the number of tokens."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_terms + 1)
    weights /= weights.sum()
    tokens = 0
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n_docs):
            length = int(rng.integers(50, 151))
            words = rng.choice(n_terms, size=length, p=weights)
            tokens += length
            handle.write(json.dumps({"id": f"d{i}", "text": " ".join(f"w{w:05d}" for w in words)}) + "\n")
    return tokens


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import logging

    import s3fs
    from distributed import Client, LocalCluster
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "bench", "secret": "bench",
               "client_kwargs": {"region_name": "eu-west-1"}}
    fs = s3fs.S3FileSystem(**options)
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    n_tokens = write_corpus(work / "docs.jsonl", args.docs, args.terms, args.seed)
    fs.put_file(str(work / "docs.jsonl"), f"{bucket}/docs.jsonl")
    n_bytes = (work / "docs.jsonl").stat().st_size
    tokenizer = TokenizerConfig()  # terms w00042 are no stop words
    runs: dict[str, list[float]] = {"ingest local": [], "ingest s3": [], "fit local": [], "fit s3": []}
    with dask.config.set({"topicflow.storage-options": options}), \
            LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                         dashboard_address=":0") as cluster, Client(cluster) as client:
        def ingest(source: str, out: str) -> Any:
            return ingest_corpus([source], out, tokenizer=tokenizer, shard_size=args.shard_size, client=client)

        stores = {"local": str(work / "store-0.zarr"), "s3": f"s3://{bucket}/store-0.zarr"}
        ingest(str(work / "docs.jsonl"), stores["local"])
        ingest(f"s3://{bucket}/docs.jsonl", stores["s3"])
        for repeat in range(1, args.repeats + 1):
            runs["ingest local"].append(timed(lambda: ingest(str(work / "docs.jsonl"),
                                                             str(work / f"store-{repeat}.zarr")))[0])
            runs["ingest s3"].append(timed(lambda: ingest(f"s3://{bucket}/docs.jsonl",
                                                          f"s3://{bucket}/store-{repeat}.zarr"))[0])

        def fit(store: str) -> Any:
            return LDA(n_topics=args.topics, max_iter=args.iterations, tol=0.0, seed=args.seed).fit(store, client=client)

        models = {kind: fit(store) for kind, store in stores.items()}  # warm-up, untimed
        same = bool(np.array_equal(models["local"].components_, models["s3"].components_))
        for _ in range(args.repeats):
            for kind, store in stores.items():
                runs[f"fit {kind}"].append(timed(lambda: fit(store))[0])
        stored_tokens = Corpus.open(stores["local"]).n_tokens
    server.stop()
    best = {name: min(values) for name, values in runs.items()}
    result = {
        "command": "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]),
        "docs": args.docs, "input_tokens": n_tokens, "stored_tokens": stored_tokens, "input_mb": n_bytes / 1e6,
        "topics": args.topics, "iterations": args.iterations, "workers": args.workers,
        "same_model_local_and_s3": same, "runs": runs, "best": best,
    }
    print(json.dumps(result))
    print(f"\n{'run':<14} {'best s':>8} {'rate':>22} {'s3 / local':>11}")
    for name in runs:
        kind, where = name.split()
        rate = (f"{n_bytes / 1e6 / best[name]:.1f} MB/s" if kind == "ingest"
                else f"{stored_tokens * args.iterations / best[name] / 1e6:.2f} M tokens/s")
        ratio = f"{best[name] / best[f'{kind} local']:.2f}x" if where == "s3" else ""
        print(f"{name:<14} {best[name]:>8.2f} {rate:>22} {ratio:>11}")
    print(f"\nsame model from local disk and from s3: {same}")


if __name__ == "__main__":
    main()
