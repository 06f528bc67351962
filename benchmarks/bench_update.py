"""Nightly update time against the size of the new data and of the base corpus.

For each base size B (``--base-docs``), documents are drawn from one known LDA model
(:func:`topicflow.models.lda.synth.draw_shard`: document i is a function of the seed and i only, so the
corpora are prefixes of one stream) and written as JSON Lines text (terms ``w00042``). The base is
ingested with :func:`ingest_corpus` (no stop words, no pruning), an online model is fitted on it
(one pass, ``LDA(method="online")``) and saved. Then, for each increment (``--increments``: a
percentage of B or a number of documents), on a fresh copy of that base store and model (copying is
not timed), documents B .. B + n - 1 are added with :func:`append_corpus` and
:func:`update_model` streams the new shards through online VB and commits a new model version.

The update's wall time is split by wrapping, for the measurement only, the functions
``topicflow.pipeline.update`` calls: ``load_model`` (read the current version), ``fit_online`` (the
online pass over the new shards, on the cluster) and ``commit_version`` (write and publish the new
version); "other" is the rest (lock, shard diff, vocabulary check, provenance). For contrast, a full
refit (same estimator and settings as the base model) on base + increment is timed once, on the
first copy. ``--repeats`` fresh copies per increment; the table shows the median, the JSON every
run (single runs of a sub-second update vary by +-20% on a shared machine).

A least-squares line ``update seconds = fixed + per_doc * new docs`` over all bases and increments
summarizes the claim: the time grows with the new documents only, so the per-base online-pass docs/s
should agree and the residuals should not grow with B; a second fit adds ``per_base_doc * B``, whose
coefficient should be about zero.

topicflow runs on a local distributed cluster of ``--workers`` worker processes (one thread each);
the base fit warms numba up on the workers, and one untimed update precedes the measurements.

Example::

    python benchmarks/bench_update.py --base-docs 50000 200000 --increments 1% 10% 2000 --topics 20

Prints one JSON object (with the exact command), then a table.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.synth import SynthParams, draw_shard, draw_topic_word, term_names
from topicflow.pipeline import update as update_module
from topicflow.api.lda import LDA
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.update import update_model

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())
GENERATE_CHUNK = 5000
#: The functions of topicflow.pipeline.update whose time is reported as a phase of the update.
PHASES = {"load": "load_model", "online_pass": "fit_online", "commit": "commit_version"}


# ----------------------------------------------------------------------------- data


def synth_params(args: argparse.Namespace, n_docs: int) -> SynthParams:
    return SynthParams(n_docs=n_docs, n_topics=args.true_topics, n_terms=args.vocab, doc_length=args.doc_length,
                       doc_topic_prior=(args.true_alpha,), topic_word_prior=args.true_eta, seed=args.data_seed)


def write_jsonl(path: Path, args: argparse.Namespace, start: int, stop: int) -> Path:
    """Documents ``start .. stop - 1`` of the stream as JSON Lines ``{"id", "text"}``."""
    params = synth_params(args, stop)
    topic_word = {"default": draw_topic_word(params, "default")}
    names = term_names(args.vocab, "default")
    with open(path, "w", encoding="utf-8") as out:
        for lo in range(start, stop, GENERATE_CHUNK):
            shard = draw_shard(params, topic_word, lo, min(GENERATE_CHUNK, stop - lo))
            indptr, terms, counts = shard.bags["default"]
            for row, doc_id in enumerate(shard.doc_ids):
                a, b = indptr[row], indptr[row + 1]
                text = " ".join(np.repeat(names[terms[a:b]], counts[a:b]))
                out.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return path


def parse_increment(text: str, base: int) -> int:
    """``"10%"`` of ``base`` documents, or a plain number of documents."""
    value = max(1, round(base * float(text[:-1]) / 100)) if text.endswith("%") else int(text)
    if value < 1:
        raise SystemExit(f"increment {text!r} gives no documents")
    return value


# ----------------------------------------------------------------------------- timing


@contextlib.contextmanager
def timed_phases() -> Iterator[dict[str, float]]:
    """Time the functions of :data:`PHASES` while they are called by ``update_model``."""
    seconds = {phase: 0.0 for phase in PHASES}
    originals = {phase: getattr(update_module, name) for phase, name in PHASES.items()}

    def timing(phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[phase] += time.perf_counter() - started
        return wrapper

    for phase, name in PHASES.items():
        setattr(update_module, name, timing(phase, originals[phase]))
    try:
        yield seconds
    finally:
        for phase, name in PHASES.items():
            setattr(update_module, name, originals[phase])


def estimator(args: argparse.Namespace) -> LDA:
    common = dict(n_topics=args.topics, eta=0.01, seed=args.seed, batch_size=args.batch_size, tau0=args.tau0,
                  kappa=args.kappa, passes=1)
    if args.base_method == "batch":
        return LDA(method="batch", max_iter=args.max_iter, **common)  # type: ignore[arg-type]
    return LDA(method="online", **common)  # type: ignore[arg-type]


def fresh_copy(base_dir: Path, target: Path) -> tuple[Path, Path]:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copytree(base_dir / "corpus.zarr", target / "corpus.zarr")
    shutil.copytree(base_dir / "model", target / "model")
    return target / "corpus.zarr", target / "model"


def measure_update(base_dir: Path, increment: Path, target: Path, args: argparse.Namespace,
                   client: Any, *, refit: bool) -> dict[str, Any]:
    """Append ``increment`` to a copy of the base, then time the update and (if ``refit``) a full refit."""
    store, model = fresh_copy(base_dir, target)
    started = time.perf_counter()
    appended = append_corpus(store, [increment], client=client)
    append_seconds = time.perf_counter() - started
    with timed_phases() as phases:
        started = time.perf_counter()
        result = update_model(model, store, client=client)
        update_seconds = time.perf_counter() - started
    row: dict[str, Any] = {
        "append_seconds": append_seconds, "update_seconds": update_seconds,
        **{f"{phase}_seconds": value for phase, value in phases.items()},
        "other_seconds": update_seconds - sum(phases.values()),
        "new_docs": result.new_docs, "new_shards": len(result.new_shards), "minibatches": result.minibatches,
        "version": result.version, "appended_docs": appended.n_kept,
        "oov_tokens": sum(appended.oov_tokens.values()),
    }
    row["update_docs_per_second"] = result.new_docs / update_seconds
    row["online_pass_docs_per_second"] = result.new_docs / max(phases["online_pass"], 1e-9)
    if refit:
        started = time.perf_counter()
        estimator(args).fit(store, client=client)
        row["refit_seconds"] = time.perf_counter() - started
    shutil.rmtree(target)
    return row


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of every numeric field over the repeats (the refit runs in the first repeat only)."""
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {k: statistics.median(r[k] for r in runs if k in r) for k in keys}


