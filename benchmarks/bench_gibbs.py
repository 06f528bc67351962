"""Collapsed Gibbs LDA: topicflow's sparse sampler against tomotopy ``LDAModel`` and the ``lda`` package.

Every system samples the same training tokens with the same hyperparameters (alpha = 0.1 symmetric,
beta = 0.01, both fixed: tomotopy's ``optim_interval`` is 0) for ``--warmup`` sweeps that are not timed
(they include each system's initialization), then ``--sweeps`` timed sweeps. Reported: tokens per
second over the timed sweeps (best of ``--repeats`` independent runs for topicflow and tomotopy; the
``lda`` package, 4-70x slower, runs once), and, so that speed is compared at equal quality, after the
same total number of sweeps:

* the joint log-likelihood log p(w, z) per token of each system's final assignments, recomputed for
  all of them by :func:`topicflow.models.lda.gibbs.scores.joint_log_likelihood`;
* the document-completion perplexity of held-out documents
  (:func:`topicflow.metrics.heldout.completion_log_likelihood`, as in ``bench_vb_lda.py``) from each
  system's phi = (n_wk + beta) / (n_k + V beta), computed from its counts.

topicflow runs single-threaded (``run_sweeps``: one call for all timed sweeps, including its copy of
the state and the rebuilding of its word lists); tomotopy with ``workers=1`` and, as a separate row,
``workers=2``; ``lda`` through its per-sweep Cython kernel (``LDA._sample_topics``, the body of its
``fit`` loop, without the log-likelihood it computes every ``refresh`` sweeps). numba is warmed up
before timing.

Examples
--------
Real corpus (JSON Lines with ``id`` and ``text``; tokenized, pruned and split as in bench_vb_lda.py,
every tenth document held out)::

    python benchmarks/bench_gibbs.py --jsonl labeled_fortunes.jsonl bible_kjv.jsonl --topics 20 100 500

Generated corpus (in memory, from a 50-topic LDA model over 10,000 terms, ~100 tokens per document)::

    python benchmarks/bench_gibbs.py --synth-docs 5000 --topics 20 100 500

Prints one JSON object per line, then a table.

Distributed route (issue 22): ``--dist-threads 1 2`` adds ``topicflow-dist-<n>``, the out-of-core AD-LDA
sampler (``topicflow.pipeline.gibbs.fit_gibbs``: the training documents written to a store of 1000-document
shards, z on disk, Dask's threaded scheduler with n threads, the default blocks), to the speed table
(tokens/s over the timed sweeps from its per-sweep trace; sweeps/s; ``cpu_ms_per_sweep``: the process's CPU
time over the whole fit, start and store reading included, divided by its sweeps, which a loaded machine
disturbs less than wall time). ``--targets P1 P2 ...`` instead
measures the time to reach each held-out perplexity (this script's evaluator, after every sweep, not
timed) for the one-thread sampler, the distributed route at each thread count and tomotopy (workers=2).
Each system's own initialization is on the clock. The one-thread sampler and tomotopy run one chain each
(``run_sweeps(..., on_sweep=)``, tomotopy's ``train(callback=)``) and the time spent in the evaluating
callback is subtracted; ``--per-sweep-calls`` instead calls ``run_sweeps(state, params, 1)`` and
``train(1)`` once per sweep (sessions 13-15: topicflow then rebuilt its word lists every sweep).
``topicflow-par-<P>`` is the same in-memory chain with partitioned sweeps (``run_sweeps(...,
partitions=P, threads=2)``: documents and words in P parts, P tasks at a time on two threads), and
``topicflow-parseq-<P>`` that from the sequential start; ``topicflow-cvb`` and ``topicflow-cvbpar-<P>`` start
from one SCVB0 pass (``init="scvb0"``, on the clock; the state after any start is scored as sweep 0).
``topicflow-stream-par-2`` and ``topicflow-stream-cvbpar-2`` run the command with ``--gibbs-partitions 2
--gibbs-threads 2`` from the random and the SCVB0 start. ``topicflow-seq`` in ``--target-systems`` is the
one-thread sampler from its sequential start
(``initial_state(..., init="sequential")``: every token drawn in order given the ones before it, on the
clock) instead of the random one; ``topicflow-distseq-<n>`` and ``topicflow-distcvb-<n>`` are the distributed
route from its sequential and its SCVB0 start (``fit --method gibbs --gibbs-start sequential|scvb0``).
``topicflow-stream`` and ``topicflow-stream-seq``
run the same in-memory sampler through the command, ``topicflow stream --algo gibbs [--gibbs-start
sequential]`` on one thread, once per sweep count (1, 2, ... until every target is reached; same seed, so
each run extends the same chain): the training time is the trace's clock (the start and the sweeps), and the
whole command's wall time at each target (start-up, reading, saving) is reported beside it as
``command_wall_to_target`` and in a "(wall)" row of the table. ``--target-repeats N`` runs the systems in
turn N times and keeps the best time per target::

    nice python benchmarks/bench_gibbs.py --jsonl labeled_fortunes.jsonl bible_kjv.jsonl --topics 100 \
        --targets 1070 981 --max-sweeps 45 --dist-threads 1 2 --target-repeats 5

``--auto-targets`` (instead of ``--targets``) runs every system for ``--max-sweeps`` and reads the issue's
targets off the curves afterwards: 1.2x and 1.1x the best perplexity any system of the run reached, and each
anchor's own final perplexity; ``--synth-heldout-docs`` caps a generated corpus's held-out documents::

    nice python benchmarks/bench_gibbs.py --synth-docs 80000 --synth-heldout-docs 2000 --topics 100 \
        --max-sweeps 60 --auto-targets --target-systems topicflow,topicflow-par-2,tomotopy-2 --dist-threads 2

``--memory-tokens 2e6 8e6 32e6`` instead measures the peak resident memory of the whole process tree of a
``fit_gibbs`` run (threaded executor, ``--sweeps`` sweeps, the default blocks) on generated stores of those
sizes (``topicflow synth``: 10,000 terms, 50 true topics, 100 tokens per document), after two unmeasured
fits that fill numba's cache (else the first row measures the compiler)::

    nice python benchmarks/bench_gibbs.py --memory-tokens 2e6 8e6 32e6 --topics 100 --sweeps 3
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vb_lda import (  # noqa: E402
    add_corpus_arguments,
    build_real,
    heldout_blocks,
    load_csr,
    perplexity,
)

from topicflow.metrics.heldout import split_doc_tokens
from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.scores import (
    joint_log_likelihood,
    topic_word_distribution,
)
from topicflow.models.lda.gibbs.state import (
    GibbsParams,
    GibbsState,
    state_from_topics,
    tokens_from_block,
)
from topicflow.models.lda.synth import SynthParams, draw_shard, draw_topic_word

ALPHA, BETA = 0.1, 0.01
EVAL_SEED = 12345
SYNTH_TRUE_TOPICS, SYNTH_TERMS, SYNTH_DOC_LEN = 50, 10_000, 100

#: A system run: (seconds of the timed sweeps, final state rebuilt from the system's assignments).
Runner = Callable[[DocBlock, int, int, int, int], tuple[float, GibbsState]]


# ----------------------------------------------------------------------------- data


def load_jsonl(inputs: list[Path], workdir: Path) -> tuple[DocBlock, list[tuple[DocBlock, DocBlock]]]:
    """Training block and held-out (observed, held-out) pairs, built as bench_vb_lda.py builds them (stores
    left in ``workdir`` by an earlier run are reused)."""
    from topicflow.io.corpus.reader import Corpus

    if (workdir / "train.zarr").exists() and (workdir / "test.zarr").exists():
        train, test = Corpus.open(workdir / "train.zarr"), Corpus.open(workdir / "test.zarr")
    else:
        train, test = build_real(inputs, workdir, None)
    return block_from_csr(load_csr(train)), heldout_blocks(train, test)


def load_synth(n_docs: int, heldout_docs: int | None = None) -> tuple[DocBlock, list[tuple[DocBlock, DocBlock]]]:
    """The first ``n_docs`` documents of one synthetic draw for training, the next tenth (or ``heldout_docs``)
    held out."""
    n_test = max(200, n_docs // 10) if heldout_docs is None else heldout_docs
    params = SynthParams(n_docs=n_docs + n_test, n_topics=SYNTH_TRUE_TOPICS, n_terms=SYNTH_TERMS,
                         doc_length=SYNTH_DOC_LEN, doc_topic_prior=(ALPHA,), topic_word_prior=BETA, seed=1)
    topic_word = {"default": draw_topic_word(params, "default")}

    def block(first: int, count: int) -> DocBlock:
        indptr, term_ids, counts = draw_shard(params, topic_word, first, count).bags["default"]
        csr = sp.csr_matrix((counts, term_ids, indptr), shape=(count, SYNTH_TERMS))
        return block_from_csr(csr, first_doc=first)

    return block(0, n_docs), [split_doc_tokens(block(n_docs, n_test), seed=EVAL_SEED)]


# ----------------------------------------------------------------------------- systems


def run_topicflow(block: DocBlock, k: int, warmup: int, sweeps: int, seed: int) -> tuple[float, GibbsState]:
    params = GibbsParams(n_topics=k, doc_topic_prior=ALPHA, topic_word_prior=BETA, seed=seed)
    state = run_sweeps(initial_state(block, params), params, warmup)
    started = time.perf_counter()
    state = run_sweeps(state, params, sweeps)
    return time.perf_counter() - started, state


def _tomotopy(workers: int) -> Runner:
    def run(block: DocBlock, k: int, warmup: int, sweeps: int, seed: int) -> tuple[float, GibbsState]:
        import tomotopy as tp

        token_indptr, token_terms = tokens_from_block(block)
        model = tp.LDAModel(k=k, alpha=ALPHA, eta=BETA, seed=seed)
        model.optim_interval = 0
        kept = []
        for d in range(block.n_docs):
            words = token_terms[token_indptr[d]:token_indptr[d + 1]]
            if words.size:  # tomotopy rejects empty documents
                model.add_doc([str(w) for w in words])
                kept.append(d)
        model.train(warmup, workers=workers)
        started = time.perf_counter()
        model.train(sweeps, workers=workers)
        seconds = time.perf_counter() - started
        vocab_term = np.array([int(v) for v in model.vocabs], dtype=np.int32)
        terms = np.concatenate([vocab_term[np.asarray(doc.words)] for doc in model.docs])
        topics = np.concatenate([np.asarray(doc.topics, dtype=np.int32) for doc in model.docs])
        lengths = np.zeros(block.n_docs, dtype=np.int64)
        lengths[kept] = [len(doc.words) for doc in model.docs]
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        return seconds, state_from_topics(indptr, terms, topics, block.n_terms, GibbsParams(k, ALPHA, BETA))

    return run


def run_lda(block: DocBlock, k: int, warmup: int, sweeps: int, seed: int) -> tuple[float, GibbsState]:
    import lda

    logging.getLogger("lda").setLevel(logging.WARNING)
    model = lda.LDA(n_topics=k, n_iter=warmup + sweeps, alpha=ALPHA, eta=BETA, random_state=seed)
    model._initialize(block.to_csr().astype(np.int64))
    rands, shuffler = model._rands.copy(), np.random.RandomState(seed)
    for _ in range(warmup):
        shuffler.shuffle(rands)
        model._sample_topics(rands)
    started = time.perf_counter()
    for _ in range(sweeps):
        shuffler.shuffle(rands)
        model._sample_topics(rands)
    seconds = time.perf_counter() - started
    order = np.argsort(model.DS, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(model.DS, minlength=block.n_docs))])
    state = state_from_topics(indptr, model.WS[order].astype(np.int32), model.ZS[order].astype(np.int32),
                              block.n_terms, GibbsParams(k, ALPHA, BETA))
    return seconds, state


SYSTEMS: dict[str, Runner] = {
    "topicflow": run_topicflow,
    "tomotopy": _tomotopy(1),
    "tomotopy-2": _tomotopy(2),
    "lda": run_lda,
}
SINGLE_RUN = {"lda"}


# ----------------------------------------------------------------------------- distributed route


def _store_of(block: DocBlock, workdir: Path) -> Path:
    from topicflow.testing.corpora import write_test_store

    path = workdir / f"train-{block.n_docs}"
    if not path.exists():
        write_test_store(path, {"default": block.to_csr()}, shard_size=1000)
    return path


def run_dist(block: DocBlock, k: int, sweeps: int, seed: int, threads: int, workdir: Path,
             on_sweep: Callable[[Any, Any], None] | None = None, init: str = "random") -> Any:
    """The AD-LDA route on Dask's threaded scheduler with ``threads`` threads; returns the GibbsFitResult."""
    import dask

    from topicflow.io.corpus.reader import Corpus
    from topicflow.pipeline.gibbs import GibbsConfig, fit_gibbs

    corpus = Corpus.open(_store_of(block, workdir))
    config = GibbsConfig(n_topics=k, sweeps=sweeps, doc_topic_prior=ALPHA, learn_alpha=False,
                         topic_word_prior=BETA, seed=seed, init=init)
    with dask.config.set(num_workers=threads):
        return fit_gibbs(corpus, config, on_sweep=on_sweep)


