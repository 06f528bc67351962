"""Topic coherence: topicflow (2-worker LocalCluster) against gensim's CoherenceModel, same topics, same texts.

Generates a JSON Lines corpus from a true LDA model over pseudo-words (``--docs`` documents, Poisson
``--doc-length`` tokens), ingests it with ``--keep-order`` (``--min-df`` leaves rare words out of the
vocabulary, so out-of-vocabulary tokens sit inside windows), and takes as topics the ``--top-n`` most
probable words of each true topic. gensim gets the same topics as word lists, the store's own
tokenized texts (``OrderedBlock.texts``, out-of-vocabulary tokens included) and a ``Dictionary`` of
the store's vocabulary. For every measure it times

* topicflow: a fresh 2-worker ``LocalCluster`` (start-up timed apart) computing ``topicflow.metrics.coherence``;
* topicflow in this process on Dask's threaded scheduler (no cluster), for reference;
* gensim ``CoherenceModel(..., processes=1)`` and with its default ``processes`` (which is
  ``max(1, cpu_count - 1)``: the same 1 on a 2-core machine, and then not run twice).

gensim runs in a subprocess with a time limit (``--gensim-timeout``); when it runs out, the row says
how long it ran and the values are compared on the first ``--subset-docs`` documents instead (a second
store ingested from those documents). Prints JSON and a table.

Usage::

    .venv/bin/python benchmarks/bench_coherence.py --docs 100000 --work-dir /tmp/bench-coherence
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import queue as queue_module
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

MEASURES = ("u_mass", "c_uci", "c_npmi", "c_v")
LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def make_words(n_words: int, seed: int) -> list[str]:
    """``n_words`` distinct pseudo-words of 4 to 9 letters."""
    rng = np.random.default_rng(seed)
    words: set[str] = set()
    while len(words) < n_words:
        words.add("".join(rng.choice(LETTERS, size=int(rng.integers(4, 10)))))
    return sorted(words)


def write_corpus(path: Path, n_docs: int, words: list[str], n_topics: int, mean_length: float,
                 seed: int) -> list[list[str]]:
    """Write documents drawn from LDA (alpha 0.1, eta 0.01); return the true topics' words by probability."""
    rng = np.random.default_rng(seed)
    vocab = np.array(words, dtype=object)
    topic_word = rng.dirichlet(np.full(len(words), 0.01), size=n_topics)
    cumulative = np.cumsum(topic_word, axis=1)
    with open(path, "w", encoding="utf-8") as handle:
        for start in range(0, n_docs, 1000):
            count = min(1000, n_docs - start)
            theta = rng.dirichlet(np.full(n_topics, 0.1), size=count)
            lengths = rng.poisson(mean_length, size=count) + 1
            doc = np.repeat(np.arange(count), lengths)
            z = (np.cumsum(theta, axis=1)[doc] < rng.random(doc.size)[:, None]).sum(axis=1)
            z = np.minimum(z, n_topics - 1)
            u = rng.random(doc.size)
            w = np.empty(doc.size, dtype=np.int64)
            for k in range(n_topics):
                mask = z == k
                w[mask] = np.searchsorted(cumulative[k], u[mask])
            w = np.minimum(w, len(words) - 1)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            for i in range(count):
                text = " ".join(vocab[w[offsets[i]:offsets[i + 1]]])
                handle.write(json.dumps({"id": f"doc-{start + i}", "text": text}) + "\n")
    return [[str(vocab[j]) for j in np.argsort(-row, kind="stable")] for row in topic_word]


def ingest(jsonl: Path, out: Path, min_df: int, workers: int) -> float:
    from topicflow.io.sources.base import FieldSpec
    from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
    from topicflow.pipeline.cluster import ClusterConfig, connect
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    started = time.perf_counter()
    with connect(ClusterConfig(workers=workers)) as client:
        ingest_corpus([jsonl], out, fields=FieldSpec(), tokenizer=TokenizerConfig(stop_words_name="none", stop_words=()),
                      prune=PruneConfig(min_df=min_df), keep_order=True, overwrite=True, client=client)
    return time.perf_counter() - started


