"""Ingest throughput and peak memory at 1x, 4x and 16x a base corpus size.

Generates JSON Lines corpora of random words (Zipf-distributed over a generated word list), then runs
``ingest_corpus`` on a local Dask cluster for each size in a fresh subprocess, sampling the resident
memory of the whole process tree (driver + worker processes) in a thread. Prints JSON and a table.

Peak memory should depend on the shard size (partition size), not on the corpus size: at 16x the
input the peak should stay roughly flat, apart from the vocabulary and id hashes held by the driver.

With ``--keep-order`` every size is ingested twice, without and with the ordered-token layer
(``ingest_corpus(..., keep_order=True)``), alternating the two arms ``--repeat`` times (best time
reported), and the table adds the store size on disk, the size of the ``order/`` groups and the
overhead of the layer in time and bytes.

Usage::

    .venv/bin/python benchmarks/bench_ingest.py --base-docs 20000 --workers 2
    .venv/bin/python benchmarks/bench_ingest.py --base-docs 20000 --scales 1,4 --keep-order --min-df 2 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _memory import measure_process_tree

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def make_words(n_words: int, seed: int) -> list[str]:
    """``n_words`` distinct pseudo-words of 3 to 10 letters."""
    rng = np.random.default_rng(seed)
    words: set[str] = set()
    while len(words) < n_words:
        length = int(rng.integers(3, 11))
        words.add("".join(rng.choice(LETTERS, size=length)))
    return sorted(words)


def write_corpus(path: Path, n_docs: int, words: list[str], mean_length: int, seed: int) -> int:
    """Write ``n_docs`` JSONL documents; returns the file size in bytes."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, len(words) + 1, dtype=np.float64)
    probs = ranks ** -1.07
    probs /= probs.sum()
    vocab = np.array(words, dtype=object)
    with open(path, "w", encoding="utf-8") as handle:
        for start in range(0, n_docs, 1000):
            count = min(1000, n_docs - start)
            lengths = rng.poisson(mean_length, size=count) + 1
            tokens = vocab[rng.choice(len(words), size=int(lengths.sum()), p=probs)]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            for i in range(count):
                text = " ".join(tokens[offsets[i]:offsets[i + 1]])
                handle.write(json.dumps({"id": f"doc-{start + i}", "text": text}) + "\n")
    return path.stat().st_size


def run_child(args: argparse.Namespace) -> None:
    """Body of one measured subprocess: ingest on a fresh local cluster, print the result as JSON."""
    from topicflow.pipeline.cluster import ClusterConfig, connect
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    cluster = ClusterConfig(workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit)
    from topicflow.io.tokenizer import PruneConfig

    with connect(cluster) as client:
        result = ingest_corpus([args.child], args.out, shard_size=args.shard_size, client=client,
                               prune=PruneConfig(min_df=args.min_df), keep_order=args.child_keep_order,
                               overwrite=True)
    print(json.dumps(result.to_dict()))


def pass_cpu_seconds(src: Path, store: Path, shard_size: int, repeat: int) -> dict[str, float]:
    """CPU seconds of the count pass and of the write pass without and with the ordered-token layer.

    Runs the task bodies of :mod:`topicflow.tasks.ingest` serially in this process (no cluster), over
    every partition of ``src``, encoding with the vocabulary of ``store``; best of ``repeat`` runs,
    the arms alternating. Process CPU time is far less sensitive than wall time to other jobs on a
    shared machine, and the passes are single-threaded Python, so it is their cost.
    """
    import shutil
    import time

    from topicflow.io.sources import discover_partitions
    from topicflow.io.sources.base import FieldSpec
    from topicflow.io.tokenizer import TokenizerConfig
    from topicflow.tasks.ingest import (
        count_partition,
        load_vocab_index,
        write_partition,
    )

    fields, tokenizer = FieldSpec(), TokenizerConfig()
    _, partitions = discover_partitions([src], fields, shard_size)
    index = load_vocab_index(str(store), fields.languages)
    best = {"count": float("inf"), "write": float("inf"), "write_keep_order": float("inf")}
    scratch = store.parent / "cpu-shards"
    for _ in range(max(1, repeat)):
        started = time.process_time()
        for part in partitions:
            count_partition(part, fields, tokenizer, "raise")
        best["count"] = min(best["count"], time.process_time() - started)
        for arm, keep_order in (("write", False), ("write_keep_order", True)):
            shutil.rmtree(scratch, ignore_errors=True)
            started = time.process_time()
            for part in partitions:
                write_partition(part, fields, tokenizer, "raise", index, str(scratch / f"{part.index:06d}"),
                                frozenset(), "all_terms_pruned", keep_order)
            best[arm] = min(best[arm], time.process_time() - started)
    shutil.rmtree(scratch, ignore_errors=True)
    return best


def directory_mb(path: Path, *, only: str | None = None) -> float:
    """Bytes on disk (file sizes) under ``path``, in MB; with ``only``, of the directories named so."""
    roots = [path] if only is None else [p for p in path.rglob(only) if p.is_dir()]
    return sum(f.stat().st_size for root in roots for f in root.rglob("*") if f.is_file()) / 1e6


