"""The online E-step on one core: topicflow's kernel against scikit-learn's, on the same minibatches.

Both run the same per-document updates (gamma from Gamma(100, 1/100), at most 100 iterations,
mean absolute change of gamma below 1e-3) on the same exp(E[log beta]), one minibatch after the
other, in this process, on one thread. Two sets of topics: random (Gamma(100, 1/100), as at the start
of a fit) and trained (after a scikit-learn online pass over the first documents). This isolates the
arithmetic from everything around it (reading, shipping lambda to workers, merging, the update), so
the gap between it and ``bench_online_lda.py``'s documents per second is the cost of the rest.

scikit-learn's E-step is its private ``_update_doc_distribution``; the script says so and stops if a
release renames it.

Example (a store written by ``bench_vb_lda.py`` or ``bench_online_lda.py``)::

    python benchmarks/bench_online_estep.py --store WORKDIR/k20/train.zarr --topics 20 --batch-size 256

Prints one JSON object per line, then a table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import psi

from topicflow.io.corpus.reader import Corpus
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.layout import prepare_topics


def sklearn_estep():  # type: ignore[no-untyped-def]
    try:
        from sklearn.decomposition._lda import _update_doc_distribution
    except ImportError as exc:  # pragma: no cover - depends on the installed release
        raise SystemExit(f"scikit-learn's _update_doc_distribution is gone ({exc}); update this benchmark") from exc
    return _update_doc_distribution


def trained_topics(X: sp.csr_matrix, k: int, batch_size: int, n_docs: int) -> np.ndarray:
    from sklearn.decomposition import LatentDirichletAllocation

    model = LatentDirichletAllocation(
        n_components=k, learning_method="online", batch_size=batch_size, total_samples=X.shape[0],
        learning_offset=9, max_doc_update_iter=100, mean_change_tol=1e-3, topic_word_prior=0.01, random_state=0,
    )
    model.partial_fit(X[:n_docs])
    return model.components_


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="corpus store (one language)")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many passes")
    args = parser.parse_args(argv)

    corpus = Corpus.open(args.store)
    X = sp.vstack([block.to_csr() for block in corpus.iter_blocks()]).tocsr().astype(np.float64)
    k, n_docs = args.topics, X.shape[0]
    minibatches = [X[i:i + args.batch_size] for i in range(0, n_docs, args.batch_size)]
    blocks = [block_from_csr(m, language="default") for m in minibatches]
    alpha = np.full(k, 1.0 / k)
    params = VBParams(n_topics=k, max_doc_iter=100, doc_tol=1e-3, random_init=True, seed=0)
    update_doc_distribution = sklearn_estep()
    topic_sets = {
        "random": np.random.default_rng(0).gamma(100.0, 0.01, (k, X.shape[1])),
        "trained": trained_topics(X, k, args.batch_size, min(n_docs, 12 * args.batch_size)),
    }
    rows = []
    for name, lam in topic_sets.items():
        exp_elog_beta = np.exp(psi(lam) - psi(lam.sum(axis=1))[:, None])
        topics = prepare_topics({"default": exp_elog_beta})
        estep_block(blocks[0], topics, alpha, params)  # numba compilation
        best_sk = best_tf = np.inf
        sweeps = 0
        for _ in range(args.repeats):
            state = np.random.RandomState(0)
            started = time.perf_counter()
            for m in minibatches:
                update_doc_distribution(m, exp_elog_beta, 1.0 / k, 100, 1e-3, True, state)
            best_sk = min(best_sk, time.perf_counter() - started)
            started = time.perf_counter()
            sweeps = sum(estep_block(b, topics, alpha, params)[0].n_doc_iter for b in blocks)
            best_tf = min(best_tf, time.perf_counter() - started)
        row = {
            "topics": name, "K": k, "batch_size": args.batch_size, "n_docs": n_docs,
            "sklearn_docs_per_s": n_docs / best_sk, "topicflow_docs_per_s": n_docs / best_tf,
            "speedup": best_sk / best_tf, "topicflow_sweeps_per_doc": sweeps / n_docs,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print(f"{'topics':<8} {'sklearn docs/s':>15} {'topicflow docs/s':>17} {'speed-up':>9} {'sweeps/doc':>11}")
    for row in rows:
        print(f"{row['topics']:<8} {row['sklearn_docs_per_s']:>15,.0f} {row['topicflow_docs_per_s']:>17,.0f} "
              f"{row['speedup']:>8.2f}x {row['topicflow_sweeps_per_doc']:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
