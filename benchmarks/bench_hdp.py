"""HDP against gensim and tomotopy (issue 19): held-out perplexity, topics in use, wall time, peak memory.

Every system is fitted on the same training store and scored by the same evaluator, Bleier's protocol
(:mod:`topicflow.pipeline.reproduce.bleier2016`): each test document's tokens are split 70/30 at random
(seed 0), its proportions are folded in on the 70% with the model's topics fixed, and the 30% are
scored (:func:`topicflow.metrics.heldout.completion_log_likelihood`). What each system hands the
evaluator:

- ``gensim``: gensim's ``HdpModel`` (Wang, Paisley & Blei 2011, online VB for the HDP) with its
  defaults (T = 150, K = 15, chunksize 256, kappa 1, tau 64, alpha = gamma = 1, eta 0.01; one pass, its
  default stopping rule), topics and alpha from ``hdp_to_lda()``. ``gensim-passes`` runs the same model
  for ``--passes`` passes (``max_chunks``).
- ``tomotopy``: tomotopy's ``HDPModel`` (collapsed Gibbs for the HDP) with its defaults (initial_k 2,
  alpha 0.1, eta 0.01, gamma 0.1), trained ``--tomotopy-iter`` iterations on one thread, converted by
  ``convert_to_lda()`` (its live topics, with their topic-word distributions and alpha vector).
- topicflow: ``pcsvb0`` (word by word, Algorithm 1), ``pcsvb0-clump`` (one update per distinct term),
  ``pcsvb0-mb`` / ``pcsvb0-mb-clump`` (minibatches of ``--batch-size`` documents on the cluster),
  ``pcvb0`` (batch) and ``scvb0-K`` for K in ``--scvb0-topics``: ``--passes`` passes, the paper's
  constants, topics (n_kw + beta) and prior alpha * pi (SCVB0: alpha = 0.1).

Topics in use, each library's own notion: gensim has none (it reports T), so we count the topics with
at least 0.1% of the stick weight of ``hdp_to_lda()``'s alpha; tomotopy: ``live_k`` (topics with at
least one table); topicflow: topics with at least 0.1% of the expected tokens (``topics_in_use``).

Each system runs in its own process (``--one SYSTEM``); the parent measures that process tree's wall
time, CPU time (user + system of every process of the tree that was waited for: the Dask workers
included) and peak RSS (``benchmarks/_memory.py``), so start-up (imports, the Dask cluster, numba
compiles) is included. On a shared machine CPU time is the steadier of the two. ``fit_seconds`` is the fit alone (cluster start-up included for topicflow, the held-out
scoring excluded). Example::

    nice .venv/bin/python benchmarks/bench_hdp.py --train /tmp/hdp19/ap-train.zarr --test /tmp/hdp19/ap-test.zarr \
        --passes 30 --systems gensim tomotopy pcsvb0 pcvb0 scvb0-100

Prints one JSON object per system as it finishes, then the table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _memory import measure_process_tree

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.reproduce.bleier2016 import HeldOut, heldout_set

SHARE = 1e-3


def load_csr(corpus: Corpus) -> sp.csr_matrix:
    """The whole training store in memory (the anchors need it)."""
    return sp.vstack([b.to_csr() for b in corpus.iter_blocks()]).tocsr()


def held(args: argparse.Namespace, train: Corpus) -> HeldOut:
    return heldout_set(train, Corpus.open(args.test))


def run_gensim(args: argparse.Namespace, passes: int | None) -> dict[str, Any]:
    import logging

    from gensim.corpora import Dictionary  # noqa: F401  (imported for parity with a user's script)
    from gensim.models import HdpModel

    logging.getLogger("gensim").setLevel(logging.ERROR)
    started = time.perf_counter()
    train = Corpus.open(args.train)
    terms = [str(t) for t in train.vocabulary().terms]
    csr = load_csr(train)
    bow = [list(zip(csr.indices[csr.indptr[d]:csr.indptr[d + 1]].tolist(),
                    csr.data[csr.indptr[d]:csr.indptr[d + 1]].tolist())) for d in range(csr.shape[0])]
    id2word = dict(enumerate(terms))
    kwargs: dict[str, Any] = {"random_state": args.seed}
    if passes is not None:
        kwargs["max_chunks"] = passes * int(np.ceil(len(bow) / 256))
    model = HdpModel(bow, id2word, **kwargs)
    alpha, beta = model.hdp_to_lda()
    fit_seconds = time.perf_counter() - started
    weights = np.asarray(alpha, dtype=np.float64) / float(np.sum(alpha))
    perplexity = held(args, train).perplexity(np.asarray(beta), np.asarray(alpha, dtype=np.float64))
    return {"topics_in_use": int(np.count_nonzero(weights >= SHARE)), "truncation": len(alpha),
            "topics_note": "stick weight of hdp_to_lda() alpha >= 0.1% (gensim reports T)",
            "fit_seconds": fit_seconds, "perplexity": perplexity,
            "settings": {"defaults": True, "passes": passes or 1, **{k: v for k, v in kwargs.items()}}}


def run_tomotopy(args: argparse.Namespace) -> dict[str, Any]:
    import tomotopy as tp

    started = time.perf_counter()
    train = Corpus.open(args.train)
    terms = [str(t) for t in train.vocabulary().terms]
    csr = load_csr(train)
    model = tp.HDPModel(seed=args.seed)
    for d in range(csr.shape[0]):
        cols, counts = csr.indices[csr.indptr[d]:csr.indptr[d + 1]], csr.data[csr.indptr[d]:csr.indptr[d + 1]]
        words = [terms[c] for c, n in zip(cols.tolist(), counts.tolist()) for _ in range(n)]
        if words:
            model.add_doc(words)
    model.train(args.tomotopy_iter, workers=1)
    lda, _ = model.convert_to_lda(topic_threshold=0.0)
    index = {w: i for i, w in enumerate(terms)}
    columns = np.array([index[w] for w in lda.used_vocabs], dtype=np.int64)
    topic_word = np.full((lda.k, len(terms)), 0.0)
    for k in range(lda.k):
        topic_word[k, columns] = lda.get_topic_word_dist(k)
    fit_seconds = time.perf_counter() - started
    perplexity = held(args, train).perplexity(topic_word + 1e-300, np.asarray(lda.alpha, dtype=np.float64))
    return {"topics_in_use": int(model.live_k), "truncation": int(model.k),
            "topics_note": "live_k (topics with a table)", "fit_seconds": fit_seconds, "perplexity": perplexity,
            "settings": {"defaults": True, "iterations": args.tomotopy_iter, "alpha": float(model.alpha),
                         "gamma": float(model.gamma), "eta": float(model.eta)}}


def run_topicflow(args: argparse.Namespace, system: str) -> dict[str, Any]:
    from bench_hdp_topicflow import fit_system

    return fit_system(args, system)


def run_one(args: argparse.Namespace, system: str) -> dict[str, Any]:
    if system == "gensim":
        out = run_gensim(args, None)
    elif system == "gensim-passes":
        out = run_gensim(args, args.passes)
    elif system == "tomotopy":
        out = run_tomotopy(args)
    else:
        out = run_topicflow(args, system)
    out["peak_rss_self_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | perplexity | topics in use | fit s | wall s | CPU s | peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['system']} | error: {r['error'][:60]} | | | | | |")
            continue
        lines.append(f"| {r['system']} | {r['perplexity']:.1f} | {r['topics_in_use']} | {r['fit_seconds']:.1f} | "
                     f"{r['wall_seconds']:.1f} | {r.get('cpu_seconds', float('nan')):.1f} | {r['peak_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--systems", nargs="+", default=["gensim", "tomotopy", "pcsvb0", "pcsvb0-clump", "pcsvb0-mb",
                                                         "pcsvb0-mb-clump", "pcvb0", "scvb0-50", "scvb0-100",
                                                         "scvb0-200"])
    parser.add_argument("--passes", type=int, default=30)
    parser.add_argument("--truncation", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tomotopy-iter", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", default=None, help="Run one system in this process and print its JSON line.")
    parser.add_argument("--out", type=Path, default=None, help="Append the JSON lines here too.")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args, args.one), default=float))
        return 0
    train = Corpus.open(args.train)
    info = {"train": args.train, "test": args.test, "docs": len(train), "tokens": train.n_tokens,
            "terms": len(train.vocabulary()), "command": shlex.join([sys.executable] + sys.argv)}
    print(json.dumps({"corpus": info}))
    rows = []
    for system in args.systems:
        command = [sys.executable, __file__, "--one", system, "--train", args.train, "--test", args.test,
                   "--passes", str(args.passes), "--truncation", str(args.truncation), "--batch-size",
                   str(args.batch_size), "--workers", str(args.workers), "--tomotopy-iter", str(args.tomotopy_iter),
                   "--seed", str(args.seed)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            out, wall, peak = measure_process_tree(command, what=system)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            row = {"system": system, **out, "wall_seconds": wall, "cpu_seconds": cpu, "peak_mb": peak, **info}
        except RuntimeError as error:
            row = {"system": system, "error": str(error)[-500:], **info}
        rows.append(row)
        print(json.dumps(row, default=float), flush=True)
        if args.out is not None:
            with args.out.open("a", encoding="utf-8") as sink:
                sink.write(json.dumps(row, default=float) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
