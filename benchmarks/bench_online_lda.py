"""Online variational LDA: topicflow against gensim LdaModel and scikit-learn, along the stream.

All systems see the same training documents in the same order, in minibatches of the same size S,
with the same step sizes rho_t = (tau0 + t) ** -kappa (t = minibatches before this one), the same
number of passes, the same corpus size D in the D/S scaling, the same eta and the same per-document
E-step limits (100 iterations, mean absolute change of gamma < 1e-3). At about ``--eval-points``
evenly spaced numbers of documents seen, each system's current topic-word matrix (rows normalized)
and alpha are scored by the common evaluator of ``bench_vb_lda.py`` (document completion on the same
held-out documents). Evaluation time is measured and excluded from every system's training time, and
so is gensim's conversion of the rows into its bag-of-words lists (given precomputed in
``bench_vb_lda.py``; here converted a minibatch at a time to bound memory at 400k documents).

topicflow runs on a local distributed cluster of ``--workers`` worker processes (one thread each), as
the CLI does (its client connects to the workers directly, as ``topicflow``'s own local cluster does),
after a numba warm-up on one shard; ``topicflow-threads`` runs the E-steps on a thread pool of this
process instead (``--executor threads``), as a fit without a cluster does; its time is the wall time of ``fit_online`` (model
initialization, reads from the store, E-steps on the workers, M-steps) minus the evaluations made in
its ``on_minibatch`` callback. The anchors run afterwards in this process, one at a time, with the
(idle) cluster still up:

- gensim ``LdaModel`` (one process, float32 as by default): built empty with ``alpha="auto"``
  (learned asymmetric alpha, as topicflow's default ``alpha="auto"``), then ``update(stream,
  chunksize=S, offset=tau0, decay=kappa, passes=P, update_every=1, iterations=100,
  gamma_threshold=1e-3)`` on a stream whose length is D, which evaluates between minibatches (gensim
  pulls the next minibatch only after the previous M-step). With several passes gensim's schedule
  differs: it does not advance t after the first pass and adds the pass number instead.
- scikit-learn ``LatentDirichletAllocation(learning_method="online", batch_size=S, total_samples=D,
  learning_decay=kappa, learning_offset=tau0 - 1)``, ``partial_fit`` per minibatch. Its counter
  starts at 1 (rho = (learning_offset + 1 + t) ** -kappa), hence ``tau0 - 1`` for the same schedule
  (when tau0 < 2 it gets tau0 and a schedule one step later; the JSON says so). Its alpha is fixed
  at 1/K: scikit-learn cannot learn it. ``n_jobs=1`` by default (``--sklearn-jobs``): with 2 its
  per-call joblib round trip made 256-document ``partial_fit`` calls about 10x slower here.
  ``--alpha fixed`` fixes alpha = 1/K in every system (gensim ``alpha="symmetric"``), for a
  comparison of the same model.

Where one pass sees only a few hundred minibatches, the held-out perplexity depends more on the
random starting lambda than on the implementation (at 20k generated documents, scikit-learn alone
ends 875..1005 at 4k documents over seeds 0..2). So every system runs once per ``--seeds`` value and
the comparison uses the mean curve over seeds; and by default (``--init shared``) topicflow starts
from the very lambda the anchors draw for that seed (``RandomState(seed).gamma(100, 0.01, (K, V))``,
passed as ``fit_online(state=...)``; gensim and scikit-learn both draw exactly this), so the runs are
paired. ``--init own`` keeps topicflow's counter-based draw of the same distribution. Per-document
gamma starts from Gamma(100, 1/100) draws in every system, but from different random streams
(topicflow's keyed by seed and document, the anchors' from their RandomState), so the trajectories
still differ within a seed.

For topicflow the JSON and the table give, per anchor, the documents and training seconds it needed
to reach the anchor's final perplexity on the mean curves (resolution: the evaluation points), the
docs/s ratio (training documents over training seconds, pooled over seeds) and the anchor's training
time over topicflow's time to reach it.

Examples
--------
Real corpus (JSON Lines with ``id`` and ``text``; shuffled, every tenth document held out)::

    python benchmarks/bench_online_lda.py --jsonl labeled_fortunes.jsonl bible_kjv.jsonl --topics 20

Generated corpus::

    python benchmarks/bench_online_lda.py --synth-docs 400000 --topics 20

Prints one JSON object (with the exact command), then a readable table.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as sp

from bench_vb_lda import add_corpus_arguments, build_real, build_synth, heldout_blocks, load_csr, perplexity

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.vb.batch import VBConfig, initial_state
from topicflow.pipeline.vb.online import OnlineConfig, fit_online

#: Per-document E-step limits shared by every system (topicflow's defaults).
DOC_MAX_ITER, DOC_TOL = 100, 1e-3

ModelGetter = Callable[[], tuple[np.ndarray, np.ndarray]]


# ----------------------------------------------------------------------------- the curve


def eval_targets(total_docs: int, n_points: int) -> list[int]:
    """Evenly spaced numbers of documents seen (the last one is the end of the stream)."""
    n_points = max(1, n_points)
    return sorted({max(1, round(total_docs * i / n_points)) for i in range(1, n_points + 1)})


class Curve:
    """Held-out perplexity at the first minibatch boundary at or past each target.

    The clock starts at :meth:`start`; evaluation time (and any time passed to :meth:`exclude`) is
    measured and left out of the training seconds recorded with each point.
    """

    def __init__(self, pairs: list, targets: list[int]) -> None:
        self.pairs = pairs
        self.pending = list(targets)
        self.points: list[tuple[int, float, float]] = []  #: (docs seen, training seconds, perplexity)
        self.excluded = 0.0
        self.started = math.nan

    def start(self) -> None:
        self.started = time.perf_counter()

    def exclude(self, seconds: float) -> None:
        self.excluded += seconds

    def training_seconds(self, now: float | None = None) -> float:
        return (time.perf_counter() if now is None else now) - self.started - self.excluded

    def at_boundary(self, docs_seen: int, model: ModelGetter) -> None:
        if not self.pending or docs_seen < self.pending[0]:
            return
        begun = time.perf_counter()
        seconds = self.training_seconds(begun)
        topic_word, alpha = model()
        self.points.append((docs_seen, seconds, perplexity(self.pairs, topic_word, alpha)))
        while self.pending and self.pending[0] <= docs_seen:
            self.pending.pop(0)
        self.excluded += time.perf_counter() - begun

    def result(self, train_seconds: float, docs: int, **extra: Any) -> dict[str, Any]:
        return {
            "train_seconds": train_seconds, "docs": docs, "docs_per_second": docs / train_seconds,
            "excluded_seconds": self.excluded, "final_perplexity": self.points[-1][2],
            "curve": [[d, round(s, 3), round(p, 2)] for d, s, p in self.points], **extra,
        }


# ----------------------------------------------------------------------------- systems


def vb_config(args: argparse.Namespace, k: int, estep: str, seed: int) -> VBConfig:
    alpha_mode, alpha = ("auto", None) if args.alpha == "auto" else ("fixed", 1.0 / k)
    return VBConfig(n_topics=k, doc_topic_prior_mode=alpha_mode, doc_topic_prior=alpha, topic_word_prior=args.eta, max_doc_iter=DOC_MAX_ITER,
                    doc_tol=DOC_TOL, seed=seed, estep=estep)  # type: ignore[arg-type]


def anchors_initial_lambda(seed: int, n_topics: int, n_terms: int) -> np.ndarray:
    """The starting lambda gensim and scikit-learn draw for ``random_state=seed``: Gamma(100, 1/100).

    Both draw ``RandomState(seed).gamma(100, 0.01, (n_topics, n_terms))`` first (gensim adds eta
    and keeps float32), which is why their curves coincide early on.
    """
    return np.random.RandomState(seed).gamma(100.0, 0.01, (n_topics, n_terms))


def online_config(args: argparse.Namespace) -> OnlineConfig:
    # eval_every=0: no per-minibatch bound, as the anchors run without their own evaluations.
    return OnlineConfig(batch_size=args.batch_size, tau0=args.tau0, kappa=args.kappa, passes=args.passes,
                        eval_every=0)


def warm_up_topicflow(train: Corpus, config: VBConfig, online: OnlineConfig, client: Any) -> None:
    """One pass over the first shard: numba compiles (or loads its cache) on every worker."""
    fit_online(train, config, online, shards=[0], client=client)


def run_topicflow(train: Corpus, config: VBConfig, online: OnlineConfig, client: Any, curve: Curve,
                  shared_init: bool) -> dict[str, Any]:
    def on_minibatch(record: Any, state: Any) -> None:
        curve.at_boundary(record.docs_seen, lambda: (state.topic_word()["default"], state.doc_topic_prior))

    start = None
    if shared_init:
        start, _ = initial_state(train, config)
        lam0 = anchors_initial_lambda(config.seed, config.n_topics, len(train.vocabulary()))
        start = start.with_updates(topic_word_var={"default": lam0})
    curve.start()
    result = fit_online(train, config, online, state=start, client=client, on_minibatch=on_minibatch)
    train_seconds = curve.training_seconds()
    return curve.result(train_seconds, result.docs_seen, minibatches=result.t,
                        minibatch_seconds=sum(r.seconds for r in result.trace), estep=config.estep)


class GensimStream:
    """The rows of ``X`` as gensim bag-of-words lists; reports every minibatch boundary.

    gensim's ``update`` pulls the first document of minibatch j + 1 only after the M-step of
    minibatch j, so ``on_boundary(docs_seen)`` runs between updates. Rows are converted one minibatch
    ahead; the conversion time goes to ``curve.exclude``.
    """

    def __init__(self, X: sp.csr_matrix, chunk: int, curve: Curve, on_boundary: Callable[[int], None]) -> None:
        self.X, self.chunk, self.curve, self.on_boundary = X, chunk, curve, on_boundary
        self.passes_started = 0

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def __iter__(self) -> Iterator[list[tuple[int, float]]]:
        n, offset = len(self), self.passes_started * len(self)
        self.passes_started += 1
        for lo in range(0, n, self.chunk):
            if lo:
                self.on_boundary(offset + lo)
            begun = time.perf_counter()
            rows = self.X[lo:lo + self.chunk]
            docs = [list(zip(rows.indices[a:b].tolist(), rows.data[a:b].tolist()))
                    for a, b in zip(rows.indptr[:-1], rows.indptr[1:])]
            self.curve.exclude(time.perf_counter() - begun)
            yield from docs
        self.on_boundary(offset + n)


def run_gensim(X: sp.csr_matrix, k: int, args: argparse.Namespace, curve: Curve, seed: int) -> dict[str, Any]:
    from gensim.models import LdaModel

    n_docs, n_terms = X.shape
    id2word = {i: str(i) for i in range(n_terms)}
    holder: dict[str, Any] = {}
    stream = GensimStream(X, args.batch_size, curve, lambda seen: curve.at_boundary(
        seen, lambda: (holder["model"].get_topics(), np.asarray(holder["model"].alpha))))
    curve.start()
    alpha = "auto" if args.alpha == "auto" else "symmetric"
    model = LdaModel(num_topics=k, id2word=id2word, alpha=alpha, eta=args.eta, chunksize=args.batch_size,
                     decay=args.kappa, offset=args.tau0, passes=args.passes, update_every=1, eval_every=None,
                     iterations=DOC_MAX_ITER, gamma_threshold=DOC_TOL, random_state=seed)
    holder["model"] = model
    model.update(stream, chunksize=args.batch_size, decay=args.kappa, offset=args.tau0, passes=args.passes,
                 update_every=1, eval_every=None, iterations=DOC_MAX_ITER, gamma_threshold=DOC_TOL)
    train_seconds = curve.training_seconds()
    return curve.result(train_seconds, n_docs * args.passes,
                        alpha="auto (learned, asymmetric)" if alpha == "auto" else f"fixed 1/K = {1 / k:.4g}",
                        dtype=np.dtype(model.dtype).name)


def sklearn_offset(tau0: float) -> tuple[float, int]:
    """scikit-learn's learning_offset for rho_t = (tau0 + t) ** -kappa, and the remaining shift in t."""
    return (tau0 - 1.0, 0) if tau0 - 1.0 >= 1.0 else (max(tau0, 1.0), 1)


