"""Speed on every route (issue 22): every topicflow method and every anchor, side by side in one run.

Systems (``--systems``, default all):

* topicflow through its CLI, each run one ``topicflow`` subprocess from start to saved model:
  ``tf-fit`` (batch VB, ``topicflow fit``), ``tf-online`` (``fit --method online``),
  ``tf-gibbs-stream`` (``stream --algo gibbs``: the in-memory single-actor sampler) and ``tf-gibbs``
  (``fit --method gibbs``: the distributed AD-LDA sampler; reported "not available" while the CLI
  does not offer it);
* anchors, each run one subprocess of ``benchmarks/_speed_anchors.py`` that loads the same bags
  (a scipy .npz of the training store), fits and saves: ``tomotopy-2`` / ``tomotopy-1`` (LDAModel,
  collapsed Gibbs, 2 or 1 threads), ``gensim-multicore`` (LdaMulticore, workers=1: on 2 cores that
  is one worker plus the master), ``gensim`` (LdaModel), ``sklearn-batch`` / ``sklearn-online``
  (LatentDirichletAllocation) and ``lda`` (the ``lda`` package, collapsed Gibbs). A missing
  package is reported "not installed".

Each system runs at a few budgets (sweeps for the Gibbs samplers, iterations for batch VB, passes
for online VB: ``--sweeps``, ``--iterations``, ``--passes``, or per system ``--budget NAME=B1,B2``);
every run's saved topic-word matrix and alpha are scored by ONE evaluator,
:func:`topicflow.metrics.heldout.completion_log_likelihood` on the held-out documents, as
bench_vb_lda.py does, after the process has ended (never on its clock). Priors: alpha 0.1 and eta
0.01 fixed for every system, except ``tf-fit`` and ``tf-online``, which keep topicflow's default
learned asymmetric alpha (the command a user types; ``--vb-alpha fixed`` gives them 0.1 too).

Measured per run: the whole command's wall time (start-up, reading the corpus, fitting, saving),
the training seconds the system reports (topicflow: the sum of its trace's seconds; anchors: the
library's fit call), tokens per second per core over the training seconds (cores = the threads or
processes the system was given), and the peak resident memory of the whole process tree
(``_memory.measure_process_tree``, sampled every 50 ms).

Derived per corpus and K: targets (each anchor's final perplexity, i.e. at its largest budget, and
1.2x and 1.1x the best perplexity of any run) and each system's time to reach each target: the
smallest wall time (and training time) among its runs whose perplexity is at or below it. With
budgets doubling, a time to target is an upper bound within a factor of about two of the crossing.
Then the three goals of issue 22 with held / not held / not measured.

Corpora (``--corpora``): ``real`` (``--jsonl`` files; tokenized, pruned and split as bench_vb_lda.py
does, every tenth document held out) and ``synth-2M``, ``synth-8M``, ``synth-32M`` (any ``synth-<N>M`` or ``synth-<N>k``; ``topicflow
synth`` with 100 true topics over 10,000 terms and 100 tokens per document; the held-out documents
are the next ones of the same draw, ``--heldout-docs`` of them scored). Stores are kept in
``--workdir`` and reused by later runs.

Examples
--------
Everything (long: hours on 2 cores)::

    python benchmarks/bench_speed.py --jsonl labeled_fortunes.jsonl bible_kjv.jsonl \\
        --corpora real,synth-2M,synth-8M,synth-32M --topics 20 100 --workdir /tmp/bench-speed

One table, e.g. the Gibbs samplers' memory as the corpus grows::

    python benchmarks/bench_speed.py --corpora synth-2M,synth-32M --topics 100 \\
        --systems tf-gibbs,tf-gibbs-stream,tomotopy-2 --sweeps 50 --workdir /tmp/bench-speed

``--quick`` uses three budgets per family and runs the ``lda`` package at the smallest two only.
Prints one JSON object per line (kind "run", "targets", "goal"), then the tables.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _memory import measure_process_tree  # noqa: E402
from _speed_anchors import MODULES  # noqa: E402
from bench_vb_lda import build_real, build_synth, heldout_blocks, load_csr, perplexity  # noqa: E402

from topicflow.io.corpus.reader import Corpus  # noqa: E402

SYNTH_SCALES = {"k": 1_000, "M": 1_000_000}
SYNTH_DOC_LENGTH, SYNTH_TERMS, SYNTH_TRUE_TOPICS = 100, 10_000, 100
ALPHA, ETA = 0.1, 0.01


@dataclass(frozen=True)
class System:
    """How one system is run."""

    #: "sweeps", "iterations" or "passes": what its budget counts.
    unit: str
    #: Threads or processes it is given (for tokens per second per core).
    cores: int
    #: "VB" or "Gibbs" (goal 2 compares topicflow fit with the fastest VB anchor).
    family: str
    #: True for topicflow's CLI routes.
    topicflow: bool


SYSTEMS: dict[str, System] = {
    "tf-fit": System("iterations", 2, "VB", True),
    "tf-online": System("passes", 2, "VB", True),
    "tf-gibbs": System("sweeps", 2, "Gibbs", True),
    "tf-gibbs-stream": System("sweeps", 1, "Gibbs", True),
    "tomotopy-2": System("sweeps", 2, "Gibbs", False),
    "tomotopy-1": System("sweeps", 1, "Gibbs", False),
    "gensim-multicore": System("passes", 2, "VB", False),
    "gensim": System("passes", 1, "VB", False),
    "sklearn-batch": System("iterations", 2, "VB", False),
    "sklearn-online": System("passes", 1, "VB", False),
    "lda": System("sweeps", 1, "Gibbs", False),
}
DEFAULT_BUDGETS = {"sweeps": [25, 50, 100, 200], "iterations": [5, 10, 20, 50], "passes": [1, 2, 4, 8]}
QUICK_BUDGETS = {"sweeps": [20, 50, 150], "iterations": [5, 15, 50], "passes": [1, 3, 8]}


# ----------------------------------------------------------------------------- corpora


def synth_tokens(name: str) -> int:
    """Training tokens of a generated corpus named ``synth-<N>M`` or ``synth-<N>k`` (e.g. synth-2M)."""
    size = name.removeprefix("synth-")
    if not name.startswith("synth-") or size[-1:] not in SYNTH_SCALES or not size[:-1].isdigit():
        raise ValueError(f"corpus {name!r}: expected real or synth-<N>M / synth-<N>k, e.g. synth-2M")
    return int(size[:-1]) * SYNTH_SCALES[size[-1]]


@dataclass
class Bench:
    """One corpus ready for every system: its training store, its bags as .npz and the held-out pairs."""

    name: str
    store: Path
    bags: Path
    pairs: list
    n_docs: int
    n_tokens: int
    n_terms: int


def prepare_corpus(name: str, args: argparse.Namespace) -> Bench:
    """Build (or reuse from ``--workdir``) the stores of one corpus, and save its bags for the anchors."""
    directory = args.workdir / name
    directory.mkdir(parents=True, exist_ok=True)
    if name == "real":
        if not args.jsonl:
            raise SystemExit("the real corpus needs --jsonl FILE...")
        if (directory / "train.zarr").exists() and (directory / "test.zarr").exists():
            train, test = Corpus.open(directory / "train.zarr"), Corpus.open(directory / "test.zarr")
        else:
            train, test = build_real(args.jsonl, directory, None)
    else:
        n_docs = synth_tokens(name) // SYNTH_DOC_LENGTH
        train, test = build_synth(n_docs, SYNTH_TRUE_TOPICS, SYNTH_TERMS, directory, None)
    pairs = heldout_blocks(train, test)
    kept, docs = [], 0
    for observed, heldout in pairs:  # the first --heldout-docs held-out documents are scored
        if docs >= args.heldout_docs:
            break
        kept.append((observed, heldout))
        docs += observed.n_docs
    bags = directory / "train.npz"
    if not bags.exists():
        import scipy.sparse as sp

        sp.save_npz(bags, load_csr(train))
    return Bench(name, directory / "train.zarr", bags, kept, len(train), train.n_tokens, len(train.vocabulary()))


# ----------------------------------------------------------------------------- runs


def topicflow_executable() -> str:
    return str(Path(sys.executable).parent / "topicflow")


def gibbs_fit_available() -> bool:
    """True when ``topicflow fit --method`` offers ``gibbs`` (the distributed sampler of issue 22.1)."""
    out = subprocess.run([topicflow_executable(), "fit", "--help"], capture_output=True, text=True, check=False).stdout
    start = out.find("--method [")
    return start >= 0 and "gibbs" in out[start:out.find("]", start)].split("|")


def availability(name: str) -> str | None:
    """None when ``name`` can run, else why not ("not installed", "not available")."""
    if name == "tf-gibbs":
        return None if gibbs_fit_available() else "not available (topicflow fit --method gibbs is not in this build)"
    if not SYSTEMS[name].topicflow and importlib.util.find_spec(MODULES[name]) is None:
        return f"not installed (no module {MODULES[name]!r})"
    return None


def command_of(name: str, bench: Bench, k: int, budget: int, out: Path, args: argparse.Namespace) -> list[str]:
    """The command of one run; topicflow's print to stderr so that the last stdout line is ``{}``."""
    if not SYSTEMS[name].topicflow:
        return [sys.executable, str(HERE / "_speed_anchors.py"), name, "--bags", str(bench.bags), "--topics", str(k),
                "--budget", str(budget), "--alpha", str(ALPHA), "--eta", str(ETA), "--seed", str(args.seed),
                "--out", str(out)]
    tf = [topicflow_executable()]
    common = ["--topics", str(k), "--topic-word-prior", str(ETA), "--seed", str(args.seed), "--overwrite"]
    vb_alpha = ["--doc-topic-prior", str(ALPHA)] if args.vb_alpha == "fixed" else []
    if name == "tf-fit":
        cli = tf + ["fit", str(bench.store), "--model", str(out), "--max-iter", str(budget)] + common + vb_alpha
    elif name == "tf-online":
        cli = tf + ["fit", str(bench.store), "--model", str(out), "--method", "online", "--passes", str(budget),
                    "--batch-size", "256"] + common + vb_alpha
    elif name == "tf-gibbs":
        cli = tf + ["fit", str(bench.store), "--model", str(out), "--method", "gibbs", "--max-iter", str(budget),
                    "--doc-topic-prior", str(ALPHA)] + common
    else:  # tf-gibbs-stream
        cli = tf + ["stream", str(bench.store), "--out", str(out), "--algo", "gibbs", "--sweeps", str(budget),
                    "--eval-every", str(budget), "--doc-topic-prior", str(ALPHA)] + common
    return ["sh", "-c", '"$@" 1>&2 && echo "{}"', "sh", *cli]


