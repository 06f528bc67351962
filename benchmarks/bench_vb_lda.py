"""Batch variational LDA: topicflow against gensim LdaModel, gensim LdaMulticore and scikit-learn.

Every system is fitted on the same training documents and scored by one evaluator,
:func:`topicflow.metrics.heldout.completion_log_likelihood` (document completion on held-out
documents), from its topic-word matrix and alpha alone. topicflow runs on a local distributed
cluster of real worker processes, as the CLI does; numba compilation is warmed up before timing.
For topicflow the held-out perplexity is also measured after every iteration (outside the timed
region), which gives its time to reach each anchor's final perplexity.

Examples
--------
Real corpus (JSON Lines with ``id`` and ``text``; every tenth document is held out)::

    python benchmarks/bench_vb_lda.py --jsonl labeled_fortunes.jsonl bible_kjv.jsonl --topics 20 100

Issue 22 (batch VB convergence): ``topicflow`` runs the defaults (learned alpha from
``start_doc_topic_prior(K)``, stopping at ``BATCH_TOL``), ``topicflow-before`` the former ones (alpha from
1/K, tol 1e-4); each runs ``--max-iter`` iterations and is stopped after the fact by its rule (the rule
only reads the ELBO trace), which gives the stop, the run's best held-out perplexity and the iterations
and fit seconds to reach each anchor's perplexity::

    python benchmarks/bench_vb_lda.py --jsonl labeled_fortunes.jsonl bible_kjv.jsonl --topics 100 20 \
        --systems topicflow-before,topicflow,gensim,gensim-multicore,sklearn --max-iter 60

Generated corpus::

    python benchmarks/bench_vb_lda.py --synth-docs 100000 --topics 20 100

Prints one JSON object per line, then a table.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from topicflow.io.corpus.reader import Corpus
from topicflow.io.sources.base import FieldSpec
from topicflow.metrics.heldout import completion_log_likelihood, split_doc_tokens
from topicflow.models.common.blocks import DocBlock, remap_terms
from topicflow.models.lda.vb.params import VBParams
from topicflow.pipeline.policies import has_converged
from topicflow.pipeline.vb.batch import (
    BATCH_TOL,
    VBConfig,
    fit_batch_vb,
    start_doc_topic_prior,
)

EVAL_SEED = 12345
EVAL_PARAMS_ITER, EVAL_PARAMS_TOL = 100, 1e-3


# ----------------------------------------------------------------------------- data


def split_jsonl(inputs: list[Path], workdir: Path, every: int) -> tuple[Path, Path]:
    """Shuffle all documents (fixed seed), then hold out every ``every``-th one (ids made unique).

    Shuffling matters for the online anchors (gensim), whose minibatches would otherwise see one
    source after the other; batch methods do not depend on the order.
    """
    records = []
    for source in inputs:
        for n, line in enumerate(open(source, encoding="utf-8")):
            record = json.loads(line)
            record["id"] = f"{source.stem}:{record.get('id', n)}"
            records.append(record)
    order = np.random.default_rng(0).permutation(len(records))
    train, test = workdir / "train.jsonl", workdir / "test.jsonl"
    with open(train, "w") as tr, open(test, "w") as te:
        for position, index in enumerate(order):
            (te if position % every == every - 1 else tr).write(json.dumps(records[index]) + "\n")
    return train, test


def build_real(inputs: list[Path], workdir: Path, client: Any) -> tuple[Corpus, Corpus]:
    from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    train, test = split_jsonl(inputs, workdir, every=10)
    fields = FieldSpec(id_field="id", text_field="text")
    prune = PruneConfig(min_df=5, max_df_fraction=0.5)
    tok = TokenizerConfig()
    ingest_corpus([train], workdir / "train.zarr", fields=fields, tokenizer=tok, prune=prune, client=client)
    ingest_corpus([test], workdir / "test.zarr", fields=fields, tokenizer=tok, prune=PruneConfig(), client=client)
    return Corpus.open(workdir / "train.zarr"), Corpus.open(workdir / "test.zarr")


def build_synth(n_docs: int, n_topics: int, n_terms: int, workdir: Path, client: Any) -> tuple[Corpus, Corpus]:
    """Training and held-out documents drawn from one generating model.

    Synthesis is a function of (seed, global document index), so the first ``n_docs`` documents of a
    corpus of ``n_docs + n_test`` are exactly the training corpus: the held-out store is the tail.
    Stores left in ``workdir`` by an earlier run with the same settings are reused.
    """
    from topicflow.pipeline.synth import synthesize_corpus
    from topicflow.testing.corpora import write_test_store

    n_test = max(1000, n_docs // 10)
    common = dict(n_topics=n_topics, n_terms=n_terms, doc_length=100, doc_topic_prior=0.1, topic_word_prior=0.01, seed=1, client=client)
    settings = {key: value for key, value in common.items() if key != "client"} | {"n_docs": n_docs}
    marker = workdir / "synth-settings.json"
    if marker.exists() and json.loads(marker.read_text()) == settings and (workdir / "test.zarr").exists():
        return Corpus.open(workdir / "train.zarr"), Corpus.open(workdir / "test.zarr")
    marker.unlink(missing_ok=True)
    synthesize_corpus(workdir / "train.zarr", n_docs=n_docs, **common)
    synthesize_corpus(workdir / "full.zarr", n_docs=n_docs + n_test, **common)
    full = Corpus.open(workdir / "full.zarr")
    tail = [b.to_csr() for b in full.iter_blocks() if b.first_doc + b.n_docs > n_docs]
    first = next(b.first_doc for b in full.iter_blocks() if b.first_doc + b.n_docs > n_docs)
    test = sp.vstack(tail).tocsr()[n_docs - first:]
    write_test_store(workdir / "test.zarr", {"default": test}, shard_size=1000,
                     terms={"default": [str(t) for t in full.vocabulary().terms]})
    marker.write_text(json.dumps(settings))
    return Corpus.open(workdir / "train.zarr"), Corpus.open(workdir / "test.zarr")


def load_csr(corpus: Corpus) -> sp.csr_matrix:
    """The whole store in memory (anchors only: they need it)."""
    return sp.vstack([b.to_csr() for b in corpus.iter_blocks()]).tocsr()


def heldout_blocks(train: Corpus, test: Corpus) -> list[tuple[DocBlock, DocBlock]]:
    """Test documents in the training vocabulary, split into observed and held-out halves."""
    vocab = train.vocabulary()
    ids = vocab.ids_of(str(t) for t in test.vocabulary().terms)
    term_map = np.array([-1 if i is None else i for i in ids], dtype=np.int64)
    pairs = []
    for block in test.iter_blocks():
        mapped = remap_terms(block, term_map, len(vocab))
        pairs.append(split_doc_tokens(mapped, seed=EVAL_SEED))
    return pairs


def perplexity(pairs: list[tuple[DocBlock, DocBlock]], topic_word: np.ndarray, alpha: np.ndarray) -> float:
    params = VBParams(n_topics=topic_word.shape[0], max_doc_iter=EVAL_PARAMS_ITER, doc_tol=EVAL_PARAMS_TOL)
    topic_word = np.asarray(topic_word, dtype=np.float64)
    topic_word = topic_word / topic_word.sum(axis=1, keepdims=True)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (topic_word.shape[0],)).copy()
    log_lik, n = 0.0, 0
    for observed, heldout in pairs:
        ll, count = completion_log_likelihood(
            {"default": observed}, {"default": heldout}, {"default": topic_word}, alpha, params
        )
        log_lik, n = log_lik + ll, n + count
    return float(np.exp(-log_lik / max(n, 1)))


# ----------------------------------------------------------------------------- systems


def run_topicflow(train: Corpus, k: int, max_iter: int, client: Any, pairs: list, eta: float = 0.01,
                  alpha: str = "auto", seed: int = 0, init_shape: float = 100.0, tol: float = 1e-4,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    curve: list[tuple[float, float]] = []
    steps: list[dict[str, Any]] = []
    fit_seconds = [0.0]

    def on_iteration(record: Any, state: Any) -> None:
        fit_seconds[0] += record.seconds
        tw = state.topic_word()["default"]
        curve.append((fit_seconds[0], perplexity(pairs, tw, state.doc_topic_prior)))
        steps.append({"iteration": record.iteration, "seconds": round(record.seconds, 3),
                      "elbo_per_token": record.elbo_per_token, "alpha_sum": record.alpha_sum})

    started = time.perf_counter()
    result = fit_batch_vb(train, VBConfig(n_topics=k, max_iter=max_iter, tol=tol, topic_word_prior=eta, seed=seed,
                                          init_shape=init_shape, **alpha_settings(alpha, k), **(extra or {})),
                          client=client, on_iteration=on_iteration)
    wall = time.perf_counter() - started
    eval_time = wall - fit_seconds[0]
    return {
        "seconds": fit_seconds[0], "wall_with_eval": wall, "eval_seconds": eval_time,
        "iterations": len(result.trace), "perplexity": curve[-1][1], "curve": curve,
        "tokens_per_second": result.trace[-1].tokens_per_second,
        "steps": [{**step, "perplexity": round(p, 2)} for step, (_, p) in zip(steps, curve)],
    }


def alpha_settings(alpha: str, k: int) -> dict[str, Any]:
    """``auto`` (learned, asymmetric) or ``fixed`` at 1/K, scikit-learn's default."""
    return ({"doc_topic_prior_mode": "auto"} if alpha == "auto"
            else {"doc_topic_prior_mode": "fixed", "doc_topic_prior": 1.0 / k})


