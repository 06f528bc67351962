"""Infinite-vocabulary LDA (Zhai 2014, chapter 7, issue 21): a first cut of sec. 7.5's experiments.

The chapter streams 20 Newsgroups (sorted by date) and de-news through infvoc and through fixed-vocabulary
online LDA, and compares (1) PMI coherence of each topic's top 10 words per minibatch (Fig. 7.6, reference
counts from Wikipedia) and (2) the 20-label classification accuracy of the online pass's document topic
vectors (Table 7.1). We have neither corpus nor Wikipedia. This script uses the labeled fortunes
(``~/.cache/topicflow-dev-corpora/labeled_fortunes.jsonl``: 6,968 fortunes, 22 labels) in label order, a
stream whose vocabulary changes as it moves through the labels, and ``--order shuffled`` for a stream
without that drift (a fixed permutation, ``--split-seed``).

Arms (all online, the same minibatches of S documents in the same order, alpha^theta = 1/K, tau0 = 64,
kappa = ``--kappa`` (0.6, Table 7.1)):

- ``infvoc-g0`` / ``infvoc-nog0``: :class:`topicflow.InfVocLDA` with the shipped English G0 / without G0
  (the reference code's setting), ``--alpha-beta``, ``--truncation``, U = ``--reorder-every``, B = M = 5;
- ``vb-null`` / ``vb-dict``: :class:`topicflow.LDA` (``method="online"``, ``max_doc_iter=50`` as the
  chapter's fixvoc-vb), vocabulary = the first minibatch's words / the English word list (``words_en.txt``);
- ``vb-dict-hash``: dictionary words keep their ids, every other word is hashed (crc32) INTO the same id set
  (spec P10); ``vb-full-hash``: every word hashed into ``--hash-buckets`` buckets;
- ``hybrid-null`` / ``hybrid-dict``: the same with ``estep="hybrid"`` (B = M = 5);
- ``river``: river's ``preprocessing.LDA`` (its port of the authors' PyInfVoc, infinite vocabulary) on the
  same token stream, one document at a time (its only mode, S = 1), n_components = K, number_of_documents =
  D, alpha_theta = 1/K, alpha_beta = ``--alpha-beta``, tau = 64, kappa = ``--kappa``, 10 sweeps of which 5
  burn-in (P7), maximum_size_vocabulary = T and vocab_prune_interval = U * S documents (the chapter's
  reordering delay in documents). river reads each document's distinct words (``x.keys()``: counts are
  ignored), keeps one word index for all topics, and its pruning keeps the first T indices, i.e. the oldest
  words (no ranking, no reordering; spec 3.8). Top words: E[beta] from its (nu_1, nu_2) per topic, as
  infvoc's; features: ``learn_transform_one``'s online-pass vectors (alpha_theta + the last sweep's counts).

``--restate-tail`` runs the infvoc arms with ``InfVocLDA(restate_tail=True)``; ``--per-minibatch`` scores
the infvoc arms after EVERY minibatch instead (the driver's ``on_minibatch``; no classification), with and
without ``restate_tail`` and, for the chapter's setting, also the top words of the same state read with its
nu2 restated (read-out only), to locate the sawtooth at each contraction. ``--seed`` seeds every model
(the stream's order stays ``--split-seed``'s).

Fixvoc counts are built by this script from the store's ordered-token layer (the raw tokens infvoc reads),
tokens longer than 20 characters dropped (spec P8: ingest drops those shorter than 3), tokens outside the
vocabulary dropped. The stream is fed as count matrices, one ``partial_fit`` per checkpoint of
``--every`` minibatches (``batch_size`` = S inside it, ``total_docs`` = D), so the minibatches are the same as
infvoc's. A hashed id's label for coherence is the most frequent corpus word mapped to it.

Measures:

- PMI coherence (Newman et al. 2010; :func:`topicflow.metrics.confirmation.c_uci`: mean PMI over the 45
  pairs of a topic's top 10 words, gensim's epsilon) after every ``--every`` minibatches, the reference
  counts being document co-occurrence over the WHOLE corpus (not Wikipedia); also NPMI
  (:func:`~topicflow.metrics.confirmation.c_npmi`), bounded in [-1, 1], since on short documents most
  top-word pairs never co-occur and PMI is then dominated by log(epsilon). A top word that never occurs
  in the corpus (possible for the dictionary vocabulary) makes a topic's PMI non-finite; such topics are
  left out of the mean and counted (``nonfinite``);
- classification accuracy of the 22 labels: logistic regression on the normalized topic vectors, 5-fold
  stratified CV, seed 0. infvoc: the online pass's vectors (``fit(doc_topics=...)``, spec P9). fixvoc: LDA
  offers no online-pass vectors, so ``transform`` of each checkpoint's documents by the model right after
  it has been trained on them (``online``) and, separately, the final model's ``transform`` of all documents
  (``final``); infvoc's ``final`` is ``InfVocLDA.transform`` (fold-in with the final sticks fixed);
- documents per second of the whole stream (wall time of the ``partial_fit`` calls; infvoc: of one
  ``fit`` with ``doc_topics``, which is a second run after the checkpointed one).

Example::

    nice .venv/bin/python benchmarks/bench_infvoc.py --work /tmp/ivx --out /tmp/ivx/runs.jsonl

    nice .venv/bin/python benchmarks/bench_infvoc.py --arms river --topics 20 --order shuffled
    nice .venv/bin/python benchmarks/bench_infvoc.py --per-minibatch --arms infvoc-nog0,infvoc-g0

``--quick`` is a smoke run (first 1,000 documents, K = 5, S = 50). Prints one JSON object per arm as it
finishes, then the tables (markdown), then one JSON summary line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

DATA = Path(os.path.expanduser("~/.cache/topicflow-dev-corpora"))
MAX_LEN = 20


# ----------------------------------------------------------------------------- data


def make_store(args: argparse.Namespace) -> Path:
    """Write the ordered (or shuffled) JSONL and ingest it with --keep-order, shards of every * S docs."""
    rows = [json.loads(line) for line in open(DATA / "labeled_fortunes.jsonl", encoding="utf-8") if line.strip()]
    if args.quick:
        rows = rows[:: max(1, len(rows) // 1000)][:1000]
    if args.order == "shuffled":
        random.Random(args.split_seed).shuffle(rows)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"fortunes-{args.order}.jsonl"
    with open(src, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    store = work / f"fortunes-{args.order}.zarr"
    exe = Path(sys.executable).with_name("topicflow")

    def ingest() -> None:
        if store.exists():
            shutil.rmtree(store)
        subprocess.run([str(exe), "ingest", str(src), "--out", str(store), "--keep-order", "--min-df", "1",
                        "--min-length", "3", "--shard-size", str(args.every * args.batch_size), "--label-field",
                        "label", "--id-field", "id"], check=True, stdout=subprocess.DEVNULL)

    # Ingest drops documents left without tokens; drop them from the JSONL first and ingest again, so that
    # every shard holds exactly every * S documents and the per-shard checkpoints cut the stream at the
    # same minibatch boundaries as one fit over the whole store.
    ingest()
    from topicflow.io.corpus.reader import as_corpus

    kept = {str(i) for i in as_corpus(str(store)).doc_ids()}
    rows = [row for row in rows if str(row["id"]) in kept]
    with open(src, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    ingest()
    return store


def read_stream(store: Path) -> tuple[list[list[str]], list[str], list[int]]:
    """Each document's raw tokens (ordered layer) in store order, its id, and each shard's size."""
    from topicflow.io.corpus.reader import as_corpus

    corpus = as_corpus(str(store))
    vocab = [str(t) for t in corpus.vocabulary().terms]
    docs: list[list[str]] = []
    ids: list[str] = []
    sizes: list[int] = []
    for shard in range(corpus.n_shards):
        block = corpus.read_ordered(shard)
        words = [vocab[t] if t >= 0 else str(block.oov_terms[-t - 1]) for t in block.tokens.tolist()]
        for d in range(len(block.indptr) - 1):
            docs.append(words[block.indptr[d]:block.indptr[d + 1]])
        ids.extend(str(x) for x in block.doc_ids)
        sizes.append(len(block.indptr) - 1)
    return docs, ids, sizes


class Reference:
    """Document co-occurrence counts of the whole corpus (the PMI reference)."""

    def __init__(self, docs: list[list[str]]) -> None:
        self.index: dict[str, int] = {}
        rows, cols = [], []
        for d, doc in enumerate(docs):
            for w in set(doc):
                rows.append(d)
                cols.append(self.index.setdefault(w, len(self.index)))
        self.n_docs = len(docs)
        self.x = sp.csc_matrix((np.ones(len(rows), np.int64), (rows, cols)), shape=(len(docs), len(self.index)))
        self.freq = Counter(w for doc in docs for w in doc)

    def pmi(self, topics: list[list[str]], measure: str = "uci") -> tuple[float, int, list[float]]:
        """Mean c_uci (or c_npmi) over topics with a finite value, the number of non-finite topics, all values."""
        from topicflow.metrics.confirmation import c_npmi, c_uci

        score = c_uci if measure == "uci" else c_npmi

        values = []
        for words in topics:
            cols = [self.index.get(w, -1) for w in words]
            counts = np.zeros((len(words), len(words)), np.int64)
            ok = [i for i, c in enumerate(cols) if c >= 0]
            if ok:
                sub = self.x[:, [cols[i] for i in ok]]
                co = (sub.T @ sub).toarray()
                for a, i in enumerate(ok):
                    for b, j in enumerate(ok):
                        counts[i, j] = co[a, b]
            values.append(float(score(counts, self.n_docs)))
        finite = [v for v in values if np.isfinite(v)]
        return (float(np.mean(finite)) if finite else float("nan")), len(values) - len(finite), values


# ----------------------------------------------------------------------------- vocabularies


class Vocab:
    """A fixed vocabulary: word -> id (None: dropped), and a label per id for coherence."""

    def __init__(self, name: str, word_ids: dict[str, int] | None, n_ids: int, labels: list[str],
                 hasher: Any = None) -> None:
        self.name, self.word_ids, self.n_ids, self.labels, self.hasher = name, word_ids, n_ids, labels, hasher

    def id_of(self, w: str) -> int | None:
        if len(w) > MAX_LEN:
            return None
        if self.word_ids is not None and w in self.word_ids:
            return self.word_ids[w]
        return None if self.hasher is None else self.hasher(w)


def _crc(w: str, n: int) -> int:
    return zlib.crc32(w.encode("utf-8")) % n


def make_vocab(kind: str, docs: list[list[str]], first: int, dictionary: list[str], buckets: int,
               freq: Counter) -> Vocab:
    """null (first minibatch's words), dict, dict-hash (P10), full-hash."""
    if kind == "null":
        words = sorted({w for doc in docs[:first] for w in doc if len(w) <= MAX_LEN})
        return Vocab(kind, {w: i for i, w in enumerate(words)}, len(words), words)
    if kind == "dict":
        return Vocab(kind, {w: i for i, w in enumerate(dictionary)}, len(dictionary), list(dictionary))
    if kind == "dict-hash":
        ids = {w: i for i, w in enumerate(dictionary)}
        n = len(dictionary)
        labels = list(dictionary)
        best: dict[int, tuple[int, str]] = {i: (freq.get(w, 0), w) for i, w in enumerate(dictionary)}
        for w, c in freq.items():
            if w not in ids and len(w) <= MAX_LEN:
                b = _crc(w, n)
                if c > best[b][0]:
                    best[b] = (c, w)
        labels = [best[i][1] for i in range(n)]
        return Vocab(kind, ids, n, labels, hasher=lambda w: _crc(w, n))
    if kind == "full-hash":
        best2: dict[int, tuple[int, str]] = {}
        for w, c in freq.items():
            if len(w) <= MAX_LEN:
                b = _crc(w, buckets)
                if c > best2.get(b, (0, ""))[0]:
                    best2[b] = (c, w)
        labels = [best2.get(i, (0, f"#{i}"))[1] for i in range(buckets)]
        return Vocab(kind, None, buckets, labels, hasher=lambda w: _crc(w, buckets))
    raise ValueError(kind)


def counts(docs: list[list[str]], vocab: Vocab) -> sp.csr_matrix:
    rows, cols = [], []
    for d, doc in enumerate(docs):
        for w in doc:
            i = vocab.id_of(w)
            if i is not None:
                rows.append(d)
                cols.append(i)
    return sp.csr_matrix((np.ones(len(rows), np.float64), (rows, cols)), shape=(len(docs), vocab.n_ids))


# ----------------------------------------------------------------------------- measures


def accuracy(theta: np.ndarray, labels: list[str]) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    x = np.asarray(theta, np.float64)
    x = x / np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    clf = LogisticRegression(max_iter=2000)
    return float(np.mean(cross_val_score(clf, x, np.asarray(labels), cv=folds)))


# ----------------------------------------------------------------------------- arms


def make_infvoc(args: argparse.Namespace, g0: bool, restate_tail: bool) -> Any:
    import topicflow

    return topicflow.InfVocLDA(args.topics, alpha_beta=args.alpha_beta, truncation=args.truncation,
                               reorder_every=args.reorder_every, batch_size=args.batch_size, tau0=64.0,
                               kappa=args.kappa, alpha=1.0 / args.topics, g0=None if g0 else False, seed=args.seed,
                               restate_tail=restate_tail)


def run_infvoc(args: argparse.Namespace, store: Path, sizes: list[int], ref: Reference, labels: list[str],
               g0: bool, client: Any) -> dict[str, Any]:
    from topicflow.io.models.infvoc import read_doc_topics

    def make() -> Any:
        return make_infvoc(args, g0, args.restate_tail)

    curve = []
    model = make()
    done = 0
    for shard, size in enumerate(sizes):
        model.partial_fit(str(store), client=client, shards=[shard])
        done += -(-size // args.batch_size)
        tops = [[w for w, _p, _r in topic] for topic in model.top_terms(10)]
        mean, bad, _ = ref.pmi(tops)
        curve.append({"minibatches": done, "pmi": mean, "nonfinite": bad, "npmi": ref.pmi(tops, "npmi")[0]})
    final_tops = [[w for w, _p, _r in topic] for topic in model.top_terms(10)]
    path = Path(args.work) / f"doc_topics-{'g0' if g0 else 'nog0'}-{args.order}-K{args.topics}.zarr"
    if path.exists():
        shutil.rmtree(path)
    model2 = make()
    start = time.perf_counter()
    model2.fit(str(store), client=client, doc_topics=str(path))
    seconds = time.perf_counter() - start
    dt = read_doc_topics(path)
    theta = np.zeros_like(dt["doc_topic"])
    theta[np.asarray(dt["doc"], np.int64)] = dt["doc_topic"]
    same = [[w for w, _p, _r in topic] for topic in model2.top_terms(10)] == final_tops
    refit = np.asarray(model2.transform(str(store), client=client).compute())
    return {"curve": curve, "acc_online": accuracy(theta, labels), "acc_final": accuracy(refit, labels),
            "fit_seconds": seconds,
            "top_words": [" ".join(t) for t in final_tops], "rerun_same_topics": same,
            "n_words_seen": int(getattr(model2, "n_words_", 0) or 0)}


def run_infvoc_curve(args: argparse.Namespace, store: Path, docs: list[list[str]], ref: Reference, g0: bool,
                     restate_tail: bool, client: Any) -> dict[str, Any]:
    """PMI/NPMI of the top 10 words after every minibatch (the driver's on_minibatch), one fit."""
    from topicflow.api.infvoc import driver_g0
    from topicflow.io.corpus.reader import as_corpus
    from topicflow.models.infvoc_lda import top_words
    from topicflow.models.infvoc_lda.update import restate_tails
    from topicflow.pipeline.infvoc_lda import fit_infvoc

    est = make_infvoc(args, g0, restate_tail)
    params, plan = est.params(), est.plan()
    words = list(dict.fromkeys(w for doc in docs for w in doc))  # the driver's ids: first seen in store order
    curve: list[dict[str, Any]] = []

    def read(state: Any) -> list[list[str]]:
        return [[words[i] for i in ids.tolist()] for ids, _ in top_words(state, 10)]

    def on_minibatch(record: Any, state: Any) -> None:
        tops = read(state)
        row = {"minibatch": record.i, "pmi": ref.pmi(tops)[0], "npmi": ref.pmi(tops, "npmi")[0],
               "reordered": record.i % params.reorder_every == 0, "seconds": record.seconds}
        if not restate_tail:  # the same state, its nu2 restated for the read-out only
            alt = read(restate_tails(state, params))
            row["pmi_readout_restated"] = ref.pmi(alt)[0]
            row["npmi_readout_restated"] = ref.pmi(alt, "npmi")[0]
        curve.append(row)

    result = fit_infvoc(as_corpus(str(store)), params, plan, client=client, g0=driver_g0(est.g0),
                        on_minibatch=on_minibatch)
    if result.word_index.words != tuple(words):
        raise RuntimeError("the driver's word ids are not the first-seen order of the stream")
    return {"curve": curve, "fit_seconds": sum(r.seconds for r in result.trace), "restated_run": restate_tail,
            "top_words": [" ".join(t) for t in read(result.state)], "acc_online": None, "acc_final": None}


def river_top_words(model: Any, n: int) -> list[list[str]]:
    """Each topic's n words of largest E[beta] under river's sticks (position 0 is its placeholder stick)."""
    out = []
    for k in range(model.n_components):
        nu1, nu2 = np.asarray(model.nu_1[k], np.float64), np.asarray(model.nu_2[k], np.float64)
        total = nu1 + nu2
        rest = np.cumprod(nu2 / total)
        prob = nu1 / total * np.concatenate(([1.0], rest[:-1]))
        order = [int(i) for i in np.argsort(-prob, kind="stable") if int(i) in model.index_to_word]
        out.append([model.index_to_word[i] for i in order[:n]])
    return out


def run_river(args: argparse.Namespace, docs: list[list[str]], sizes: list[int], ref: Reference,
              labels: list[str]) -> dict[str, Any]:
    """river's preprocessing.LDA over the same token stream, one document at a time."""
    from river.preprocessing import LDA as RiverLDA

    k_topics = args.topics
    model = RiverLDA(n_components=k_topics, number_of_documents=len(docs), alpha_theta=1.0 / k_topics,
                     alpha_beta=args.alpha_beta, tau=64.0, kappa=args.kappa,
                     vocab_prune_interval=args.reorder_every * args.batch_size, number_of_samples=10,
                     burn_in_sweeps=5, maximum_size_vocabulary=args.truncation, seed=args.seed)
    theta = np.zeros((len(docs), k_topics))
    curve, seconds, start, done = [], 0.0, 0, 0
    for size in sizes:
        t0 = time.perf_counter()
        for d in range(start, start + size):
            out = model.learn_transform_one(dict(Counter(docs[d])))
            theta[d] = [out[k] for k in range(k_topics)]
        seconds += time.perf_counter() - t0
        start += size
        done += -(-size // args.batch_size)
        tops = river_top_words(model, 10)
        mean, bad, _ = ref.pmi(tops)
        curve.append({"minibatches": done, "pmi": mean, "nonfinite": bad, "npmi": ref.pmi(tops, "npmi")[0]})
    return {"curve": curve, "acc_online": accuracy(theta, labels), "acc_final": None, "fit_seconds": seconds,
            "top_words": [" ".join(t) for t in river_top_words(model, 10)], "vocab_size": len(model.word_to_index),
            "river_version": __import__("river").__version__}


def run_fixvoc(args: argparse.Namespace, docs: list[list[str]], sizes: list[int], ref: Reference,
               labels: list[str], vocab: Vocab, estep: str, client: Any) -> dict[str, Any]:
    import topicflow

    model = topicflow.LDA(args.topics, method="online", doc_topic_prior=1.0 / args.topics,
                          topic_word_prior=args.eta, batch_size=args.batch_size, tau0=64.0, kappa=args.kappa,
                          total_docs=len(docs), max_doc_iter=50, estep=estep, seed=args.seed)
    names = [str(i) for i in range(vocab.n_ids)]
    curve = []
    thetas = []
    seconds = 0.0
    start_doc = 0
    done = 0
    for size in sizes:
        x = counts(docs[start_doc:start_doc + size], vocab)
        start_doc += size
        t0 = time.perf_counter()
        model.partial_fit(x, client=client, vocabulary=names)
        seconds += time.perf_counter() - t0
        done += -(-size // args.batch_size)
        thetas.append(np.asarray(model.transform(x, vocabulary=names)))
        tops = top_ids(model.components_, 10)
        words = [[vocab.labels[i] for i in t] for t in tops]
        mean, bad, _ = ref.pmi(words)
        curve.append({"minibatches": done, "pmi": mean, "nonfinite": bad, "npmi": ref.pmi(words, "npmi")[0]})
    x_all = counts(docs, vocab)
    final = np.asarray(model.transform(x_all, vocabulary=names))
    tops = top_ids(model.components_, 10)
    return {"curve": curve, "acc_online": accuracy(np.vstack(thetas), labels),
            "acc_final": accuracy(final, labels), "fit_seconds": seconds,
            "top_words": [" ".join(vocab.labels[i] for i in t) for t in tops], "vocab_size": vocab.n_ids,
            "tokens_kept": float(x_all.sum()), "tokens_total": sum(len(d) for d in docs)}


def top_ids(components: Any, n: int) -> list[list[int]]:
    comp = np.asarray(components)
    return [list(np.argsort(-row, kind="stable")[:n]) for row in comp]


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/bench_infvoc")
    parser.add_argument("--out", default=None, help="append JSON lines here")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--order", choices=("label", "shuffled"), default="label")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=155)
    parser.add_argument("--every", type=int, default=5, help="minibatches per checkpoint (= shard)")
    parser.add_argument("--kappa", type=float, default=0.6)
    parser.add_argument("--alpha-beta", type=float, default=1000.0)
    parser.add_argument("--truncation", type=int, default=4000)
    parser.add_argument("--reorder-every", type=int, default=10)
    parser.add_argument("--eta", type=float, default=0.01, help="fixvoc topic-word prior")
    parser.add_argument("--hash-buckets", type=int, default=10000)
    parser.add_argument("--arms", default="infvoc-g0,infvoc-nog0,vb-null,vb-dict,vb-dict-hash,vb-full-hash,hybrid-null,hybrid-dict")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="seed of every model (not of the stream's order)")
    parser.add_argument("--restate-tail", action="store_true", help="infvoc arms with InfVocLDA(restate_tail=True)")
    parser.add_argument("--summarize", default=None, metavar="JSONL",
                        help="print mean +- sd over seeds of the runs in JSONL (per order, K and arm), run nothing")
    parser.add_argument("--per-minibatch", action="store_true",
                        help="infvoc arms only: PMI after every minibatch, with and without restate_tail")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize)
        return 0
    if args.quick:
        args.topics, args.batch_size, args.every = 5, 50, 5

    import warnings

    from distributed import Client, LocalCluster

    warnings.filterwarnings("ignore", message="Sending large graph")

    store = make_store(args)
    docs, ids, sizes = read_stream(store)
    label_of = {}
    for line in open(DATA / "labeled_fortunes.jsonl", encoding="utf-8"):
        if line.strip():
            row = json.loads(line)
            label_of[str(row["id"])] = row["label"]
    labels = [label_of[i] for i in ids]
    ref = Reference(docs)
    dictionary = [w.strip().lower() for w in open(DATA / "words_en.txt", encoding="utf-8")
                  if w.strip() and not w.startswith("#")]
    dictionary = list(dict.fromkeys(dictionary))
    n_types = len(ref.index)
    majority = Counter(labels).most_common(1)[0][1] / len(labels)
    in_dict = len(set(ref.index) & set(dictionary))
    header = {"corpus": "labeled_fortunes", "order": args.order, "docs": len(docs), "types": n_types,
              "types_in_dict": in_dict, "tokens": sum(len(d) for d in docs), "majority": majority, "K": args.topics,
              "S": args.batch_size, "minibatches": sum(-(-s // args.batch_size) for s in sizes),
              "kappa": args.kappa, "alpha_beta": args.alpha_beta, "T": args.truncation, "U": args.reorder_every,
              "seed": args.seed, "restate_tail": args.restate_tail}
    print(json.dumps({"header": header}), flush=True)
    results = []

    def record(res: dict, arm: str, t0: float) -> None:
        """Complete one arm's result, print it, append it to --out and keep it."""
        res.update(header)
        res["arm"] = arm
        res["docs_per_second"] = len(docs) / res["fit_seconds"]
        res["arm_seconds"] = time.perf_counter() - t0
        print(json.dumps(res), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(res) + "\n")
        results.append(res)

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for arm in args.arms.split(","):
            t0 = time.perf_counter()
            if args.per_minibatch:
                if not arm.startswith("infvoc"):
                    raise SystemExit(f"--per-minibatch runs infvoc arms only, not {arm}")
                for restate in (False, True):
                    res = run_infvoc_curve(args, store, docs, ref, arm == "infvoc-g0", restate, client)
                    record(res, arm + ("+restate" if restate else ""), t0)
                continue
            if arm == "river":
                res = run_river(args, docs, sizes, ref, labels)
            elif arm.startswith("infvoc"):
                res = run_infvoc(args, store, sizes, ref, labels, arm == "infvoc-g0", client)
            else:
                estep, kind = arm.split("-", 1)
                vocab = make_vocab(kind, docs, args.batch_size, dictionary, args.hash_buckets, ref.freq)
                res = run_fixvoc(args, docs, sizes, ref, labels, vocab, estep, client)
            record(res, arm, t0)
    if args.per_minibatch:
        print_curves(results, args.reorder_every)
        return 0
    print_tables(results)
    print(json.dumps({"summary": {r["arm"]: {"pmi_last": r["curve"][-1]["pmi"], "acc_online": r["acc_online"]}
                                  for r in results}}))
    return 0


def print_tables(results: list[dict[str, Any]]) -> None:
    if not results:
        return
    h = results[0]
    print(f"\n{h['corpus']} ({h['order']} order): {h['docs']} docs, {h['types']} types "
          f"({h['types_in_dict']} in the word list), K={h['K']}, S={h['S']}, {h['minibatches']} minibatches; "
          f"majority-label accuracy {100 * h['majority']:.1f}%\n")
    print("| arm | vocabulary | acc online % | acc final % | PMI mean | PMI last | NPMI last | docs/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        final = "-" if r["acc_final"] is None else f"{100 * r['acc_final']:.1f}"
        vocab = "unbounded" if r["arm"].startswith("infvoc") else r.get("vocab_size", "")
        if r["arm"] == "river":
            vocab = f"{vocab} (oldest kept)"
        print(f"| {r['arm']} | {vocab} | {100 * r['acc_online']:.1f} | {final} | "
              f"{np.mean([c['pmi'] for c in r['curve']]):.2f} | "
              f"{r['curve'][-1]['pmi']:.3f} | {r['curve'][-1]['npmi']:.3f} | {r['docs_per_second']:.0f} |")
    marks = [c["minibatches"] for c in results[0]["curve"]]
    print("\nPMI per checkpoint (non-finite topics in brackets)\n")
    print("| arm | " + " | ".join(f"mb {m}" for m in marks) + " |")
    print("|---|" + "---|" * len(marks))
    for r in results:
        cells = [f"{c['pmi']:.2f}" + (f" ({c['nonfinite']})" if c["nonfinite"] else "") for c in r["curve"]]
        print(f"| {r['arm']} | " + " | ".join(cells) + " |")
    print("\nNPMI per checkpoint\n")
    print("| arm | " + " | ".join(f"mb {m}" for m in marks) + " |")
    print("|---|" + "---|" * len(marks))
    for r in results:
        print(f"| {r['arm']} | " + " | ".join(f"{c['npmi']:.3f}" for c in r["curve"]) + " |")


def summarize(path: str) -> None:
    """Mean +- sd over seeds of the checkpointed runs (chapter settings) in a JSON-lines file."""
    groups: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        if "minibatches" not in r["curve"][0]:
            continue  # per-minibatch curves
        key = (r["order"], r["K"], r["arm"], r["alpha_beta"], r["T"], r["U"], r["kappa"], bool(r.get("restate_tail")))
        groups.setdefault(key, {})[int(r.get("seed", 0))] = r  # the last run of a seed wins
    print("| order | K | arm | alpha^beta, T, U, kappa | seeds | acc online % | acc final % | PMI mean | PMI last | "
          "NPMI last | docs/s (min-max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def cell(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
        v = np.asarray([x for x in values if x is not None], np.float64) * scale
        if v.size == 0:
            return "-"
        return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}" if v.size > 1 else f"{v[0]:.{digits}f}"

    for key in sorted(groups, key=lambda k: (k[0], k[1], k[3], k[4], k[5], k[6], k[7], k[2])):
        runs = list(groups[key].values())
        order, k, arm = key[0], key[1], key[2] + (" +restate" if key[7] else "")
        rates = [r["docs_per_second"] for r in runs]
        print(f"| {order} | {k} | {arm} | {key[3]:g}, {key[4]}, {key[5]}, {key[6]} | "
              f"{','.join(str(s) for s in sorted(groups[key]))} | "
              f"{cell([r['acc_online'] for r in runs], 100)} | {cell([r['acc_final'] for r in runs], 100)} | "
              f"{cell([float(np.mean([c['pmi'] for c in r['curve']])) for r in runs], 1, 2)} | "
              f"{cell([r['curve'][-1]['pmi'] for r in runs], 1, 2)} | "
              f"{cell([r['curve'][-1]['npmi'] for r in runs], 1, 3)} | "
              f"{min(rates):.0f}-{max(rates):.0f} |")


def print_curves(results: list[dict[str, Any]], every: int) -> None:
    """Per-minibatch PMI (rows: minibatches; columns: runs) and the sawtooth summary."""
    if not results:
        return
    h = results[0]
    print(f"\n{h['corpus']} ({h['order']} order), K={h['K']}, S={h['S']}, U={every}, alpha^beta {h['alpha_beta']:g}, "
          f"T {h['T']}, kappa {h['kappa']}, seed {h['seed']}: PMI after every minibatch (R = reordered)\n")
    cols = []
    for r in results:
        cols.append((r["arm"], "pmi"))
        if not r["restated_run"]:
            cols.append((r["arm"] + " (read restated)", "pmi_readout_restated"))
    print("| minibatch | " + " | ".join(c for c, _ in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for j, row in enumerate(results[0]["curve"]):
        mark = " R" if row["reordered"] else ""
        cells = []
        for r in results:
            cells.append(f"{r['curve'][j]['pmi']:.2f}")
            if not r["restated_run"]:
                cells.append(f"{r['curve'][j]['pmi_readout_restated']:.2f}")
        print(f"| {row['minibatch']}{mark} | " + " | ".join(cells) + " |")
    print("\n| run | PMI mean | at reorders | just before (i mod U = U-1) | others | NPMI mean | docs/s |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for label, key in ((r["arm"], "pmi"), (r["arm"] + " (read restated)", "pmi_readout_restated")):
            if key not in r["curve"][0]:
                continue
            vals = np.array([c[key] for c in r["curve"]])
            i = np.array([c["minibatch"] for c in r["curve"]])
            at, before = i % every == 0, i % every == every - 1
            npmi_key = "npmi" if key == "pmi" else "npmi_readout_restated"
            print(f"| {label} | {vals.mean():.2f} | {vals[at].mean():.2f} | {vals[before].mean():.2f} | "
                  f"{vals[~at].mean():.2f} | {np.mean([c[npmi_key] for c in r['curve']]):.3f} | "
                  f"{r['docs_per_second']:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