def saved_model(name: str, out: Path) -> tuple[np.ndarray, np.ndarray, float | None, int | None]:
    """(topic-word matrix, alpha, training seconds, iterations done) of a finished run, from what it saved.

    The iterations done are known for ``tf-fit`` only (batch VB may stop before ``--max-iter``);
    every other run does its whole budget.
    """
    if not SYSTEMS[name].topicflow:
        saved = np.load(out)
        return saved["topic_word"], saved["alpha"], None, None
    from topicflow.io.models.store import load_model

    model = load_model(out / "model" if name == "tf-gibbs-stream" else out)
    state = model.state
    if name == "tf-gibbs-stream":
        summary = json.loads((out / "summary.json").read_text())["summary"]
        seconds: float | None = float(summary[-1]["seconds_mean"])  # cumulative over the sweeps
    else:
        trace = [dict(r) for r in (model.info.trace or [])]
        if trace and "elapsed" in trace[-1]:
            seconds = float(trace[-1]["elapsed"])
        else:
            seconds = float(sum(r.get("seconds", 0.0) for r in trace)) if trace else None
    done = len(model.info.trace or []) if name == "tf-fit" else None
    return state.topic_word()["default"], np.asarray(state.doc_topic_prior, dtype=np.float64), seconds, done


def run_once(name: str, bench: Bench, k: int, budget: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run of one system at one budget: best wall time of ``--repeats``, then its perplexity."""
    best: dict[str, Any] | None = None
    for _ in range(args.repeats):
        out = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=args.workdir / "runs")) / (
            "model.npz" if not SYSTEMS[name].topicflow else "model")
        printed, wall, peak = measure_process_tree(command_of(name, bench, k, budget, out, args), what=f"{name} {budget}")
        topic_word, alpha, seconds, done = saved_model(name, out)
        fit_seconds = printed.get("fit_seconds", seconds)
        if best is None or wall < best["wall_seconds"]:
            best = {"wall_seconds": wall, "fit_seconds": fit_seconds, "peak_mb": peak, "done": done or budget,
                    "topic_word": topic_word, "alpha": alpha}
        subprocess.run(["rm", "-rf", str(out.parent)], check=False)
    assert best is not None
    system = SYSTEMS[name]
    fit_seconds = best["fit_seconds"]
    rate = None if not fit_seconds else bench.n_tokens * best["done"] / fit_seconds / system.cores
    return {"kind": "run", "corpus": bench.name, "K": k, "system": name, "unit": system.unit, "budget": budget, "done": best["done"],
            "cores": system.cores, "n_docs": bench.n_docs, "n_tokens": bench.n_tokens, "n_terms": bench.n_terms,
            "wall_seconds": best["wall_seconds"], "fit_seconds": fit_seconds,
            "tokens_per_second_per_core": rate, "peak_mb": best["peak_mb"],
            "perplexity": perplexity(bench.pairs, best["topic_word"], best["alpha"])}


# ----------------------------------------------------------------------------- targets and goals


def time_to_target(runs: Sequence[dict[str, Any]], target: float, key: str) -> float | None:
    """Smallest ``key`` (wall or training seconds) among ``runs`` whose perplexity is at most ``target``."""
    times = [r[key] for r in runs if r["perplexity"] <= target and r.get(key) is not None]
    return min(times) if times else None


def targets_of(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each anchor's final perplexity (at its largest budget), and 1.2x and 1.1x the best of any run."""
    targets: dict[str, float] = {}
    best = min(r["perplexity"] for r in runs)
    targets["1.2x best"] = 1.2 * best
    targets["1.1x best"] = 1.1 * best
    for name in dict.fromkeys(r["system"] for r in runs):
        if not SYSTEMS[name].topicflow:
            last = max((r for r in runs if r["system"] == name), key=lambda r: r["budget"])
            targets[f"{name} final"] = last["perplexity"]
    return targets


def goals_of(runs: Sequence[dict[str, Any]], targets: dict[str, float]) -> list[dict[str, Any]]:
    """Goals 1 and 2 of issue 22 on one corpus and K (goal 3, memory, spans corpora: :func:`memory_goal`)."""
    by_system: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_system.setdefault(r["system"], []).append(r)
    goals = []
    ours = [n for n in by_system if SYSTEMS[n].topicflow]
    if "tomotopy-2" in by_system and ours:
        rows, held = {}, True
        for label, target in targets.items():
            theirs = time_to_target(by_system["tomotopy-2"], target, "fit_seconds")
            if theirs is None:
                continue
            mine = [t for n in ours if (t := time_to_target(by_system[n], target, "fit_seconds")) is not None]
            fastest = min(mine) if mine else None
            rows[label] = {"topicflow": fastest, "tomotopy-2": theirs}
            held = held and fastest is not None and fastest <= theirs
        goals.append({"goal": "fastest topicflow method reaches every target no later than tomotopy-2 (training s)",
                      "verdict": "held" if held else "not held", "targets": rows})
    else:
        goals.append({"goal": "fastest topicflow method reaches every target no later than tomotopy-2 (training s)",
                      "verdict": "not measured"})
    vb_anchors = [n for n in by_system if SYSTEMS[n].family == "VB" and not SYSTEMS[n].topicflow]
    if "tf-fit" in by_system and vb_anchors:
        reach = {n: (time_to_target(by_system[n], targets[f"{n} final"], "wall_seconds"), targets[f"{n} final"])
                 for n in vb_anchors}
        fastest = min(reach, key=lambda n: reach[n][0] or math.inf)
        anchor_wall, target = reach[fastest]
        ours_wall = time_to_target(by_system["tf-fit"], target, "wall_seconds")
        held = ours_wall is not None and anchor_wall is not None and ours_wall <= anchor_wall / 3
        per_anchor = {n: {"target": reach[n][1], "anchor_wall": reach[n][0],
                          "tf_fit_wall": time_to_target(by_system["tf-fit"], reach[n][1], "wall_seconds")}
                      for n in vb_anchors}
        goals.append({"goal": "topicflow fit wall time at equal perplexity <= 1/3 of the fastest VB anchor's",
                      "verdict": "held" if held else "not held", "anchor": fastest, "target": target,
                      "anchor_wall": anchor_wall, "tf_fit_wall": ours_wall,
                      "ratio": None if ours_wall is None or not anchor_wall else ours_wall / anchor_wall,
                      "per_anchor": per_anchor})
    else:
        goals.append({"goal": "topicflow fit wall time at equal perplexity <= 1/3 of the fastest VB anchor's",
                      "verdict": "not measured"})
    return goals


def memory_goal(runs: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """Goal 3: peak memory of ``tf-gibbs`` flat within 10% from synth-2M to synth-32M."""
    peaks = {c: max((r["peak_mb"] for r in runs if r["system"] == "tf-gibbs" and r["corpus"] == c and r["K"] == k),
                    default=None) for c in ("synth-2M", "synth-32M")}
    goal = {"goal": "tf-gibbs peak memory flat (within 10%) from 2M to 32M tokens", "K": k, "peaks_mb": peaks}
    if None in peaks.values():
        return goal | {"verdict": "not measured"}
    return goal | {"verdict": "held" if peaks["synth-32M"] <= 1.1 * peaks["synth-2M"] else "not held"}


# ----------------------------------------------------------------------------- tables


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def short(label: str) -> str:
    """A target's column heading: an anchor's final perplexity is headed by the anchor's name."""
    return label.removesuffix(" final").replace("gensim-multicore", "gensim-mc").replace("sklearn-", "sk-")


def emit(headers: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool, left: int = 2) -> None:
    """Print one table: aligned text, or a Markdown table (``--markdown``, for RESULTS.md)."""
    if markdown:
        print("| " + " | ".join(headers) + " |")
        print("|" + "|".join("---" if i < left else "---:" for i in range(len(headers))) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows)]
    for row in [headers, *rows]:
        print(" ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


def goal_text(goal: dict[str, Any]) -> str:
    extra = ""
    if "anchor" in goal:
        extra = (f" (tf-fit {fmt(goal['tf_fit_wall'])} s against {goal['anchor']} {fmt(goal['anchor_wall'])} s "
                 f"to perplexity {goal['target']:.1f})")
    elif goal.get("targets"):
        late = [label for label, t in goal["targets"].items() if t["topicflow"] is None or t["topicflow"] > t["tomotopy-2"]]
        extra = f" (later or never: {', '.join(late)})" if late else ""
    return f"goal: {goal['goal']}: **{goal['verdict']}**{extra}"


def print_tables(runs: list[dict[str, Any]], summaries: list[dict[str, Any]], skipped: dict[str, str],
                 markdown: bool = False) -> None:
    """The runs, then per corpus and K the times to each target and goals 1-2, then peak memory."""
    print()
    rows = []
    for r in runs:
        rate = r["tokens_per_second_per_core"]
        if rate is None and r.get("fit_seconds"):  # rows written before "done" was recorded
            rate = r["n_tokens"] * r.get("done", r["budget"]) / r["fit_seconds"] / r["cores"]
        rows.append([f"{r['corpus']} K={r['K']}", r["system"], f"{r['budget']} {r['unit']}",
                     f"{r['wall_seconds']:.1f}", fmt(r["fit_seconds"]), f"{r['perplexity']:.1f}",
                     fmt(None if rate is None else rate / 1e6, 2), f"{r['peak_mb']:.0f}"])
    emit(["corpus", "system", "budget", "wall s", "train s", "perplexity", "Mtok/s/core", "peak MB"], rows, markdown)
    for summary in summaries:
        labels = list(summary["targets"])
        print(f"\n{summary['corpus']}, K = {summary['K']}: seconds to reach each held-out perplexity target, "
              "whole command (training only); - never. Columns: 1.2x and 1.1x the best "
              "perplexity of any run, then each anchor's final perplexity.\n")
        rows = [["(target)"] + [f"{summary['targets'][label]:.1f}" for label in labels]]
        for name, reach in summary["reach"].items():
            rows.append([name] + [f"{fmt(reach[label]['wall_seconds'])} ({fmt(reach[label]['fit_seconds'])})"
                                      for label in labels])
        emit(["system"] + [short(label) for label in labels], rows, markdown, left=1)
        print()
        for goal in summary["goals"]:
            print(f"- {goal_text(goal)}")
    corpora = list(dict.fromkeys(r["corpus"] for r in runs))
    if corpora:
        print("\npeak memory of the whole process tree, MB (largest over budgets)\n")
        rows = []
        for k in dict.fromkeys(r["K"] for r in runs):
            for name in dict.fromkeys(r["system"] for r in runs):
                peaks = [max((r["peak_mb"] for r in runs if r["K"] == k and r["system"] == name and r["corpus"] == c),
                             default=None) for c in corpora]
                rows.append([name, str(k)] + [fmt(p, 0) for p in peaks])
        emit(["system", "K"] + corpora, rows, markdown)
    print()
    for name, why in skipped.items():
        print(f"- {name}: {why}")


# ----------------------------------------------------------------------------- driver


def budgets_of(args: argparse.Namespace) -> dict[str, list[int]]:
    table = QUICK_BUDGETS if args.quick else DEFAULT_BUDGETS
    units = {"sweeps": args.sweeps or table["sweeps"], "iterations": args.iterations or table["iterations"],
             "passes": args.passes or table["passes"]}
    budgets = {name: list(units[system.unit]) for name, system in SYSTEMS.items()}
    if args.quick:
        budgets["lda"] = budgets["lda"][:2]
    for item in args.budget:
        name, _, values = item.partition("=")
        if name not in SYSTEMS:
            raise SystemExit(f"--budget {item!r}: unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
        budgets[name] = [int(v) for v in values.split(",")]
    return budgets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jsonl", nargs="+", type=Path, help="the real corpus: JSON Lines with id and text")
    parser.add_argument("--corpora", default="real", help="comma-separated: real, synth-2M, synth-8M, synth-32M")
    parser.add_argument("--sizes", default=None, help="synthetic sizes to add to --corpora, e.g. 2M,8M,32M")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {', '.join(SYSTEMS)}")
    parser.add_argument("--topics", nargs="+", type=int, default=[100])
    parser.add_argument("--sweeps", type=lambda s: [int(v) for v in s.split(",")], default=None,
                        help="Gibbs budgets, e.g. 25,50,100,200")
    parser.add_argument("--iterations", type=lambda s: [int(v) for v in s.split(",")], default=None,
                        help="batch VB budgets, e.g. 5,10,20,50")
    parser.add_argument("--passes", type=lambda s: [int(v) for v in s.split(",")], default=None,
                        help="online VB budgets, e.g. 1,2,4,8")
    parser.add_argument("--budget", action="append", default=[], metavar="NAME=B1,B2",
                        help="one system's budgets (repeatable), e.g. lda=20,50")
    parser.add_argument("--quick", action="store_true", help="three budgets per family; lda at the smallest two")
    parser.add_argument("--repeats", type=int, default=1, help="runs per budget; the best wall time is kept")
    parser.add_argument("--vb-alpha", choices=["default", "fixed"], default="default",
                        help="tf-fit / tf-online alpha: topicflow's default (learned) or fixed at 0.1")
    parser.add_argument("--heldout-docs", type=int, default=5000, help="held-out documents scored at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="stores and bags (reused when present)")
    parser.add_argument("--from-json", nargs="+", type=Path, default=None, metavar="FILE",
                        help="run nothing: print the tables and goals from the JSON lines of earlier runs")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown (for RESULTS.md)")
    args = parser.parse_args(argv)
    if args.from_json:
        return rerender(args.from_json, args.markdown)

    corpora = [c for c in args.corpora.split(",") if c]
    if args.sizes:
        corpora += [f"synth-{s}" for s in args.sizes.split(",") if f"synth-{s}" not in corpora]
    for corpus in corpora:
        if corpus != "real":
            try:
                synth_tokens(corpus)
            except ValueError as error:
                parser.error(f"--corpora: {error}")
    names = [n for n in args.systems.split(",") if n]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-speed-"))
    (args.workdir / "runs").mkdir(parents=True, exist_ok=True)
    budgets = budgets_of(args)
    skipped = {n: why for n in names if (why := availability(n)) is not None}
    for name, why in skipped.items():
        print(json.dumps({"kind": "skipped", "system": name, "why": why}), flush=True)
    runs: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    for corpus in corpora:
        bench = prepare_corpus(corpus, args)
        for k in args.topics:
            here: list[dict[str, Any]] = []
            for name in names:
                if name in skipped:
                    continue
                for budget in budgets[name]:
                    try:
                        row = run_once(name, bench, k, budget, args)
                    except RuntimeError as error:  # one failed run is reported, the others still run
                        print(json.dumps({"kind": "failed", "corpus": corpus, "K": k, "system": name,
                                          "budget": budget, "error": str(error)[-2000:]}), flush=True)
                        continue
                    print(json.dumps(row), flush=True)
                    here.append(row)
            if here:
                summary = summarize(here)
                print(json.dumps(summary), flush=True)
                summaries.append(summary)
                runs += here
    report(runs, summaries, skipped, args.topics, args.markdown)
    return 0


def summarize(here: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Targets, each system's time to reach them and goals 1 and 2, for the runs of one corpus and K."""
    targets = targets_of(here)
    reach = {name: {label: {key: time_to_target([r for r in here if r["system"] == name], target, key)
                            for key in ("wall_seconds", "fit_seconds")}
                    for label, target in targets.items()}
             for name in dict.fromkeys(r["system"] for r in here)}
    return {"kind": "targets", "corpus": here[0]["corpus"], "K": here[0]["K"], "targets": targets, "reach": reach,
            "goals": goals_of(here, targets)}


def report(runs: list[dict[str, Any]], summaries: list[dict[str, Any]], skipped: dict[str, str],
           topics: Sequence[int], markdown: bool = False) -> None:
    """Goal 3's JSON lines, then every table and goal."""
    for k in topics:
        print(json.dumps({"kind": "goal"} | memory_goal(runs, k)), flush=True)
    print_tables(runs, summaries, skipped, markdown)
    for k in topics:
        goal = memory_goal(runs, k)
        peaks = ", ".join(f"{c} {fmt(p, 0)} MB" for c, p in goal["peaks_mb"].items())
        print(f"- K = {k}: goal: {goal['goal']}: **{goal['verdict']}** ({peaks})")


def rerender(paths: Sequence[Path], markdown: bool) -> int:
    """Tables and goals again from the JSON lines of earlier runs (several files are joined)."""
    runs: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                if row.get("kind") == "run":
                    runs.append(row)
                elif row.get("kind") == "skipped":
                    skipped[row["system"]] = row["why"]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in runs:
        groups.setdefault((row["corpus"], row["K"]), []).append(row)
    summaries = [summarize(group) for group in groups.values()]
    for summary in summaries:
        print(json.dumps(summary), flush=True)
    report(runs, summaries, skipped, list(dict.fromkeys(r["K"] for r in runs)), markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