#: Issue 22 part 4: batch VB before and after the new defaults, as (learned alpha start, stopping tol).
VARIANTS: dict[str, tuple[Callable[[int], float], float]] = {
    "topicflow": (start_doc_topic_prior, BATCH_TOL),
    "topicflow-before": (lambda k: 1.0 / k, 1e-4),
}


def stop_index(elbos: list[float], tol: float) -> int:
    """Index of the iteration at which ``has_converged(..., tol)`` stops a fit (the last one if never)."""
    for i in range(len(elbos)):
        if has_converged(elbos[: i + 1], tol):
            return i
    return len(elbos) - 1


def run_variant(name: str, train: Corpus, k: int, max_iter: int, client: Any, pairs: list, **options: Any) -> dict[str, Any]:
    """One run to ``max_iter`` with the variant's alpha start (tol 0), stopped after the fact by its rule.

    The stopping rule only reads the ELBO trace, so the iterations before the stop are exactly those of a
    fit with that tol: one run gives the stop and what happens after it (the eventual best).
    """
    start, tol = VARIANTS[name]
    res = run_topicflow(train, k, max_iter, client, pairs, tol=0.0, extra={"doc_topic_prior": start(k)}, **options)
    stop = stop_index([s["elbo_per_token"] for s in res["steps"]], tol)
    best = min(range(len(res["curve"])), key=lambda i: res["curve"][i][1])
    res.update({
        "alpha_start": start(k), "tol": tol, "stop_iterations": stop + 1, "stop_seconds": res["curve"][stop][0],
        "stop_perplexity": res["curve"][stop][1], "best_perplexity": res["curve"][best][1], "best_iterations": best + 1,
        "stop_over_best": res["curve"][stop][1] / res["curve"][best][1] - 1.0,
    })
    return res


