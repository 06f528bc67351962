"""Why the hybrid (Gibbs within VB) E-step loses to the dense one here: controlled experiments (issue 18).

Each run fits LDA on the training documents of an ingested corpus store, with either the dense VB
E-step (:func:`topicflow.models.lda.vb.estep.estep_block`) or the hybrid one
(:func:`topicflow.models.lda.vb.hybrid.hybrid_estep_block`), everything else identical: the same
random starting topics (Hoffman et al.'s Gamma(100, 1/100)), eta, alpha start and alpha mode, the
same minibatches and step sizes. The loop is the batch or online M-step of the package's drivers
(:func:`topicflow.models.lda.vb.objective.mstep_batch`, :mod:`topicflow.models.lda.vb.online`),
run in this process on the whole corpus in memory (no cluster: the corpora are small and the point
is the arithmetic, which is the drivers'). Every run is scored on the same held-out documents
(every document held out with probability 0.1, :func:`topicflow.metrics.heldout.split_documents`)
by two estimators, each applied identically to every run:

* ``completion``: document completion, theta folded in by the dense E-step on a random half of each
  held-out document's tokens, the other half scored (:func:`topicflow.metrics.heldout.completion_log_likelihood`);
* ``l2r``: Wallach et al.'s left-to-right estimator of log p(w_d) of whole documents, R particles
  (:func:`topicflow.metrics.left_to_right.left_to_right_log_likelihood`).

Both use the normalized lambda and the run's final alpha. The experiments (``--experiments``):

``samples``   M = 1, 5, 10, 50 kept sweeps (B = 5), batch and online
``burnin``    B = 0, 5, 20 (M = 5)
``init``      progressive vs random start of z (B = 5, M = 10: the dissertation's configuration)
``alpha``     alpha fixed vs learned (auto), and for the learned one the two alpha statistics
``online``    batch vs online, two minibatch sizes
``topics``    K = 20 and K = 100
``passes``    online S = 256 for 20 passes: does the online lead last?
``smallalpha``  the hybrid's E-step run with alpha / 2 and alpha / 5 (scored with alpha): does a
              sparser document prior in the sampler close the batch gap?

Usage::

    topicflow ingest ~/.cache/topicflow-dev-corpora/labeled_fortunes.jsonl --out fortunes.zarr --min-df 2
    python benchmarks/bench_hybrid_why.py --store fortunes.zarr [--topics 20] [--iters 30] [--passes 10]
        [--experiments samples burnin init alpha online topics] [--sample-counts 1 5 10 50] [--seeds 0 1]
        [--particles 10] [--json-only]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.heldout import completion_log_likelihood, split_doc_tokens, split_documents
from topicflow.metrics.left_to_right import left_to_right_log_likelihood
from topicflow.models.common.blocks import DocBlock, block_from_csr, concat_blocks, expand_tokens
from topicflow.models.common.dirichlet import newton_alpha
from topicflow.models.lda.vb import online as online_vb
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.layout import prepare_topics_from_var
from topicflow.models.lda.vb.objective import initial_topic_word_var, mstep_batch
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats

ETA = 0.01
EVAL_SEED = 12345


@dataclass(frozen=True)
class Arm:
    """One fit: the E-step and its settings, the learning loop, the alpha mode."""

    name: str
    estep: str = "hybrid"                 # "vb" or "hybrid"
    burn_in: int = 5
    samples: int = 5
    init: str = "progressive"
    alpha_stats: str = "mean"
    method: str = "batch"                 # "batch" or "online"
    batch_size: int = 256
    alpha_mode: str = "fixed"             # "fixed" (1/K) or "auto"
    n_topics: int = 20
    extra: dict[str, Any] = field(default_factory=dict)


def load_corpus(store: str, seed: int = 0) -> tuple[DocBlock, DocBlock]:
    """All documents of the store, split into (train, held-out); the training order is shuffled once."""
    corpus = Corpus.open(store)
    block = concat_blocks(list(corpus.iter_blocks()))
    train, test = split_documents(block, held_out_fraction=0.1, seed=seed)
    order = np.random.default_rng(seed).permutation(train.n_docs)  # stores are ordered by label
    train = block_from_csr(train.to_csr()[order], doc_ids=train.doc_ids[order])
    return train, block_from_csr(test.to_csr())


def rows(block: DocBlock, lo: int, hi: int) -> DocBlock:
    return block_from_csr(block.to_csr()[lo:hi], first_doc=lo, doc_ids=block.doc_ids[lo:hi])


def estep(arm: Arm, block: DocBlock, lam: np.ndarray, alpha: np.ndarray, seed: int, epoch: int) -> EStepStats:
    topics = prepare_topics_from_var({"default": lam})
    alpha = alpha * arm.extra.get("estep_alpha_scale", 1.0)
    if arm.estep == "vb":
        return estep_block(block, topics, alpha, VBParams(arm.n_topics, random_init=arm.method == "online",
                                                           seed=seed))[0]
    params = HybridParams(arm.n_topics, burn_in=arm.burn_in, samples=arm.samples, seed=seed, init=arm.init,  # type: ignore[arg-type]
                          alpha_stats=arm.alpha_stats)  # type: ignore[arg-type]
    return hybrid_estep_block(block, topics, alpha, params, epoch=epoch, compute_bound=False)[0]


def new_alpha(arm: Arm, alpha: np.ndarray, stats: EStepStats) -> np.ndarray:
    if arm.alpha_mode == "fixed":
        return alpha
    return newton_alpha(alpha, stats.alpha_suff, stats.n_docs)[0]


def fit(arm: Arm, train: DocBlock, args: argparse.Namespace, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Final (lambda, alpha) and the E-step seconds."""
    lam = initial_topic_word_var(arm.n_topics, train.n_terms, seed=seed)
    alpha = np.full(arm.n_topics, 1.0 / arm.n_topics)
    seconds = 0.0
    if arm.method == "batch":
        for it in range(args.iters):
            start = time.perf_counter()
            stats = estep(arm, train, lam, alpha, seed, it)
            seconds += time.perf_counter() - start
            lam = mstep_batch(stats.topic_terms["default"].to_dense(train.n_terms), ETA)
            alpha = new_alpha(arm, alpha, stats)
        return lam, alpha, seconds
    schedule = online_vb.StepSchedule(tau0=args.tau0, kappa=args.kappa)
    step, size = 0, arm.batch_size
    for epoch in range(arm.extra.get("passes", args.passes)):
        for lo in range(0, train.n_docs, size):
            batch = rows(train, lo, min(lo + size, train.n_docs))
            start = time.perf_counter()
            stats = estep(arm, batch, lam, alpha, seed, epoch)
            seconds += time.perf_counter() - start
            rho = schedule.rho(step)
            target = online_vb.topic_word_target(stats.topic_terms["default"].to_dense(train.n_terms), ETA,
                                                 train.n_docs / batch.n_docs)
            lam = online_vb.blend(lam, target, rho)
            alpha = online_vb.blend(alpha, new_alpha(arm, alpha, stats), rho)
            step += 1
    return lam, alpha, seconds


