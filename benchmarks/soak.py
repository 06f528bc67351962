"""Soak run: many nightly cycles on a growing generated stream, as cron would run them (issue 26.6).

Setup (recorded, not part of the verdict): documents 0 .. D-1 of a known LDA model
(:func:`topicflow.models.lda.synth.draw_shard`, terms ``w00042``) are written as JSON Lines, ingested
(``topicflow ingest --stop-words none``), an online model is fitted on them (``topicflow fit
--method online``) and a streaming-Gibbs run is started (``topicflow stream --algo sgs``).

Each cycle c = 1 .. N then runs, each command as its own subprocess of the venv's ``topicflow``:

1. ``topicflow append STORE cycle-c.jsonl --promote-min-df 5``: the next D documents of the stream.
   Every document also carries tokens of ``--new-terms`` words never seen before (``c0003n07``: new
   vocabulary every cycle) and of the new words of earlier cycles, so the vocabulary grows by
   ``--new-terms`` terms a cycle;
2. ``topicflow update MODEL STORE``: online VB over the new shards, a new model version;
3. ``topicflow versions MODEL --keep 3``: prune to the newest three versions;
4. ``topicflow stream STORE --out STREAM --algo sgs --resume --checkpoint-every 1``: the one long
   SGS stream continued from its saved state over the grown store (an SGS run saves its state when
   it stops, so a resumed run per night *is* how that stream runs across cycles), with
   ``--trace-max-bytes``, ``--trace-keep`` and ``--summary-points`` bounding its history.

Per cycle it records the wall time and the peak resident memory of each command's whole process
tree (the command, and with ``--local-cluster processes`` its scheduler, nannies and workers;
RSS summed over the tree every 50 ms with psutil, through ``benchmarks/_memory.py``), and the size
on disk of the store, of the whole model directory, of the current model version, and of the stream
directory. Generating a cycle's JSON Lines is not timed.

Verdict: warm-up = the first ``--warmup`` share of cycles (default 10%); "early" = the next 20% of
the cycles, "late" = the last 20%. Memory (the cycle's largest per-command peak) and time (the
cycle's total) hold when the late mean is within 10% of the early mean; disk holds when the model
directory never holds more than ``--keep`` versions and its size per vocabulary term stays within 10%
(the model grows with the vocabulary only); the store grows with the documents (reported, not judged).
The stream's history (``state/stream.json``, ``trace.jsonl``, its rotated ``trace-*.jsonl.gz`` and
``summary.json``) holds when its largest size in the second half of the cycles is at most 10% above
its largest in the first half (it saw-tooths with the rotation), and ``state/stream.json`` holds when
it is the same size at the end as after the first cycle (within 64 bytes); the stream's arrays grow
with the vocabulary (reported as bytes per term).
With fewer than 10 cycles the verdict is "not measured long enough".

Example (one command; ``--work`` is created and left behind for inspection)::

    nice python benchmarks/soak.py --cycles 100 --docs 1000 --work /tmp/soak

Prints the JSON (with the exact command), then a table and the verdict.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _memory import run_process_tree

from topicflow.models.lda.synth import (
    SynthParams,
    draw_shard,
    draw_topic_word,
    term_names,
)

TOPICFLOW = [str(Path(sys.executable).parent / "topicflow")]


# ----------------------------------------------------------------------------- data


def new_terms_of(cycle: int, n_new: int) -> list[str]:
    """The words first seen in ``cycle`` (letters and digits, kept by the default tokenizer)."""
    return [f"c{cycle:04d}n{j:02d}" for j in range(n_new)]


def write_cycle_jsonl(path: Path, *, cycle: int, docs: int, topics: int, vocab: int, doc_length: float,
                      new_terms: int, new_tokens: int, seed: int) -> Path:
    """Documents ``cycle * docs .. (cycle + 1) * docs - 1`` of the stream as JSON Lines ``{"id", "text"}``.

    Cycle 0 is the base. From cycle 1 on every document also gets ``new_tokens`` tokens drawn from the
    cycle's new words and ``new_tokens`` from the new words of earlier cycles.
    """
    start, stop = cycle * docs, (cycle + 1) * docs
    params = SynthParams(n_docs=stop, n_topics=topics, n_terms=vocab, doc_length=doc_length,
                         doc_topic_prior=(0.1,), topic_word_prior=0.01, seed=seed)
    topic_word = {"default": draw_topic_word(params, "default")}
    names = term_names(vocab, "default")
    shard = draw_shard(params, topic_word, start, docs)
    indptr, terms, counts = shard.bags["default"]
    rng = np.random.default_rng([seed, cycle])
    fresh = new_terms_of(cycle, new_terms) if cycle > 0 else []
    older = [t for c in range(1, cycle) for t in new_terms_of(c, new_terms)]
    with open(path, "w", encoding="utf-8") as out:
        for row, doc_id in enumerate(shard.doc_ids):
            a, b = indptr[row], indptr[row + 1]
            words = list(np.repeat(names[terms[a:b]], counts[a:b]))
            if fresh:
                words += list(rng.choice(fresh, size=new_tokens))
            if older:
                words += list(rng.choice(older, size=new_tokens))
            out.write(json.dumps({"id": doc_id, "text": " ".join(words)}) + "\n")
    return path


# ----------------------------------------------------------------------------- measuring


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def model_facts(model: Path) -> dict[str, Any]:
    """Kept versions, the current one, its size and its vocabulary (from ``versions.json``)."""
    listing = json.loads((model / "versions.json").read_text())
    current = int(listing["current"])
    version_dirs = sorted(p for p in (model / "versions").iterdir() if p.is_dir() and not p.name.startswith("."))
    current_dir = next((p for p in version_dirs if p.name.lstrip("v0") == str(current) or p.name == f"{current}"),
                       None)
    return {"current": current, "versions_kept": len(listing["versions"]), "version_dirs": len(version_dirs),
            "current_version_bytes": disk_bytes(current_dir) if current_dir else None}


def vocabulary_size(store: Path) -> int:
    from topicflow.io.corpus.reader import Corpus

    corpus = Corpus.open(store)
    return len(corpus.vocabulary(corpus.languages[0]))


# ----------------------------------------------------------------------------- the run


def cluster_args(args: argparse.Namespace) -> list[str]:
    return ["--local-cluster", args.local_cluster, "--workers", str(args.workers)]


def setup(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    store, model, stream = work / "corpus.zarr", work / "model", work / "stream"
    base = write_cycle_jsonl(work / "cycle-0000.jsonl", cycle=0, **data_args(args))
    steps = {
        "ingest": [*TOPICFLOW, "ingest", str(base), "--out", str(store), "--stop-words", "none",
                   *cluster_args(args)],
        "fit": [*TOPICFLOW, "fit", str(store), "--model", str(model), "--method", "online", "--topics",
                str(args.topics), "--batch-size", str(args.batch_size), "--seed", str(args.seed), *cluster_args(args)],
        "stream": stream_command(args, store, stream, resume=False),
    }
    row: dict[str, Any] = {}
    for name, command in steps.items():
        wall, peak, _ = run_process_tree(command, what=name)
        row[f"{name}_seconds"], row[f"{name}_peak_mb"] = wall, peak
    base.unlink()
    return row


def stream_command(args: argparse.Namespace, store: Path, out: Path, *, resume: bool) -> list[str]:
    return [*TOPICFLOW, "stream", str(store), "--out", str(out), "--algo", "sgs", "--topics", str(args.topics),
            "--batch-size", str(args.batch_size), "--max-iter", str(args.sgs_max_iter), "--seed", str(args.seed),
            "--checkpoint-every", "1", "--format", "json", "--trace-max-bytes", str(args.trace_max_bytes),
            "--trace-keep", str(args.trace_keep), "--summary-points", str(args.summary_points),
            *(["--resume"] if resume else []), *cluster_args(args)]


def stream_history_bytes(stream: Path) -> dict[str, int]:
    """Bytes of the stream's history files (state/stream.json, the trace segments, summary.json)."""
    state_json = stream / "state" / "stream.json"
    trace = [p for p in stream.glob("trace*") if p.is_file()]
    return {"stream_state_json_bytes": state_json.stat().st_size,
            "stream_history_bytes": state_json.stat().st_size + (stream / "summary.json").stat().st_size
            + sum(p.stat().st_size for p in trace),
            "stream_trace_segments": sum(1 for p in trace if p.name.endswith(".gz"))}