def count_doc_sweeps(train: Corpus, k: int, iterations: int) -> dict[str, list[float]]:
    """Mean phi/gamma sweeps per document in each iteration of each variant: the E-step's work, free of timing noise."""
    from topicflow.pipeline.vb.batch import initial_state, run_iteration
    from topicflow.tasks.estep import graph_token

    sweeps: dict[str, list[float]] = {}
    for name, (start, _) in VARIANTS.items():
        config = VBConfig(n_topics=k, doc_topic_prior=start(k), tol=0.0, max_iter=iterations)
        state, _ = initial_state(train, config)
        sweeps[name] = []
        for i in range(iterations):
            state, stats, _ = run_iteration(train.to_delayed_multi(), state, config, token=graph_token(name, k, i),
                                            split_every=8, client=None, iteration=i)
            sweeps[name].append(stats.n_doc_iter / stats.n_docs)
    return sweeps


def reach_target(curve: list[tuple[float, float]], target: float) -> tuple[int, float] | None:
    """(iterations, fit seconds) at which the held-out perplexity first reaches ``target``."""
    for i, (seconds, value) in enumerate(curve):
        if value <= target:
            return i + 1, seconds
    return None


def run_gensim(X: sp.csr_matrix, k: int, passes: int, multicore: bool, seed: int = 0) -> tuple[float, np.ndarray, np.ndarray]:
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaModel, LdaMulticore

    corpus = list(Sparse2Corpus(X, documents_columns=False))
    started = time.perf_counter()
    if multicore:
        model = LdaMulticore(corpus, num_topics=k, passes=passes, workers=1, chunksize=2000,
                             iterations=50, random_state=seed, eval_every=None)
    else:
        model = LdaModel(corpus, num_topics=k, passes=passes, chunksize=2000, iterations=50,
                         alpha="auto", random_state=seed, eval_every=None)
    seconds = time.perf_counter() - started
    return seconds, model.get_topics(), np.asarray(model.alpha)


