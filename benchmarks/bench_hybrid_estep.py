"""Hybrid (Gibbs within VB) E-step against the dense VB E-step: cost per token and model quality.

Documents are drawn once, in memory, from a planted LDA model (:mod:`topicflow.models.lda.synth`:
``--true-topics`` 50 topics, alpha 0.1, eta 0.01, default 2000 training documents of ~100 tokens over
5000 terms, plus a held-out tail of 200 documents of the same draw). Then, for each number of topics K
fitted, two measurements (numba warmed up first):

1. Quality: ``--fit-iters`` batch iterations (E-step on the training block, then
   ``lambda = eta + stats``, fixed alpha = 0.1) from the same random lambda, once with each E-step;
   then the document-completion perplexity of the held-out documents
   (:func:`topicflow.metrics.heldout.completion_log_likelihood`: theta folded in on half of each
   document's tokens, the other half scored) from each run's normalized lambda, after every
   iteration (untimed). Reported: each run's E-step seconds and final perplexity, and the dense
   run's perplexity after the last iteration it finished within the hybrid run's E-step seconds
   (an equal-time comparison; "-" if none).
2. Speed, like for like: both E-steps on the same topics, the VB run's final lambda (topics after a few
   batch VB iterations); best of ``--repeats`` wall-clock runs. Seconds per token and tokens per second
   for the dense E-step (``estep_block``, default ``VBParams``: up to 100 sweeps, tol 1e-3), the hybrid
   E-step with its bound (``compute_bound=True``, as a fit computes it) and without it. Next to them the
   token-weighted mean cosine similarity, over terms, of the hybrid statistics' topic column against
   the dense E-step's expected counts (1 = the same direction).

Hybrid defaults: B = 5 burn-in and M = 5 kept sweeps (HybridParams' defaults), so 11 sweeps per document;
``--init random --samples 10`` is the dissertation's configuration (preset ``zhai2014-hybrid``). Why the
hybrid's perplexity trails here is measured by ``bench_hybrid_why.py`` (benchmarks/RESULTS.md).

Usage::

    .venv/bin/python benchmarks/bench_hybrid_estep.py [--docs 2000] [--doc-len 100] [--terms 5000]
        [--topics 100 500 1000] [--true-topics 50] [--burn-in 5] [--samples 5] [--init progressive] [--fit-iters 10]
        [--repeats 2] [--quick] [--json-only]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import Any, Callable

import numpy as np

from topicflow.models.common.blocks import DocBlock
from topicflow.metrics.heldout import completion_log_likelihood, split_doc_tokens
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.synth import SynthParams, draw_shard, draw_topic_word
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.objective import initial_topic_word_var
from topicflow.models.lda.vb.layout import prepare_topics_from_var

ALPHA, ETA = 0.1, 0.01
EVAL_SEED = 12345


def draw_blocks(n_docs: int, n_test: int, doc_len: int, n_terms: int,
                n_topics: int) -> tuple[DocBlock, DocBlock, np.ndarray]:
    """Training block, held-out block (the first ``n_docs`` and next ``n_test`` documents of one draw), true topics."""
    params = SynthParams(n_docs=n_docs + n_test, n_topics=n_topics, n_terms=n_terms, doc_length=doc_len,
                         doc_topic_prior=(ALPHA,), topic_word_prior=ETA, seed=1)
    topic_word = {"default": draw_topic_word(params, "default")}

    def block(first: int, count: int) -> DocBlock:
        shard = draw_shard(params, topic_word, first, count)
        indptr, term_ids, counts = shard.bags["default"]
        return DocBlock(indptr=indptr, term_ids=term_ids, counts=counts, doc_ids=shard.doc_ids,
                        first_doc=first, n_terms=n_terms)

    return block(0, n_docs), block(n_docs, n_test), topic_word["default"]


def perplexity(test: DocBlock, lam: np.ndarray, n_topics: int) -> float:
    observed, heldout = split_doc_tokens(test, seed=EVAL_SEED)
    topic_word = lam / lam.sum(axis=1, keepdims=True)
    log_lik, n = completion_log_likelihood(observed, heldout, {"default": topic_word}, ALPHA, VBParams(n_topics))
    return float(np.exp(-log_lik / n))


def vb_step(block: DocBlock, lam: np.ndarray, n_topics: int, epoch: int, args: argparse.Namespace) -> EStepStats:
    return estep_block(block, prepare_topics_from_var({"default": lam}), ALPHA, VBParams(n_topics))[0]


def hybrid_step(block: DocBlock, lam: np.ndarray, n_topics: int, epoch: int, args: argparse.Namespace) -> EStepStats:
    params = HybridParams(n_topics, burn_in=args.burn_in, samples=args.samples, init=args.init)
    return hybrid_estep_block(block, prepare_topics_from_var({"default": lam}), ALPHA, params, epoch=epoch)[0]


def fit(train: DocBlock, test: DocBlock, n_topics: int, step: Callable[..., EStepStats],
        args: argparse.Namespace) -> tuple[np.ndarray, dict[str, Any]]:
    """Batch iterations with one E-step: final lambda, E-step seconds, and (seconds, perplexity) per iteration.

    The held-out perplexity is computed after every iteration, outside the timed region.
    """
    lam = initial_topic_word_var(n_topics, train.n_terms, seed=0)
    seconds, curve = 0.0, []
    for epoch in range(args.fit_iters):
        start = time.perf_counter()
        stats = step(train, lam, n_topics, epoch, args)
        seconds += time.perf_counter() - start
        lam = ETA + stats.topic_terms["default"].to_dense(train.n_terms)
        curve.append((seconds, perplexity(test, lam, n_topics)))
    return lam, {"fit_estep_seconds": seconds, "perplexity": curve[-1][1], "curve": curve}


def perplexity_at(curve: list[tuple[float, float]], seconds: float) -> float | None:
    """Perplexity of the last iteration finished within ``seconds`` of E-step time (None if none was)."""
    done = [ppl for spent, ppl in curve if spent <= seconds]
    return done[-1] if done else None


def best_time(run: Callable[[], EStepStats], repeats: int) -> tuple[float, EStepStats]:
    best, stats = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        stats = run()
        best = min(best, time.perf_counter() - start)
    assert stats is not None
    return best, stats


def weighted_cosine(a: EStepStats, b: EStepStats) -> float:
    """Token-weighted mean over terms of the cosine between the two statistics' topic columns."""
    x, y = a.topic_terms["default"], b.topic_terms["default"]
    assert np.array_equal(x.term_ids, y.term_ids)
    cos = (x.values * y.values).sum(0) / (np.linalg.norm(x.values, axis=0) * np.linalg.norm(y.values, axis=0))
    weight = x.values.sum(0)
    return float((cos * weight).sum() / weight.sum())


