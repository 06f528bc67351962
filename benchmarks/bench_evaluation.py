"""Every topicflow model, gensim LdaModel and tomotopy LDAModel, scored by one evaluation path (issue 17).

Per real labeled corpus: one training store, one held-out store, one K. Every topicflow model is fitted
through the public Python API (``topicflow.LDA``: batch, online and hybrid VB; ``topicflow.StreamingLDA``:
batch collapsed Gibbs, o-LDA, incremental Gibbs, the particle filter, SGS and DSGS) on a local cluster
of worker processes, as the CLI runs them. gensim's ``LdaModel`` and tomotopy's ``LDAModel`` are fitted
on the same bags of words (the store's term ids and counts, read from the store) and converted into
topicflow saved models by :mod:`topicflow.io.models.foreign`. Every model, ours and theirs, is saved
with topicflow's model writer, loaded back, and scored by the same topicflow code:

* coherence (``topicflow.metrics.coherence``: u_mass, c_npmi, c_v of the top 10 words, gensim's
  definitions and windows) with the training store, ingested with token order kept, as the reference;
* held-out perplexity on the held-out store (``heldout_likelihood``): document completion with a
  random half of each document's tokens observed (the default protocol) and the left-to-right
  estimator (20 particles);
* topics as features on the training store (``topic_features_scores``): 5-fold stratified logistic
  regression on the folded-in document topics, beside the same classifier on tf-idf of the bag of
  words, and NMI (arithmetic) / ARI / purity of each document's most probable topic against its label.

Polylingual VB is fitted on the aligned English/German corpus (its own stores) and scored per language:
coherence of each language's topics against that language of the training store, perplexity on
held-out stores holding one side of each pair only.

Data: each corpus is shuffled (seed 0) and every tenth document is held out (``bench_vb_lda.split_jsonl``);
training stores keep terms in at least 5 documents and at most half of them (aligned: at least 3, at
most 30%, which also removes German function words, since the only built-in stop list is English).

Settings, the same for every seed (``Settings``):

* batch VB: at most 100 iterations (tol 1e-4), alpha learned (asymmetric), eta 0.01;
* online VB: S = 256, tau0 = 10, kappa = 0.7, 10 passes, alpha learned, eta 0.01; hybrid VB: the same
  with the Gibbs-within-VB E-step (5 burn-in, 5 kept sweeps); polylingual VB: as batch VB;
* gensim LdaModel: online VB with the same S, offset 10, decay 0.7, 10 passes, 100 E-step iterations
  to 1e-3, ``alpha="auto"``, eta 0.01;
* Gibbs family (alpha 0.1, beta 0.01, fixed): collapsed Gibbs 500 sweeps; tomotopy 500 iterations, one
  thread, ``optim_interval=0``; o-LDA, incremental Gibbs (10 rejuvenated tokens per token from a
  1000-token reservoir) and the particle filter (P = 20, resampling below ESS 20%, 10 rejuvenated
  tokens) start from 100 Gibbs sweeps on the first 10% of the stream; SGS and DSGS: S = 256, decay 0.9,
  at most 100 sweeps per minibatch, patience 10 (DSGS: one sampler loop per worker, the first two
  minibatches in order, then asynchronous).

Examples
--------
::

    python benchmarks/bench_evaluation.py                      # fortunes and bible, seeds 0 1 2, K = 20
    python benchmarks/bench_evaluation.py --corpora bible --seeds 0 --systems batch-vb,gensim,tomotopy

Prints one JSON object per model as it is scored, a final JSON report, then a Markdown table (mean
± standard deviation over seeds).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vb_lda import load_csr, split_jsonl

from topicflow import LDA, StreamingLDA, __version__
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.foreign import from_gensim, from_tomotopy
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
from topicflow.pipeline.ingest.ingest import ingest_corpus

DEV_CORPORA = Path.home() / ".cache" / "topicflow-dev-corpora"
#: Collapsed-Gibbs family priors (every sampler, and tomotopy): the settings of bench_gibbs / bench_sgs.
GIBBS_ALPHA, GIBBS_BETA = 0.1, 0.01
#: Topic-word prior of the variational models (and gensim); their alpha is learned (asymmetric).
VB_ETA = 0.01


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Stores:
    """The stores of one benchmark run: training and held-out documents, labeled, and the aligned pair."""

    train: Corpus
    test: Corpus
    poly_train: Corpus | None
    #: Held-out aligned pairs by what they hold: "en+de" (both sides), "en" and "de" (one side each).
    poly_test: dict[str, Corpus]


def ingest(source: Path, out: Path, fields: FieldSpec, prune: PruneConfig, client: Any) -> Corpus:
    """One store, with token order kept, from a JSON Lines file (reused when it exists and keeps order)."""
    if not (out / "manifest.json").exists() or not Corpus.open(out).has_order:
        ingest_corpus([source], out, fields=fields, tokenizer=TokenizerConfig(), prune=prune, client=client,
                      keep_order=True, overwrite=True)
    return Corpus.open(out)


#: The labeled development corpora (../shared/corpora): file and the field used as the label.
CORPORA = {
    "fortunes": ("labeled_fortunes.jsonl", "label"),
    "bible": ("bible_kjv.jsonl", "group"),
}


def build_stores(name: str, data_dir: Path, aligned: Path | None, workdir: Path, client: Any) -> Stores:
    """Shuffle (seed 0) and hold out every tenth document, then ingest with the default tokenizer, order kept.

    The training vocabulary keeps terms in at least 5 documents and at most half of them (the cut of
    bench_vb_lda.py); held-out stores keep every term (evaluation matches terms by string and counts
    out-of-vocabulary tokens apart).
    """
    file, label_field = CORPORA[name]
    data = workdir / "data" / name
    data.mkdir(parents=True, exist_ok=True)
    train_jsonl, test_jsonl = split_jsonl([data_dir / file], data, every=10)
    labeled = FieldSpec(id_field="id", text_field="text", label_field=label_field)
    train = ingest(train_jsonl, data / "train.zarr", labeled, PruneConfig(min_df=5, max_df_fraction=0.5), client)
    test = ingest(test_jsonl, data / "test.zarr", labeled, PruneConfig(), client)
    poly_train, poly_test = None, {}
    if aligned is not None:
        poly = workdir / "data" / "aligned"
        poly.mkdir(parents=True, exist_ok=True)
        ptrain, ptest = split_jsonl([aligned], poly, every=10)
        both = FieldSpec(id_field="id", lang_fields=(("en", "en"), ("de", "de")))
        # The English stop list is the only built-in one: German function words go by the max-df cut.
        poly_train = ingest(ptrain, poly / "train.zarr", both, PruneConfig(min_df=3, max_df_fraction=0.3), client)
        poly_test["en+de"] = ingest(ptest, poly / "test.zarr", both, PruneConfig(), client)
        for lang in ("en", "de"):  # one side only: the model infers theta from that language alone
            one = FieldSpec(id_field="id", lang_fields=((lang, lang),))
            poly_test[lang] = ingest(ptest, poly / f"test-{lang}.zarr", one, PruneConfig(), client)
    return Stores(train, test, poly_train, poly_test)


def bags(corpus: Corpus) -> sp.csr_matrix:
    """The store's documents as one CSR matrix of counts (the anchors need them in memory)."""
    return load_csr(corpus)