def data_args(args: argparse.Namespace) -> dict[str, Any]:
    return dict(docs=args.docs, topics=args.true_topics, vocab=args.vocab, doc_length=args.doc_length,
                new_terms=args.new_terms, new_tokens=args.new_tokens, seed=args.data_seed)


def run_cycle(args: argparse.Namespace, work: Path, cycle: int) -> dict[str, Any]:
    store, model, stream = work / "corpus.zarr", work / "model", work / "stream"
    jsonl = write_cycle_jsonl(work / f"cycle-{cycle:04d}.jsonl", cycle=cycle, **data_args(args))
    steps = {
        "append": [*TOPICFLOW, "append", str(store), str(jsonl), "--promote-min-df", "5", *cluster_args(args)],
        "update": [*TOPICFLOW, "update", str(model), str(store), "--format", "json", *cluster_args(args)],
        "versions": [*TOPICFLOW, "versions", str(model), "--keep", str(args.keep), "--format", "json"],
        "stream": stream_command(args, store, stream, resume=True),
    }
    row: dict[str, Any] = {"cycle": cycle}
    outputs = {}
    for name, command in steps.items():
        wall, peak, out = run_process_tree(command, what=f"cycle {cycle}: {name}")
        row[f"{name}_seconds"], row[f"{name}_peak_mb"] = round(wall, 3), round(peak, 1)
        outputs[name] = out
    jsonl.unlink()
    row["seconds"] = round(sum(row[f"{n}_seconds"] for n in steps), 3)
    row["peak_mb"] = max(row[f"{n}_peak_mb"] for n in steps)
    stream_final = json.loads(outputs["stream"])["final"]
    row["stream_docs_seen"] = int(stream_final["docs_seen"])
    row.update(model_facts(model))
    row["vocab"] = vocabulary_size(store)
    row["store_bytes"] = disk_bytes(store)
    row["model_bytes"] = disk_bytes(model)
    row["stream_bytes"] = disk_bytes(stream)
    row.update(stream_history_bytes(stream))
    row["stream_other_bytes_per_term"] = round((row["stream_bytes"] - row["stream_history_bytes"]) / row["vocab"], 1)
    row["model_bytes_per_term"] = round(row["model_bytes"] / row["vocab"], 1)
    return row