def store_texts(store: Path) -> tuple[list[list[str]], list[str]]:
    from topicflow import Corpus

    corpus = Corpus.open(store)
    vocab = corpus.vocabulary()
    texts = [t for i in range(corpus.n_shards) for t in corpus.read_ordered(i).texts(vocab)]
    return texts, [str(t) for t in vocab.terms]


def run_topicflow(store: Path, topics: list[list[str]], measure: str, workers: int) -> dict[str, Any]:
    from topicflow.metrics import coherence
    from topicflow.pipeline.cluster import ClusterConfig, connect

    started = time.perf_counter()
    with connect(ClusterConfig(workers=workers, threads_per_worker=1)) as client:
        ready = time.perf_counter()
        result = coherence(topics, store, measure=measure, client=client)
        done = time.perf_counter()
    return {"per_topic": list(result.per_topic), "mean": result.mean, "n_units": result.n_units,
            "startup_s": ready - started, "compute_s": done - ready, "total_s": time.perf_counter() - started}


def run_topicflow_threads(store: Path, topics: list[list[str]], measure: str) -> dict[str, Any]:
    """The same call without a cluster: Dask's threaded scheduler in this process (after a warm-up)."""
    from topicflow.metrics import coherence

    started = time.perf_counter()
    result = coherence(topics, store, measure=measure, client=None)
    return {"per_topic": list(result.per_topic), "seconds": time.perf_counter() - started}


def _gensim_child(store: str, topics: list[list[str]], measure: str, processes: int, queue: Any) -> None:
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    warnings.simplefilter("ignore")
    texts, terms = store_texts(Path(store))
    dictionary = Dictionary([terms])
    started = time.perf_counter()
    model = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary, coherence=measure,
                           topn=len(topics[0]), processes=processes)
    per_topic = [float(v) for v in model.get_coherence_per_topic()]
    seconds = time.perf_counter() - started
    queue.put({"per_topic": per_topic, "mean": float(np.mean(per_topic)), "seconds": seconds})


def run_gensim(store: Path, topics: list[list[str]], measure: str, processes: int, timeout: float) -> dict[str, Any]:
    """gensim in a subprocess (texts read there, not timed); ``timed_out`` after ``timeout`` seconds."""
    context = mp.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_gensim_child, args=(str(store), topics, measure, processes, queue))
    started = time.perf_counter()
    child.start()
    try:
        return queue.get(timeout=timeout + 120)  # texts are read before the clock starts
    except queue_module.Empty:
        return {"timed_out": True, "ran_s": time.perf_counter() - started}
    finally:
        if child.is_alive():
            child.terminate()
        child.join()