def score(test: DocBlock, lam: np.ndarray, alpha: np.ndarray, particles: int) -> dict[str, float]:
    topic_word = lam / lam.sum(axis=1, keepdims=True)
    observed, heldout = split_doc_tokens(test, seed=EVAL_SEED)
    ll, n = completion_log_likelihood(observed, heldout, {"default": topic_word}, alpha, VBParams(len(alpha)))
    indptr, terms = expand_tokens(test)
    l2r = left_to_right_log_likelihood(indptr, terms, topic_word, alpha, n_particles=particles, seed=EVAL_SEED)
    return {"completion": float(np.exp(-ll / n)), "l2r": float(np.exp(-l2r.sum() / test.n_tokens))}


def experiments(names: list[str], k: int, sample_counts: tuple[int, ...] = (1, 5, 10, 50)) -> list[tuple[str, Arm]]:
    """(experiment, arm) pairs; the same arm may serve several experiments (run once)."""
    vb, hy = Arm("dense VB", estep="vb", n_topics=k), Arm("hybrid B5 M5 (default)", n_topics=k)
    out: list[tuple[str, Arm]] = []
    if "samples" in names:
        for method in ("batch", "online"):
            out.append(("samples", replace(vb, name=f"dense VB, {method}", method=method)))
            for m in sample_counts:
                out.append(("samples", replace(hy, name=f"hybrid B5 M{m}, {method}", samples=m, method=method)))
    if "burnin" in names:
        out.append(("burnin", replace(vb, name="dense VB, batch")))
        for b in (0, 5, 20):
            out.append(("burnin", replace(hy, name=f"hybrid B{b} M5, batch", burn_in=b)))
    if "init" in names:
        for method in ("batch", "online"):
            for init in ("progressive", "random"):
                out.append(("init", replace(hy, name=f"hybrid B5 M10 {init}, {method}", samples=10, init=init,
                                            method=method)))
    if "alpha" in names:
        for method in ("batch", "online"):
            out.append(("alpha", replace(vb, name=f"dense VB, alpha auto, {method}", alpha_mode="auto",
                                         method=method)))
            for stats in ("mean", "samples"):
                out.append(("alpha", replace(hy, name=f"hybrid B5 M5, alpha auto ({stats}), {method}",
                                             alpha_mode="auto", alpha_stats=stats, method=method)))
    if "online" in names:
        for method, size in (("batch", 0), ("online", 64), ("online", 256), ("online", 1024)):
            tag = method if method == "batch" else f"online S={size}"
            out.append(("online", replace(vb, name=f"dense VB, {tag}", method=method, batch_size=size or 256)))
            out.append(("online", replace(hy, name=f"hybrid B5 M5, {tag}", method=method, batch_size=size or 256)))
    if "topics" in names:
        for kk in (20, 100):
            for method in ("batch", "online"):
                out.append(("topics", replace(vb, name=f"dense VB, K={kk}, {method}", n_topics=kk, method=method)))
                out.append(("topics", replace(hy, name=f"hybrid B5 M5, K={kk}, {method}", n_topics=kk,
                                              method=method)))
    if "passes" in names:
        for m in (5, 10):
            out.append(("passes", replace(hy, name=f"hybrid B5 M{m}, online 20 passes", samples=m, method="online",
                                          extra={"passes": 20})))
        out.append(("passes", replace(vb, name="dense VB, online 20 passes", method="online", extra={"passes": 20})))
    if "smallalpha" in names:
        out.append(("smallalpha", replace(vb, name="dense VB, batch")))
        for scale in (1.0, 0.5, 0.2):
            out.append(("smallalpha", replace(hy, name=f"hybrid B5 M10, E-step alpha x{scale}, batch", samples=10,
                                              extra={"estep_alpha_scale": scale})))
    return out