# ----------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class Settings:
    """What every system shares: K, the seed, and the budgets."""

    n_topics: int
    seed: int
    vb_max_iter: int = 100
    passes: int = 10
    batch_size: int = 256
    gibbs_sweeps: int = 500
    #: Share of the stream whose prefix batch Gibbs fits to start o-LDA, incremental Gibbs and the particle
    #: filter (Canini et al.'s setting in bench_streaming.py: the first 10%).
    init_fraction: float = 0.1
    particles: int = 20
    rejuv: int = 10
    sgs_batch_size: int = 256
    decay: float = 0.9


Fit = Callable[[Stores, Settings, Any], SavedModel]


def fit_lda(corpus: Corpus, settings: Settings, client: Any, **params: Any) -> SavedModel:
    estimator = LDA(settings.n_topics, topic_word_prior=VB_ETA, seed=settings.seed, **params)
    return estimator.fit(corpus, client=client).model_


def fit_batch(stores: Stores, settings: Settings, client: Any) -> SavedModel:
    return fit_lda(stores.train, settings, client, max_iter=settings.vb_max_iter)


def fit_online(stores: Stores, settings: Settings, client: Any) -> SavedModel:
    return fit_lda(stores.train, settings, client, method="online", batch_size=settings.batch_size,
                   passes=settings.passes)