def run_case(n_topics: int, train: DocBlock, test: DocBlock, args: argparse.Namespace) -> dict[str, Any]:
    lam_vb, vb_fit = fit(train, test, n_topics, vb_step, args)
    _, hybrid_fit = fit(train, test, n_topics, hybrid_step, args)
    topics = prepare_topics_from_var({"default": lam_vb})
    hybrid = HybridParams(n_topics, burn_in=args.burn_in, samples=args.samples, init=args.init)
    vb_s, vb_stats = best_time(lambda: estep_block(train, topics, ALPHA, VBParams(n_topics))[0], args.repeats)
    hy_s, hy_stats = best_time(lambda: hybrid_estep_block(train, topics, ALPHA, hybrid)[0], args.repeats)
    nb_s, _ = best_time(lambda: hybrid_estep_block(train, topics, ALPHA, hybrid, compute_bound=False)[0],
                        args.repeats)
    n_tokens = train.n_tokens
    return {
        "n_topics": n_topics, "n_docs": train.n_docs, "n_tokens": n_tokens, "n_terms": train.n_terms,
        "burn_in": args.burn_in, "samples": args.samples, "init": args.init, "vb_mean_sweeps": vb_stats.n_doc_iter / train.n_docs,
        "vb_capped": vb_stats.n_capped, "vb_seconds": vb_s, "hybrid_seconds": hy_s, "hybrid_nobound_seconds": nb_s,
        "vb_s_per_token": vb_s / n_tokens, "hybrid_s_per_token": hy_s / n_tokens,
        "hybrid_nobound_s_per_token": nb_s / n_tokens, "vb_tokens_per_s": n_tokens / vb_s,
        "hybrid_tokens_per_s": n_tokens / hy_s, "speedup": vb_s / hy_s,
        "stats_cosine": weighted_cosine(hy_stats, vb_stats), "fit_iters": args.fit_iters,
        "vb_fit_estep_seconds": vb_fit["fit_estep_seconds"],
        "hybrid_fit_estep_seconds": hybrid_fit["fit_estep_seconds"],
        "vb_perplexity": vb_fit["perplexity"], "hybrid_perplexity": hybrid_fit["perplexity"],
        "vb_perplexity_at_hybrid_seconds": perplexity_at(vb_fit["curve"], hybrid_fit["fit_estep_seconds"]),
        "vb_curve": vb_fit["curve"], "hybrid_curve": hybrid_fit["curve"], "held_out_docs": test.n_docs,
    }


