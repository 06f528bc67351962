"""Time and value of every held-out protocol, and of topics as features, on a real labeled corpus.

One LDA model (batch VB) is fitted on 80% of the documents; the other 20% are ingested twice: kept
in reading order (``--keep-order``) and as bags only. Then, on the held-out store:

``protocols``
    :func:`topicflow.pipeline.evaluation.heldout_likelihood` under ``completion-random``,
    ``completion-first-half``, ``left-to-right`` (R = 20, reading order) and ``bound``; each run twice,
    the second time reported (numba kernels cached and warm). Also ``left-to-right`` on the bag-only
    store (bag order), to show what the token order changes.
``particles``
    ``left-to-right`` with R in ``--particles``, each for ``--seeds``: time and the spread of the
    per-token estimate over seeds.
``features``
    :func:`topicflow.pipeline.evaluation.topic_features_scores` (5-fold logistic regression on the
    document-topic proportions beside the tf-idf baseline, and clustering scores).

All on Dask's threaded scheduler in this process (numba kernels release the GIL). Times are wall
times on a machine shared with other jobs: the JSON records the load average before each run.

Example::

    python benchmarks/bench_heldout.py --jsonl ~/.cache/topicflow-dev-corpora/labeled_fortunes.jsonl

Prints one JSON object per measurement, a final JSON report (with the command), then tables.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from topicflow.api.lda import LDA
from topicflow.io.corpus.reader import Corpus
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig
from topicflow.pipeline.evaluation import heldout_likelihood, topic_features_scores
from topicflow.pipeline.ingest.ingest import ingest_corpus

DEFAULT_CORPUS = Path.home() / ".cache" / "topicflow-dev-corpora" / "labeled_fortunes.jsonl"
PROTOCOLS = ("completion-random", "completion-first-half", "left-to-right", "bound")


def split_jsonl(source: Path, workdir: Path, every: int) -> tuple[Path, Path]:
    """Shuffle the documents (fixed seed) and hold out every ``every``-th one."""
    records = [json.loads(line) for line in open(source, encoding="utf-8")]
    order = np.random.default_rng(0).permutation(len(records))
    train, test = workdir / "train.jsonl", workdir / "test.jsonl"
    with open(train, "w", encoding="utf-8") as tr, open(test, "w", encoding="utf-8") as te:
        for position, index in enumerate(order):
            (te if position % every == every - 1 else tr).write(json.dumps(records[index]) + "\n")
    return train, test


def build_stores(source: Path, workdir: Path, shard_size: int) -> tuple[Corpus, Corpus, Corpus]:
    """(training store, held-out store kept in order, the same held-out documents as bags only)."""
    train, test = split_jsonl(source, workdir, every=5)
    fields = FieldSpec(label_field="label")
    ingest_corpus([train], workdir / "train.zarr", fields=fields, prune=PruneConfig(min_df=3, max_df_fraction=0.5),
                  shard_size=shard_size)
    ingest_corpus([test], workdir / "test-ordered.zarr", fields=fields, shard_size=shard_size, keep_order=True)
    ingest_corpus([test], workdir / "test.zarr", fields=fields, shard_size=shard_size)
    return tuple(Corpus.open(workdir / name) for name in ("train.zarr", "test-ordered.zarr", "test.zarr"))  # type: ignore[return-value]


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def emit(record: dict[str, Any], records: list[dict[str, Any]]) -> None:
    record["load_avg_1min"] = os.getloadavg()[0]
    records.append(record)
    print(json.dumps(record), flush=True)


def measure_protocols(model: Any, ordered: Corpus, bags: Corpus, records: list[dict[str, Any]]) -> None:
    runs = [(protocol, ordered) for protocol in PROTOCOLS] + [("left-to-right", bags)]
    for protocol, store in runs:
        first = time.perf_counter()
        heldout_likelihood(model, store, protocol)
        first = time.perf_counter() - first
        result, seconds = timed(lambda: heldout_likelihood(model, store, protocol))
        emit({"experiment": "protocols", "protocol": protocol, "token_order": result.token_order,
              "seconds": seconds, "first_seconds": first, "n_docs": result.n_docs, "n_tokens": result.n_tokens,
              "tokens_per_second": result.n_tokens / seconds, "log_lik_per_token": result.log_lik_per_token,
              "perplexity": result.perplexity, "settings": result.settings}, records)


def measure_particles(model: Any, ordered: Corpus, particles: list[int], seeds: list[int],
                      records: list[dict[str, Any]]) -> None:
    for n_particles in particles:
        values, times = [], []
        for seed in seeds:
            result, seconds = timed(lambda: heldout_likelihood(model, ordered, "left-to-right",
                                                               n_particles=n_particles, seed=seed))
            values.append(result.log_lik_per_token)
            times.append(seconds)
        emit({"experiment": "particles", "particles": n_particles, "seeds": seeds,
              "log_lik_per_token_mean": float(np.mean(values)), "log_lik_per_token_std": float(np.std(values)),
              "perplexity_mean": float(np.exp(-np.mean(values))), "seconds_mean": float(np.mean(times))}, records)


def measure_features(model: Any, store: Corpus, records: list[dict[str, Any]]) -> None:
    result, seconds = timed(lambda: topic_features_scores(model, store))
    emit({"experiment": "features", "seconds": seconds, **result.to_dict()}, records)


def tables(records: list[dict[str, Any]]) -> str:
    lines = ["| protocol | token order | docs | tokens | seconds (warm) | first run | tokens/s | nats/token | perplexity |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in (r for r in records if r["experiment"] == "protocols"):
        lines.append(f"| {r['protocol']} | {r['token_order'] or ''} | {r['n_docs']} | {r['n_tokens']} | "
                     f"{r['seconds']:.2f} | {r['first_seconds']:.2f} | {r['tokens_per_second']:,.0f} | "
                     f"{r['log_lik_per_token']:.4f} | {r['perplexity']:.1f} |")
    lines += ["", "| left-to-right R | nats/token (mean over seeds) | std over seeds | seconds |", "|---:|---:|---:|---:|"]
    for r in (r for r in records if r["experiment"] == "particles"):
        lines.append(f"| {r['particles']} | {r['log_lik_per_token_mean']:.4f} | {r['log_lik_per_token_std']:.4f} | "
                     f"{r['seconds_mean']:.2f} |")
    for r in (r for r in records if r["experiment"] == "features"):
        c, b, k = r["classification"], r["baseline"], r["clustering"]
        lines += ["", "| features | accuracy (5-fold mean +- std) |", "|---|---:|",
                  f"| document-topic proportions ({c['n_features']}) | {c['mean_accuracy']:.3f} +- {c['std_accuracy']:.3f} |",
                  f"| {b['features']} ({b['n_features']}) | {b['mean_accuracy']:.3f} +- {b['std_accuracy']:.3f} |",
                  "", f"Clustering ({k['n_classes']} labels, argmax of {k['n_clusters']} topics): NMI arithmetic "
                  f"{k['nmi_arithmetic']:.3f}, NMI geometric {k['nmi_geometric']:.3f}, ARI {k['ari']:.3f}, "
                  f"purity {k['purity']:.3f}; {r['seconds']:.1f} s for {r['n_docs']} documents."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jsonl", type=Path, default=DEFAULT_CORPUS, help="JSON Lines with id, text, label.")
    parser.add_argument("--workdir", type=Path, default=None, help="Where the stores go (default: a temporary dir).")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--max-iter", type=int, default=50)
    parser.add_argument("--shard-size", type=int, default=500)
    parser.add_argument("--particles", type=int, nargs="*", default=[1, 5, 20, 50])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    args = parser.parse_args(argv)
    if not args.jsonl.is_file():
        sys.exit(f"{args.jsonl} not found; build it with ../shared/corpora/build-dev-corpora.sh")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-heldout-"))
    workdir.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    train, ordered, bags = build_stores(args.jsonl, workdir, args.shard_size)
    fitted, seconds = timed(lambda: LDA(args.topics, max_iter=args.max_iter, seed=0).fit(train))
    emit({"experiment": "fit", "seconds": seconds, "train_docs": len(train), "test_docs": len(ordered),
          "test_tokens": ordered.n_tokens, "topics": args.topics, "iterations": fitted.n_iter_}, records)
    model = fitted.model_
    measure_protocols(model, ordered, bags, records)
    measure_particles(model, ordered, args.particles, args.seeds, records)
    measure_features(model, ordered, records)
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    print(json.dumps({"command": command, "records": records}))
    print(tables(records))


if __name__ == "__main__":
    main()
