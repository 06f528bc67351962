"""Peak memory and iteration time of batch-VB fits as a generated corpus grows 1x, 4x, 16x.

For each scale a corpus is drawn with ``topicflow synth`` (not measured), then a fresh subprocess fits
a few iterations on a fresh local cluster while the resident memory of its whole process tree
(driver, scheduler, nannies, workers) is sampled. The corpus is never loaded whole: memory should be
set by the shard size and the model (n_topics x n_terms), not by the number of documents.

Example::

    python benchmarks/bench_vb_memory.py --base-docs 25000 --topics 20 --iterations 3

Prints one JSON object per scale, then a table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _memory import measure_process_tree


def run_child(args: argparse.Namespace) -> None:
    """Body of one measured subprocess: fit on a fresh local cluster, print the result as JSON."""
    from topicflow.io.corpus.reader import Corpus
    from topicflow.pipeline.cluster import ClusterConfig, connect
    from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb

    corpus = Corpus.open(args.child)
    with connect(ClusterConfig(workers=args.workers, threads_per_worker=1)) as client:
        fit_batch_vb(corpus, VBConfig(n_topics=args.topics, max_iter=1), client=client)  # numba warm-up
        result = fit_batch_vb(corpus, VBConfig(n_topics=args.topics, max_iter=args.iterations, tol=0.0), client=client)
    seconds = [r.seconds for r in result.trace]
    print(json.dumps({"n_docs": len(corpus), "n_tokens": corpus.n_tokens, "n_shards": corpus.n_shards,
                      "seconds_per_iteration": sum(seconds) / len(seconds),
                      "tokens_per_second": corpus.n_tokens * len(seconds) / sum(seconds)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-docs", type=int, default=25000)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--doc-length", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bench-vb-memory"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    from topicflow.pipeline.cluster import ClusterConfig, connect
    from topicflow.pipeline.synth import synthesize_corpus

    args.work_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for scale in args.scales:
        store = args.work_dir / f"synth-{args.base_docs * scale}.zarr"
        if not store.exists():
            with connect(ClusterConfig(workers=args.workers, threads_per_worker=1)) as client:
                synthesize_corpus(store, n_docs=args.base_docs * scale, n_topics=args.topics, n_terms=args.vocab,
                                  doc_length=args.doc_length, doc_topic_prior=0.1, topic_word_prior=0.01, seed=scale, client=client)
        command = [sys.executable, __file__, "--child", str(store), "--topics", str(args.topics),
                   "--iterations", str(args.iterations), "--workers", str(args.workers)]
        result, wall, peak_mb = measure_process_tree(command, what="fit")
        row = {"scale": scale, "K": args.topics, **result, "wall_seconds": wall, "peak_rss_mb": peak_mb}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print(f"{'scale':>5} {'docs':>9} {'tokens':>11} {'s/iter':>7} {'tokens/s':>11} {'peak RSS MB':>12}")
    for row in rows:
        print(f"{row['scale']:>5} {row['n_docs']:>9} {row['n_tokens']:>11} {row['seconds_per_iteration']:>7.2f} "
              f"{row['tokens_per_second']:>11,.0f} {row['peak_rss_mb']:>12.0f}")


if __name__ == "__main__":
    main()