def linear_fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Least squares over every (base, increment): update seconds against new and base documents.

    ``fixed + per_new_doc * new_docs``, and, with two or more bases, the same plus
    ``per_base_doc * base_docs``: the claim is that this last coefficient is about zero.
    """
    new = np.array([r["new_docs"] for r in rows], dtype=float)
    base = np.array([r["base_docs"] for r in rows], dtype=float)
    y = np.array([r["update_seconds"] for r in rows], dtype=float)
    if len(set(new.tolist())) < 2:
        return {}
    per_doc, fixed = np.polyfit(new, y, 1)
    residual = y - (fixed + per_doc * new)
    out: dict[str, Any] = {
        "fixed_seconds": float(fixed), "seconds_per_new_doc": float(per_doc),
        "docs_per_second_marginal": float(1 / per_doc) if per_doc > 0 else None,
        "residuals": [round(float(r), 3) for r in residual],
        "max_relative_residual": float(np.max(np.abs(residual) / y)),
    }
    if len(set(base.tolist())) >= 2 and len(rows) >= 4:
        design = np.column_stack([np.ones_like(new), new, base])
        (c0, c_new, c_base), *_ = np.linalg.lstsq(design, y, rcond=None)
        out["with_base"] = {"fixed_seconds": float(c0), "seconds_per_new_doc": float(c_new),
                            "seconds_per_base_doc": float(c_base),
                            "base_share_at_largest_base": float(c_base * base.max() / y.mean())}
    return out


# ----------------------------------------------------------------------------- driver


def prepare_base(base: int, increments: list[int], args: argparse.Namespace, workdir: Path,
                 client: Any) -> tuple[Path, dict[str, Any], dict[int, Path]]:
    """Write the base and increment files, ingest the base, fit and save the base model (timed)."""
    base_dir = workdir / f"base-{base}"
    base_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("corpus.zarr", "model"):
        if (base_dir / stale).exists():
            shutil.rmtree(base_dir / stale)
    write_jsonl(base_dir / "base.jsonl", args, 0, base)
    files = {n: write_jsonl(base_dir / f"new-{n}.jsonl", args, base, base + n) for n in sorted(set(increments))}
    started = time.perf_counter()
    ingest_corpus([base_dir / "base.jsonl"], base_dir / "corpus.zarr", tokenizer=NO_STOP, prune=PruneConfig(),
                  shard_size=args.shard_size, client=client)
    ingest_seconds = time.perf_counter() - started
    corpus = Corpus.open(base_dir / "corpus.zarr")
    started = time.perf_counter()
    estimator(args).fit(corpus, client=client).save(base_dir / "model")
    fit_seconds = time.perf_counter() - started
    info = {"base_docs": base, "n_tokens": corpus.n_tokens, "n_terms": len(corpus.vocabulary()),
            "n_shards": corpus.n_shards, "ingest_seconds": ingest_seconds, "base_fit_seconds": fit_seconds}
    return base_dir, info, files


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-docs", nargs="+", type=int, default=[50000, 200000])
    parser.add_argument("--increments", nargs="+", default=["1%", "10%", "2000"],
                        help="percentages of each base (e.g. 1%%) or numbers of documents (the same for every base)")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=10000, help="terms of the generating model")
    parser.add_argument("--doc-length", type=float, default=100.0)
    parser.add_argument("--true-topics", type=int, default=20)
    parser.add_argument("--true-alpha", type=float, default=0.1)
    parser.add_argument("--true-eta", type=float, default=0.01)
    parser.add_argument("--shard-size", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--tau0", type=float, default=10.0)
    parser.add_argument("--kappa", type=float, default=0.7)
    parser.add_argument("--base-method", choices=["online", "batch"], default="online")
    parser.add_argument("--max-iter", type=int, default=20, help="batch base model only")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh copies per increment (median reported; the refit runs once)")
    parser.add_argument("--no-refit", action="store_true", help="skip the full refit on base + increment")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fitted models")
    parser.add_argument("--data-seed", type=int, default=1,
                        help="seed of the generating model (not the fit's: both use the same random streams)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    return parser.parse_args(argv)


def print_table(report: dict[str, Any]) -> None:
    print()
    print(f"{'base docs':>10} {'increment':>9} {'new docs':>9} {'append s':>9} {'update s':>9} {'load s':>7} "
          f"{'pass s':>7} {'commit s':>8} {'other s':>8} {'upd docs/s':>10} {'pass docs/s':>11} {'refit s':>8}")
    for row in report["rows"]:
        m = row["median"]
        refit = f"{m['refit_seconds']:>8.1f}" if "refit_seconds" in m else f"{'':>8}"
        print(f"{row['base_docs']:>10,} {row['increment']:>9} {int(m['new_docs']):>9,} {m['append_seconds']:>9.2f} "
              f"{m['update_seconds']:>9.2f} {m['load_seconds']:>7.2f} {m['online_pass_seconds']:>7.2f} "
              f"{m['commit_seconds']:>8.2f} {m['other_seconds']:>8.2f} {m['update_docs_per_second']:>10,.0f} "
              f"{m['online_pass_docs_per_second']:>11,.0f} {refit}")
    print()
    for base in report["bases"]:
        print(f"base {base['base_docs']:,} docs: {base['n_shards']} shards, {base['n_tokens']:,} tokens, "
              f"{base['n_terms']:,} terms; ingest {base['ingest_seconds']:.1f} s, "
              f"base fit {base['base_fit_seconds']:.1f} s")
    fit = report["fit"]
    if fit:
        print(f"fit over all rows: update s = {fit['fixed_seconds']:.2f} + {fit['seconds_per_new_doc'] * 1000:.3f} ms"
              f" x new docs (max relative residual {fit['max_relative_residual']:.0%})")
    if fit and "with_base" in fit:
        wb = fit["with_base"]
        print(f"with the base size as a regressor: {wb['seconds_per_base_doc'] * 1e6:+.2f} us per base doc "
              f"({wb['base_share_at_largest_base']:+.0%} of the mean update time at the largest base)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from distributed import Client, LocalCluster

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-update-"))
    workdir.mkdir(parents=True, exist_ok=True)
    bases, rows = [], []
    loadavg = {"start": list(os.getloadavg())}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        warmed = False
        for base in args.base_docs:
            increments = {text: parse_increment(text, base) for text in args.increments}
            base_dir, info, files = prepare_base(base, list(increments.values()), args, workdir, client)
            bases.append(info)
            if not warmed:  # first update in this process: imports, numba cache loads on the driver
                measure_update(base_dir, files[min(files)], workdir / "scratch", args, client, refit=False)
                warmed = True
            for text, n in increments.items():
                loadavg[f"{base}/{text}"] = list(os.getloadavg())
                runs = [measure_update(base_dir, files[n], workdir / "scratch", args, client,
                                       refit=repeat == 0 and not args.no_refit)
                        for repeat in range(args.repeats)]
                rows.append({"base_docs": base, "increment": text, "median": summarize(runs), "runs": runs})
                m = rows[-1]["median"]
                print(f"# base {base}, +{text} ({n} docs): update {m['update_seconds']:.2f} s "
                      f"(online pass {m['online_pass_seconds']:.2f} s)", file=sys.stderr, flush=True)
    report = {
        "benchmark": "update",
        "command": shlex.join(["python", *sys.argv]) if argv is None else shlex.join(["python", sys.argv[0], *argv]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {"cpus": os.cpu_count(), "loadavg_before": loadavg},
        "bases": bases,
        "rows": rows,
        "fit": linear_fit([{**r["median"], "base_docs": r["base_docs"]} for r in rows]),
    }
    print(json.dumps(report), flush=True)
    print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