def relative_difference(ours: list[float], theirs: list[float]) -> float:
    a, b = np.asarray(ours), np.asarray(theirs)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--doc-length", type=float, default=60.0)
    parser.add_argument("--vocab", type=int, default=20_000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--top-n", type=int, default=10)
    parser.add_argument("--min-df", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gensim-timeout", type=float, default=1200.0, help="Seconds per gensim run.")
    parser.add_argument("--subset-docs", type=int, default=10_000, help="Documents compared when gensim times out.")
    parser.add_argument("--measures", default=",".join(MEASURES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bench-coherence"))
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    measures = args.measures.split(",")

    jsonl = args.work_dir / f"docs-{args.docs}.jsonl"
    words = make_words(args.vocab, args.seed)
    ranked = write_corpus(jsonl, args.docs, words, args.topics, args.doc_length, args.seed)
    store = args.work_dir / f"store-{args.docs}.zarr"
    ingest_s = ingest(jsonl, store, args.min_df, args.workers)
    texts, terms = store_texts(store)
    known = set(terms)
    topics = [[w for w in ranked_topic if w in known][: args.top_n] for ranked_topic in ranked]
    n_tokens = sum(len(t) for t in texts)
    n_oov = sum(w not in known for t in texts for w in t)
    del texts
    default_processes = max(1, (os.cpu_count() or 1) - 1)
    setup = {"docs": args.docs, "tokens": n_tokens, "oov_tokens": n_oov, "vocab": len(terms),
             "topics": args.topics, "top_n": args.top_n, "workers": args.workers, "ingest_s": ingest_s,
             "gensim_default_processes": default_processes, "cpu_count": os.cpu_count()}
    print(json.dumps({"setup": setup}), file=sys.stderr)

    subset_store = None
    rows = []
    for measure in measures:
        ours = run_topicflow(store, topics, measure, args.workers)
        row: dict[str, Any] = {"measure": measure, "topicflow": ours,
                               "topicflow_threads": run_topicflow_threads(store, topics, measure)}
        for label, processes in (("gensim_p1", 1), ("gensim_default", default_processes)):
            if label == "gensim_default" and processes == 1:
                row[label] = {"same_as": "gensim_p1"}
                continue
            theirs = run_gensim(store, topics, measure, processes, args.gensim_timeout)
            if theirs.get("timed_out"):
                if subset_store is None:
                    subset_jsonl = args.work_dir / f"docs-{args.subset_docs}.jsonl"
                    with open(jsonl, encoding="utf-8") as src, open(subset_jsonl, "w", encoding="utf-8") as dst:
                        dst.writelines(line for _, line in zip(range(args.subset_docs), src))
                    subset_store = args.work_dir / f"store-{args.subset_docs}.zarr"
                    ingest(subset_jsonl, subset_store, args.min_df, args.workers)
                from topicflow import Corpus

                sub_terms = {str(t) for t in Corpus.open(subset_store).vocabulary().terms}
                sub_topics = [[w for w in t if w in sub_terms] for t in topics]
                sub = run_gensim(subset_store, sub_topics, measure, processes, args.gensim_timeout)
                sub["topicflow"] = run_topicflow(subset_store, sub_topics, measure, args.workers)
                sub["max_rel_diff"] = (math.nan if sub.get("timed_out") else
                                       relative_difference(sub["topicflow"]["per_topic"], sub["per_topic"]))
                theirs["subset"] = sub
            else:
                theirs["max_rel_diff"] = relative_difference(ours["per_topic"], theirs["per_topic"])
                theirs["speedup_total"] = theirs["seconds"] / ours["total_s"]
            row[label] = theirs
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    print(json.dumps({"setup": setup, "rows": rows}, indent=2))
    print()
    print(f"{args.docs:,} documents, {n_tokens:,} tokens ({n_oov:,} out of vocabulary), vocabulary {len(terms):,}, "
          f"{args.topics} topics x top {args.top_n}; gensim default processes = {default_processes}")
    print("| measure | topicflow start-up s | topicflow compute s | topicflow total s | topicflow threads s "
          "| gensim processes=1 s | speed-up (total) | max rel. diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ours, theirs = row["topicflow"], row["gensim_p1"]
        if theirs.get("timed_out"):
            sub = theirs["subset"]
            gensim = f"> {theirs['ran_s']:.0f} (stopped)"
            speed = f"> {theirs['ran_s'] / ours['total_s']:.0f}x"
            diff = f"{sub['max_rel_diff']:.1e} ({args.subset_docs:,} docs)"
        else:
            gensim, speed, diff = f"{theirs['seconds']:.1f}", f"{theirs['speedup_total']:.1f}x", f"{theirs['max_rel_diff']:.1e}"
        print(f"| {row['measure']} | {ours['startup_s']:.1f} | {ours['compute_s']:.1f} | {ours['total_s']:.1f} | "
              f"{row['topicflow_threads']['seconds']:.1f} | {gensim} | {speed} | {diff} |")


if __name__ == "__main__":
    main()