def fit_hybrid(stores: Stores, settings: Settings, client: Any) -> SavedModel:
    return fit_lda(stores.train, settings, client, method="online", batch_size=settings.batch_size,
                   passes=settings.passes, estep="hybrid")


def fit_polylingual(stores: Stores, settings: Settings, client: Any) -> SavedModel:
    assert stores.poly_train is not None
    return fit_lda(stores.poly_train, settings, client, max_iter=settings.vb_max_iter)


def fit_stream(algorithm: str, **params: Any) -> Fit:
    def fit(stores: Stores, settings: Settings, client: Any) -> SavedModel:
        estimator = StreamingLDA(algorithm, settings.n_topics, doc_topic_prior=GIBBS_ALPHA,
                                 topic_word_prior=GIBBS_BETA, seed=settings.seed,
                                 **stream_settings(algorithm, settings, len(stores.train)), **params)
        return estimator.fit(stores.train, client=client).model_

    return fit


def stream_settings(algorithm: str, settings: Settings, n_docs: int) -> dict[str, Any]:
    """The budget of each streaming algorithm over ``n_docs`` documents (one record at the end, no test store)."""
    if algorithm == "gibbs":
        return {"sweeps": settings.gibbs_sweeps, "eval_every": settings.gibbs_sweeps}
    every = {"eval_every": 10**9}
    if algorithm in ("sgs", "dsgs"):
        return {**every, "batch_size": settings.sgs_batch_size, "decay": settings.decay}
    init_docs = max(1, round(settings.init_fraction * n_docs))
    common = {**every, "init_docs": init_docs, "init_sweeps": 100, "init_select": "perplexity"}
    if algorithm == "olda":
        return common
    if algorithm == "incgibbs":
        return {**common, "rejuvenation_steps": settings.rejuv}
    return {**common, "n_particles": settings.particles, "rejuvenation_steps": settings.rejuv, "ess_threshold": 0.2}


def fit_gensim(stores: Stores, settings: Settings, client: Any) -> SavedModel:
    """gensim LdaModel, online VB with topicflow's online settings: S, tau0 = 10, kappa = 0.7, passes, eta."""
    from gensim.models import LdaModel

    X = bags(stores.train)
    vocabulary = stores.train.vocabulary()
    documents = [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(),
                          X.data[X.indptr[d]:X.indptr[d + 1]].tolist())) for d in range(X.shape[0])]
    model = LdaModel(documents, id2word={i: str(t) for i, t in enumerate(vocabulary.terms)},
                     num_topics=settings.n_topics, chunksize=settings.batch_size, passes=settings.passes,
                     update_every=1, alpha="auto", eta=VB_ETA, decay=0.7, offset=10.0, iterations=100,
                     gamma_threshold=1e-3, eval_every=None, random_state=settings.seed)
    return from_gensim(model, stores.train, settings={"alpha": "auto", "eta": VB_ETA, "seed": settings.seed})