def run_sklearn(X: sp.csr_matrix, k: int, max_iter: int, seed: int = 0) -> tuple[float, np.ndarray, np.ndarray]:
    from sklearn.decomposition import LatentDirichletAllocation

    model = LatentDirichletAllocation(n_components=k, learning_method="batch", max_iter=max_iter,
                                      n_jobs=2, random_state=seed, evaluate_every=-1)
    started = time.perf_counter()
    model.fit(X)
    seconds = time.perf_counter() - started
    return seconds, model.components_, np.full(k, model.doc_topic_prior_)


# ----------------------------------------------------------------------------- driver


def time_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    for seconds, value in curve:
        if value <= target:
            return seconds
    return None


def add_corpus_arguments(parser: argparse.ArgumentParser, *, synth_vocab: bool = True) -> None:
    """``--jsonl FILE...`` (a real corpus) or ``--synth-docs N`` (a generated one), and ``--synth-vocab``."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--jsonl", nargs="+", type=Path, help="real corpus: JSON Lines with id and text")
    source.add_argument("--synth-docs", type=int, help="generated corpus of this many training documents")
    if synth_vocab:
        parser.add_argument("--synth-vocab", type=int, default=10000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(parser)
    parser.add_argument("--topics", nargs="+", type=int, default=[20])
    parser.add_argument("--systems", default="topicflow,gensim,gensim-multicore,sklearn")
    parser.add_argument("--max-iter", type=int, default=50, help="topicflow iterations / sklearn max_iter")
    parser.add_argument("--passes", type=int, default=10, help="gensim passes")
    parser.add_argument("--eta", type=float, default=0.01,
                        help="topicflow's topic-word prior (gensim and scikit-learn keep their default, 1/K)")
    parser.add_argument("--alpha", choices=["auto", "fixed"], default="auto",
                        help="topicflow's alpha: learned, or fixed at 1/K like scikit-learn's")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of every system (topicflow's start, the anchors' random_state)")
    parser.add_argument("--init-shape", type=float, default=100.0,
                        help="topicflow's starting topics: Gamma(s, 1/s) entries (the anchors draw Gamma(100, 1/100))")
    parser.add_argument("--sklearn-max-iter", type=int, default=None,
                        help="scikit-learn max_iter (default: --max-iter); its batch iterations are slow at scale")
    parser.add_argument("--tol", type=float, default=1e-4, help="topicflow's stopping tolerance (0: run --max-iter)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sweeps", type=int, default=0,
                        help="also count each variant's mean E-step sweeps per document over this many iterations")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)

    from distributed import Client, LocalCluster

    systems = args.systems.split(",")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-vb-"))
    rows = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, Client(cluster) as client:
        for k in args.topics:
            kdir = workdir / f"k{k}"
            kdir.mkdir(parents=True, exist_ok=True)
            if args.jsonl:
                train, test = build_real(args.jsonl, kdir, client)
            else:
                train, test = build_synth(args.synth_docs, k, args.synth_vocab, kdir, client)
            pairs = heldout_blocks(train, test)
            info = {"K": k, "n_docs": len(train), "n_tokens": train.n_tokens, "n_terms": len(train.vocabulary()),
                    "heldout_docs": len(test)}
            fit_batch_vb(train, VBConfig(n_topics=k, max_iter=1), client=client)  # numba warm-up on workers
            results: dict[str, dict[str, Any]] = {}
            X = load_csr(train) if set(systems) - {"topicflow"} else None
            anchors: dict[str, Callable[[], tuple[float, np.ndarray, np.ndarray]]] = {
                "gensim": lambda: run_gensim(X, k, args.passes, multicore=False, seed=args.seed),
                "gensim-multicore": lambda: run_gensim(X, k, args.passes, multicore=True, seed=args.seed),
                "sklearn": lambda: run_sklearn(X, k, args.sklearn_max_iter or args.max_iter, seed=args.seed),
            }
            for name in systems:
                if name in VARIANTS and args.alpha == "auto":
                    results[name] = run_variant(name, train, k, args.max_iter, client, pairs, eta=args.eta,
                                                seed=args.seed, init_shape=args.init_shape)
                elif name in VARIANTS:
                    results[name] = run_topicflow(train, k, args.max_iter, client, pairs, eta=args.eta,
                                                  alpha=args.alpha, seed=args.seed, init_shape=args.init_shape,
                                                  tol=args.tol)
                else:
                    seconds, topic_word, alpha = anchors[name]()
                    results[name] = {"seconds": seconds, "perplexity": perplexity(pairs, topic_word, alpha)}
            anchor_names = [n for n in results if n not in VARIANTS]
            for name in VARIANTS:
                if name in results:
                    results[name]["reach"] = {a: reach_target(results[name]["curve"], results[a]["perplexity"])
                                              for a in anchor_names}
            if "topicflow" in results and anchor_names:
                fastest = min(anchor_names, key=lambda n: results[n]["seconds"])
                best = min(anchor_names, key=lambda n: results[n]["perplexity"])
                curve = results["topicflow"]["curve"]
                results["topicflow"]["time_to_fastest_anchor_perplexity"] = time_to_reach(curve, results[fastest]["perplexity"])
                results["topicflow"]["time_to_best_anchor_perplexity"] = time_to_reach(curve, results[best]["perplexity"])
                results["topicflow"]["fastest_anchor"] = fastest
            counted = count_doc_sweeps(train, k, args.sweeps) if args.sweeps else {}
            for name in VARIANTS:
                if name in results and counted:
                    sweeps = counted[name]
                    stop = results[name].get("stop_iterations", len(sweeps))
                    results[name]["doc_sweeps"] = [round(x, 2) for x in sweeps]
                    results[name]["doc_sweeps_to_stop"] = round(sum(sweeps[:stop]), 1)
            for name, res in results.items():
                row = {**info, "system": name, **{k2: v for k2, v in res.items() if k2 != "curve"}}
                if "curve" in res:
                    row["curve"] = [[round(s, 3), round(p, 2)] for s, p in res["curve"]]
                print(json.dumps(row), flush=True)
                rows.append(row)
    print()
    print(f"{'K':>4} {'system':<17} {'docs':>8} {'tokens':>10} {'seconds':>8} {'perplexity':>10} {'t->fastest':>10}")
    for row in rows:
        reach = row.get("time_to_fastest_anchor_perplexity")
        reach_text = "" if "fastest_anchor" not in row else ("never" if reach is None else f"{reach:.1f}")
        print(f"{row['K']:>4} {row['system']:<17} {row['n_docs']:>8} {row['n_tokens']:>10} "
              f"{row['seconds']:>8.1f} {row['perplexity']:>10.1f} {reach_text:>10}")
    print_convergence(rows)
    return 0


def print_convergence(rows: list[dict[str, Any]]) -> None:
    """Issue 22 table: where each variant's stopping rule stops, the eventual best, and when each anchor is reached."""
    variants = [row for row in rows if "stop_iterations" in row]
    if not variants:
        return
    anchors = [row for row in rows if row["system"] not in VARIANTS]
    print()
    print("batch VB convergence (iterations / fit seconds; perplexity on the held-out documents)")
    for row in anchors:
        print(f"  K={row['K']} anchor {row['system']}: {row['perplexity']:.1f} in {row['seconds']:.1f} s")
    head = f"{'K':>4} {'variant':<17} {'alpha0':>7} {'tol':>6} {'stop it':>7} {'stop s':>7} {'stop ppl':>8} " \
           f"{'best ppl':>8} {'best it':>7} {'stop/best':>9}"
    names = sorted({a for row in variants for a in row.get("reach", {})})
    print(head + "".join(f" {('->' + n)[:17]:>17}" for n in names))
    for row in variants:
        cells = []
        for n in names:
            hit = row.get("reach", {}).get(n)
            cells.append("never" if hit is None else f"{hit[0]} it {hit[1]:.1f} s")
        print(f"{row['K']:>4} {row['system']:<17} {row['alpha_start']:>7.3g} {row['tol']:>6.0e} "
              f"{row['stop_iterations']:>7} {row['stop_seconds']:>7.1f} {row['stop_perplexity']:>8.1f} "
              f"{row['best_perplexity']:>8.1f} {row['best_iterations']:>7} {100 * row['stop_over_best']:>8.2f}%"
              + "".join(f" {c:>17}" for c in cells))


if __name__ == "__main__":
    sys.exit(main())
