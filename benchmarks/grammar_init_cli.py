"""Word segmentation through the command line: ``topicflow grammar fit --init seed`` against ``--init empty``.

The data are those of ``benchmarks/bench_adaptor_grammar.py`` (KJV verses by default: lowercase letters,
punctuation as hard boundaries, at most ``--max-chars`` letters; the first ``--sentences`` split 70/30 by
``--split-seed``). The training sentences, with their gold words separated by spaces, are ingested with
``topicflow ingest --keep-order`` (every word kept: ``--min-length 1 --stop-words none``), so a document
is a sentence and its tokens joined are the unsegmented text. For each start, ``topicflow grammar fit``
runs one pass with the chapter's unigram settings (B 20, tau 128, kappa 0.6, u 50, K_Word 1,500), then
``topicflow grammar segment`` segments the training and the test sentences (the highest-weight of 10
sampled parses per sentence) and the token, boundary and lexicon F1 against the gold are computed with
:func:`topicflow.metrics.segmentation.segmentation_scores`. Prints one JSON object per start and a table.

    nice .venv/bin/python benchmarks/grammar_init_cli.py --sentences 5000 --out benchmarks/out/ag_init_cli.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from topicflow.io.sources.segmentation import (
    read_segmentation_corpus,
    write_unsegmented_lines,
)
from topicflow.metrics.segmentation import segmentation_scores

KJV = Path.home() / ".cache" / "topicflow-dev-corpora" / "bible_kjv.jsonl"
CLI = [sys.executable, "-m", "topicflow"]
CLUSTER = ["--local-cluster", "threads", "--workers", "1", "--threads-per-worker", "2"]


def run(args: list[str]) -> str:
    """Run one ``topicflow`` command; return its output (raise with it on failure)."""
    done = subprocess.run([*CLI, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"topicflow {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def scores(gold: Any, segmented: Path) -> dict[str, float]:
    """Token, boundary and lexicon P/R/F1 of a ``grammar segment`` output against the gold words."""
    predicted = [tuple(line.split()) for line in segmented.read_text().splitlines()]
    s = segmentation_scores(list(gold), predicted)
    return {"token_f1": s.token.f1, "token_precision": s.token.precision, "token_recall": s.token.recall,
            "boundary_f1": s.boundary.f1, "lexicon_f1": s.type.f1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=KJV)
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--sentences", type=int, default=5000, help="first N sentences (before the split)")
    parser.add_argument("--max-chars", type=int, default=60)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inits", nargs="+", default=["empty", "seed"], choices=["empty", "seed"])
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    corpus = read_segmentation_corpus(args.input, text_field=args.text_field, max_chars=args.max_chars)
    train, test = corpus.subset(range(min(args.sentences, len(corpus)))).split(test_fraction=0.3,
                                                                                seed=args.split_seed)
    results = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        source = tmp / "train.jsonl"
        source.write_text("".join(json.dumps({"id": f"s{d}", "text": " ".join(words)}) + "\n"
                                  for d, words in enumerate(train.gold)))
        store = tmp / "train.zarr"
        run(["ingest", str(source), "--out", str(store), "--keep-order", "--min-length", "1", "--stop-words", "none",
             "--token-pattern", "[a-z]+", *CLUSTER])
        for name, part in (("train", train), ("test", test)):
            write_unsegmented_lines(tmp / f"{name}.txt", part.sentences)
        alphabet = "".join(sorted(set("".join(train.sentences + test.sentences))))
        for init in args.inits:
            model = tmp / f"model-{init}"
            began = time.perf_counter()
            fitted = run(["grammar", "fit", str(store), "--model", str(model), "--init", init, "--batch-size", "20",
                          "--tau", "128", "--kappa", "0.6", "--prune-every", "50", "--truncation", "Word=1500",
                          "--partitions", str(args.partitions), "--seed", str(args.seed), "--alphabet", alphabet,
                          *CLUSTER])
            fit_seconds = time.perf_counter() - began
            record: dict[str, Any] = {"init": init, "train_sentences": len(train), "test_sentences": len(test),
                                      "fit_seconds": fit_seconds, "fit_output": fitted.strip().splitlines()[0]}
            for name, part in (("train", train), ("test", test)):
                out = tmp / f"{name}-{init}.seg"
                run(["grammar", "segment", str(model), str(tmp / f"{name}.txt"), "--out", str(out)])
                record[name] = scores(part.gold, out)
            print(json.dumps(record), flush=True)
            results.append(record)
    print_table(results)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))


def print_table(results: list[dict[str, Any]]) -> None:
    """One row per start: what ``grammar fit`` printed (minibatches, inside calls, TNG size) and the scores."""
    print("| start | grammar fit printed | train token P / R | train token F1 | boundary F1 | lexicon F1 "
          "| test token F1 | fit seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        t = r["train"]
        printed = r["fit_output"].split("): ", 1)[-1].split(", mean", 1)[0]
        print(f"| {r['init']} | {printed} | {t['token_precision']:.3f} / {t['token_recall']:.3f} | "
              f"{t['token_f1']:.3f} | {t['boundary_f1']:.3f} | {t['lexicon_f1']:.3f} | {r['test']['token_f1']:.3f} | "
              f"{r['fit_seconds']:.0f} |")


if __name__ == "__main__":
    main()
