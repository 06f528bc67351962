"""Driver memory of adaptor-grammar fits on a store: sentences held in memory vs streamed from the store.

Builds (once, in ``--work``) a store of KJV sentences: :func:`topicflow.io.sources.segmentation.read_segmentation_corpus`
splits the dev corpus ``bible_kjv.jsonl`` at punctuation into 123,563 phrases; each is written with its gold
spacing as one document and ingested with ``--keep-order`` (so each document's tokens joined are one
unsegmented sentence, as ``topicflow grammar fit`` reads them). Then each arm runs in a fresh process:

- ``memory``: what ``AdaptorGrammar.fit(store)`` did before streaming: :func:`read_sentences` reads every
  sentence into a list, :func:`fit_grammar` encodes them all, then runs minibatches;
- ``stream``: :func:`fit_grammar_store`: one scan keeps three integers per sentence, each minibatch's E-step
  task reads its sentences from the store;
- ``stream-shuffle``: the same with ``--shuffle`` (a minibatch's sentences come from many shards).

Each arm stops after ``--minibatches`` minibatches (B = 20, unigram grammar, K_Word = 1500, threaded
scheduler in the same process), so the numbers are the driver's fixed cost of holding (or indexing) the
sentences plus a few minibatches, not a whole fit. Reported per arm: the peak of Python allocations
(tracemalloc, includes NumPy buffers), the peak RSS of the process tree (sampled every 50 ms), and the
seconds. Run::

    nice .venv/bin/python benchmarks/bench_adaptor_grammar_memory.py --work /tmp/agbench --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

KJV = Path.home() / ".cache" / "topicflow-dev-corpora" / "bible_kjv.jsonl"


class Stop(Exception):
    """Raised by the minibatch callback to end an arm after N minibatches."""


def build_store(work: Path, source: Path, shard_size: int) -> Path:
    from topicflow.io.sources.segmentation import read_segmentation_corpus
    from topicflow.io.tokenizer import PruneConfig
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    store = work / f"kjv-sentences-{shard_size}.zarr"
    if (store / "manifest.json").exists() or store.exists():
        return store
    corpus = read_segmentation_corpus(source)
    jsonl = work / "kjv-sentences.jsonl"
    with jsonl.open("w", encoding="utf-8") as out:
        for i, words in enumerate(corpus.gold):
            out.write(json.dumps({"id": f"s{i}", "text": " ".join(words)}) + "\n")
    ingest_corpus([jsonl], store, shard_size=shard_size, prune=PruneConfig(min_df=1), keep_order=True)
    return store


def run_arm(arm: str, store: Path, minibatches: int) -> dict[str, object]:
    from topicflow.io.corpus.reader import Corpus
    from topicflow.pipeline.adaptor_grammar import (
        GrammarFitConfig,
        fit_grammar,
        fit_grammar_store,
        read_sentences,
    )

    config = GrammarFitConfig(grammar="unigram", truncations={"Word": 1500}, batch_size=20, tau=128.0, kappa=0.6,
                              prune_every=50, n_samples=10, seed=0, shuffle=arm == "stream-shuffle")
    done = [0]

    def stop(state: object, stats: object) -> None:
        done[0] += 1
        if done[0] >= minibatches:
            raise Stop

    tracemalloc.start()
    start = time.perf_counter()
    corpus = Corpus.open(store)
    n = 0
    try:
        if arm == "memory":
            texts = read_sentences(corpus).texts
            n = len(texts)
            fit_grammar(texts, config, on_minibatch=stop)
        else:
            fit_grammar_store(corpus, config, on_minibatch=stop)
    except Stop:
        pass
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    return {"arm": arm, "minibatches": done[0], "sentences_in_memory": n, "tracemalloc_peak_mb": peak / 1e6,
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/agbench"))
    parser.add_argument("--source", type=Path, default=KJV)
    parser.add_argument("--shard-size", type=int, default=4096)
    parser.add_argument("--minibatches", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="Runs per arm; the best (lowest) is reported.")
    parser.add_argument("--arms", default="memory,stream,stream-shuffle")
    parser.add_argument("--arm", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.arm, args.store, args.minibatches)))
        return
    from _memory import measure_process_tree

    args.work.mkdir(parents=True, exist_ok=True)
    store = build_store(args.work, args.source, args.shard_size)
    rows = []
    for arm in args.arms.split(","):
        best: dict[str, object] | None = None
        times: list[float] = []
        for _ in range(args.repeat):
            out, wall, rss = measure_process_tree(
                [sys.executable, __file__, "--arm", arm, "--store", str(store), "--minibatches", str(args.minibatches)],
                what=arm)
            out["tree_peak_rss_mb"] = rss
            out["wall_seconds"] = wall
            times.append(float(out["seconds"]))  # type: ignore[arg-type]
            if best is None or float(out["tree_peak_rss_mb"]) < float(best["tree_peak_rss_mb"]):  # type: ignore[arg-type]
                best = out
        assert best is not None
        best["repeats"] = args.repeat
        best["best_seconds"] = min(times)
        rows.append(best)
        print(json.dumps(best), flush=True)
    print()
    print(f"store: {store} ({os.cpu_count()} cores; memory: the run of lowest peak RSS, seconds: the fastest run, "
          f"of {args.repeat}; seconds include tracemalloc's overhead)")
    print(f"{'arm':<16}{'minibatches':>12}{'tracemalloc MB':>16}{'peak RSS MB':>13}{'seconds':>9}")
    for r in rows:
        print(f"{r['arm']:<16}{r['minibatches']:>12}{float(r['tracemalloc_peak_mb']):>16.1f}"  # type: ignore[arg-type]
              f"{float(r['tree_peak_rss_mb']):>13.1f}{float(r['best_seconds']):>9.1f}")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