def run_sklearn(X: sp.csr_matrix, k: int, args: argparse.Namespace, curve: Curve, seed: int) -> dict[str, Any]:
    from sklearn.decomposition import LatentDirichletAllocation

    n_docs = X.shape[0]
    offset, shift = sklearn_offset(args.tau0)
    curve.start()
    model = LatentDirichletAllocation(
        n_components=k, learning_method="online", batch_size=args.batch_size, learning_offset=offset,
        learning_decay=args.kappa, total_samples=n_docs, topic_word_prior=args.eta,
        max_doc_update_iter=DOC_MAX_ITER, mean_change_tol=DOC_TOL, n_jobs=args.sklearn_jobs,
        random_state=seed, evaluate_every=-1,
    )
    seen = 0
    for _ in range(args.passes):
        for lo in range(0, n_docs, args.batch_size):
            model.partial_fit(X[lo:lo + args.batch_size])
            seen += min(args.batch_size, n_docs - lo)
            curve.at_boundary(seen, lambda: (model.components_, np.full(k, model.doc_topic_prior_)))
    train_seconds = curve.training_seconds()
    return curve.result(train_seconds, seen, learning_offset=offset, schedule_shift=shift,
                        n_jobs=args.sklearn_jobs, alpha=f"fixed 1/K = {1 / k:.4g}")