def run_stream_command(store: Path, k: int, sweeps: int, seed: int, workdir: Path,
                       start: str, parts: int = 1) -> tuple[float, float, np.ndarray]:
    """``topicflow stream --algo gibbs`` for ``sweeps`` sweeps, in a fresh process: on one thread, or with
    ``parts`` > 1 partitioned sweeps of ``parts`` parts on two threads.

    Returns its training seconds (the trace's clock: the start and the sweeps, evaluation excluded),
    the whole command's wall time, and the saved model's phi.
    """
    import shutil
    import subprocess

    from topicflow.io.models.store import load_model

    out = workdir / f"stream-{start}"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "topicflow", "stream", str(store), "--out", str(out), "--algo", "gibbs",
               "--gibbs-start", start, "--topics", str(k), "--doc-topic-prior", str(ALPHA), "--topic-word-prior",
               str(BETA), "--sweeps", str(sweeps), "--eval-every", str(sweeps), "--seed", str(seed),
               "--local-cluster", "threads", "--workers", "1", "--threads-per-worker", "1" if parts == 1 else "2"]
    if parts > 1:
        command += ["--gibbs-partitions", str(parts), "--gibbs-threads", "2"]
    clock = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - clock
    last = json.loads((out / "trace.jsonl").read_text().splitlines()[-1])
    assert last["sweeps"] == sweeps, last
    topic_word = load_model(out / "model").state.topic_word_var["default"]
    return float(last["seconds"]), wall, topic_word / topic_word.sum(axis=1, keepdims=True)


