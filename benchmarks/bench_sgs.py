"""Streaming Gibbs sampling (SGS) and its distributed form (DSGS) against online VB and batch CGS.

Gao, Chen and Zhu (2016) report that SGS reaches a held-out perplexity close to batch collapsed
Gibbs, better than streaming variational Bayes (SVB, Broderick et al. 2013) at small minibatches,
that decay helps at larger minibatches, and that DSGS scales because its updates are small. This
benchmark compares SGS with Hoffman et al.'s *online* VB instead, which is not the paper's baseline
(``topicflow reproduce gao2016`` runs the paper's comparison with SVB). Three experiments; every model is scored by one evaluator, the document-completion perplexity of
``bench_vb_lda.py`` (:func:`topicflow.metrics.heldout.completion_log_likelihood`) on the same
held-out documents, from its topic-word matrix and alpha alone. All systems share K, alpha (fixed,
symmetric) and the topic-word prior (beta = eta), and see the training documents once, in store
order (the real corpus is shuffled once by ``bench_vb_lda.split_jsonl``).

``batch-size``
    For each minibatch size S: SGS (decay 1, ``--max-iters`` sweeps at most per minibatch, stopping
    after ``--patience`` sweeps without a better training perplexity, "posterior" start), online VB
    (:func:`topicflow.pipeline.vb.online.fit_online`, one pass, rho_t = (tau0 + t) ** -kappa, fixed
    alpha, Dask's threaded pool in this process) and, once, batch CGS
    (:func:`topicflow.models.lda.gibbs.chain.run_sweeps`, ``--cgs-sweeps`` sweeps over all training
    documents: the reference SGS is after).
``decay``
    SGS for every S and every decay in ``--decays``.
``dsgs``
    At S = ``--dsgs-batch-size``: SGS in this process, then DSGS on local Dask clusters of 1 and 2
    worker processes (one thread each; real parallelism on this 2-core machine), with as many
    sampler loops as processes ("real"), and with ``--simulated-loops`` loops on the 2 processes
    (several loops per process and core: "simulated" workers, which measure how asynchrony grows,
    not speed-up). Reported: tokens/s over the whole stream (wall time of ``run_dsgs``, reading
    included, numba warmed up on every worker first), payload bytes per minibatch fetched and pushed
    against one dense float64 update of N, the staleness seen (pushes by other loops between a
    minibatch's fetch and its push) and lag (earlier minibatches missing from its prior), and the
    held-out perplexity at the end of the stream (equal documents) against SGS's. Every
    configuration with several loops runs fully asynchronous and with a synchronized start
    (``sync_first`` = loops: the first minibatches each wait for all earlier ones). DSGS with a
    staleness bound of 0 (sequential, equal to SGS) is run once on 2 processes for the cost of
    synchronization.

SGS and batch CGS run single-threaded (numba kernels in this process); online VB's E-steps use the
local thread pool (2 threads). Times are wall times on a machine shared with other jobs: the JSON
records the load average before each run.

Examples
--------
Real corpus (JSON Lines with ``id`` and ``text``; shuffled, every tenth document held out)::

    python benchmarks/bench_sgs.py --jsonl /tmp/devcorpora/labeled_fortunes.jsonl /tmp/devcorpora/bible_kjv.jsonl

Generated corpus (the generating model has ``--topics`` topics over ``--synth-vocab`` terms)::

    python benchmarks/bench_sgs.py --synth-docs 400000 --batch-sizes 256 1024 4096 --decays 1.0 0.9

Prints one JSON object per measurement as it finishes, a final JSON report (with the exact command),
then tables.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench_vb_lda import add_corpus_arguments, build_real, build_synth, heldout_blocks, load_csr, perplexity

from topicflow.io.corpus.reader import Corpus
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.gibbs.state import GibbsParams
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.scores import topic_word_distribution
from topicflow.models.lda.streaming.sgs import SGSParams, topic_word_var
from topicflow.pipeline.vb.batch import VBConfig
from topicflow.pipeline.vb.online import OnlineConfig, fit_online
from topicflow.pipeline.streaming.dsgs import run_dsgs
from topicflow.pipeline.streaming.sgs import run_sgs

EXPERIMENTS = ("batch-size", "decay", "dsgs")


# ----------------------------------------------------------------------------- systems


def sgs_params(args: argparse.Namespace, decay: float, seed: int) -> SGSParams:
    return SGSParams(n_topics=args.topics, doc_topic_prior=args.alpha, topic_word_prior=args.beta, decay=decay,
                     max_iter=args.max_iters, patience=args.patience, init=args.init, seed=seed)


def score_sgs(state: Any, params: SGSParams, pairs: list) -> float:
    return perplexity(pairs, topic_word_var(state, params), params.alpha)


def run_sgs_point(train: Corpus, pairs: list, args: argparse.Namespace, batch_size: int, decay: float,
                  seed: int) -> dict[str, Any]:
    params = sgs_params(args, decay, seed)
    load = os.getloadavg()[0]
    result = run_sgs(train, params, batch_size=batch_size)
    iterations = [r.iterations for r in result.records]
    return {"system": "sgs", "batch_size": batch_size, "decay": decay, "seed": seed, "load": load,
            "seconds": result.seconds, "tokens_per_second": result.state.tokens_seen / result.seconds,
            "minibatches": len(result.records), "mean_iterations": float(np.mean(iterations)),
            "stopped_early": sum(r.stop_reason == "no_improvement" for r in result.records),
            "perplexity": score_sgs(result.state, params, pairs)}


def run_ovb_point(train: Corpus, pairs: list, args: argparse.Namespace, batch_size: int, seed: int) -> dict[str, Any]:
    config = VBConfig(n_topics=args.topics, doc_topic_prior_mode="fixed", doc_topic_prior=args.alpha, topic_word_prior=args.beta, seed=seed)
    online = OnlineConfig(batch_size=batch_size, tau0=args.tau0, kappa=args.kappa, passes=1, eval_every=0)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    result = fit_online(train, config, online)
    seconds = time.perf_counter() - started
    state = result.state
    return {"system": "online-vb", "batch_size": batch_size, "seed": seed, "load": load, "seconds": seconds,
            "tokens_per_second": train.n_tokens / seconds, "minibatches": result.t,
            "perplexity": perplexity(pairs, state.topic_word()["default"], state.doc_topic_prior)}


def run_cgs_point(train: Corpus, pairs: list, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    block = block_from_csr(load_csr(train))
    params = GibbsParams(n_topics=args.topics, doc_topic_prior=args.alpha, topic_word_prior=args.beta, seed=seed)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    state = run_sweeps(initial_state(block, params), params, args.cgs_sweeps)
    seconds = time.perf_counter() - started
    return {"system": "batch-cgs", "sweeps": args.cgs_sweeps, "seed": seed, "load": load, "seconds": seconds,
            "tokens_per_second": block.n_tokens * args.cgs_sweeps / seconds,
            "perplexity": perplexity(pairs, topic_word_distribution(state), params.alpha)}


def run_dsgs_point(train: Corpus, pairs: list, args: argparse.Namespace, client: Any, processes: int, loops: int,
                   staleness: int | None, sync_first: int, seed: int) -> dict[str, Any]:
    params = sgs_params(args, args.dsgs_decay, seed)
    load = os.getloadavg()[0]
    result = run_dsgs(train, params, batch_size=args.dsgs_batch_size, client=client, n_workers=loops,
                      staleness=staleness, sync_first=sync_first)
    records = result.records
    dense = float(np.mean([r.dense_bytes for r in records]))
    return {
        "system": "dsgs", "label": "real" if loops <= processes else "simulated", "processes": processes,
        "loops": loops, "staleness_bound": staleness, "sync_first": sync_first, "batch_size": args.dsgs_batch_size,
        "decay": args.dsgs_decay,
        "seed": seed, "load": load, "seconds": result.seconds, "tokens_per_second": result.tokens_per_second,
        "minibatches": len(records), "mean_iterations": float(np.mean([r.iterations for r in records])),
        "bytes_pushed_per_minibatch": float(np.mean([r.bytes_pushed for r in records])),
        "delta_nonzeros_per_minibatch": float(np.mean([r.nonzeros for r in records])),
        "terms_per_minibatch": float(np.mean([r.terms_used for r in records])),
        "bytes_fetched_per_minibatch": float(np.mean([r.bytes_fetched for r in records])),
        "dense_bytes": dense,
        "push_vs_dense": float(np.mean([r.bytes_pushed for r in records])) / dense,
        "fetch_vs_dense": float(np.mean([r.bytes_fetched for r in records])) / dense,
        "staleness_mean": float(np.mean([r.staleness for r in records])),
        "staleness_max": int(max(r.staleness for r in records)),
        "lag_mean": float(np.mean([r.lag for r in records])), "lag_max": int(max(r.lag for r in records)),
        "wait_seconds": float(sum(r.wait_seconds for r in records)),
        "sample_seconds": float(sum(r.sample_seconds for r in records)),
        "comm_seconds": float(sum(r.comm_seconds for r in records)),
        "loop_seconds": float(sum(r.seconds for r in records)),
        "perplexity": score_sgs(result.state, params, pairs),
    }


# ----------------------------------------------------------------------------- experiments


def emit(rows: list[dict[str, Any]], row: dict[str, Any]) -> None:
    rows.append(row)
    print(json.dumps(row), flush=True)


def streaming_experiments(train: Corpus, pairs: list, args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    decays = sorted(set(args.decays) | {1.0}, reverse=True) if "decay" in args.experiments else [1.0]
    for seed in args.seeds:
        if "batch-size" in args.experiments and args.cgs_sweeps:
            emit(rows, run_cgs_point(train, pairs, args, seed))
        for batch_size in args.batch_sizes:
            for decay in decays:
                emit(rows, run_sgs_point(train, pairs, args, batch_size, decay, seed))
            if "batch-size" in args.experiments and "online-vb" in args.systems:
                emit(rows, run_ovb_point(train, pairs, args, batch_size, seed))


def dsgs_experiments(train: Corpus, pairs: list, args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    from distributed import Client, LocalCluster

    for seed in args.seeds:
        emit(rows, {**run_sgs_point(train, pairs, args, args.dsgs_batch_size, args.dsgs_decay, seed),
                    "label": "reference", "processes": 0, "loops": 1})
        for processes in (1, 2):
            with LocalCluster(n_workers=processes, threads_per_worker=1, processes=True,
                              dashboard_address=":0") as cluster, Client(cluster) as client:
                warm = sgs_params(args, args.dsgs_decay, seed)
                run_dsgs(train, warm, batch_size=args.dsgs_batch_size, client=client, n_workers=processes,
                         max_docs=2 * processes * args.dsgs_batch_size)  # numba caches loaded on every worker
                loops = [processes] + ([n for n in args.simulated_loops if n > processes] if processes == 2 else [])
                for n_loops in loops:
                    for sync_first in ((0, n_loops) if n_loops > 1 else (0,)):
                        emit(rows, run_dsgs_point(train, pairs, args, client, processes, n_loops, None, sync_first,
                                                  seed))
                if processes == 2:
                    emit(rows, run_dsgs_point(train, pairs, args, client, processes, 2, 0, 0, seed))


# ----------------------------------------------------------------------------- output


def mean_rows(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Rows grouped by ``keys`` (over seeds): numeric fields averaged (``*_max`` fields: the maximum)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    out = {}
    for key, group in groups.items():
        cell: dict[str, Any] = {"n": len(group)}
        for name, value in group[0].items():
            if name in keys or isinstance(value, (str, bool)) or value is None:
                cell[name] = value
            elif name.endswith("_max"):
                cell[name] = max(r[name] for r in group)
            else:
                cell[name] = float(np.mean([r[name] for r in group]))
        out[key] = cell
    return out


def print_tables(report: dict[str, Any]) -> None:
    rows = report["rows"]
    info = report["corpus"]
    print()
    print(f"corpus: {info['kind']}: {info['n_docs']:,} training docs, {info['n_tokens']:,} tokens, "
          f"{info['n_terms']:,} terms, {info['heldout_docs_scored']:,} held-out docs scored; "
          f"K={report['settings']['topics']}, alpha={report['settings']['alpha']}, beta={report['settings']['beta']}; "
          f"mean over seeds {report['settings']['seeds']}")
    cgs = [r for r in rows if r["system"] == "batch-cgs"]
    if cgs:
        print(f"batch CGS, {cgs[0]['sweeps']} sweeps: perplexity {np.mean([r['perplexity'] for r in cgs]):.1f}, "
              f"{np.mean([r['seconds'] for r in cgs]):.1f} s")
    stream = [r for r in rows if r["system"] in ("sgs", "online-vb") and r.get("label") is None]
    if stream:
        sgs_by = mean_rows([r for r in stream if r["system"] == "sgs"], ("batch_size", "decay"))
        ovb_by = mean_rows([r for r in stream if r["system"] == "online-vb"], ("batch_size",))
        decays = sorted({key[1] for key in sgs_by}, reverse=True)
        print()
        print("held-out perplexity after one pass, by minibatch size S (seconds in brackets)")
        print(f"{'S':>6} " + " ".join(f"{'SGS decay ' + str(d):>22}" for d in decays) + f" {'online VB':>22}")
        for size in sorted({key[0] for key in sgs_by}):
            cells = []
            for decay in decays:
                cell = sgs_by.get((size, decay))
                cells.append(f"{cell['perplexity']:>13.1f} ({cell['seconds']:>5.1f} s)" if cell else f"{'':>22}")
            ovb = ovb_by.get((size,))
            cells.append(f"{ovb['perplexity']:>13.1f} ({ovb['seconds']:>5.1f} s)" if ovb else f"{'':>22}")
            print(f"{size:>6} " + " ".join(cells))
    dist = [r for r in rows if r.get("label") in ("reference", "real", "simulated")]
    if dist:
        print()
        print(f"DSGS, S={report['settings']['dsgs_batch_size']}, decay {report['settings']['dsgs_decay']} "
              "(bytes: payload per minibatch; dense = one float64 N)")
        print(f"{'run':<26} {'tokens/s':>10} {'speed-up':>8} {'push B':>9} {'fetch B':>9} {'dense B':>10} "
              f"{'stale mean/max':>14} {'lag max':>7} {'comm %':>6} {'perplexity':>10} {'vs SGS':>7}")
        by = mean_rows(dist, ("label", "processes", "loops", "staleness_bound", "sync_first"))
        ref = next((v for k, v in by.items() if k[0] == "reference"), None)
        one = next((v for k, v in by.items() if k[0] == "real" and k[1] == 1), None)
        for (label, processes, loops, bound, sync_first), cell in by.items():
            name = ("SGS (1 process)" if label == "reference" else
                    f"{label} {processes}p x {loops}" + ("" if bound is None else f" B={bound}")
                    + (f" sync {sync_first}" if sync_first else ""))
            speed = (f"{cell['tokens_per_second'] / one['tokens_per_second']:.2f}x"
                     if one and label != "reference" else "")
            extra = ("" if label == "reference" else
                     f"{cell['bytes_pushed_per_minibatch']:>9,.0f} {cell['bytes_fetched_per_minibatch']:>9,.0f} "
                     f"{cell['dense_bytes']:>10,.0f} {cell['staleness_mean']:>7.2f}/{cell['staleness_max']:<6d} "
                     f"{cell['lag_max']:>7d} {cell['comm_seconds'] / cell['loop_seconds']:>6.1%}")
            rel = f"{cell['perplexity'] / ref['perplexity'] - 1:+.1%}" if ref else ""
            print(f"{name:<26} {cell['tokens_per_second']:>10,.0f} {speed:>8} {extra:>69} "
                  f"{cell['perplexity']:>10.1f} {rel:>7}")


# ----------------------------------------------------------------------------- driver


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(parser)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--alpha", type=float, default=0.1, help="symmetric doc-topic prior, fixed (all systems)")
    parser.add_argument("--beta", type=float, default=0.01, help="topic-word prior (eta of online VB)")
    parser.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    parser.add_argument("--systems", default="sgs,online-vb", help="online-vb can be left out of batch-size")
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 256, 1024, 4096])
    parser.add_argument("--decays", nargs="+", type=float, default=[1.0, 0.9, 0.5])
    parser.add_argument("--max-iters", type=int, default=100, help="SGS: most sweeps per minibatch")
    parser.add_argument("--patience", type=int, default=10, help="SGS: sweeps without improvement before stopping")
    parser.add_argument("--init", choices=["posterior", "random"], default="posterior")
    parser.add_argument("--cgs-sweeps", type=int, default=200, help="batch CGS sweeps (0: skip)")
    parser.add_argument("--tau0", type=float, default=10.0)
    parser.add_argument("--kappa", type=float, default=0.7)
    parser.add_argument("--dsgs-batch-size", type=int, default=256)
    parser.add_argument("--dsgs-decay", type=float, default=1.0)
    parser.add_argument("--simulated-loops", nargs="*", type=int, default=[4, 8])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--max-heldout-docs", type=int, default=2000)
    parser.add_argument("--workdir", type=Path, default=None)
    return parser.parse_args(argv)


def load_corpora(args: argparse.Namespace, workdir: Path) -> tuple[Corpus, Corpus]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        if args.jsonl:
            return build_real(args.jsonl, workdir, client)
        return build_synth(args.synth_docs, args.topics, args.synth_vocab, workdir, client)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.systems = args.systems.split(",")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sgs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    train, test = load_corpora(args, workdir)
    pairs, kept = [], 0
    for pair in heldout_blocks(train, test):
        if kept >= args.max_heldout_docs:
            break
        pairs.append(pair)
        kept += pair[0].n_docs
    corpus = {"kind": "jsonl: " + " ".join(str(p) for p in args.jsonl) if args.jsonl else f"synth {args.synth_docs}",
              "n_docs": len(train), "n_tokens": train.n_tokens, "n_terms": len(train.vocabulary()),
              "heldout_docs_scored": kept}
    perplexity(pairs, np.ones((args.topics, corpus["n_terms"])), np.full(args.topics, args.alpha))  # warm-up
    run_sgs(train, sgs_params(args, 0.9, 0), batch_size=64, max_docs=128)  # numba warm-up in this process
    rows: list[dict[str, Any]] = []
    if {"batch-size", "decay"} & set(args.experiments):
        streaming_experiments(train, pairs, args, rows)
    if "dsgs" in args.experiments:
        dsgs_experiments(train, pairs, args, rows)
    report = {
        "benchmark": "sgs",
        "command": shlex.join(["python", *sys.argv]) if argv is None else shlex.join(["python", sys.argv[0], *argv]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                     if k not in ("jsonl", "workdir")},
        "corpus": corpus, "machine": {"cpus": os.cpu_count(), "platform": sys.platform},
        "total_seconds": time.perf_counter() - started, "rows": rows,
    }
    print(json.dumps(report), flush=True)
    print_tables(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