# ----------------------------------------------------------------------------- comparison


def aggregate(runs: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Mean over seeds: curve (seconds and perplexity per point), final perplexity; docs/s pooled."""
    train_seconds = float(np.mean([r["train_seconds"] for r in runs]))
    docs = runs[0]["docs"]
    finals = [r["final_perplexity"] for r in runs]
    curve = []
    for points in zip(*(r["curve"] for r in runs)):  # the same minibatch boundaries in every run
        seconds, ppl = np.mean([p[1] for p in points]), np.mean([p[2] for p in points])
        curve.append([points[0][0], round(float(seconds), 3), round(float(ppl), 2)])
    return {
        "train_seconds": train_seconds, "docs": docs, "docs_per_second": docs / train_seconds,
        "final_perplexity": float(np.mean(finals)), "final_perplexity_min": min(finals),
        "final_perplexity_max": max(finals), "curve": curve,
        "runs": [{"seed": seed, **run} for seed, run in zip(seeds, runs)],
    }



def compare(tf: dict[str, Any], anchor: dict[str, Any]) -> dict[str, Any]:
    """topicflow against one anchor: where it reaches the anchor's final perplexity, and the ratios."""
    target = anchor["final_perplexity"]
    reached = next(((d, s) for d, s, p in tf["curve"] if p <= target), None)
    out: dict[str, Any] = {
        "anchor_final_perplexity": target,
        "docs_to_reach": None if reached is None else reached[0],
        "seconds_to_reach": None if reached is None else reached[1],
        "docs_per_second_ratio": tf["docs_per_second"] / anchor["docs_per_second"],
        "time_ratio_to_reach": None if reached is None else anchor["train_seconds"] / max(reached[1], 1e-9),
    }
    out["meets_3x"] = reached is not None and out["docs_per_second_ratio"] >= 3.0
    return out


def package_versions() -> dict[str, str]:
    """Versions of the packages in the run (anchors that are not installed are left out)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for name in ("numpy", "dask", "distributed", "gensim", "scikit-learn"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def print_table(report: dict[str, Any]) -> None:
    systems = report["systems"]
    print()
    print(f"corpus: {report['corpus']['kind']}, {report['corpus']['n_docs']:,} training docs, "
          f"{report['corpus']['n_tokens']:,} tokens, {report['corpus']['n_terms']:,} terms, "
          f"{report['corpus']['heldout_docs_scored']:,} held-out docs scored; K={report['settings']['topics']}, "
          f"S={report['settings']['batch_size']}, tau0={report['settings']['tau0']}, "
          f"kappa={report['settings']['kappa']}, passes={report['settings']['passes']}")
    print(f"mean over seeds {report['settings']['seeds']} (init: {report['settings']['init']}, "
          f"alpha: {report['settings']['alpha']})")
    print(f"{'system':<18} {'docs':>9} {'train s':>9} {'docs/s':>9} {'final ppl':>10} {'min..max over seeds':>21}")
    for name, res in systems.items():
        spread = f"{res['final_perplexity_min']:.1f}..{res['final_perplexity_max']:.1f}"
        print(f"{name:<18} {res['docs']:>9,} {res['train_seconds']:>9.1f} {res['docs_per_second']:>9,.0f} "
              f"{res['final_perplexity']:>10.1f} {spread:>21}")
    for tf_name, by_anchor in report["comparisons"].items():
        print()
        print(f"{tf_name} vs {'anchor':<8} {'anchor ppl':>10} {'docs to reach':>13} {'s to reach':>10} "
              f"{'docs/s ratio':>12} {'time ratio':>10} {'>=3x':>5}")
        for anchor, c in by_anchor.items():
            docs = "never" if c["docs_to_reach"] is None else f"{c['docs_to_reach']:,}"
            secs = "" if c["seconds_to_reach"] is None else f"{c['seconds_to_reach']:.1f}"
            ratio = "" if c["time_ratio_to_reach"] is None else f"{c['time_ratio_to_reach']:.1f}x"
            print(f"{'':<{len(tf_name)}}    {anchor:<8} {c['anchor_final_perplexity']:>10.1f} {docs:>13} {secs:>10} "
                  f"{c['docs_per_second_ratio']:>11.1f}x {ratio:>10} {'yes' if c['meets_3x'] else 'no':>5}")
    print()
    names = list(systems)
    print("held-out perplexity after n documents seen (mean over seeds)")
    print(f"{'docs seen':>10} " + " ".join(f"{n:>17}" for n in names))
    by_docs: dict[int, dict[str, float]] = {}
    for name in names:
        for docs, _, ppl in systems[name]["curve"]:
            by_docs.setdefault(docs, {})[name] = ppl
    for docs in sorted(by_docs):
        cells = [f"{by_docs[docs][n]:>17.1f}" if n in by_docs[docs] else f"{'':>17}" for n in names]
        print(f"{docs:>10,} " + " ".join(cells))


# ----------------------------------------------------------------------------- driver


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(parser)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256, help="S, documents per minibatch (all systems)")
    parser.add_argument("--tau0", type=float, default=10.0)
    parser.add_argument("--kappa", type=float, default=0.7)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--eta", type=float, default=0.01, help="topic-word prior (all systems)")
    parser.add_argument("--alpha", choices=["auto", "fixed"], default="auto",
                        help="auto: topicflow and gensim learn an asymmetric alpha (scikit-learn cannot: fixed 1/K); "
                             "fixed: every system keeps alpha = 1/K")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                        help="one run per seed and system; the comparison uses the mean over seeds")
    parser.add_argument("--init", choices=["shared", "own"], default="shared",
                        help="shared: topicflow starts from the lambda the anchors draw for the same seed; "
                             "own: from its own counter-based draw")
    parser.add_argument("--eval-points", type=int, default=10, help="held-out evaluations along the stream")
    parser.add_argument("--max-heldout-docs", type=int, default=10000,
                        help="score at most this many held-out documents (whole held-out shards, in order)")
    parser.add_argument("--systems", default="topicflow,topicflow-hybrid,gensim,sklearn")
    parser.add_argument("--sklearn-jobs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    return parser.parse_args(argv)


def capped_pairs(train: Corpus, test: Corpus, max_docs: int) -> list:
    pairs, kept = [], 0
    for pair in heldout_blocks(train, test):
        if kept >= max_docs:
            break
        pairs.append(pair)
        kept += pair[0].n_docs
    return pairs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("gensim").setLevel(logging.WARNING)
    from distributed import Client, LocalCluster

    systems = args.systems.split(",")
    known = ["topicflow", "topicflow-hybrid", "topicflow-threads", "gensim", "sklearn"]
    unknown = set(systems) - set(known)
    if unknown:
        raise SystemExit(f"unknown systems {sorted(unknown)}; choose from {', '.join(known)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-online-"))
    workdir.mkdir(parents=True, exist_ok=True)
    k = args.topics
    results: dict[str, dict[str, Any]] = {}
    load: dict[str, list[float]] = {"start": list(os.getloadavg())}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster, direct_to_workers=True) as client:
        if args.jsonl:
            train, test = build_real(args.jsonl, workdir, client)
        else:
            train, test = build_synth(args.synth_docs, k, args.synth_vocab, workdir, client)
        pairs = capped_pairs(train, test, args.max_heldout_docs)
        corpus_info = {
            "kind": "jsonl: " + " ".join(str(p) for p in args.jsonl) if args.jsonl else f"synth {args.synth_docs}",
            "n_docs": len(train), "n_tokens": train.n_tokens, "n_terms": len(train.vocabulary()),
            "n_shards": train.n_shards, "heldout_docs": len(test),
            "heldout_docs_scored": sum(obs.n_docs for obs, _ in pairs),
        }
        targets = eval_targets(len(train) * args.passes, args.eval_points)
        online = online_config(args)
        X = load_csr(train) if {"gensim", "sklearn"} & set(systems) else None
        perplexity(pairs, np.ones((k, corpus_info["n_terms"])), np.full(k, 1.0 / k))  # evaluator warm-up
        for name in systems:
            runs = []
            for seed in args.seeds:
                load[f"{name}/{seed}"] = list(os.getloadavg())
                curve = Curve(pairs, targets)
                if name.startswith("topicflow"):
                    config = vb_config(args, k, "hybrid" if name == "topicflow-hybrid" else "vb", seed)
                    executor = "threads" if name == "topicflow-threads" else "auto"
                    system_online = dataclasses.replace(online, executor=executor)
                    if not runs:
                        warm_up_topicflow(train, config, system_online, client)
                    runs.append(run_topicflow(train, config, system_online, client, curve, args.init == "shared"))
                elif name == "gensim":
                    runs.append(run_gensim(X, k, args, curve, seed))
                else:
                    runs.append(run_sklearn(X, k, args, curve, seed))
                print(f"# {name} seed {seed}: {runs[-1]['docs_per_second']:,.0f} docs/s, "
                      f"final perplexity {runs[-1]['final_perplexity']:.1f}", file=sys.stderr, flush=True)
            results[name] = aggregate(runs, args.seeds)
    anchors = [n for n in results if not n.startswith("topicflow")]
    comparisons = {tf: {a: compare(results[tf], results[a]) for a in anchors}
                   for tf in results if tf.startswith("topicflow") and anchors}
    report = {
        "benchmark": "online_lda",
        "command": shlex.join(["python", *sys.argv]) if argv is None else shlex.join(["python", sys.argv[0], *argv]),
        "settings": {"topics": k, "batch_size": args.batch_size, "tau0": args.tau0, "kappa": args.kappa,
                     "passes": args.passes, "eta": args.eta, "seeds": args.seeds, "init": args.init,
                     "eval_points": len(targets),
                     "doc_max_iter": DOC_MAX_ITER, "doc_tol": DOC_TOL, "workers": args.workers,
                     "threads_per_worker": 1, "sklearn_jobs": args.sklearn_jobs, "alpha": args.alpha},
        "corpus": corpus_info,
        "machine": {"cpus": os.cpu_count(), "loadavg_before": load, "versions": package_versions()},
        "systems": results,
        "comparisons": comparisons,
    }
    print(json.dumps(report), flush=True)
    print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