def measure(command: list[str]) -> tuple[dict[str, Any], float, float]:
    """Run ``command``; return its JSON output, wall seconds and peak RSS (MB) of its process tree."""
    return measure_process_tree(command, what="ingest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-docs", type=int, default=20_000, help="documents at scale 1x")
    parser.add_argument("--scales", default="1,4,16", help="comma-separated multiples of --base-docs")
    parser.add_argument("--mean-length", type=int, default=80, help="mean words per document")
    parser.add_argument("--n-words", type=int, default=20_000, help="size of the generated word list")
    parser.add_argument("--shard-size", type=int, default=1000, help="documents per partition/shard")
    parser.add_argument("--workers", type=int, default=2, help="local Dask worker processes")
    parser.add_argument("--memory-limit", default=None, help="memory limit per worker, e.g. 2GiB")
    parser.add_argument("--work-dir", default=None, help="where inputs and stores go (default: a temp dir)")
    parser.add_argument("--min-df", type=int, default=1, help="vocabulary pruning (tokens of rarer terms are OOV)")
    parser.add_argument("--keep-order", action="store_true",
                        help="also ingest every size with --keep-order and report the overhead")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size and arm (best time reported)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-keep-order", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-ingest-"))
    work.mkdir(parents=True, exist_ok=True)
    words = make_words(args.n_words, seed=0)
    script = os.path.abspath(__file__)

    def command(src: Path, out: Path, keep_order: bool = False) -> list[str]:
        cmd = [sys.executable, script, "--child", str(src), "--out", str(out), "--shard-size",
               str(args.shard_size), "--workers", str(args.workers), "--min-df", str(args.min_df)]
        cmd += ["--child-keep-order"] if keep_order else []
        return cmd + (["--memory-limit", args.memory_limit] if args.memory_limit else [])

    # Warm-up: first imports and file-system caches, not reported.
    warm = work / "warmup.jsonl"
    write_corpus(warm, 500, words, args.mean_length, seed=99)
    measure(command(warm, work / "warmup.zarr"))

    arms = (False, True) if args.keep_order else (False,)
    rows = []
    for scale in (int(s) for s in args.scales.split(",")):
        n_docs = args.base_docs * scale
        src = work / f"corpus-{scale}x.jsonl"
        n_bytes = write_corpus(src, n_docs, words, args.mean_length, seed=scale)
        best: dict[bool, dict[str, Any]] = {}
        for _ in range(max(1, args.repeat)):
            for keep_order in arms:  # alternate the arms so drifting machine load hits both alike
                out = work / f"store-{scale}x{'-ordered' if keep_order else ''}.zarr"
                result, wall, peak_mb = measure(command(src, out, keep_order))
                if keep_order not in best or result["elapsed"] < best[keep_order]["ingest_s"]:
                    best[keep_order] = {
                        "scale": scale, "n_docs": n_docs, "input_mb": n_bytes / 1e6, "keep_order": keep_order,
                        "n_tokens": result["n_tokens"]["default"], "vocab": result["vocab_sizes"]["default"],
                        "n_shards": result["n_shards"], "ingest_s": result["elapsed"], "wall_s": wall,
                        "mb_per_s": n_bytes / 1e6 / result["elapsed"], "docs_per_s": n_docs / result["elapsed"],
                        "peak_rss_mb": peak_mb, "workers": args.workers, "shard_size": args.shard_size,
                        "store_mb": directory_mb(out / "shards"), "order_mb": directory_mb(out / "shards", only="order"),
                    }
        rows.extend(best[arm] for arm in arms)
    print(json.dumps(rows, indent=2))
    header = f"{'scale':>5} {'docs':>9} {'order':>5} {'input MB':>9} {'tokens':>11} {'vocab':>7} {'ingest s':>9} " \
             f"{'MB/s':>6} {'docs/s':>8} {'peak RSS MB':>12} {'shards MB':>10} {'order/ MB':>10}"
    print(header)
    for r in rows:
        print(f"{r['scale']:>4}x {r['n_docs']:>9,} {'yes' if r['keep_order'] else 'no':>5} {r['input_mb']:>9.1f} "
              f"{r['n_tokens']:>11,} {r['vocab']:>7,} {r['ingest_s']:>9.1f} {r['mb_per_s']:>6.2f} "
              f"{r['docs_per_s']:>8,.0f} {r['peak_rss_mb']:>12,.0f} {r['store_mb']:>10.1f} {r['order_mb']:>10.1f}")
    if args.keep_order:
        print("keep-order overhead (ingest time and shard bytes, with / without):")
        for plain, ordered in zip(rows[::2], rows[1::2]):
            print(f"{plain['scale']:>4}x  time x{ordered['ingest_s'] / plain['ingest_s']:.2f}  "
                  f"bytes x{ordered['store_mb'] / plain['store_mb']:.2f}")
        first = min(int(s) for s in args.scales.split(","))
        cpu = pass_cpu_seconds(work / f"corpus-{first}x.jsonl", work / f"store-{first}x.zarr", args.shard_size,
                               max(3, args.repeat))
        plain_total, ordered_total = cpu["count"] + cpu["write"], cpu["count"] + cpu["write_keep_order"]
        print(json.dumps({"scale": first, "cpu_seconds": cpu}, indent=2))
        print(f"CPU seconds at {first}x (serial, best of {max(3, args.repeat)}): count pass {cpu['count']:.2f}, "
              f"write pass {cpu['write']:.2f} -> {cpu['write_keep_order']:.2f} with --keep-order "
              f"(x{cpu['write_keep_order'] / cpu['write']:.2f}); both passes x{ordered_total / plain_total:.2f}")


if __name__ == "__main__":
    main()
