"""``topicflow reproduce gao2016`` with a grid between ``--scale quick`` and ``--scale paper``.

The paper's settings (K = 50, alpha 0.1, beta 0.03, at most 400 sweeps per minibatch, patience 10)
over the whole training set, with fewer minibatch sizes and decays than ``--scale paper`` so that it
fits an afternoon on two shared cores. Writes what ``topicflow reproduce`` writes into ``--out``.

    python benchmarks/bench_gao2016.py /tmp/gao-verses.zarr --out /tmp/gao-mid \\
        --sizes 100 400 1600 6400 --decays 0.5 0.7 0.9 1.0 --curve-batch 1600 --svb-doc-tol 1e-4
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.reproduce import ReproduceRequest
from topicflow.pipeline.reproduce.claims import write_reproduction
from topicflow.pipeline.reproduce.gao2016 import SCALES, run_gao2016


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 400, 1600, 6400])
    parser.add_argument("--decays", type=float, nargs="+", default=[0.5, 0.7, 0.9, 1.0])
    parser.add_argument("--curve-batch", type=int, default=1600)
    parser.add_argument("--reading-batch", type=int, default=400)
    parser.add_argument("--cgs-sweeps", type=int, default=400)
    parser.add_argument("--max-test-docs", type=int, default=3000)
    parser.add_argument("--svb-doc-tol", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    settings = dataclasses.replace(
        SCALES["paper"], batch_sizes=tuple(args.sizes), decays=tuple(args.decays), curve_batch=args.curve_batch,
        reading_batch=args.reading_batch, cgs_sweeps=args.cgs_sweeps, max_test_docs=args.max_test_docs,
        svb_doc_tol=args.svb_doc_tol)
    args.out.mkdir(parents=True, exist_ok=True)
    with connect(ClusterConfig(workers=args.workers)) as client:
        request = ReproduceRequest(corpora=[Corpus.open(args.store)], out=args.out, scale="paper", seed=args.seed,
                                   client=client)
        started = time.perf_counter()
        result = run_gao2016(request, settings)
        result.seconds = time.perf_counter() - started
    result.settings["grid"] = "bench_gao2016.py: " + " ".join(f"{k}={v}" for k, v in vars(args).items())
    write_reproduction(result, args.out)
    print((args.out / "claims.md").read_text())


if __name__ == "__main__":
    main()
