"""Issue 24, [Z] section 8.4.2: the infinite-vocabulary LDA grammar against the dedicated infvoc model.

Zhai (2014) section 8.4.2 writes infinite-vocabulary LDA (chapter 7) as an adaptor grammar (Table 8.1,
right: Sentence -> Doc_j; Doc_j -> '_j' Topic_i; Topic_i adapted -> Word -> Chars), feeds each token with
its document's pseudo-word as one sentence, and compares the PMI coherence of the five topics' top 10
words with INFVOC's (Fig. 8.3: "comparable or better ... under most conditions"; de-news, 5 topics,
u = 100, K_Topic = 3k, B = 50, kappa in {0.7, 0.9}, tau in {64, 256}; reference counts from Wikipedia).

Here, on one stream of documents (the labeled fortunes, a seeded random subset of ``--docs`` documents in
a fixed shuffled order, ingested once with ``--keep-order``), every arm reads the same store in store
order:

- ``grammar``: :class:`topicflow.AdaptorGrammar` with the shipped ``infvoc-lda`` grammar, K = ``--topics``,
  B = ``--batch-size`` sentences (tokens), u = ``--prune-every``, K_Topic = ``--truncation``, tau, kappa,
  10 samples, the default seed pass; pass p > 1 is ``partial_fit`` over the store again;
- ``grammar-empty``: the same from [Z]'s printed start (``init="empty"``, empty TNGs);
- ``variational``: [Z]'s VARIATIONAL (B = |X| sentences, kappa = 0; u = 1), the seed pass included;
- ``infvoc``: :class:`topicflow.InfVocLDA` (chapter 7) with the shipped English G0, K topics,
  S = ``--infvoc-batch`` documents, T = ``--truncation``, U = ``--reorder-every``, alpha^beta =
  ``--alpha-beta``, alpha^theta = 1/K, the same tau and kappa; pass p is a fresh fit with ``passes=p``;
- ``infvoc-nog0``: the same without G0 (the reference code's setting).

Topics: the grammar's ``topics(10)`` (each Topic_i's cached words ranked by E_q[pi], the stick weight;
``--by count`` ranks by f~) and infvoc's ``top_terms(10)`` (E_q[beta]).

Coherence (the same for every arm): document co-occurrence over the WHOLE labeled-fortunes corpus (all
6,961 documents with tokens; the same tokenizer as the stream; no Wikipedia offline), the 45 pairs of each
topic's top 10 words, averaged over topics: NPMI (:func:`topicflow.metrics.confirmation.c_npmi`) as the
headline, since on these short documents most pairs never co-occur and PMI is then dominated by
log(epsilon), and PMI (:func:`~topicflow.metrics.confirmation.c_uci`, the chapter's measure, gensim's
epsilon) beside it; also the project's :func:`topicflow.metrics.topic_coherence.coherence` with
``c_npmi`` (sliding windows of 10, gensim's definition) on the same reference store. These are the counts
and functions of the issue-21 reproduction (``bench_infvoc.Reference``), so the numbers compare with it.

Every arm runs on one in-process Dask worker with ``--threads`` threads (2), started before the first
arm; a warm-up loads both models' numba kernels first. Time: wall seconds of each pass (fit or partial_fit; the grammar's includes the seed pass in pass 1),
and for the grammar the inside calls (``n_inside_calls_``: one per sentence per minibatch, plus the seed
pass's).

Example::

    nice .venv/bin/python benchmarks/bench_ag_infvoc.py --docs 300 --passes 2 --work /tmp/agiv \\
        --out benchmarks/out/ag_infvoc.json

Prints one JSON object per arm and pass as it finishes, then a markdown table. ``--summarize A.json
B.json ...`` prints one table over saved runs with two diagnostics of the top words (their median
document frequency in the reference and the number of distinct words among the 50).
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_infvoc import Reference, read_stream  # noqa: E402

DATA = Path(os.environ.get("TOPICFLOW_DEV_CORPORA", Path.home() / ".cache" / "topicflow-dev-corpora"))
ARMS = ("grammar", "grammar-empty", "variational", "infvoc", "infvoc-nog0")


def ingest(rows: list[dict[str, Any]], work: Path, name: str) -> Path:
    """Write ``rows`` as JSONL and ingest them with --keep-order (issue 21's tokenizer settings)."""
    src = work / f"{name}.jsonl"
    with open(src, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    store = work / f"{name}.zarr"
    if store.exists():
        shutil.rmtree(store)
    exe = Path(sys.executable).with_name("topicflow")
    subprocess.run([str(exe), "ingest", str(src), "--out", str(store), "--keep-order", "--min-df", "1",
                    "--min-length", "3", "--label-field", "label", "--id-field", "id"], check=True,
                   stdout=subprocess.DEVNULL)
    return store


def make_stores(args: argparse.Namespace) -> tuple[Path, Path]:
    """The stream (``--docs`` shuffled fortunes) and the reference (all fortunes)."""
    rows = [json.loads(line) for line in open(DATA / "labeled_fortunes.jsonl", encoding="utf-8") if line.strip()]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    reference = work / "fortunes-all.zarr"
    if not reference.exists():
        reference = ingest(rows, work, "fortunes-all")
    random.Random(args.split_seed).shuffle(rows)
    stream = ingest(rows[:args.docs], work, f"stream-{args.docs}-{args.split_seed}")
    return stream, reference


def score(topics: list[list[str]], ref: Reference, reference_store: Path) -> dict[str, Any]:
    """NPMI and PMI on document co-occurrence, and the windowed c_npmi of ``coherence``."""
    from topicflow.metrics.topic_coherence import coherence

    npmi, bad_n, per_topic = ref.pmi(topics, "npmi")
    pmi, bad_p, _ = ref.pmi(topics)
    usable = [t for t in topics if len(t) >= 2]
    window = coherence(usable, str(reference_store), measure="c_npmi").mean if usable else float("nan")
    return {"npmi_doc": npmi, "pmi_doc": pmi, "npmi_window10": window, "nonfinite": max(bad_n, bad_p),
            "npmi_per_topic": per_topic, "top_words": [" ".join(t) for t in topics]}


def run_grammar(args: argparse.Namespace, arm: str, stream: Path, n_sentences: int, client: Any) -> Any:
    """Yield (pass, seconds, inside calls, topics) for a grammar arm."""
    import topicflow

    variational = arm == "variational"
    model = topicflow.AdaptorGrammar(
        "infvoc-lda", grammar_params={"K": args.topics},
        truncation={f"Topic{i}": args.truncation for i in range(1, args.topics + 1)},
        batch_size=n_sentences if variational else args.batch_size, tau=args.tau,
        kappa=0.0 if variational else args.kappa, prune_every=1 if variational else args.prune_every,
        n_samples=10, seed=args.seed, init="empty" if arm == "grammar-empty" else "seed")
    calls = 0
    for p in range(1, args.passes + 1):
        start = time.perf_counter()
        if p == 1:
            model.fit(str(stream), client=client)
        else:
            model.partial_fit(str(stream), client=client)
        seconds = time.perf_counter() - start
        yield p, seconds, int(model.n_inside_calls_) - calls, model.topics(10, by=args.by)
        calls = int(model.n_inside_calls_)


def run_infvoc(args: argparse.Namespace, arm: str, stream: Path, client: Any) -> Any:
    """Yield (pass, seconds, None, topics) for an infvoc arm (pass p: a fresh fit with passes=p)."""
    import topicflow

    for p in range(1, args.passes + 1):
        model = topicflow.InfVocLDA(args.topics, alpha_beta=args.alpha_beta, truncation=args.truncation,
                                    reorder_every=args.reorder_every, batch_size=args.infvoc_batch,
                                    tau0=args.tau, kappa=args.kappa, alpha=1.0 / args.topics, passes=p,
                                    g0=False if arm == "infvoc-nog0" else None, seed=args.seed)
        start = time.perf_counter()
        model.fit(str(stream), client=client)
        seconds = time.perf_counter() - start
        yield p, seconds, None, [[w for w, _p, _r in topic] for topic in model.top_terms(10)]


def warm_up(args: argparse.Namespace, stream: Path, client: Any) -> None:
    """Load both models' numba kernels before any timing (a tiny grammar fit, one short infvoc fit)."""
    import topicflow

    topicflow.AdaptorGrammar("infvoc-lda", grammar_params={"K": 2, "D": 2}, batch_size=2).fit(
        [["_1", "a", "b"], ["_2", "b", "c", "a"]], client=client)
    topicflow.InfVocLDA(2, truncation=100, batch_size=args.infvoc_batch).fit(str(stream), client=client)


def summarize(paths: list[str], work: str) -> None:
    """Print one table over saved runs, with two diagnostics of the top words.

    ``df`` is the median, over the 50 top words of the 5 topics, of the word's document frequency in the
    reference (the whole fortunes corpus): topics of frequent words score near 0 in NPMI, topics of rare
    words far below. ``distinct`` is the number of different words among those 50.
    """
    import statistics

    reference = Path(work) / "fortunes-all.zarr"
    ref_docs, _, _ = read_stream(reference)
    df: dict[str, int] = {}
    for doc in ref_docs:
        for w in set(doc):
            df[w] = df.get(w, 0) + 1
    print("| run | arm | pass | NPMI (doc) | PMI (doc) | NPMI (window 10) | seconds | inside calls | median df "
          "| distinct of 50 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ref = Reference(ref_docs)
    controls_done: set[tuple[int, int]] = set()
    for path in paths:
        payload = json.loads(Path(path).read_text())
        st = payload["settings"]
        run = f"{st['docs']} docs, tau {st['tau']:g}, kappa {st['kappa']:g}, S {st['infvoc_batch']}"
        stream_key = (int(st["docs"]), int(st["split_seed"]))
        if stream_key not in controls_done:
            # control: the stream's 50 most frequent words dealt round-robin into 5 "topics" (no model)
            controls_done.add(stream_key)
            docs, _, _ = read_stream(Path(work) / f"stream-{stream_key[0]}-{stream_key[1]}.zarr")
            counts: dict[str, int] = {}
            for doc in docs:
                for w in doc:
                    counts[w] = counts.get(w, 0) + 1
            top = sorted(counts, key=lambda w: (-counts[w], w))[:50]
            topics = [top[k::5] for k in range(5)]
            words = [w for t in topics for w in t]
            print(f"| {st['docs']} docs | control: 50 most frequent words, dealt | - | {ref.pmi(topics, 'npmi')[0]:.3f} | "
                  f"{ref.pmi(topics)[0]:.2f} | - | - | - | {statistics.median(df.get(w, 0) for w in words):g} | 50 |")
        for r in payload["records"]:
            words = [w for line in r["top_words"] for w in line.split()]
            calls = "-" if r["inside_calls"] is None else f"{r['inside_calls']:,}"
            print(f"| {run} | {r['arm']} | {r['pass']} | {r['npmi_doc']:.3f} | {r['pmi_doc']:.2f} | "
                  f"{r['npmi_window10']:.3f} | {r['seconds']:.1f} | {calls} | "
                  f"{statistics.median(df.get(w, 0) for w in words):g} | {len(set(words))} |")


def main(argv: list[str] | None = None) -> int:
    """Run the arms on one stream and print JSON lines and a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=300, help="documents in the stream (a shuffled subset)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the subset and its order")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--topics", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=50, help="grammar: sentences (tokens) per minibatch")
    parser.add_argument("--infvoc-batch", type=int, default=5, help="infvoc: documents per minibatch")
    parser.add_argument("--prune-every", type=int, default=100)
    parser.add_argument("--truncation", type=int, default=3000, help="K_Topic, and infvoc's T")
    parser.add_argument("--reorder-every", type=int, default=10, help="infvoc's U")
    parser.add_argument("--alpha-beta", type=float, default=1000.0, help="infvoc's DP concentration")
    parser.add_argument("--tau", type=float, default=64.0)
    parser.add_argument("--kappa", type=float, default=0.7)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--by", choices=("stick", "count"), default="stick", help="grammar topic ranking")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="threads of the one in-process Dask worker")
    parser.add_argument("--work", default="/tmp/ag-infvoc")
    parser.add_argument("--out", default=None, help="write all records as one JSON list")
    parser.add_argument("--summarize", nargs="+", metavar="JSON", help="print one table over saved --out files")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize, args.work)
        return 0
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm(s) {unknown}; choose among {', '.join(ARMS)}")

    stream, reference_store = make_stores(args)
    docs, _, _ = read_stream(stream)
    n_sentences = sum(len(d) for d in docs)
    ref_docs, _, _ = read_stream(reference_store)
    ref = Reference(ref_docs)
    print(json.dumps({"stream": {"documents": len(docs), "tokens": n_sentences,
                                 "types": len({w for d in docs for w in d}), "reference_documents": ref.n_docs},
                      "load": os.getloadavg()}), flush=True)
    from distributed import Client, LocalCluster

    # one in-process worker with --threads threads for every arm, started before any timing
    client = Client(LocalCluster(n_workers=1, threads_per_worker=args.threads, processes=False,
                                 dashboard_address=None))
    warm_up(args, stream, client)
    records: list[dict[str, Any]] = []
    for arm in arms:
        runs = run_infvoc(args, arm, stream, client) if arm.startswith("infvoc") else \
            run_grammar(args, arm, stream, n_sentences, client)
        for p, seconds, calls, topics in runs:
            rec = {"arm": arm, "pass": p, "seconds": seconds, "inside_calls": calls,
                   **score(topics, ref, reference_store), "load": os.getloadavg()[0]}
            records.append(rec)
            print(json.dumps(rec), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"settings": vars(args), "records": records}, indent=1))
    client.close()
    print_table(records)
    return 0


def print_table(records: list[dict[str, Any]]) -> None:
    """One row per arm and pass."""
    print("\n| arm | pass | NPMI (doc) | PMI (doc) | NPMI (window 10) | seconds | inside calls | top words, topic 1 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in records:
        calls = "-" if r["inside_calls"] is None else f"{r['inside_calls']:,}"
        print(f"| {r['arm']} | {r['pass']} | {r['npmi_doc']:.3f} | {r['pmi_doc']:.2f} | {r['npmi_window10']:.3f} | "
              f"{r['seconds']:.1f} | {calls} | {r['top_words'][0]} |")


if __name__ == "__main__":
    raise SystemExit(main())
