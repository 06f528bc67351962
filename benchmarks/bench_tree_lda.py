"""Tree priors (Zhai 2014, chapter 5, issue 20): LDA, pLDA, tLDA and ptLDA on aligned English/German documents.

The chapter scores its models by BLEU of a topic-adapted SMT system, which we do not have. This script
tests the chapter's orderings with measures we can compute on the aligned Debian-reference corpus
(444 en/de section pairs) and the FreeDict German-English dictionary (``~/.cache/topicflow-dev-corpora``):

- the pairs are shuffled with ``--split-seed`` and split into training and held-out pairs
  (``--heldout-fraction``, default 0.2: 355 and 89);
- four models, as in the chapter (all by :class:`topicflow.TreeLDA` or the tree Gibbs sampler):
  ``LDA`` (flat tree, each training pair split into two single-language documents), ``pLDA`` (flat tree,
  aligned documents), ``tLDA`` (dictionary tree, single-language documents), ``ptLDA`` (dictionary tree,
  aligned documents); each by ``vb``, ``hybrid`` and ``gibbs`` (``TreeLDA(inference=...)``, normalization
  ``node_language``: a flat tree is polylingual LDA), plus ``ptLDA`` by ``vb`` and ``gibbs`` with the
  chapter's ``node`` normalization, and the anchor ``pLDA-anchor``: topicflow's own polylingual LDA (``topicflow.LDA`` on the
  aligned store; MALLET's polylingual model is not in the OS packages);
- the measures, all on the held-out pairs: cross-language document matching (theta folded in from
  each side alone, nearest neighbour by Hellinger distance, precision at 1 and MRR in both directions,
  :func:`topicflow.pipeline.evaluation.matching.document_matching`); held-out perplexity per language
  (``completion-random``, :func:`topicflow.pipeline.evaluation.heldout.heldout_likelihood`, on a
  single-language store of the held-out side); C_V coherence of the top 10 words per language against
  all 444 pairs (:func:`topicflow.pipeline.evaluation.coherence.evaluate_coherence`); topic translation
  consistency of the top 10 words (:func:`topicflow.metrics.translation.translation_consistency`, the
  dictionary pairs that made the tree's concepts); and the wall time of the fit;
- the aligned-share sweep: ``--shares`` percent of the training pairs kept aligned (the rest split into
  single-language documents), pLDA against ptLDA (spec pitfall P7: near-translations hide the tree);
- the timing comparison: the corpus replicated ``--copies`` times (about 1M tokens), gibbs against vb
  and hybrid on ``--workers`` Dask workers.

Tokenization: topicflow's defaults (lowercase, English stop words) plus, as stop words, each language's
terms found in more than ``--max-df-fraction`` (0.5) of the aligned training documents, measured once
and used for every store so that all stores keep the same vocabularies. That drops 17 German function
words (der, die, und, ...) that the English stop list leaves in and that otherwise fill the German top
words of every topic; ``--max-df-fraction 1`` keeps them. The dictionary tree is built per training store
(one concept per pair, ``topicflow tree build``'s defaults).

Every fit uses alpha = ``--alpha`` (0.01, the chapter's, fixed), the tree's per-leaf root prior 0.01 and
concept prior 100 (``topicflow tree build`` defaults), ``--max-iter`` VB iterations and
``--gibbs-sweeps`` Gibbs sweeps. One Dask cluster (``--workers`` processes, one thread each) runs
everything; ``fit_seconds`` is the fit alone. Example::

    nice .venv/bin/python benchmarks/bench_tree_lda.py --work /tmp/tree20 --out /tmp/tree20/runs.jsonl

``--quick`` is a smoke run (K = 10, one seed, few iterations, a small timing corpus). Prints one JSON
object per fit as it finishes, then the tables (markdown), then one JSON summary line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(os.path.expanduser("~/.cache/topicflow-dev-corpora"))
LANGS = ("en", "de")
FIELDS_LANGS = (("en", "en"), ("de", "de"))


# ----------------------------------------------------------------------------- data


def read_pairs(path: Path) -> list[dict[str, str]]:
    """The aligned records (id, en, de) of the JSONL corpus."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def split_train_heldout(pairs: Sequence[dict[str, str]], fraction: float, seed: int) -> tuple[list, list]:
    """Shuffle with ``seed`` and hold out ``round(fraction * n)`` pairs."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_held = int(round(fraction * len(pairs)))
    return [pairs[i] for i in order[n_held:]], [pairs[i] for i in order[:n_held]]


def as_single(pair: dict[str, str]) -> list[dict[str, str]]:
    """A pair as two single-language documents."""
    return [{"id": f"{pair['id']}#{lang}", lang: pair[lang]} for lang in LANGS]


def aligned_share(pairs: Sequence[dict[str, str]], percent: int, seed: int) -> list[dict[str, str]]:
    """Keep ``percent`` % of the pairs aligned (chosen with ``seed``), split the rest."""
    order = list(range(len(pairs)))
    random.Random(seed + 1).shuffle(order)
    keep = set(order[: int(round(percent / 100 * len(pairs)))])
    out: list[dict[str, str]] = []
    for i, pair in enumerate(pairs):
        out.extend([pair] if i in keep else as_single(pair))
    return out


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def ingest(jsonl: Path, out: Path, client: Any, *, keep_order: bool = False, languages: Sequence[str] = LANGS,
           tokenizer: Any = None) -> Any:
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.sources.base import FieldSpec
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    fields = FieldSpec(lang_fields=tuple((lang, lang) for lang in languages))
    ingest_corpus([jsonl], out, fields=fields, overwrite=True, keep_order=keep_order, client=client,
                  tokenizer=tokenizer)
    return Corpus.open(out)


def frequent_terms(store: Any, fraction: float) -> dict[str, list[str]]:
    """Per language, the terms in more than ``fraction`` of the documents that have text in the language."""
    out = {}
    for lang, n_docs in store_docs_by_language(store).items():
        vocab = store.vocabulary(lang)
        out[lang] = sorted(str(t) for t, df in zip(vocab.terms, vocab.doc_freq, strict=True) if df > fraction * n_docs)
    return out


def store_docs_by_language(store: Any) -> dict[str, int]:
    """Documents with at least one token, per language (an aligned store: every document)."""
    counts = {}
    for lang in store.languages:
        counts[lang] = sum(int(np.count_nonzero(np.diff(block.indptr))) for block in store.iter_blocks(lang))
    return counts


def pruned_tokenizer(store: Any, fraction: float) -> tuple[Any, dict[str, list[str]]]:
    """The default tokenizer plus, as stop words, each language's terms above ``fraction`` document frequency.

    Measured once on the aligned training store and then used for every store, so that all stores
    (aligned, split, mixed) keep the same vocabularies (``--max-df-fraction`` at ingest would prune a
    split store, with twice the documents, differently).
    """
    from topicflow.io.tokenizer import TokenizerConfig

    frequent = frequent_terms(store, fraction)
    base = TokenizerConfig()
    words = set(base.stop_words).union(*frequent.values())
    return TokenizerConfig(stop_words_name="file", stop_words=tuple(sorted(words))), frequent


def dictionary_terms(tree: Any) -> list[tuple[str, int, str, int]]:
    """(language, term id, language, term id) of every two-language concept of a two-level tree."""
    indptr, edges = np.asarray(tree.path_indptr), np.asarray(tree.path_edges)
    by_concept: dict[int, list[tuple[str, int]]] = {}
    for path in range(len(indptr) - 1):
        if indptr[path + 1] - indptr[path] >= 2:
            key = int(edges[indptr[path]])
            by_concept.setdefault(key, []).append(
                (tree.languages[int(tree.path_language[path])], int(tree.path_term[path])))
    out = []
    for leaves in by_concept.values():
        de = [t for lang, t in leaves if lang == "de"]
        en = [t for lang, t in leaves if lang == "en"]
        out.extend(("de", a, "en", b) for a in de for b in en)
    return out


def prepare(args: argparse.Namespace, client: Any) -> dict[str, Any]:
    """Write and ingest the stores, build the trees; returns everything the runs need."""
    from topicflow.io.trees import build_tree_for_store
    from topicflow.models.tree_lda.tree import flat_tree

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    pairs = read_pairs(Path(args.corpus))
    train, held = split_train_heldout(pairs, args.heldout_fraction, args.split_seed)
    shares = sorted(set(args.shares) | {0, 100})
    files = {f"train-{s}": aligned_share(train, s, args.split_seed) for s in shares}
    files["heldout"] = held
    files["heldout-en"] = [{"id": p["id"], "en": p["en"]} for p in held]
    files["heldout-de"] = [{"id": p["id"], "de": p["de"]} for p in held]
    files["reference"] = pairs
    stores: dict[str, Any] = {}
    tokenizer, frequent = None, {}
    if args.max_df_fraction < 1.0:
        write_jsonl(work / "train-100.jsonl", files["train-100"])
        probe = ingest(work / "train-100.jsonl", work / "probe.zarr", client)
        tokenizer, frequent = pruned_tokenizer(probe, args.max_df_fraction)
    for name, records in files.items():
        write_jsonl(work / f"{name}.jsonl", records)
        langs = [name[-2:]] if name in ("heldout-en", "heldout-de") else list(LANGS)
        stores[name] = ingest(work / f"{name}.jsonl", work / f"{name}.zarr", client,
                              keep_order=name == "reference", languages=langs, tokenizer=tokenizer)
    trees: dict[str, Any] = {}
    coverage: dict[str, Any] = {}
    for s in shares:
        store = stores[f"train-{s}"]
        started = time.perf_counter()
        tree, cov, _ = build_tree_for_store(args.dictionary, store, languages=["de", "en"])
        coverage[f"train-{s}"] = {**(cov.to_dict() if hasattr(cov, "to_dict") else dict(vars(cov))),
                                  "build_seconds": time.perf_counter() - started}
        trees[("dict", s)] = tree
        trees[("flat", s)] = flat_tree(store.languages, [len(store.vocabulary(lang)) for lang in store.languages],
                                       0.01)
    # the dictionary pairs (as terms) that made the aligned store's concepts: translation consistency
    aligned = stores["train-100"]
    dict_terms = [(aligned.vocabulary(la).term_of(a), aligned.vocabulary(lb).term_of(b))
                  for la, a, lb, b in dictionary_terms(trees[("dict", 100)])]
    sizes = {name: {"docs": len(store), "tokens": int(store.n_tokens),
                    "tokens_by_language": {k: int(v) for k, v in store.tokens_by_language().items()},
                    "vocabulary": {lang: len(store.vocabulary(lang)) for lang in store.languages}}
             for name, store in stores.items()}
    return {"stores": stores, "trees": trees, "dict_terms": dict_terms, "sizes": sizes, "coverage": coverage,
            "tokenizer": tokenizer, "frequent_terms": frequent,
            "n_train_pairs": len(train), "n_heldout_pairs": len(held), "work": work}


# ----------------------------------------------------------------------------- fits


def gibbs_in_estimator() -> bool:
    """Whether :class:`topicflow.TreeLDA` takes ``inference="gibbs"`` (helper tree-wiring's branch)."""
    from topicflow.api.tree_lda import TreeLDA
    from topicflow.errors import InvalidParameterError
    from topicflow.models.tree_lda.tree import flat_tree

    try:
        TreeLDA(2, prior_tree=flat_tree(["en"], [3]), inference="gibbs", alpha=0.1)._validate_params()
    except InvalidParameterError:
        return False
    return True


def fit_vb(store: Any, tree: Any, k: int, seed: int, inference: str, normalization: str,
           args: argparse.Namespace, client: Any) -> tuple[Any, float, dict[str, Any]]:
    """TreeLDA by vb or hybrid; returns the saved model, the fit's seconds and its iterations."""
    from topicflow.api.tree_lda import TreeLDA

    model = TreeLDA(k, prior_tree=tree, inference=inference, normalization=normalization, alpha=args.alpha,
                    max_iter=args.max_iter, seed=seed)
    started = time.perf_counter()
    model.fit(store, client=client)
    return model.model_, time.perf_counter() - started, {"iterations": model.n_iter_, "converged": model.converged_}


def fit_gibbs(store: Any, tree: Any, k: int, seed: int, normalization: str, args: argparse.Namespace,
              client: Any) -> tuple[Any, float, dict[str, Any]]:
    """Tree collapsed Gibbs, AD-LDA over the store's shards: ``TreeLDA(inference="gibbs")`` (lambda = beta + N_ke)."""
    from topicflow.api.tree_lda import TreeLDA

    if not gibbs_in_estimator():
        raise SystemExit("this topicflow has no TreeLDA(inference='gibbs'); merge the tree-wiring branch")
    estimator = TreeLDA(k, prior_tree=tree, inference="gibbs", normalization=normalization, alpha=args.alpha,
                        max_iter=args.gibbs_sweeps, sync_every=args.sync_every, seed=seed)
    started = time.perf_counter()
    estimator.fit(store, client=client)
    return estimator.model_, time.perf_counter() - started, {
        "sweeps": args.gibbs_sweeps, "sync_every": args.sync_every, "log_joint": float(estimator.trace_[-1].elbo)}


def fit_anchor(store: Any, k: int, seed: int, args: argparse.Namespace, client: Any) -> tuple[Any, float, dict]:
    """topicflow's polylingual LDA (batch VB) on the aligned store: the pLDA anchor."""
    from topicflow.api.lda import LDA

    model = LDA(k, doc_topic_prior=args.alpha, topic_word_prior=0.01, max_iter=args.max_iter, seed=seed)
    started = time.perf_counter()
    model.fit(store, client=client)
    return model.model_, time.perf_counter() - started, {"iterations": len(model.model_.info.trace)}


# ----------------------------------------------------------------------------- measures


def measure(model: Any, data: dict[str, Any], args: argparse.Namespace, client: Any) -> dict[str, Any]:
    """Matching, perplexity, coherence and translation consistency of one saved model."""
    from topicflow.metrics.translation import translation_consistency
    from topicflow.pipeline.evaluation.coherence import evaluate_coherence
    from topicflow.pipeline.evaluation.heldout import heldout_likelihood
    from topicflow.pipeline.evaluation.matching import document_matching

    stores = data["stores"]
    out: dict[str, Any] = {}
    for query, cand in (("en", "de"), ("de", "en")):
        scores = document_matching(model, stores["heldout"], query_language=query, candidate_language=cand,
                                   divergence="hellinger", client=client)
        out[f"p1_{query}_{cand}"] = scores.precision_at_1
        out[f"mrr_{query}_{cand}"] = scores.mean_reciprocal_rank
    out["p1"] = (out["p1_en_de"] + out["p1_de_en"]) / 2
    out["mrr"] = (out["mrr_en_de"] + out["mrr_de_en"]) / 2
    for lang in LANGS:
        held = heldout_likelihood(model, stores[f"heldout-{lang}"], "completion-random", client=client, seed=0)
        out[f"perplexity_{lang}"] = held.perplexity
        coh = evaluate_coherence(model, stores["reference"], measure="c_v", top_n=10, language=lang, client=client)
        out[f"coherence_{lang}"] = float(np.nanmean(coh.per_topic))
    words = model.state.topic_word()
    vocab = model.vocabularies
    ids = [(vocab["de"].id_of(a), vocab["en"].id_of(b)) for a, b in data["dict_terms"]]
    pairs = np.array([p for p in ids if p[0] is not None and p[1] is not None], dtype=np.int64).reshape(-1, 2)
    trans = translation_consistency(words["de"], words["en"], pairs, top_n=10, languages=("de", "en")).to_dict()
    out.update({f"translation_{k}": v for k, v in trans.items()})
    return out


# ----------------------------------------------------------------------------- runs

#: (model, store share of aligned pairs, tree)
MODELS = {"LDA": (0, "flat"), "pLDA": (100, "flat"), "tLDA": (0, "dict"), "ptLDA": (100, "dict")}


def systems(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(model, inference, normalization) of the main comparison."""
    out = [(m, inf, "node_language") for m in MODELS for inf in args.inference]
    out += [("ptLDA", inf, "node") for inf in args.inference if inf != "hybrid"]
    return out + [("pLDA-anchor", "vb", "-")]


def run_one(data: dict[str, Any], model_name: str, inference: str, normalization: str, share: int | None, k: int,
            seed: int, args: argparse.Namespace, client: Any) -> dict[str, Any]:
    if model_name == "pLDA-anchor":
        store = data["stores"]["train-100"]
        model, seconds, extra = fit_anchor(store, k, seed, args, client)
        tree_kind, share = "flat", 100
    else:
        base_share, tree_kind = MODELS[model_name]
        share = base_share if share is None else share
        store, tree = data["stores"][f"train-{share}"], data["trees"][(tree_kind, share)]
        if inference == "gibbs":
            model, seconds, extra = fit_gibbs(store, tree, k, seed, normalization, args, client)
        else:
            model, seconds, extra = fit_vb(store, tree, k, seed, inference, normalization, args, client)
    row = {"model": model_name, "inference": inference, "normalization": normalization, "tree": tree_kind,
           "aligned_percent": share, "k": k, "seed": seed, "fit_seconds": seconds, **extra}
    row.update(measure(model, data, args, client))
    return row


def timing_runs(args: argparse.Namespace, data: dict[str, Any], client: Any) -> list[dict[str, Any]]:
    """gibbs, vb and hybrid ptLDA on the replicated corpus: time per iteration and per fit."""
    from topicflow.io.trees import build_tree_for_store

    work = data["work"]
    train = read_pairs(work / "train-100.jsonl")
    records = [{**p, "id": f"{p['id']}@{c}"} for c in range(args.copies) for p in train]
    write_jsonl(work / "large.jsonl", records)
    store = ingest(work / "large.jsonl", work / "large.zarr", client, tokenizer=data["tokenizer"])
    tree, _, _ = build_tree_for_store(args.dictionary, store, languages=["de", "en"])
    rows = []
    k = 10
    for inference in args.inference:
        if inference == "gibbs":
            model, seconds, extra = fit_gibbs(store, tree, k, 0, "node_language", args, client)
            per_iteration = seconds / args.gibbs_sweeps
        else:
            model, seconds, extra = fit_vb(store, tree, k, 0, inference, "node_language", args, client)
            per_iteration = seconds / max(1, extra["iterations"])
        held = {lang: heldout_likelihood_of(model, data["stores"][f"heldout-{lang}"], client) for lang in LANGS}
        row = {"timing": True, "inference": inference, "k": k, "docs": len(store), "tokens": int(store.n_tokens),
               "shards": store.n_shards, "workers": args.workers, "fit_seconds": seconds,
               "seconds_per_iteration": per_iteration, **extra,
               **{f"perplexity_{lang}": v for lang, v in held.items()}}
        print(json.dumps(row, default=float), flush=True)
        rows.append(row)
    return rows


def heldout_likelihood_of(model: Any, store: Any, client: Any) -> float:
    from topicflow.pipeline.evaluation.heldout import heldout_likelihood

    return float(heldout_likelihood(model, store, "completion-random", client=client, seed=0).perplexity)


def warm_up(data: dict[str, Any], args: argparse.Namespace, client: Any) -> None:
    """One tiny fit and measure per inference, not recorded: numba compiles and worker imports happen here."""
    quick = argparse.Namespace(**{**vars(args), "max_iter": 1, "gibbs_sweeps": 2, "sync_every": 1})
    for inference in args.inference:
        run_one(data, "ptLDA", inference, "node_language", None, 2, 0, quick, client)
    run_one(data, "pLDA-anchor", "vb", "-", None, 2, 0, quick, client)


# ----------------------------------------------------------------------------- tables


def mean_sd(values: Sequence[float], digits: int = 3) -> str:
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 1:
        return f"{arr[0]:.{digits}f}"
    return f"{arr.mean():.{digits}f} ± {arr.std(ddof=1):.{digits}f}"


COLUMNS: list[tuple[str, str, int]] = [
    ("P@1 en→de", "p1_en_de", 3), ("P@1 de→en", "p1_de_en", 3), ("MRR", "mrr", 3),
    ("ppl en", "perplexity_en", 0), ("ppl de", "perplexity_de", 0), ("C_V en", "coherence_en", 3),
    ("C_V de", "coherence_de", 3), ("transl.", "translation_mean", 3), ("fit s", "fit_seconds", 1),
]


def table(rows: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], tuple], first: Sequence[str]) -> str:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    head = list(first) + ["runs"] + [c[0] for c in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, members in groups.items():
        cells = [str(g) for g in group] + [str(len(members))]
        cells += [mean_sd([m[field] for m in members], digits) for _, field, digits in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def timing_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| inference | docs | tokens | workers | iterations / sweeps | s per iteration | fit s | ppl en | ppl de |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        its = r.get("iterations", r.get("sweeps"))
        lines.append(f"| {r['inference']} | {r['docs']} | {r['tokens']} | {r['workers']} | {its} | "
                     f"{r['seconds_per_iteration']:.3f} | {r['fit_seconds']:.1f} | {r['perplexity_en']:.0f} | "
                     f"{r['perplexity_de']:.0f} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(DATA / "aligned_en_de_debref.jsonl"))
    parser.add_argument("--dictionary", default=str(DATA / "dict_de_en.tsv"))
    parser.add_argument("--work", default="/tmp/tree-lda-bench", help="Directory for the stores (rewritten).")
    parser.add_argument("--heldout-fraction", type=float, default=0.2)
    parser.add_argument("--max-df-fraction", type=float, default=0.5,
                        help="Also drop each language's terms in more than this share of the aligned training "
                             "documents (the German function words: the built-in stop list is English); 1 keeps all.")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--topics", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--large-k-seeds", type=int, default=1, help="Seeds (the first ones) at the larger K.")
    parser.add_argument("--inference", nargs="+", default=["vb", "hybrid", "gibbs"])
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--max-iter", type=int, default=50)
    parser.add_argument("--gibbs-sweeps", type=int, default=300)
    parser.add_argument("--sync-every", type=int, default=10)
    parser.add_argument("--shares", type=int, nargs="+", default=[0, 25, 50, 100])
    parser.add_argument("--sweep-inference", nargs="+", default=["vb"])
    parser.add_argument("--copies", type=int, default=10, help="Replications of the training pairs for the timing.")
    parser.add_argument("--no-main", action="store_true", help="Leave out the main comparison (e.g. a sweep only).")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="Smoke run: K=10, one seed, few iterations.")
    parser.add_argument("--out", type=Path, default=None, help="Append the JSON lines here too.")
    args = parser.parse_args(argv)
    if args.quick:
        args.topics, args.seeds, args.max_iter, args.gibbs_sweeps, args.copies = [10], [0], 5, 20, 2
        args.shares = [0, 50, 100]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    from distributed import Client, LocalCluster

    rows: list[dict[str, Any]] = []
    sink = open(args.out, "a", encoding="utf-8") if args.out else None

    def emit(row: dict[str, Any]) -> None:
        line = json.dumps(row, default=float)
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()

    started = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        data = prepare(args, client)
        warm_up(data, args, client)
        emit({"corpus": {"train_pairs": data["n_train_pairs"], "heldout_pairs": data["n_heldout_pairs"],
                         "stores": data["sizes"], "tree_coverage": data["coverage"],
                         "dictionary_pairs_used": len(data["dict_terms"]),
                         "frequent_terms_dropped": data["frequent_terms"],
                         "gibbs_in_estimator": gibbs_in_estimator(), "load_average": os.getloadavg(),
                         "cpus": os.cpu_count(), "settings": vars(args) | {"out": str(args.out)}}})
        for k in [] if args.no_main else args.topics:
            seeds = args.seeds if k == args.topics[0] else args.seeds[: args.large_k_seeds]
            for seed in seeds:
                for model_name, inference, normalization in systems(args):
                    if inference != "-" and inference not in args.inference and model_name != "pLDA-anchor":
                        continue
                    row = run_one(data, model_name, inference, normalization, None, k, seed, args, client)
                    emit(row)
                    rows.append(row)
        sweep: list[dict[str, Any]] = []
        if not args.no_sweep:
            k = args.topics[0]
            for seed in args.seeds:
                for share in args.shares:
                    for inference in args.sweep_inference:
                        for model_name in ("pLDA", "ptLDA"):
                            done = [r for r in rows if r["model"] == model_name and r["k"] == k and r["seed"] == seed
                                    and r["inference"] == inference and r["aligned_percent"] == share
                                    and r["normalization"] != "node"]
                            if done:
                                sweep.append(done[0])
                                continue
                            row = run_one(data, model_name, inference, "node_language", share, k, seed, args, client)
                            row["sweep"] = True
                            emit(row)
                            sweep.append(row)
        timing = [] if args.no_timing else timing_runs(args, data, client)
        if sink:
            for row in timing:
                sink.write(json.dumps(row, default=float) + "\n")
    print()
    for k in args.topics:
        print(f"### K = {k}\n")
        print(table([r for r in rows if r["k"] == k], lambda r: (r["model"], r["inference"], r["normalization"]),
                    ["model", "inference", "normalization"]))
        print()
    if sweep:
        print("### Aligned share sweep\n")
        sweep = sorted(sweep, key=lambda r: (r["inference"], r["aligned_percent"], r["model"]))
        print(table(sweep, lambda r: (r["aligned_percent"], r["model"], r["inference"]),
                    ["aligned %", "model", "inference"]))
        print()
    if timing:
        print("### Timing\n")
        print(timing_table(timing))
        print()
    summary = {"summary": True, "total_seconds": time.perf_counter() - started, "load_average": os.getloadavg(), "n_fits": len(rows) + len(
        [r for r in sweep if r.get("sweep")]) + len(timing)}
    emit(summary)
    if sink:
        sink.close()


if __name__ == "__main__":
    sys.exit(main())
