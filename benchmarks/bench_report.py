"""Wall time of ``topicflow report`` and of the pyLDAvis export on a real corpus, phase by phase.

The corpus (a JSON Lines file, e.g. the King James Bible by chapter from
``/work/shared/corpora/build-dev-corpora.sh``) is ingested with ``--keep-order`` (English stop words,
``--min-df``, ``--max-df-fraction``) and a batch VB model is fitted on it (both untimed, reused from
``--work-dir`` when present). Then, in one process on a local cluster of ``--workers`` processes (one
thread each), each phase the median of ``--repeats`` runs, after an untimed warm-up report (numba compiles the fold-in kernel on the workers):

* ``coherence u_mass`` and ``coherence c_v``: :func:`coherence_summary` against the store;
* ``fold-in``: every document folded into the model and summarized per partition
  (:func:`corpus_doc_stats`);
* ``examples``: the snippets of each topic's top documents (:func:`example_documents`);
* ``build_report``: everything the page shows (fold-in, examples, versions, trace), no drawing;
* ``report total``: ``write_model_report`` end to end (``build_report``, then the matplotlib charts
  and the HTML file), the time of ``topicflow report MODEL --corpus STORE --coherence none`` once the
  cluster is up; ``charts + write`` is the difference;
* ``pyldavis data`` and ``pyLDAvis.prepare``: :func:`pyldavis_data`, then pyLDAvis itself (n_jobs=1).

Example::

    python benchmarks/bench_report.py --jsonl ~/.cache/topicflow-dev-corpora/bible_kjv.jsonl --topics 20

Prints one JSON object (with the exact command), then a table.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topicflow.api.lda import LDA
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.evaluation.pyldavis import pyldavis_data
from topicflow.pipeline.evaluation.report import (
    ReportOptions,
    build_report,
    coherence_summary,
    corpus_doc_stats,
    example_documents,
    write_model_report,
)
from topicflow.pipeline.ingest.ingest import ingest_corpus


def timed(phases: dict[str, float], name: str, call: Callable[[], Any], repeats: int) -> Any:
    """Run ``call`` ``repeats`` times; record the median wall time, return the last value."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        value = call()
        times.append(time.perf_counter() - started)
    phases[name] = statistics.median(times)
    return value


def prepare(args: argparse.Namespace) -> tuple[Path, Path]:
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    store, model = work / "corpus.zarr", work / f"lda{args.topics}"
    if not store.exists():
        ingest_corpus([args.jsonl], store, fields=FieldSpec(id_field="id"), tokenizer=TokenizerConfig(),
                      prune=PruneConfig(min_df=args.min_df, max_df_fraction=args.max_df_fraction),
                      shard_size=args.shard_size, keep_order=True)
    if not model.exists():
        LDA(args.topics, max_iter=args.max_iter, seed=1).fit(store).save(model)
    return store, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jsonl", required=True)
    parser.add_argument("--work-dir", default="/tmp/bench-report")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--max-iter", type=int, default=40)
    parser.add_argument("--min-df", type=int, default=5)
    parser.add_argument("--max-df-fraction", type=float, default=0.5)
    parser.add_argument("--shard-size", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    store, model_path = prepare(args)
    corpus = Corpus.open(store)
    options = ReportOptions()
    phases: dict[str, float] = {}
    r = args.repeats
    out = Path(args.work_dir) / "report.html"
    with connect(ClusterConfig(workers=args.workers, threads_per_worker=1)) as client:
        write_model_report(model_path, out, corpus, client=client, overwrite=True)  # warm-up
        u_mass = timed(phases, "coherence u_mass", lambda: coherence_summary(model_path, corpus, measure="u_mass",
                                                                              client=client), r)
        timed(phases, "coherence c_v", lambda: coherence_summary(model_path, corpus, measure="c_v", client=client), r)
        model = load_model(model_path)
        stats = timed(phases, "fold-in", lambda: corpus_doc_stats(model, corpus, n_top=options.examples,
                                                                  client=client), r)
        timed(phases, "examples", lambda: example_documents(stats, corpus, n_words=options.snippet_words,
                                                            client=client), r)
        timed(phases, "build_report", lambda: build_report(model_path, corpus, coherence=u_mass, client=client), r)
        timed(phases, "report total", lambda: write_model_report(model_path, out, corpus, coherence=u_mass,
                                                                 client=client, overwrite=True), r)
        data = timed(phases, "pyldavis data", lambda: pyldavis_data(model_path, corpus, client), r)
    import pyLDAvis

    timed(phases, "pyLDAvis.prepare", lambda: pyLDAvis.prepare(**data, sort_topics=False, n_jobs=1), r)
    phases["charts + write"] = phases["report total"] - phases["build_report"]
    result = {
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "corpus": {"docs": len(corpus), "tokens": corpus.n_tokens, "vocab": len(corpus.vocabulary()),
                   "shards": corpus.n_shards},
        "topics": args.topics, "workers": args.workers, "report_bytes": out.stat().st_size,
        "seconds": {k: round(v, 3) for k, v in phases.items()},
    }
    print(json.dumps(result, indent=2))
    print(f"\n{'phase':<20} {'seconds':>8}")
    for name in ("coherence u_mass", "coherence c_v", "fold-in", "examples", "build_report", "charts + write",
                 "report total", "pyldavis data", "pyLDAvis.prepare"):
        print(f"{name:<20} {phases[name]:8.2f}")


if __name__ == "__main__":
    main()
