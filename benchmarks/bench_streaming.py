"""Streaming samplers on real labeled three-label corpora: Canini et al. (2009) and May et al. (2014) again.

Corpora: the three-label subsets built by ``benchmarks/labeled_subsets.py`` from a real labeled English
corpus (``DIR/<subset>/train.jsonl`` and ``test.jsonl``, a 60/40 split), each ingested here with the
training vocabulary (English stop words; min df 2) and documents shuffled by a fixed seed, since the
source files are grouped by label and a stream must not be. K = 3 topics, alpha = 0.1, beta = 0.1.
Every configuration runs ``--runs`` seeds side by side on a local cluster of ``--workers`` processes;
the table gives mean and standard deviation over runs of the final in-sample NMI (every training
document's most frequent topic when it was seen, against its label) and out-of-sample NMI (test
documents, topics fixed, 5 Gibbs sweeps), and the JSON holds every run's trace.

Experiments (``--experiments``):

- ``algorithms``: o-LDA, incremental Gibbs (rejuvenation of ``--rejuv`` history tokens after each
  token), the particle filter (P = ``--particles``, ESS threshold 20% of P, ``--rejuv`` history tokens
  after each resampling), and batch collapsed Gibbs as the reference (Canini et al., Table 1).
- ``reservoir``: the particle filter rejuvenating from a reservoir of 1000 tokens against the whole
  history (May et al., sec. 4).
- ``init-size``: the particle filter initialized on 2%, 10% and 30% of the stream (May et al., Fig. 2).
- ``init-tuning``: one initialization against the best of ``--init-trials`` by NMI and by perplexity.
- ``long-stream``: one particle filter with the reservoir over a long generated stream: seconds per
  1000 tokens and the sampler's memory along the stream, against the history source.
- ``canini2009``: Canini et al.'s own protocol on each subset, through ``topicflow reproduce canini2009``
  (``--canini-scale quick|paper``): o-LDA and incremental Gibbs (|R| = 4) as the best of 100 independent
  samples, the PF with P = 100, ESS 20, |R| = 30, residual resampling; training-set NMI under the best
  sample now and held-out NMI with the test documents observed as the next ones, then restored; Table 1's
  runtime multiples. Claims tables and figures go to ``--plots`` as ``canini2009-<subset>-*``.

Example::

    python benchmarks/labeled_subsets.py --source /tmp/devcorpora/labeled_fortunes.jsonl --out /tmp/subsets
    python benchmarks/bench_streaming.py --subsets /tmp/subsets --runs 30 --plots benchmarks/plots

Prints one JSON object (with the exact command), then a readable table.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.streaming.config import StreamConfig, StreamResult
from topicflow.pipeline.streaming import run_stream

TOPICS = 3
ALPHA = 0.1
BETA = 0.1


def shuffled_copy(source: Path, target: Path, seed: int) -> Path:
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(seed).shuffle(lines)
    target.write_text("".join(lines), encoding="utf-8")
    return target


def build_subset(subset_dir: Path, workdir: Path, client: Any) -> tuple[Corpus, Corpus]:
    from topicflow.io.sources.base import FieldSpec
    from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    fields = FieldSpec(id_field="id", text_field="text", label_field="label")
    out = workdir / subset_dir.name
    out.mkdir(parents=True, exist_ok=True)
    train = shuffled_copy(subset_dir / "train.jsonl", out / "train.jsonl", seed=1)
    test = shuffled_copy(subset_dir / "test.jsonl", out / "test.jsonl", seed=2)
    ingest_corpus([train], out / "train.zarr", fields=fields, tokenizer=TokenizerConfig(),
                  prune=PruneConfig(min_df=2), shard_size=200, client=client)
    ingest_corpus([test], out / "test.zarr", fields=fields, tokenizer=TokenizerConfig(), prune=PruneConfig(),
                  shard_size=200, client=client)
    return Corpus.open(out / "train.zarr"), Corpus.open(out / "test.zarr")


#: Settings of the particle filters' base that batch Gibbs shares (the model's and the runs').
GIBBS_BASE = {"n_topics", "doc_topic_prior", "topic_word_prior", "runs", "seed", "eval_every"}


def configurations(experiment: str, n_docs: int, args: argparse.Namespace) -> dict[str, StreamConfig]:
    base = dict(n_topics=TOPICS, doc_topic_prior=ALPHA, topic_word_prior=BETA, runs=args.runs, seed=args.seed,
                init_docs=max(5, n_docs // 10), init_sweeps=args.init_sweeps, eval_every=max(10, n_docs // 20),
                n_particles=args.particles, ess_threshold=0.2, rejuvenation_steps=args.rejuv,
                rejuvenation_source="history", init_select="nmi")
    pf = StreamConfig.create(algorithm="pf", **base)  # type: ignore[arg-type]
    if experiment == "algorithms":
        return {
            "o-LDA": StreamConfig.create(algorithm="olda", **base),  # type: ignore[arg-type]
            "incremental Gibbs": StreamConfig.create(algorithm="incgibbs", **base),  # type: ignore[arg-type]
            "particle filter": pf,
            "batch Gibbs": StreamConfig.create(algorithm="gibbs", **{  # type: ignore[arg-type]
                **{k: v for k, v in base.items() if k in GIBBS_BASE}, "sweeps": args.gibbs_sweeps,
                "eval_every": args.gibbs_sweeps}),
        }
    if experiment == "reservoir":
        return {"history": pf, "reservoir 1000": StreamConfig.from_dict(
            {**pf.to_dict(), "rejuvenation_source": "reservoir", "reservoir_size": 1000})}
    if experiment == "init-size":
        return {f"init {share:.0%}": StreamConfig.from_dict({**pf.to_dict(), "init_docs": max(2, int(n_docs * share))})
                for share in (0.02, 0.10, 0.30)}
    if experiment == "init-tuning":
        tuned = {**pf.to_dict(), "init_trials": args.init_trials}
        return {"1 initialization": pf,
                f"best of {args.init_trials} by NMI": StreamConfig.from_dict({**tuned, "init_select": "nmi"}),
                f"best of {args.init_trials} by perplexity": StreamConfig.from_dict({**tuned, "init_select": "perplexity"})}
    raise ValueError(experiment)


def final_row(result: StreamResult) -> dict[str, Any]:
    last = result.summary[-1]
    keys = ("nmi_in_mean", "nmi_in_std", "nmi_out_mean", "nmi_out_std", "seconds_mean", "perplexity_out_mean")
    return {k: last.get(k) for k in keys} | {"runs": last["runs"], "docs_seen": last["docs_seen"]}


def run_canini2009(subset: str, train: Corpus, test: Corpus, args: argparse.Namespace, client: Any,
                   workdir: Path) -> dict[str, Any]:
    """``topicflow reproduce canini2009`` on one subset; the claims, and the figures copied to ``--plots``."""
    import shutil

    from topicflow.pipeline.reproduce import reproduce

    out = workdir / f"canini2009-{subset}"
    result = reproduce("canini2009", [train], out, scale=args.canini_scale, seed=args.seed, client=client, test=test)
    if args.plots is not None:
        args.plots.mkdir(parents=True, exist_ok=True)
        for name in result.figures:
            shutil.copy(out / name, args.plots / f"canini2009-{subset}-{name.split('-')[0]}.png")
    for claim in result.claims:
        print(f"{subset:6s} [{claim.held}] {claim.claim}: {claim.ours}", file=sys.stderr)
    return result.to_dict()


def run_subsets(args: argparse.Namespace, client: Any, workdir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for subset_dir in sorted(p for p in args.subsets.iterdir() if (p / "train.jsonl").is_file()):
        train, test = build_subset(subset_dir, workdir, client)
        for experiment in args.experiments:
            if experiment == "long-stream":
                continue
            if experiment == "canini2009":
                results.setdefault("canini2009", {})[subset_dir.name] = run_canini2009(
                    subset_dir.name, train, test, args, client, workdir)
                continue
            for name, config in configurations(experiment, len(train), args).items():
                started = time.perf_counter()
                result = run_stream(train, config, client=client, test_corpus=test)
                row = final_row(result) | {"wall_s": time.perf_counter() - started, "config": config.to_dict()}
                results.setdefault(subset_dir.name, {}).setdefault(experiment, {})[name] = row | {
                    "records": result.records}
                print(f"{subset_dir.name:6s} {experiment:12s} {name:28s} in {row['nmi_in_mean']:.3f} "
                      f"({row['nmi_in_std']:.3f}) out {row['nmi_out_mean']:.3f} ({row['nmi_out_std']:.3f})",
                      file=sys.stderr)
    return results


def long_stream(args: argparse.Namespace, client: Any, workdir: Path) -> dict[str, Any]:
    from topicflow.pipeline.synth import synthesize_corpus

    store = workdir / "long.zarr"
    synthesize_corpus(store, n_docs=args.long_docs, n_topics=10, n_terms=5000, doc_length=50, doc_topic_prior=0.1, topic_word_prior=0.01,
                      seed=5, client=client)
    corpus = Corpus.open(store)
    out: dict[str, Any] = {}
    for source in ("reservoir", "history"):
        config = StreamConfig.create(algorithm="pf", n_topics=10, doc_topic_prior=0.1, topic_word_prior=0.01,
                              n_particles=args.long_particles, ess_threshold=0.2, rejuvenation_steps=args.rejuv,
                              rejuvenation_source=source, reservoir_size=1000, init_docs=200, init_sweeps=50,
                              eval_every=args.long_docs // 20, runs=1, seed=args.seed)
        result = run_stream(corpus, config, client=client)
        rows = []
        for before, after in zip(result.records, result.records[1:]):
            tokens = after["tokens_seen"] - before["tokens_seen"]
            rows.append({"docs_seen": after["docs_seen"], "tokens_seen": after["tokens_seen"],
                         "s_per_1000_tokens": 1000 * (after["seconds"] - before["seconds"]) / max(tokens, 1),
                         "nbytes": after.get("nbytes"), "n_entries": after.get("n_entries"),
                         "depth_max": after.get("depth_max")})
        out[source] = rows
        print(f"long stream, {source}: " + ", ".join(f"{r['s_per_1000_tokens']:.3f}s/{r['nbytes'] / 1e6:.1f}MB"
                                                     for r in rows), file=sys.stderr)
    return out


def plot(results: dict[str, Any], directory: Path) -> list[str]:
    from topicflow.cli.plots import plot_metric_band

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for subset, experiments in results.items():
        for experiment, configs in experiments.items():
            traces = {}
            for name, row in configs.items():
                if row["config"]["algorithm"] == "gibbs":
                    continue
                runs: dict[int, list[tuple[int, float]]] = {}
                for record in row["records"]:
                    if record.get("nmi_in") is not None:
                        runs.setdefault(record["run"], []).append((record["docs_seen"], record["nmi_in"]))
                traces[name] = [runs[r] for r in sorted(runs)]
            path = directory / f"stream-{subset}-{experiment}.png"
            plot_metric_band(traces, ylabel="in-sample NMI", out=path, title=f"{subset}: {experiment}")
            written.append(str(path))
    return written


def table(results: dict[str, Any]) -> list[str]:
    lines = [f"{'subset':8s} {'experiment':12s} {'configuration':30s} {'NMI in-sample':>16s} {'NMI out-of-sample':>18s} "
             f"{'s/run':>7s}"]
    for subset, experiments in results.items():
        for experiment, configs in experiments.items():
            for name, row in configs.items():
                lines.append(f"{subset:8s} {experiment:12s} {name:30s} {row['nmi_in_mean']:8.3f} ({row['nmi_in_std']:.3f})"
                             f" {row['nmi_out_mean']:10.3f} ({row['nmi_out_std']:.3f}) {row['seconds_mean']:7.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subsets", type=Path, help="output directory of benchmarks/labeled_subsets.py")
    parser.add_argument("--experiments", nargs="+", default=["algorithms", "reservoir", "init-size", "init-tuning",
                                                             "long-stream"])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--particles", type=int, default=100)
    parser.add_argument("--rejuv", type=int, default=30)
    parser.add_argument("--init-sweeps", type=int, default=100)
    parser.add_argument("--init-trials", type=int, default=10)
    parser.add_argument("--gibbs-sweeps", type=int, default=200)
    parser.add_argument("--long-docs", type=int, default=100_000)
    parser.add_argument("--long-particles", type=int, default=20)
    parser.add_argument("--canini-scale", choices=["quick", "paper"], default="paper")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--plots", type=Path, default=None, help="directory for NMI band plots")
    parser.add_argument("--json", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    report: dict[str, Any] = {"command": "python " + " ".join(["benchmarks/bench_streaming.py", *sys.argv[1:]])}
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workdir = Path(tmp)
        if args.subsets is not None:
            report["subsets"] = run_subsets(args, client, workdir)
            if args.plots is not None:
                report["plots"] = plot({k: v for k, v in report["subsets"].items() if k != "canini2009"}, args.plots)
        if "long-stream" in args.experiments:
            report["long_stream"] = long_stream(args, client, workdir)
    text = json.dumps(report, default=float)
    if args.json is not None:
        args.json.write_text(text)
    print(text)
    if "subsets" in report:
        print("\n".join(table({k: v for k, v in report["subsets"].items() if k != "canini2009"})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