# ----------------------------------------------------------------------------- verdict


def window_means(rows: list[dict[str, Any]], key: str, warmup: float) -> tuple[float, float]:
    """Mean of ``key`` over the first 20% of cycles after warm-up, and over the last 20%."""
    n = len(rows)
    skip = int(round(n * warmup))
    width = max(1, int(round(n * 0.2)))
    early = [r[key] for r in rows[skip:skip + width]]
    late = [r[key] for r in rows[-width:]]
    return statistics.fmean(early), statistics.fmean(late)


def verdict(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    if len(rows) < 10:
        return {"overall": "not measured long enough", "reason": f"{len(rows)} cycles (< 10)"}
    out: dict[str, Any] = {}
    for key in ("peak_mb", "seconds", "model_bytes_per_term"):
        early, late = window_means(rows, key, args.warmup)
        change = late / early - 1
        out[key] = {"early_mean": round(early, 3), "late_mean": round(late, 3), "change": round(change, 4),
                    "held": abs(change) <= 0.10}
    # The current version grows with the vocabulary (a column of lambda per term): reported, not judged.
    out["current_version_bytes"] = {"first": rows[0]["current_version_bytes"],
                                    "last": rows[-1]["current_version_bytes"],
                                    "vocab_first": rows[0]["vocab"], "vocab_last": rows[-1]["vocab"]}
    out["versions_bounded"] = {"max_versions_kept": max(r["versions_kept"] for r in rows),
                               "max_version_dirs": max(r["version_dirs"] for r in rows),
                               "held": all(r["versions_kept"] <= args.keep and r["version_dirs"] <= args.keep
                                           for r in rows)}
    out["store_bytes_per_doc"] = {
        "first": round(rows[0]["store_bytes"] / ((rows[0]["cycle"] + 1) * args.docs), 1),
        "last": round(rows[-1]["store_bytes"] / ((rows[-1]["cycle"] + 1) * args.docs), 1)}
    docs = (rows[-1]["cycle"] - rows[0]["cycle"]) * args.docs
    out["stream_bytes"] = {"first": rows[0]["stream_bytes"], "last": rows[-1]["stream_bytes"],
                           "per_1000_docs": round((rows[-1]["stream_bytes"] - rows[0]["stream_bytes"]) * 1000
                                                  / max(docs, 1), 1)}
    # The stream's history is bounded by --trace-max-bytes, --trace-keep and --summary-points: it
    # saw-tooths with the rotation, so its largest size must not grow from the first half to the second.
    half = len(rows) // 2
    first, second = max(r["stream_history_bytes"] for r in rows[:half]), max(r["stream_history_bytes"] for r in rows[half:])
    out["stream_history_bytes"] = {"max_first_half": first, "max_second_half": second,
                                   "max_segments": max(r["stream_trace_segments"] for r in rows),
                                   "held": second <= 1.1 * first}
    state_first, state_last = rows[0]["stream_state_json_bytes"], rows[-1]["stream_state_json_bytes"]
    out["stream_state_json_bytes"] = {"first": state_first, "last": state_last,
                                      "held": abs(state_last - state_first) <= 64}
    early, late = window_means(rows, "stream_other_bytes_per_term", args.warmup)
    out["stream_other_bytes_per_term"] = {"early_mean": round(early, 1), "late_mean": round(late, 1)}
    held = all(out[k]["held"] for k in ("peak_mb", "seconds", "model_bytes_per_term", "versions_bounded",
                                        "stream_history_bytes", "stream_state_json_bytes"))
    out["overall"] = "held" if held else "not held"
    return out


def table(rows: list[dict[str, Any]]) -> list[str]:
    cols = ["cycle", "seconds", "peak_mb", "append_seconds", "update_seconds", "versions_seconds", "stream_seconds",
            "vocab", "versions_kept", "store_bytes", "model_bytes", "current_version_bytes", "stream_bytes",
            "stream_history_bytes", "stream_state_json_bytes", "stream_trace_segments", "stream_docs_seen"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                                       for c in cols) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--docs", type=int, default=1000, help="Documents appended per cycle (and in the base).")
    parser.add_argument("--work", type=Path, required=True, help="Directory to run in (replaced).")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--true-topics", type=int, default=10)
    parser.add_argument("--vocab", type=int, default=2000, help="Vocabulary of the true model.")
    parser.add_argument("--doc-length", type=float, default=50.0)
    parser.add_argument("--new-terms", type=int, default=10, help="New words per cycle.")
    parser.add_argument("--new-tokens", type=int, default=2, help="Tokens of new and of older new words per doc.")
    parser.add_argument("--batch-size", type=int, default=250, help="update and sgs minibatch (divides --docs).")
    parser.add_argument("--sgs-max-iter", type=int, default=20)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--trace-max-bytes", type=int, default=65536,
                        help="stream --trace-max-bytes (small, so that 100 cycles rotate the trace several times).")
    parser.add_argument("--trace-keep", type=int, default=2, help="stream --trace-keep.")
    parser.add_argument("--summary-points", type=int, default=40, help="stream --summary-points.")
    parser.add_argument("--warmup", type=float, default=0.1, help="Share of cycles left out as warm-up.")
    parser.add_argument("--local-cluster", choices=["auto", "threads", "processes"], default="auto")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-seed", type=int, default=1)
    parser.add_argument("--time-budget", type=float, default=None,
                        help="Stop starting new cycles after this many seconds (the run reports how many ran).")
    parser.add_argument("--json", type=Path, default=None, help="Also write the JSON here.")
    args = parser.parse_args(argv)

    work = args.work
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    started = time.perf_counter()
    setup_row = setup(args, work)
    rows: list[dict[str, Any]] = []
    for cycle in range(1, args.cycles + 1):
        if args.time_budget is not None and time.perf_counter() - started > args.time_budget:
            break
        rows.append(run_cycle(args, work, cycle))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = {
        "command": shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(argv),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
        "setup": setup_row, "cycles": rows, "verdict": verdict(rows, args),
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    print("\n".join(table(rows)))
    print(json.dumps(result["verdict"], indent=2))


if __name__ == "__main__":
    main()