def measure_dist(block: DocBlock, pairs: list, k: int, args: argparse.Namespace, threads: int,
                 workdir: Path) -> dict[str, Any]:
    """Best-of-repeats tokens/s of the distributed route over the timed sweeps (its own per-sweep trace)."""
    import resource

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    times, cpu_ms, result = [], [], None
    for _ in range(args.repeats):
        before = cpu()
        result = run_dist(block, k, args.warmup + args.sweeps, args.seed, threads, workdir)
        cpu_ms.append((cpu() - before) * 1000 / (args.warmup + args.sweeps))
        times.append(sum(r.seconds for r in result.trace[args.warmup:]))
    assert result is not None
    best = min(times)
    phi = result.state.topic_word()["default"]
    return {
        "system": f"topicflow-dist-{threads}", "seconds": best, "all_seconds": [round(t, 4) for t in times],
        "cpu_ms_per_sweep": min(cpu_ms), "all_cpu_ms_per_sweep": [round(c, 1) for c in cpu_ms],
        "tokens_per_second": block.n_tokens * args.sweeps / best, "sweeps_per_second": args.sweeps / best,
        "log_lik_per_token": result.trace[-1].log_likelihood_per_token,
        "perplexity": perplexity(pairs, phi, np.full(k, ALPHA)),
    }