def fit_tomotopy(stores: Stores, settings: Settings, client: Any) -> SavedModel:
    """tomotopy LDAModel, collapsed Gibbs with topicflow's Gibbs settings: alpha, beta fixed, same sweeps."""
    import tomotopy as tp

    X = bags(stores.train)
    terms = np.asarray([str(t) for t in stores.train.vocabulary().terms], dtype=object)
    model = tp.LDAModel(k=settings.n_topics, alpha=GIBBS_ALPHA, eta=GIBBS_BETA, min_cf=0, min_df=0, rm_top=0,
                        seed=settings.seed, tw=tp.TermWeight.ONE)
    for d in range(X.shape[0]):
        row = slice(X.indptr[d], X.indptr[d + 1])
        words = np.repeat(terms[X.indices[row]], X.data[row].astype(np.int64)).tolist()
        if words:
            model.add_doc(words)
    model.optim_interval = 0  # fixed priors, as topicflow's Gibbs samplers run here
    model.train(settings.gibbs_sweeps, workers=1)
    return from_tomotopy(model, stores.train, settings={"iterations": settings.gibbs_sweeps, "workers": 1,
                                                        "seed": settings.seed})


@dataclass(frozen=True)
class System:
    """One row of the table: its name, family and how it is fitted."""

    name: str
    label: str
    fit: Fit
    polylingual: bool = False


SYSTEMS: dict[str, System] = {s.name: s for s in (
    System("batch-vb", "batch VB", fit_batch),
    System("online-vb", "online VB", fit_online),
    System("hybrid-vb", "hybrid VB (online, Gibbs E-step)", fit_hybrid),
    System("gibbs", "collapsed Gibbs", fit_stream("gibbs")),
    System("olda", "o-LDA", fit_stream("olda")),
    System("incgibbs", "incremental Gibbs", fit_stream("incgibbs")),
    System("pf", "particle filter", fit_stream("pf")),
    System("sgs", "SGS", fit_stream("sgs")),
    System("dsgs", "DSGS", fit_stream("dsgs", sync_first=2)),
    System("gensim", "gensim LdaModel (online VB)", fit_gensim),
    System("tomotopy", "tomotopy LDAModel (Gibbs)", fit_tomotopy),
    System("polylingual-vb", "polylingual VB (en/de)", fit_polylingual, polylingual=True),
)}


# ----------------------------------------------------------------------------- scoring


#: Coherence measures of the table (top 10 words, gensim's windows: 10 for c_npmi, 110 for c_v).
MEASURES = ("u_mass", "c_npmi", "c_v")
TOP_N = 10
#: Held-out protocols: the default (completion with a random half of each document's tokens observed) and
#: Wallach et al.'s left-to-right estimator.
PROTOCOLS = ("completion-random", "left-to-right")
FOLDS = 5


def score(model_path: Path, system: System, stores: Stores, client: Any, seed: int) -> dict[str, Any]:
    """Every score of one saved model, by topicflow's evaluation code (the model is read from disk).

    Coherence uses the training store as the reference; held-out likelihood the held-out store;
    classification and clustering the training store's labels (documents folded in with the topics
    fixed, 5-fold stratified cross-validation). The evaluation seed is the fit's seed.
    """
    from topicflow.metrics import coherence
    from topicflow.pipeline.evaluation import heldout_likelihood, topic_features_scores

    model = load_model(model_path)
    out: dict[str, Any] = {}
    timings: dict[str, float] = {}
    reference = stores.poly_train if system.polylingual else stores.train
    assert reference is not None
    languages = model.state.languages if system.polylingual else (None,)
    for measure in MEASURES:
        started = time.perf_counter()
        for lang in languages:
            result = coherence(model, reference, measure=measure, top_n=TOP_N, language=lang, client=client)
            out[measure if lang is None else f"{measure}_{lang}"] = result.mean
        timings[measure] = time.perf_counter() - started
    tests = ({f"_{name}" if name != "en+de" else "": store for name, store in stores.poly_test.items()}
             if system.polylingual else {"": stores.test})
    for protocol in PROTOCOLS:
        started = time.perf_counter()
        for suffix, test in tests.items():
            held = heldout_likelihood(model, test, protocol, client=client, seed=seed)
            key = protocol.replace("-", "_") + suffix
            out[f"{key}_perplexity"] = held.perplexity
            out[f"{key}_log_lik_per_token"] = held.log_lik_per_token
            out[f"{key}_tokens"] = held.n_tokens
        timings[protocol] = time.perf_counter() - started
    if not system.polylingual:
        started = time.perf_counter()
        # The tf-idf baseline depends on the store, the folds and the seed only: scored once per pair and reused.
        key = (str(stores.train.path), seed)
        features = topic_features_scores(model, stores.train, client=client, n_folds=FOLDS, seed=seed,
                                         baseline="none" if key in _BASELINES else "tfidf")
        if key not in _BASELINES:
            _BASELINES[key] = features.baseline.mean_accuracy
        out.update(accuracy=features.classification.mean_accuracy, accuracy_std=features.classification.std_accuracy,
                   baseline_accuracy=_BASELINES[key], nmi=features.clustering.nmi_arithmetic,
                   ari=features.clustering.ari, purity=features.clustering.purity,
                   n_clusters=features.clustering.n_clusters, n_classes=features.clustering.n_classes)
        timings["features"] = time.perf_counter() - started
    out["score_seconds_by_part"] = {name: round(value, 2) for name, value in timings.items()}
    return out


