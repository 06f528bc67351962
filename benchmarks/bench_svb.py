"""Streaming variational Bayes (Broderick et al. 2013) against online VB (Hoffman et al. 2010) on a real corpus.

Broderick et al. claim that streaming VB (SDA-Bayes with VB as the primitive), which needs no step
sizes and no corpus size, reaches a held-out predictive performance comparable to stochastic/online
VB (SVI) after one pass. This benchmark sets the two side by side on one of the dev corpora, at a few
minibatch sizes S, one pass each:

- ``svb``: ``fit_svb`` (``topicflow fit --method svb --batch-size S``): each minibatch fitted by batch VB
  (at most ``--max-iter`` local iterations, stop at relative ELBO change ``--tol``) with the posterior
  so far as its prior.
- ``online``: ``fit_online`` (``--method online``) with rho_t = (tau0 + t) ** -kappa and D = the training
  size (known here: a single pass over a fixed corpus is the setting where SVI applies at all).
- ``gensim``: gensim's ``LdaModel`` (online VB; ``chunksize=S``, ``offset=tau0``, ``decay=kappa``,
  ``passes=1``, ``update_every=1``, the same alpha, eta and E-step limits), when installed.
- ``batch``: batch VB on the whole training set (``--batch-max-iter`` iterations), the offline reference.

Every model, gensim's included (its lambda wrapped as a topicflow model), is scored by the same code
as ``topicflow evaluate``: document completion (``completion-random``, seed 0) on every tenth document
held out. Training time is wall time around the fit (the cluster is warmed up first: numba compiles
on every worker). alpha is fixed at 1/K in every system by default (``--alpha fixed``; Broderick et
al.'s setting), eta = 0.01.

Example::

    python benchmarks/bench_svb.py --jsonl ~/.cache/topicflow-dev-corpora/labeled_fortunes.jsonl \
        --topics 20 --batch-sizes 64 256 1024

Prints one JSON object (with the exact command), then a readable table.
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

from bench_vb_lda import build_real, load_csr

from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.pipeline.vb.infer import evaluate_model
from topicflow.pipeline.vb.online import OnlineConfig, fit_online
from topicflow.pipeline.vb.svb import SVBConfig, fit_svb

#: Per-document E-step limits shared by every system (topicflow's defaults).
DOC_MAX_ITER, DOC_TOL = 100, 1e-3


def vb_config(args: argparse.Namespace, seed: int, **changes: Any) -> VBConfig:
    mode, alpha = ("auto", None) if args.alpha == "auto" else ("fixed", 1.0 / args.topics)
    settings = {"n_topics": args.topics, "doc_topic_prior_mode": mode, "doc_topic_prior": alpha,
                "topic_word_prior": args.eta, "max_iter": args.max_iter, "tol": args.tol,
                "max_doc_iter": DOC_MAX_ITER, "doc_tol": DOC_TOL, "seed": seed} | changes
    return VBConfig(**settings)  # type: ignore[arg-type]


def score(state: LDAState, train: Corpus, test: Corpus, client: Any, method: str) -> float:
    """Held-out perplexity of ``state`` by the ``topicflow evaluate`` code (completion-random, seed 0)."""
    model = SavedModel(state, {"default": train.vocabulary()}, ModelInfo(kind="vb_lda", method=method))
    return float(evaluate_model(model, test, client=client, seed=0).perplexity)


def run_svb(args: argparse.Namespace, train: Corpus, test: Corpus, client: Any, size: int, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    result = fit_svb(train, vb_config(args, seed), SVBConfig(batch_size=size), client=client)
    seconds = time.perf_counter() - started
    iterations = [r.iterations for r in result.trace]
    return {"perplexity": score(result.state, train, test, client, "svb"), "train_seconds": seconds,
            "minibatches": result.t, "local_iterations_mean": float(np.mean(iterations)),
            "local_iterations_max": int(max(iterations)),
            "minibatches_at_max_iter": sum(not r.converged for r in result.trace)}


def run_online(args: argparse.Namespace, train: Corpus, test: Corpus, client: Any, size: int, seed: int) -> dict[str, Any]:
    online = OnlineConfig(batch_size=size, tau0=args.tau0, kappa=args.kappa, passes=1, eval_every=0)
    started = time.perf_counter()
    result = fit_online(train, vb_config(args, seed), online, client=client)
    seconds = time.perf_counter() - started
    return {"perplexity": score(result.state, train, test, client, "online"), "train_seconds": seconds,
            "minibatches": result.t}


def run_gensim(args: argparse.Namespace, train: Corpus, test: Corpus, client: Any, size: int, seed: int,
               bow: list[list[tuple[int, int]]]) -> dict[str, Any]:
    from gensim.models import LdaModel

    k = args.topics
    alpha: Any = "auto" if args.alpha == "auto" else "symmetric"  # symmetric: 1/K, fixed
    started = time.perf_counter()
    id2word = dict(enumerate(str(t) for t in train.vocabulary().terms))
    model = LdaModel(num_topics=k, id2word=id2word, alpha=alpha, eta=args.eta, random_state=seed, dtype=np.float64)
    model.update(bow, chunksize=size, passes=1, update_every=1, offset=args.tau0, decay=args.kappa,
                 iterations=DOC_MAX_ITER, gamma_threshold=DOC_TOL)
    seconds = time.perf_counter() - started
    state = LDAState({"default": np.asarray(model.state.get_lambda(), dtype=np.float64)},
                     np.asarray(model.alpha, dtype=np.float64), {"default": args.eta})
    return {"perplexity": score(state, train, test, client, "online"), "train_seconds": seconds,
            "minibatches": -(-len(bow) // size)}


def run_batch(args: argparse.Namespace, train: Corpus, test: Corpus, client: Any, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    result = fit_batch_vb(train, vb_config(args, seed, max_iter=args.batch_max_iter), client=client)
    seconds = time.perf_counter() - started
    return {"perplexity": score(result.state, train, test, client, "batch"), "train_seconds": seconds,
            "iterations": len(result.trace), "converged": result.converged}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    perplexities = [r["perplexity"] for r in runs]
    return {"perplexity_mean": float(np.mean(perplexities)),
            "perplexity_sd": float(np.std(perplexities, ddof=1)) if len(runs) > 1 else 0.0,
            "train_seconds_mean": float(np.mean([r["train_seconds"] for r in runs])), "runs": runs}


def table(report: dict[str, Any]) -> str:
    lines = [f"{'system':<8} {'S':>6} {'perplexity':>18} {'train s':>9}  notes", "-" * 72]
    for row in report["results"]:
        spread = f"{row['perplexity_mean']:.1f} +- {row['perplexity_sd']:.1f}"
        first = row["runs"][0]
        note = ""
        if row["system"] == "svb":
            note = (f"{first['minibatches']} minibatches, {first['local_iterations_mean']:.1f} local it. "
                    f"(max {first['local_iterations_max']})")
        elif "minibatches" in first:
            note = f"{first['minibatches']} minibatches"
        elif "iterations" in first:
            note = f"{first['iterations']} iterations"
        size = "-" if row["batch_size"] is None else str(row["batch_size"])
        lines.append(f"{row['system']:<8} {size:>6} {spread:>18} {row['train_seconds_mean']:>9.1f}  {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jsonl", nargs="+", type=Path, required=True, help="real corpus: JSON Lines with id and text")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 256, 1024])
    parser.add_argument("--systems", default="svb,online,gensim,batch")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--alpha", choices=["fixed", "auto"], default="fixed")
    parser.add_argument("--eta", type=float, default=0.01)
    parser.add_argument("--max-iter", type=int, default=100, help="svb: local iterations per minibatch at most")
    parser.add_argument("--tol", type=float, default=1e-4, help="svb: relative change of the minibatch ELBO")
    parser.add_argument("--tau0", type=float, default=10.0, help="online and gensim: step-size delay")
    parser.add_argument("--kappa", type=float, default=0.7, help="online and gensim: forgetting rate")
    parser.add_argument("--batch-max-iter", type=int, default=100, help="batch VB: iterations at most")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    systems = args.systems.split(",")

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-svb-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        train, test = build_real(args.jsonl, workdir, client)
        warm = vb_config(args, 0, max_iter=2)
        fit_svb(train, warm, SVBConfig(batch_size=64), shards=[0], client=client)  # numba warm-up everywhere
        fit_online(train, warm, OnlineConfig(batch_size=64, eval_every=0), shards=[0], client=client)
        bow = None
        if "gensim" in systems:
            csr = load_csr(train)
            bow = [list(zip(row.indices.tolist(), row.data.astype(int).tolist())) for row in csr]
        results = []
        for size in args.batch_sizes:
            for system in [s for s in systems if s != "batch"]:
                runs = []
                for seed in args.seeds:
                    if system == "svb":
                        runs.append(run_svb(args, train, test, client, size, seed))
                    elif system == "online":
                        runs.append(run_online(args, train, test, client, size, seed))
                    elif system == "gensim":
                        runs.append(run_gensim(args, train, test, client, size, seed, bow or []))
                    print(f"{system} S={size}: {runs[-1]['perplexity']:.1f} in {runs[-1]['train_seconds']:.1f} s",
                          file=sys.stderr)
                results.append({"system": system, "batch_size": size, **summarize(runs)})
        if "batch" in systems:
            runs = [run_batch(args, train, test, client, seed) for seed in args.seeds]
            results.append({"system": "batch", "batch_size": None, **summarize(runs)})
        report = {
            "command": "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]),
            "corpus": {"files": [str(p) for p in args.jsonl], "train_docs": len(train), "test_docs": len(test),
                       "train_tokens": train.n_tokens, "vocabulary": len(train.vocabulary())},
            "settings": {"topics": args.topics, "alpha": args.alpha, "eta": args.eta, "max_iter": args.max_iter,
                         "tol": args.tol, "tau0": args.tau0, "kappa": args.kappa, "seeds": args.seeds,
                         "workers": args.workers, "cpu_count": os.cpu_count()},
            "results": results,
        }
    print(json.dumps(report, indent=2))
    print(table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
