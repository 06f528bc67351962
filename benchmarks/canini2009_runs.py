"""Two runs behind the canini2009 section of benchmarks/RESULTS.md that the reproduction command does not make.

``paper-runs``: ``topicflow reproduce canini2009`` at the paper's per-run settings (100 samples or
particles, 10 evaluation points, 200 Gibbs sweeps) with fewer runs than the paper's 30 (``--runs``).

``issue5``: the issue-5 "algorithms" configuration of bench_streaming.py (incremental Gibbs as one sample
rejuvenating 20 history tokens after every token, a particle filter of 50 particles rejuvenating 20) scored
both ways: held-out NMI by fold-in and as the next documents of the stream.

Both read the stores that ``bench_streaming.build_subset`` writes (``STORES/<subset>/{train,test}.zarr``):

    python benchmarks/labeled_subsets.py --source labeled_fortunes.jsonl --out /tmp/subsets
    python benchmarks/canini2009_runs.py build --subsets /tmp/subsets --stores /tmp/stores diff3 rel3 sim3
    python benchmarks/canini2009_runs.py paper-runs --stores /tmp/stores --runs 5 --out /tmp/paper5 diff3 rel3 sim3
    python benchmarks/canini2009_runs.py issue5 --stores /tmp/stores diff3 rel3
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from distributed import Client, LocalCluster

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.reproduce import canini2009, reproduce
from topicflow.pipeline.streaming import StreamConfig, run_stream

sys.path.insert(0, str(Path(__file__).parent))
from bench_streaming import build_subset  # noqa: E402


def stores(directory: Path, name: str) -> tuple[Corpus, Corpus]:
    return Corpus.open(directory / name / "train.zarr"), Corpus.open(directory / name / "test.zarr")


def paper_runs(args: argparse.Namespace, client: Client) -> dict[str, object]:
    canini2009.SCALES["paper-runs"] = {**canini2009.SCALES["paper"], "runs": args.runs}
    out: dict[str, object] = {}
    for name in args.subsets:
        train, test = stores(args.stores, name)
        result = reproduce("canini2009", [train], args.out / name, scale="paper-runs", client=client,  # type: ignore[arg-type]
                           test=test)
        out[name] = [{"claim": c.claim, "ours": c.ours, "held": c.held} for c in result.claims]
    return out


def issue5(args: argparse.Namespace, client: Client) -> dict[str, object]:
    out: dict[str, dict[str, object]] = {}
    for name in args.subsets:
        train, test = stores(args.stores, name)
        n = len(train)
        base = dict(n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.1, runs=10, seed=0, init_docs=max(5, n // 10),
                    init_sweeps=100, eval_every=max(10, n // 20), n_particles=50, ess_threshold=0.2,
                    rejuvenation_steps=20, rejuvenation_source="history", init_select="nmi", heldout_mode="next_docs")
        for algorithm in ("olda", "incgibbs", "pf"):
            result = run_stream(train, StreamConfig.create(algorithm=algorithm, **base), client=client,  # type: ignore[arg-type]
                                test_corpus=test)
            last = result.summary[-1]
            out.setdefault(name, {})[algorithm] = {
                key: last.get(key) for key in ("nmi_in_mean", "nmi_train_best_mean", "nmi_out_mean", "nmi_out_std",
                                               "nmi_out_next_mean", "nmi_out_next_std", "seconds_mean")}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "paper-runs", "issue5"])
    parser.add_argument("subsets", nargs="+", help="subset names (diff3 rel3 sim3)")
    parser.add_argument("--stores", type=Path, required=True, help="directory of <subset>/{train,test}.zarr")
    parser.add_argument("--subsets-dir", "--subsets", dest="subsets_dir", type=Path,
                        help="build: output directory of labeled_subsets.py")
    parser.add_argument("--runs", type=int, default=5, help="paper-runs: runs instead of the paper's 30")
    parser.add_argument("--out", type=Path, default=Path("canini2009-paper-runs"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        if args.command == "build":
            for name in args.subsets:
                train, test = build_subset(args.subsets_dir / name, args.stores, client)
                print(name, len(train), len(test))
            return 0
        result = paper_runs(args, client) if args.command == "paper-runs" else issue5(args, client)
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