def _key(arm: Arm) -> tuple[Any, ...]:
    return (arm.estep, arm.burn_in if arm.estep == "hybrid" else 0, arm.samples if arm.estep == "hybrid" else 0,
            arm.init if arm.estep == "hybrid" else "", arm.alpha_stats if arm.alpha_mode == "auto" else "",
            arm.method, arm.batch_size if arm.method == "online" else 0, arm.alpha_mode, arm.n_topics,
            tuple(sorted(arm.extra.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--iters", type=int, default=30, help="batch iterations")
    parser.add_argument("--passes", type=int, default=10, help="online passes")
    parser.add_argument("--tau0", type=float, default=10.0)
    parser.add_argument("--kappa", type=float, default=0.7)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--particles", type=int, default=10)
    parser.add_argument("--experiments", nargs="+",
                        default=["samples", "burnin", "init", "alpha", "online", "topics"])
    parser.add_argument("--sample-counts", type=int, nargs="+", default=[1, 5, 10, 50],
                        help="kept sweeps M of the samples experiment")
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args(argv)
    train, test = load_corpus(args.store)
    warm = rows(train, 0, 20)  # compile (or load) the numba kernels before timing
    estep(Arm("w", estep="vb"), warm, initial_topic_word_var(20, train.n_terms, seed=0), np.full(20, 0.05), 0, 0)
    estep(Arm("w"), warm, initial_topic_word_var(20, train.n_terms, seed=0), np.full(20, 0.05), 0, 0)
    done: dict[tuple[Any, ...], dict[str, Any]] = {}
    results = []
    for experiment, arm in experiments(args.experiments, args.topics, tuple(args.sample_counts)):
        key = _key(arm)
        if key not in done:
            runs = []
            for seed in args.seeds:
                lam, alpha, seconds = fit(arm, train, args, seed)
                runs.append({"seed": seed, "estep_seconds": seconds, "alpha_sum": float(alpha.sum()),
                             **score(test, lam, alpha, args.particles)})
            done[key] = {"runs": runs, **{m: float(np.mean([r[m] for r in runs]))
                                          for m in ("completion", "l2r", "alpha_sum", "estep_seconds")},
                         "completion_sd": float(np.std([r["completion"] for r in runs], ddof=1))
                         if len(runs) > 1 else 0.0,
                         "l2r_sd": float(np.std([r["l2r"] for r in runs], ddof=1)) if len(runs) > 1 else 0.0}
            print(f"# {experiment:8} {arm.name:45} completion {done[key]['completion']:8.1f} "
                  f"l2r {done[key]['l2r']:8.1f} alpha sum {done[key]['alpha_sum']:.2f}", file=sys.stderr, flush=True)
        results.append({"experiment": experiment, "arm": arm.name, "settings": {
            k: v for k, v in arm.__dict__.items() if k not in ("name", "extra")}, **done[key]})
    report = {"benchmark": "hybrid_why", "python": sys.version.split()[0], "machine": platform.machine(),
              "argv": sys.argv[1:], "store": args.store, "train_docs": train.n_docs, "train_tokens": train.n_tokens,
              "test_docs": test.n_docs, "test_tokens": test.n_tokens, "n_terms": train.n_terms,
              "iters": args.iters, "passes": args.passes, "tau0": args.tau0, "kappa": args.kappa, "eta": ETA,
              "seeds": args.seeds, "particles": args.particles, "results": results}
    print(json.dumps(report, indent=1))
    if not args.json_only:
        print(f"{'experiment':10} {'arm':48} {'completion':>16} {'left-to-right':>16} {'alpha sum':>9} {'E-step s':>8}")
        for r in results:
            print(f"{r['experiment']:10} {r['arm']:48} {r['completion']:>9.1f} ± {r['completion_sd']:<4.0f} "
                  f"{r['l2r']:>9.1f} ± {r['l2r_sd']:<4.0f} {r['alpha_sum']:>9.2f} {r['estep_seconds']:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