#: Baseline accuracy per (training store, seed), scored with the first model of each pair.
_BASELINES: dict[tuple[str, int], float] = {}


# ----------------------------------------------------------------------------- driver


def run_system(system: System, stores: Stores, settings: Settings, client: Any, models: Path) -> dict[str, Any]:
    started = time.perf_counter()
    model = system.fit(stores, settings, client)
    fit_seconds = time.perf_counter() - started
    path = models / f"{system.name}-seed{settings.seed}"
    save_model(path, model, overwrite=True)
    started = time.perf_counter()
    scores = score(path, system, stores, client, settings.seed)
    return {"system": system.name, "label": system.label, "seed": settings.seed, "K": settings.n_topics,
            "fit_seconds": round(fit_seconds, 2), "score_seconds": round(time.perf_counter() - started, 2),
            "model": str(path), **scores}


def warm_up(stores: Stores, client: Any) -> None:
    """Compile the numba kernels on every worker and in this process before anything is timed."""
    LDA(2, max_iter=1, seed=0).fit(stores.train, client=client)
    LDA(2, method="online", estep="hybrid", seed=0).fit(stores.train, client=client)
    tiny = Settings(n_topics=2, seed=0, gibbs_sweeps=2, particles=2, sgs_batch_size=20)
    for algorithm in ("gibbs", "olda", "incgibbs", "pf", "sgs", "dsgs"):
        params = stream_settings(algorithm, tiny, 200)
        if algorithm in ("olda", "incgibbs", "pf"):
            params["init_sweeps"] = 2
        StreamingLDA(algorithm, 2, max_docs=60, **params).fit(stores.train, client=client)


#: Columns of the table: (row key, header, format).
COLUMNS = (
    ("fit_seconds", "fit s", ".1f"), ("u_mass", "u_mass", ".3f"), ("c_npmi", "c_npmi", ".4f"), ("c_v", "c_v", ".3f"),
    ("completion_random_perplexity", "perplexity (completion)", ".0f"),
    ("left_to_right_perplexity", "perplexity (left-to-right)", ".0f"),
    ("accuracy", "accuracy", ".3f"), ("nmi", "NMI", ".3f"), ("ari", "ARI", ".3f"),
)


def cell(values: list[float], fmt: str) -> str:
    """Mean, and ± the standard deviation over seeds when there are several."""
    if not values:
        return ""
    mean = float(np.mean(values))
    return f"{mean:{fmt}}" if len(values) == 1 else f"{mean:{fmt}} ± {float(np.std(values)):{fmt}}"


def value_of(row: dict[str, Any], key: str, language: str | None) -> Any:
    """A column's value in a row; for one language of a polylingual row, that language's score."""
    if language is None or key == "fit_seconds":
        return row.get(key)
    if key.endswith("_perplexity"):
        return row.get(key.removesuffix("_perplexity") + f"_{language}_perplexity")
    return row.get(f"{key}_{language}")


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, list[float]]]]:
    """(corpus, label, values by column key over seeds) per corpus and system, in run order.

    A polylingual row becomes one row per language.
    """
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in rows:
        languages: tuple[str | None, ...] = ("en", "de") if row["system"] == "polylingual-vb" else (None,)
        for lang in languages:
            label = row["label"] if lang is None else f"{row['label']}, {lang}"
            values = groups.setdefault((row["corpus"], label), {})
            for key, _, _ in COLUMNS:
                value = value_of(row, key, lang)
                if value is not None:
                    values.setdefault(key, []).append(float(value))
    return [(corpus, label, values) for (corpus, label), values in groups.items()]