def warm_up() -> None:
    """Compile (or load from cache) every numba kernel the timed code calls."""
    train, test, _ = draw_blocks(20, 5, 20, 50, 3)
    lam = initial_topic_word_var(3, 50, seed=0)
    estep_block(train, prepare_topics_from_var({"default": lam}), ALPHA, VBParams(3))
    hybrid_estep_block(train, prepare_topics_from_var({"default": lam}), ALPHA, HybridParams(3))
    perplexity(test, lam, 3)


def print_table(results: list[dict[str, Any]]) -> None:
    print(f"{'K':>5} {'tokens':>8} {'VB sw':>6} {'VB us/tok':>9} {'HY us/tok':>9} {'HY-nb us/tok':>12} "
          f"{'VB tok/s':>9} {'HY tok/s':>9} {'speedup':>7} {'cos':>6} {'fit VB s':>8} {'fit HY s':>8} "
          f"{'ppl VB':>8} {'ppl HY':>8} {'VB@HY s':>8}")
    for r in results:
        print(f"{r['n_topics']:>5} {r['n_tokens']:>8} {r['vb_mean_sweeps']:>6.1f} {r['vb_s_per_token'] * 1e6:>9.2f} "
              f"{r['hybrid_s_per_token'] * 1e6:>9.2f} {r['hybrid_nobound_s_per_token'] * 1e6:>12.2f} "
              f"{r['vb_tokens_per_s']:>9.0f} {r['hybrid_tokens_per_s']:>9.0f} {r['speedup']:>7.1f} "
              f"{r['stats_cosine']:>6.3f} {r['vb_fit_estep_seconds']:>8.1f} {r['hybrid_fit_estep_seconds']:>8.1f} "
              f"{r['vb_perplexity']:>8.1f} {r['hybrid_perplexity']:>8.1f} {_fmt(r['vb_perplexity_at_hybrid_seconds'])}")


def _fmt(value: float | None) -> str:
    return f"{'-':>8}" if value is None else f"{value:>8.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--doc-len", type=int, default=100)
    parser.add_argument("--terms", type=int, default=5000)
    parser.add_argument("--topics", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--true-topics", type=int, default=50, help="topics of the planted model")
    parser.add_argument("--burn-in", type=int, default=5)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--init", choices=["progressive", "random"], default="progressive",
                        help="start of each document's chain")
    parser.add_argument("--fit-iters", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 docs of ~50 tokens, 1000 terms, 10 true topics, K = 20 50, 2 iterations")
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.docs, args.doc_len, args.terms, args.topics, args.fit_iters, args.repeats = 200, 50, 1000, [20, 50], 2, 1
        args.true_topics = 10
    warm_up()
    train, test, true_topic_word = draw_blocks(args.docs, max(1, args.docs // 10), args.doc_len, args.terms,
                                               args.true_topics)
    results = [run_case(k, train, test, args) for k in args.topics]
    report = {"benchmark": "hybrid_estep", "python": sys.version.split()[0], "machine": platform.machine(),
              "argv": sys.argv[1:], "true_topics": args.true_topics,
              "true_model_perplexity": perplexity(test, true_topic_word, args.true_topics), "results": results}
    print(json.dumps(report, indent=2))
    if not args.json_only:
        print(f"held-out perplexity of the planted model ({args.true_topics} topics): "
              f"{report['true_model_perplexity']:.1f}")
        print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
