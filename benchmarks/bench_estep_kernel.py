"""Micro-benchmark of the VB E-step kernel (``topicflow.models.lda.vb.estep.estep_block``) on one block.

Generates a block from planted LDA topics (default 2000 documents of 100 tokens, 10000 terms), builds
lambda = eta + scaled planted topics so documents need a realistic number of sweeps, warms numba
up, then times ``estep_block`` for each number of topics and dtype. The rate reported is
token-topic updates per second: nonzero entries x n_topics x sweeps / seconds (best of ``--repeats``
wall-clock runs; the per-CPU-second rate from ``time.thread_time`` is also given, as it is less
sensitive to other load on the machine), with sweeps counted
per document by the kernel (``EStepStats.n_doc_iter``; documents have equal token counts, so
entries per document x total sweeps is the exact count up to nonzeros-per-document variation).

Next to each rate, the machine's measured ceiling for the same arithmetic: :func:`_ceiling_sweeps`
runs only the kernel's two multiply-add passes per sweep on an in-cache document of the same size.

Usage::

    .venv/bin/python benchmarks/bench_estep_kernel.py [--docs 2000] [--doc-len 100] [--terms 10000]
        [--topics 20 100] [--repeats 3] [--json-only]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numba
import numpy as np
import scipy.sparse as sp

from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.layout import prepare_topics_from_var


def planted_block(n_docs: int, doc_len: int, n_terms: int, n_topics: int, seed: int) -> tuple[DocBlock, np.ndarray]:
    """Documents drawn from LDA with Dirichlet(0.05) topics; returns the block and the topics."""
    rng = np.random.default_rng(seed)
    topic_word = rng.dirichlet(np.full(n_terms, 0.05), size=n_topics)
    theta = rng.dirichlet(np.full(n_topics, 0.1), size=n_docs)
    doc_of_token = np.repeat(np.arange(n_docs), doc_len)
    cdf = np.cumsum(theta, axis=1)
    topic_of_token = np.minimum((rng.random(doc_of_token.shape[0])[:, None] > cdf[doc_of_token]).sum(1), n_topics - 1)
    words = np.empty_like(doc_of_token)
    for k in range(n_topics):
        mine = np.flatnonzero(topic_of_token == k)
        words[mine] = rng.choice(n_terms, size=mine.shape[0], p=topic_word[k])
    data = np.ones(doc_of_token.shape[0], dtype=np.int64)
    matrix = sp.csr_matrix((data, (doc_of_token, words)), shape=(n_docs, n_terms))
    return block_from_csr(matrix), topic_word


def time_case(block: DocBlock, topic_word: np.ndarray, dtype: type, repeats: int) -> dict[str, object]:
    n_topics, n_terms = topic_word.shape
    lam = 0.05 + topic_word * (block.n_tokens / n_topics)
    topics = prepare_topics_from_var({"default": lam}, dtype=dtype)
    params = VBParams(n_topics=n_topics, max_doc_iter=100, doc_tol=1e-3)
    alpha = np.full(n_topics, 0.1)
    estep_block(block.slice(0, 10), topics, alpha, params)  # numba warm-up (compile or load cache)
    best = best_cpu = np.inf
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        stats, _ = estep_block(block, topics, alpha, params)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.thread_time() - start_cpu)
    nnz = int(block.term_ids.shape[0])
    updates = nnz / block.n_docs * stats.n_doc_iter * n_topics
    return {
        "n_topics": n_topics, "dtype": np.dtype(dtype).name, "n_docs": block.n_docs, "n_terms": n_terms,
        "nnz": nnz, "n_tokens": block.n_tokens, "mean_sweeps": stats.n_doc_iter / block.n_docs,
        "n_capped": stats.n_capped, "seconds": best, "cpu_seconds": best_cpu, "docs_per_s": block.n_docs / best,
        "token_topic_updates_per_s": updates / best, "token_topic_updates_per_cpu_s": updates / best_cpu,
    }


@numba.njit(nogil=True, cache=True)
def _ceiling_sweeps(rows, cols, cnts, eth, norm, acc, n_sweeps):  # type: ignore[no-untyped-def]
    """The E-step's two multiply-add passes per sweep on in-cache data, each in its best layout.

    Per sweep: norm_j = sum_k eth_k cols[k, j] (k outer, vectorized over j) and
    acc_k = sum_j (cnts_j / norm_j) rows[j, k] (j outer, vectorized over k): 2 multiply-adds per
    token-topic update, as in the kernel, without digamma, exp, gathering or convergence checks.
    ``eth`` is nudged each sweep so the compiler cannot hoist the work out of the loop.
    """
    n, n_topics = rows.shape
    for _ in range(n_sweeps):
        for j in range(n):
            norm[j] = 1e-100
        for k in range(n_topics):
            e = eth[k]
            for j in range(n):
                norm[j] += e * cols[k, j]
        for k in range(n_topics):
            acc[k] = 0.0
        for j in range(n):
            ratio = cnts[j] / norm[j]
            for k in range(n_topics):
                acc[k] += ratio * rows[j, k]
        for k in range(n_topics):
            eth[k] = 0.5 * eth[k] + 1e-3 * acc[k]
    return acc.sum()


def measure_ceiling(n_topics: int, terms_per_doc: int, repeats: int) -> dict[str, float]:
    """Token-topic updates per second of :func:`_ceiling_sweeps` on one document-sized buffer."""
    rng = np.random.default_rng(0)
    rows = rng.random((terms_per_doc, n_topics))
    cnts = rng.integers(1, 4, terms_per_doc).astype(np.float64)
    eth, norm, acc = rng.random(n_topics), np.empty(terms_per_doc), np.empty(n_topics)
    n_sweeps = max(1, int(2e8 / (terms_per_doc * n_topics)))
    cols = np.ascontiguousarray(rows.T)
    _ceiling_sweeps(rows, cols, cnts, eth, norm, acc, 1)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        _ceiling_sweeps(rows, cols, cnts, eth, norm, acc, n_sweeps)
        best = min(best, time.perf_counter() - start)
    return {"n_topics": n_topics, "terms_per_doc": terms_per_doc,
            "ceiling_updates_per_s": terms_per_doc * n_topics * n_sweeps / best}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--doc-len", type=int, default=100)
    parser.add_argument("--terms", type=int, default=10000)
    parser.add_argument("--topics", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args(argv)
    results = []
    for n_topics in args.topics:
        block, topic_word = planted_block(args.docs, args.doc_len, args.terms, n_topics, seed=n_topics)
        for dtype in (np.float64, np.float32):
            results.append(time_case(block, topic_word, dtype, args.repeats))
    for r in results:
        terms_per_doc = max(1, round(int(r["nnz"]) / int(r["n_docs"])))
        ceiling = measure_ceiling(int(r["n_topics"]), terms_per_doc, args.repeats)["ceiling_updates_per_s"]
        r["ceiling_updates_per_s"] = ceiling
        r["fraction_of_ceiling"] = float(r["token_topic_updates_per_s"]) / ceiling
    report = {"benchmark": "estep_kernel", "python": sys.version.split()[0], "machine": platform.machine(),
              "argv": sys.argv[1:], "results": results}
    print(json.dumps(report, indent=2))
    if not args.json_only:
        header = (f"{'K':>4} {'dtype':>8} {'nnz':>8} {'sweeps':>7} {'capped':>6} {'seconds':>8} {'docs/s':>9} "
                  f"{'Mupd/s':>8} {'Mupd/cpu-s':>10} {'ceiling':>8} {'of ceil':>7}")
        print(header)
        for r in results:
            print(f"{r['n_topics']:>4} {r['dtype']:>8} {r['nnz']:>8} {r['mean_sweeps']:>7.1f} {r['n_capped']:>6} "
                  f"{r['seconds']:>8.3f} {r['docs_per_s']:>9.0f} {r['token_topic_updates_per_s'] / 1e6:>8.1f} "
                  f"{r['token_topic_updates_per_cpu_s'] / 1e6:>10.1f} {r['ceiling_updates_per_s'] / 1e6:>8.1f} "
                  f"{r['fraction_of_ceiling']:>7.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