def print_table(rows: list[dict[str, Any]]) -> None:
    """The results as a Markdown table (mean ± standard deviation over seeds), then each corpus's baseline."""
    print()
    print("| corpus | model | " + " | ".join(header for _, header, _ in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for corpus, label, values in table_rows(rows):
        print(f"| {corpus} | {label} | " + " | ".join(cell(values.get(k, []), f) for k, _, f in COLUMNS) + " |")
    baselines: dict[str, list[float]] = {}
    for row in rows:
        if "baseline_accuracy" in row:
            baselines.setdefault(row["corpus"], []).append(row["baseline_accuracy"])
    for corpus, values in baselines.items():
        print(f"\n{corpus}: bag-of-words (tf-idf) baseline accuracy {cell(values, '.3f')} (same folds)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=list(CORPORA), default=["fortunes", "bible"],
                        help="labeled development corpora: fortunes (label: 22 categories), bible (group: 10 divisions)")
    parser.add_argument("--data-dir", type=Path, default=DEV_CORPORA,
                        help="folder of the development corpora (../shared/corpora/build-dev-corpora.sh)")
    parser.add_argument("--aligned", default="aligned_en_de_debref.jsonl",
                        help="aligned corpus in --data-dir for polylingual VB (id, en, de); 'none' to skip")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)

    from distributed import Client, LocalCluster

    names = args.systems.split(",")
    unknown = sorted(set(names) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-eval-"))
    rows: list[dict[str, Any]] = []
    corpora: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        for index, corpus_name in enumerate(args.corpora):
            # Polylingual VB has its own corpus: it runs once, with the first corpus.
            aligned = None if args.aligned == "none" or index > 0 else args.data_dir / args.aligned
            stores = build_stores(corpus_name, args.data_dir, aligned, workdir, client)
            corpora[corpus_name] = describe(stores)
            print(json.dumps({"corpus": corpus_name, **corpora[corpus_name]}), flush=True)
            if index == 0:
                warm_up(stores, client)
            models = workdir / "models" / corpus_name
            models.mkdir(parents=True, exist_ok=True)
            for seed in args.seeds:
                settings = Settings(n_topics=args.topics, seed=seed)
                for name in names:
                    system = SYSTEMS[name]
                    if system.polylingual and stores.poly_train is None:
                        continue
                    row = {"corpus": "aligned" if system.polylingual else corpus_name,
                           **run_system(system, stores, settings, client, models)}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    report = {"command": shlex.join([sys.executable, *sys.argv]), "topicflow": __version__,
              "python": platform.python_version(), "cpus": os.cpu_count(), "corpora": corpora,
              "settings": asdict(Settings(n_topics=args.topics, seed=-1)) | {"seeds": args.seeds},
              "total_seconds": round(time.perf_counter() - started, 1), "rows": rows}
    print(json.dumps(report), flush=True)
    print_table(rows)
    return 0


def describe(stores: Stores) -> dict[str, Any]:
    """Sizes of the stores, for the report."""
    out = {"train_docs": len(stores.train), "train_tokens": stores.train.n_tokens,
           "n_terms": len(stores.train.vocabulary()), "test_docs": len(stores.test),
           "test_tokens": stores.test.n_tokens}
    if stores.poly_train is not None:
        out["aligned"] = {"train_docs": len(stores.poly_train), "train_tokens": stores.poly_train.tokens_by_language(),
                          "n_terms": stores.poly_train.vocab_sizes(), "test_docs": len(stores.poly_test["en+de"])}
    return out


if __name__ == "__main__":
    sys.exit(main())