def memory_rows(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    """Peak RSS of a Gibbs fit (threaded executor) in a fresh process on generated stores of growing size."""
    import subprocess

    from _memory import measure_process_tree

    rows = []
    for tokens in args.memory_tokens:
        n_docs = int(tokens) // SYNTH_DOC_LEN
        store = workdir / f"synth-{n_docs}"
        if not store.exists():
            subprocess.run([sys.executable, "-m", "topicflow", "synth", "--out", str(store), "--docs", str(n_docs),
                            "--topics", str(SYNTH_TRUE_TOPICS), "--vocab", str(SYNTH_TERMS), "--doc-length",
                            str(SYNTH_DOC_LEN), "--seed", "1", "--workers", "1"], check=True, capture_output=True)
        for k in args.topics:
            if not rows:  # fill numba's cache first: compiling the kernels would be measured, not the fit
                warm = ("from topicflow.io.corpus.reader import Corpus; from topicflow.pipeline.gibbs import "
                        f"GibbsConfig, fit_gibbs; fit_gibbs(Corpus.open({str(store)!r}), GibbsConfig(n_topics={k}, "
                        "sweeps=1, init='sequential', block_size=10**9))")
                subprocess.run([sys.executable, "-c", warm], check=True, capture_output=True)
                subprocess.run([sys.executable, "-c", warm.replace("init='sequential', ", "")], check=True,
                               capture_output=True)
            code = ("import json, time; from topicflow.io.corpus.reader import Corpus; "
                    "from topicflow.pipeline.gibbs import GibbsConfig, fit_gibbs; t = time.perf_counter(); "
                    f"r = fit_gibbs(Corpus.open({str(store)!r}), GibbsConfig(n_topics={k}, sweeps={args.sweeps})); "
                    "print(json.dumps({'n_tokens': int(r.topic_counts.sum()), 'seconds': time.perf_counter() - t, "
                    "'sweep_seconds': [x.seconds for x in r.trace], "
                    "'block_size': r.saved_model.info.settings['block_size']}))")
            result, wall, peak = measure_process_tree([sys.executable, "-c", code], what=f"gibbs fit of {store}")
            row = {"mode": "memory", "K": k, "n_docs": n_docs, **result, "wall_seconds": wall, "peak_mb": peak}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print(f"{'K':>4} {'tokens':>10} {'block docs':>10} {'peak MB':>8} {'s/sweep':>8}")
    for row in rows:
        print(f"{row['K']:>4} {row['n_tokens']:>10} {row['block_size']:>10} {row['peak_mb']:>8.0f} "
              f"{min(row['sweep_seconds']):>8.2f}")
    return rows


def time_to_targets(name: str, block: DocBlock, pairs: list, k: int, args: argparse.Namespace,
                    workdir: Path) -> dict[str, Any]:
    """Training seconds (evaluation excluded, start included) until each target perplexity is reached."""
    targets = sorted(args.targets, reverse=True)
    reached: dict[str, float | None] = {str(t): None for t in targets}
    curve: list[tuple[int, float, float]] = []
    curve_walls: list[tuple[int, float]] = []  # the stream command's whole wall time per sweep count

    def note(sweep: int, seconds: float, phi: np.ndarray) -> bool:
        value = perplexity(pairs, phi, np.full(k, ALPHA))
        curve.append((sweep, round(seconds, 4), round(value, 2)))
        for target in targets:
            if reached[str(target)] is None and value <= target:
                reached[str(target)] = seconds
        return all(v is not None for v in reached.values())

    started = time.perf_counter()

    class Done(Exception):
        pass

    if name.startswith(("topicflow-dist-", "topicflow-distseq-", "topicflow-distcvb-")):
        def on_sweep(record: Any, model: Any) -> None:
            if note(record.sweep, record.elapsed, model.topic_word()["default"]):
                raise Done

        try:
            run_dist(block, k, args.max_sweeps, args.seed, int(name.rsplit("-", 1)[1]), workdir, on_sweep,
                     init="sequential" if name.startswith("topicflow-distseq-") else
                     "scvb0" if name.startswith("topicflow-distcvb-") else "random")
        except Done:
            pass
    elif name in ("topicflow-stream", "topicflow-stream-seq", "topicflow-stream-par-2", "topicflow-stream-cvbpar-2"):
        # the command: one run per sweep count
        store = _store_of(block, workdir)
        start = "sequential" if name.endswith("-seq") else "scvb0" if "cvb" in name else "random"
        for sweep in range(1, args.max_sweeps + 1):
            seconds, wall, phi = run_stream_command(store, k, sweep, args.seed, workdir, start,
                                                    2 if name.endswith("par-2") else 1)
            curve_walls.append((sweep, round(wall, 3)))
            if note(sweep, seconds, phi):
                break
    elif name == "topicflow" and args.per_sweep_calls:  # sessions 13-15: one run_sweeps call per sweep
        params = GibbsParams(n_topics=k, doc_topic_prior=ALPHA, topic_word_prior=BETA, seed=args.seed)
        clock = time.perf_counter()
        state = initial_state(block, params)
        spent = time.perf_counter() - clock
        for sweep in range(1, args.max_sweeps + 1):
            clock = time.perf_counter()
            state = run_sweeps(state, params, 1)
            spent += time.perf_counter() - clock
            if note(sweep, spent, topic_word_distribution(state)):
                break
    elif name in ("topicflow", "topicflow-seq", "topicflow-cvb") or name.startswith(
            ("topicflow-par-", "topicflow-parseq-", "topicflow-cvbpar-")):
        # one chain; its evaluation in the per-sweep callback, off the clock
        params = GibbsParams(n_topics=k, doc_topic_prior=ALPHA, topic_word_prior=BETA, seed=args.seed)
        # the sequential and SCVB0 starts are on the clock; the state after the start is "sweep 0"
        init = "scvb0" if "cvb" in name else "sequential" if "seq" in name else "random"
        parts = int(name.rsplit("-", 1)[1]) if name.startswith(("topicflow-par", "topicflow-cvbpar")) else 1
        clock, off = time.perf_counter(), 0.0

        def on_state(state: GibbsState) -> None:
            nonlocal off
            entered = time.perf_counter()
            done = note(state.sweeps_done, entered - clock - off, topic_word_distribution(state))
            off += time.perf_counter() - entered
            if done:
                raise Done

        try:
            start = initial_state(block, params, init=init, threads=2 if parts > 1 else 1)
            on_state(start)
            run_sweeps(start, params, args.max_sweeps, on_sweep=on_state, partitions=parts,
                       threads=2 if parts > 1 else 1)
        except Done:
            pass
    elif name.startswith("tomotopy"):
        import tomotopy as tp

        token_indptr, token_terms = tokens_from_block(block)
        clock, off = time.perf_counter(), 0.0
        model = tp.LDAModel(k=k, alpha=ALPHA, eta=BETA, seed=args.seed)
        model.optim_interval = 0
        for d in range(block.n_docs):
            words = token_terms[token_indptr[d]:token_indptr[d + 1]]
            if words.size:
                model.add_doc([str(w) for w in words])
        workers = 2 if name == "tomotopy-2" else 1

        def tomotopy_phi(model: Any) -> np.ndarray:
            vocab_term = np.array([int(v) for v in model.vocabs], dtype=np.int64)  # reordered by the first train
            terms = np.concatenate([vocab_term[np.asarray(doc.words)] for doc in model.docs])
            topics = np.concatenate([np.asarray(doc.topics, dtype=np.int64) for doc in model.docs])
            counts = np.zeros((k, block.n_terms))
            np.add.at(counts, (topics, terms), 1.0)
            return (counts + BETA) / (counts.sum(axis=1, keepdims=True) + block.n_terms * BETA)

        if args.per_sweep_calls:  # sessions 13-15: one train(1) call per sweep
            spent = time.perf_counter() - clock
            for sweep in range(1, args.max_sweeps + 1):
                clock = time.perf_counter()
                model.train(1, workers=workers)
                spent += time.perf_counter() - clock
                if note(sweep, spent, tomotopy_phi(model)):
                    break
        else:  # one train call; the evaluation runs in its per-iteration callback, off the clock
            def on_iteration(model: Any, iteration: int, total: int) -> None:
                nonlocal off
                entered = time.perf_counter()
                done = iteration > 0 and note(iteration, entered - clock - off, tomotopy_phi(model))
                off += time.perf_counter() - entered
                if done:
                    raise Done

            try:
                model.train(args.max_sweeps, workers=workers, callback_interval=1, callback=on_iteration)
            except Done:
                pass
    row = {"system": name, "targets": reached, "wall_seconds": time.perf_counter() - started,
           "sweeps": len(curve), "final_perplexity": curve[-1][2] if curve else None, "curve": curve}
    if curve_walls:  # the command's whole wall time (start-up, saving) at the first sweep count reaching each
        walls = dict(curve_walls)
        row["command_wall_to_target"] = {
            str(t): next((walls[sweep] for sweep, _, value in curve if value <= t), None) for t in targets}
    return row


# ----------------------------------------------------------------------------- driver


def curve_time(curve: list, target: float) -> float | None:
    """Training seconds at the first point of a ``(sweep, seconds, perplexity)`` curve at or below ``target``."""
    return next((seconds for _, seconds, value in curve if value <= target), None)


def auto_targets(runs: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """The targets read off the curves: each anchor's final perplexity (its best run), 1.2x and 1.1x the best."""
    finals = {name: min(r["final_perplexity"] for r in rows) for name, rows in runs.items() if rows}
    best = min(min(point[2] for r in rows for point in r["curve"]) for rows in runs.values() if rows)
    targets = {f"{name} final": value for name, value in finals.items() if not name.startswith("topicflow")}
    return {"1.2x best": round(1.2 * best, 2), "1.1x best": round(1.1 * best, 2), **targets}


def print_auto_targets(k: int, runs: dict[str, list[dict[str, Any]]]) -> None:
    """Best time (over the repeats) of every system to every target of :func:`auto_targets`, as JSON and a table."""
    targets = auto_targets(runs)
    rows = []
    for name, found in runs.items():
        times = {label: min((t for t in (curve_time(r["curve"], value) for r in found) if t is not None), default=None)
                 for label, value in targets.items()}
        rows.append({"mode": "auto-targets", "K": k, "system": name, "targets": targets, "seconds_to": times,
                     "final_perplexity": min(r["final_perplexity"] for r in found),
                     "sweeps": found[0]["sweeps"]})
        print(json.dumps(rows[-1]), flush=True)
    print()
    labels = list(targets)
    print(f"{'K':>4} {'system':<22} " + " ".join(f"{label[:16]:>16}" for label in labels) + f" {'final':>8}")
    print(f"{'':>4} {'(target perplexity)':<22} " + " ".join(f"{targets[label]:>16.1f}" for label in labels))
    for row in rows:
        cells = " ".join(f"{'-' if row['seconds_to'][label] is None else format(row['seconds_to'][label], '.2f'):>16}"
                         for label in labels)
        print(f"{k:>4} {row['system']:<22} {cells} {row['final_perplexity']:>8.1f}")


def measure(name: str, block: DocBlock, pairs: list, k: int, args: argparse.Namespace) -> dict[str, Any]:
    """Best-of-repeats speed of one system and the quality of its last run."""
    times = []
    for repeat in range(1 if name in SINGLE_RUN else args.repeats):
        seconds, state = SYSTEMS[name](block, k, args.warmup, args.sweeps, args.seed)
        times.append(seconds)
    best = min(times)
    return {
        "system": name, "seconds": best, "all_seconds": [round(t, 4) for t in times],
        "tokens_per_second": block.n_tokens * args.sweeps / best,
        "log_lik_per_token": joint_log_likelihood(state) / block.n_tokens,
        "perplexity": perplexity(pairs, topic_word_distribution(state), np.full(k, ALPHA)),
    }


def warm_up_numba() -> None:
    block = block_from_csr(sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 3]])))
    run_topicflow(block, 3, 1, 1, 0)


def print_table(rows: list[dict[str, Any]]) -> None:
    print()
    print(f"{'K':>4} {'system':<11} {'sweeps':>6} {'seconds':>8} {'Mtok/s':>7} {'vs tomotopy':>11} "
          f"{'logp(w,z)/tok':>13} {'perplexity':>10}")
    for row in rows:
        ratio = row.get("speed_vs_tomotopy")
        print(f"{row['K']:>4} {row['system']:<11} {row['sweeps']:>6} {row['seconds']:>8.2f} "
              f"{row['tokens_per_second'] / 1e6:>7.2f} {'' if ratio is None else f'{ratio:.2f}x':>11} "
              f"{row['log_lik_per_token']:>13.4f} {row['perplexity']:>10.1f}")


def main(argv: list[str] | None = None) -> int:
    memory = argparse.ArgumentParser(add_help=False)
    memory.add_argument("--memory-tokens", nargs="*", type=float, default=[])
    memory.add_argument("--topics", nargs="+", type=int, default=[100])
    memory.add_argument("--sweeps", type=int, default=3)
    memory.add_argument("--workdir", type=Path, default=None)
    early, _ = memory.parse_known_args(argv)
    if early.memory_tokens:  # memory mode: generated stores only
        memory_rows(early, early.workdir or Path(tempfile.mkdtemp(prefix="bench-gibbs-mem-")))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(parser, synth_vocab=False)
    parser.add_argument("--topics", nargs="+", type=int, default=[20, 100, 500])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--warmup", type=int, default=5, help="untimed sweeps after initialization")
    parser.add_argument("--sweeps", type=int, default=50, help="timed sweeps")
    parser.add_argument("--repeats", type=int, default=3, help="runs per system (best time kept); lda runs once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--dist-threads", nargs="*", type=int, default=[],
                        help="add the distributed AD-LDA route at these numbers of Dask threads")
    parser.add_argument("--targets", nargs="*", type=float, default=[],
                        help="time-to-perplexity mode: these held-out perplexity targets")
    parser.add_argument("--max-sweeps", type=int, default=200, help="time-to-perplexity mode: sweeps at most")
    parser.add_argument("--target-systems", default="topicflow,tomotopy-2",
                        help="time-to-perplexity mode: systems besides topicflow-dist-<n>")
    parser.add_argument("--target-repeats", type=int, default=1,
                        help="time-to-perplexity mode: runs per system, taking turns (best time per target kept)")
    parser.add_argument("--auto-targets", action="store_true",
                        help="time-to-perplexity mode without --targets: every system runs --max-sweeps, and the "
                             "targets are read off the curves afterwards (each anchor's final perplexity, 1.2x and "
                             "1.1x the best any system reached)")
    parser.add_argument("--synth-heldout-docs", type=int, default=None,
                        help="generated corpus: held-out documents (default: a tenth of --synth-docs, at least 200)")
    parser.add_argument("--per-sweep-calls", action="store_true",
                        help="time-to-perplexity mode: one run_sweeps / train(1) call per sweep, as in sessions "
                             "13-15, instead of one call with a per-sweep callback")
    parser.add_argument("--memory-tokens", nargs="*", type=float, default=[],
                        help="memory mode (no corpus options): generated stores of about these many tokens")
    args = parser.parse_args(argv)

    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    if args.jsonl:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-gibbs-"))
        block, pairs = load_jsonl(args.jsonl, workdir)
        corpus = "+".join(p.stem for p in args.jsonl)
    else:
        block, pairs = load_synth(args.synth_docs, args.synth_heldout_docs)
        corpus = f"synth-{args.synth_docs}"
    warm_up_numba()
    info = {"corpus": corpus, "n_docs": block.n_docs, "n_tokens": block.n_tokens, "n_terms": block.n_terms,
            "heldout_docs": sum(obs.n_docs for obs, _ in pairs), "warmup": args.warmup, "sweeps": args.sweeps,
            "alpha": ALPHA, "beta": BETA, "machine": platform.processor() or platform.machine()}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-gibbs-"))
    if args.dist_threads:
        run_dist(block_from_csr(sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 3]]))), 3, 2, 0, 1, workdir)  # numba
    if args.auto_targets and args.targets:
        parser.error("--auto-targets reads the targets off the curves: give --targets or --auto-targets, not both")
    if args.auto_targets:
        args.targets = [0.0]  # never reached: every system runs --max-sweeps
    if args.targets:
        for k in args.topics:
            names = [n for n in args.target_systems.split(",") if n] + [f"topicflow-dist-{t}" for t in args.dist_threads]
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
            for _ in range(args.target_repeats):  # the systems take turns, so that load falls on all of them
                for name in names:
                    row = {"K": k, **info, "mode": "targets", **time_to_targets(name, block, pairs, k, args, workdir)}
                    print(json.dumps(row), flush=True)
                    runs[name].append(row)
            found = []
            for name in names:  # best of the repeats, per target
                best = dict(runs[name][-1])
                for t in args.targets:
                    times = [r["targets"][str(t)] for r in runs[name]]
                    reached = [x for x in times if x is not None]
                    best["targets"] = {**best["targets"], str(t): min(reached) if reached else None}
                    best[f"all_{format(t, 'g')}"] = times
                    walls = [r["command_wall_to_target"][str(t)] for r in runs[name] if "command_wall_to_target" in r]
                    if any(w is not None for w in walls):
                        best.setdefault("command_wall_to_target", {})[str(t)] = min(w for w in walls if w is not None)
                found.append(best)
            if args.auto_targets:
                print_auto_targets(k, runs)
                continue
            print()
            print(f"{'K':>4} {'system':<26} " + " ".join(f"{'t<=' + format(t, 'g'):>10}" for t in args.targets)
                  + f" {'sweeps':>6} {'final':>8}")
            for row in found:
                cells = " ".join(f"{'-' if row['targets'][str(t)] is None else format(row['targets'][str(t)], '.2f'):>10}"
                                 for t in args.targets)
                print(f"{row['K']:>4} {row['system']:<26} {cells} {row['sweeps']:>6} {row['final_perplexity']:>8}")
            for row in found:
                if "command_wall_to_target" in row:
                    cells = " ".join(f"{format(row['command_wall_to_target'].get(str(t)) or float('nan'), '.2f'):>10}"
                                     for t in args.targets)
                    print(f"{row['K']:>4} {row['system'] + ' (wall)':<26} {cells}")
        return 0
    rows = []
    for k in args.topics:
        results = [measure(name, block, pairs, k, args) for name in args.systems.split(",") if name]
        results += [measure_dist(block, pairs, k, args, threads, workdir) for threads in args.dist_threads]
        anchor = next((r for r in results if r["system"] == "tomotopy"), None)
        for result in results:
            row = {"K": k, **info, **result}
            if anchor is not None:
                row["speed_vs_tomotopy"] = result["tokens_per_second"] / anchor["tokens_per_second"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
