"""SGS and DSGS run the way the other streaming samplers are run: seeds, trace records, saved state, resume, nightly continuation."""
from __future__ import annotations

import concurrent.futures
import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel
from topicflow.io.models.stream_state import RunState, read_stream_state
from topicflow.io.storage import StoragePath
from topicflow.models.lda.streaming import sgs
from topicflow.pipeline.cluster import worker_addresses
from topicflow.pipeline.continuation import Continuation, Continuer, register_continuer
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.streaming.actors import (
    HeldOutSet,
    evaluate_topics,
    read_held_out,
    stream_source,
    top_term_ids,
)
from topicflow.pipeline.streaming.config import StreamConfig, StreamResult, sgs_params
from topicflow.pipeline.streaming.dsgs import run_dsgs
from topicflow.pipeline.streaming.outputs import (
    StreamOutputs,
    TraceRotation,
    check_resumable,
    check_same_stream,
    held_out_set,
    summarize,
)
from topicflow.pipeline.streaming.sgs import run_sgs, sgs_model

log = logging.getLogger(__name__)
def topic_report(state: sgs.SGSState, params: sgs.SGSParams, terms: np.ndarray, held_out: Any,
                 seed: int) -> dict[str, Any]:
    """Top terms per topic and, with held-out documents, their out-of-sample NMI and perplexity."""
    report: dict[str, Any] = {
        "top_terms": [[str(terms[i]) for i in topic] for topic in top_term_ids(state.term_topic_counts.T)]}
    if held_out is not None:
        report.update(evaluate_topics(sgs.topic_word_distribution(state, params), params.alpha, held_out, seed))
    return report


def sgs_run(corpus_path: str, config: StreamConfig, run: int, state: RunState | None,
            held_out: HeldOutSet | None) -> tuple[list[dict[str, Any]], RunState]:
    """One SGS run from ``state`` (None: empty counts) to the end of the stream (a task body)."""
    corpus = Corpus.open(corpus_path)
    params = sgs_params(config, config.run_seed(run))
    start = None if state is None else sgs.from_arrays(*state)
    held_out_docs = None if held_out is None else read_held_out(held_out)
    terms = corpus.vocabulary(corpus.languages[0]).terms
    records: list[dict[str, Any]] = []
    clock = {"seconds": 0.0 if state is None else float(state[1].get("seconds", 0.0)),
             "next": _next_point(0 if start is None else start.docs_seen, config.run.eval_every)}

    def on_minibatch(record: Any, current: sgs.SGSState) -> None:
        clock["seconds"] += record.seconds
        entry = {"run": run, "seed": config.run_seed(run), "point": current.docs_seen, "docs_seen": current.docs_seen,
                 "tokens_seen": current.tokens_seen, "seconds": clock["seconds"], "perplexity_train": record.perplexity,
                 "iterations": record.iterations, "stop_reason": record.stop_reason}
        last = config.run.max_docs is not None and current.docs_seen >= config.run.max_docs or \
            current.docs_seen >= len(corpus)
        if current.docs_seen >= clock["next"] or last:
            clock["next"] = _next_point(current.docs_seen, config.run.eval_every)
            entry.update(topic_report(current, params, terms, held_out_docs, config.run.seed))
        records.append(entry)

    result = run_sgs(corpus, params, batch_size=config.minibatch.batch_size, state=start, max_docs=config.run.max_docs,
                     on_minibatch=on_minibatch)
    arrays, meta = sgs.to_arrays(result.state)
    return records, (dict(arrays), {**meta, "seconds": clock["seconds"]})


def _next_point(docs_seen: int, every: int) -> int:
    return (docs_seen // every + 1) * every


def run_sgs_stream(
    corpus: Corpus, config: StreamConfig, *, client: Any, test_corpus: Corpus | None, out: Path | StoragePath | None,
    resume: bool, checkpoint_every: int = 0, recovery_every: int = 0, progress: ProgressReporter = NO_PROGRESS,
    trace: TraceRotation = TraceRotation(),
) -> StreamResult:
    """:func:`topicflow.pipeline.streaming.run_stream` for ``algorithm="sgs"`` or ``"dsgs"``.

    ``checkpoint_every`` and ``recovery_every`` concern runs held by actors; an SGS or DSGS run is a
    task (or a parameter server with sampler loops) whose state is saved when it ends.
    """
    source = stream_source(corpus)
    held_out = held_out_set(test_corpus, source, config)
    records: list[dict[str, Any]] = []
    states: list[RunState | None] = [None] * config.run.runs
    outputs = None if out is None or resume else StreamOutputs(out, trace)
    if resume:
        if out is None:
            raise InvalidParameterError("resume needs the output directory of the stream to continue")
        info, saved = read_stream_state(out / "state")
        check_resumable(info, config, out)
        check_same_stream(info, corpus, out)
        outputs = StreamOutputs(out, trace, info)
        states = list(saved)
    started = time.perf_counter()
    if config.algorithm == "dsgs":
        results = [dsgs_run(corpus, config, run, states[run], held_out, client)
                   for run in progress.track(range(config.run.runs), total=config.run.runs, desc="dsgs", unit="run")]
    elif client is not None:
        futures = [client.submit(sgs_run, str(corpus.path), config, run, states[run], held_out, pure=False)
                   for run in range(config.run.runs)]
        results = list(progress.track((f.result() for f in futures), total=config.run.runs, desc="sgs", unit="run"))
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda run: sgs_run(str(corpus.path), config, run, states[run], held_out),
                                    range(config.run.runs)))
    for new_records, _ in results:
        records.extend(new_records)
    records.sort(key=lambda r: (r["point"], r["run"]))
    snapshots = [state for _, state in results]
    log.info("%s: %d run(s) in %.1f s", config.algorithm, config.run.runs, time.perf_counter() - started)
    summary = summarize(records)
    if outputs is not None:  # records of this invocation; the trace and summary on disk keep the earlier ones
        outputs.save(corpus, config, records, snapshots)
        records, summary = outputs.records, outputs.summary
    model = sgs_saved_model(corpus, snapshots[0], config, summary)
    return StreamResult(config, records, summary, model, snapshots)


def sgs_saved_model(corpus: Corpus, snapshot: RunState, config: StreamConfig,
                    summary: Sequence[dict[str, Any]]) -> SavedModel:
    """Run 0 as a model that keeps the sampler's exact counts, so ``topicflow update`` can continue it."""
    arrays, meta = snapshot
    state = sgs.from_arrays(arrays, meta)
    params = sgs_params(config, config.run.seed)
    model = sgs_model(corpus, state, params, algorithm=config.algorithm, settings={}, summary=list(summary))
    info = model.info.with_changes(settings=config.to_dict(), sgs_state=dict(meta))
    return SavedModel(model.state, model.vocabularies, info,
                      sampler_state={name: np.asarray(value) for name, value in arrays.items()})


def continue_sgs_model(model: SavedModel, corpus: Corpus, *, client: Any,
                       progress: ProgressReporter = NO_PROGRESS) -> tuple[SavedModel, int, int]:
    """Continue a streaming-Gibbs model with the documents of ``corpus`` after the ones it has seen.

    Returns the new model, the new documents and the minibatches run. The counts continue exactly:
    the stream stopped and continued ends where one uninterrupted stream over the grown store would.
    """
    config = StreamConfig.from_dict(model.info.settings)
    if not model.sampler_state:
        raise InvalidParameterError("this streaming-Gibbs model has no sampler state to continue (saved by an older "
                                    "topicflow); run `topicflow stream` again")
    snapshot: RunState = (dict(model.sampler_state), dict(model.info.sgs_state or {}))
    before = int(snapshot[1]["docs_seen"])
    config = StreamConfig.from_dict({**config.to_dict(), "max_docs": None, "runs": 1})
    if config.algorithm == "dsgs":
        records, state = dsgs_run(corpus, config, 0, snapshot, None, client)
    else:
        records, state = sgs_run(str(corpus.path), config, 0, snapshot, None)
    previous = list(model.info.summary)
    # Bounded as summary.json: a model continued every night keeps the last points only.
    updated = sgs_saved_model(corpus, state, config,
                              (previous + summarize(records))[-TraceRotation().summary_points:])
    return updated, int(state[1]["docs_seen"]) - before, len(records)
def dsgs_run(corpus: Corpus, config: StreamConfig, run: int, state: RunState | None, held_out: HeldOutSet | None,
             client: Any) -> tuple[list[dict[str, Any]], RunState]:
    """One DSGS run on the whole cluster; held-out scores at its end (the loops report when they finish)."""
    params = sgs_params(config, config.run_seed(run))
    n_workers = config.minibatch.n_workers or (len(worker_addresses(client)) if client is not None else 2)
    start = None if state is None else sgs.from_arrays(*state)
    result = run_dsgs(corpus, params, batch_size=config.minibatch.batch_size, client=client, n_workers=n_workers,
                      staleness=config.minibatch.staleness, sync_first=config.minibatch.sync_first, state=start, max_docs=config.run.max_docs)
    seconds = 0.0 if state is None else float(state[1].get("seconds", 0.0))
    records = []
    docs_seen = 0 if start is None else start.docs_seen
    for record in result.records:
        docs_seen += record.docs
        records.append({"run": run, "seed": config.run_seed(run), "point": docs_seen, "docs_seen": docs_seen,
                        "perplexity_train": record.perplexity, "iterations": record.iterations,
                        "worker": record.worker, "lag": record.lag, "staleness": record.staleness,
                        "bytes_pushed": record.bytes_pushed, "bytes_fetched": record.bytes_fetched})
    seconds += result.seconds
    if records:
        records[-1]["seconds"] = seconds
        records[-1]["tokens_per_s"] = result.tokens_per_second
        terms = corpus.vocabulary(corpus.languages[0]).terms
        held_out_docs = None if held_out is None else read_held_out(held_out)
        records[-1].update(topic_report(result.state, params, terms, held_out_docs, config.run.seed))
    arrays, meta = sgs.to_arrays(result.state)
    return records, (dict(arrays), {**meta, "seconds": seconds})


def _check_sgs(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """New terms of the store's one language (a streaming-Gibbs model grows with the store)."""
    grown = len(corpus.vocabulary(corpus.languages[0])) - model.state.n_terms(model.state.languages[0])
    return {corpus.languages[0]: grown}


def _continue_sgs(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: Any, client: Any,
                  split_every: int | None, progress: ProgressReporter, model_path: Path) -> Continuation:
    """The stream continued with the documents after the ones the model has seen (its own settings)."""
    updated, new_docs, minibatches = continue_sgs_model(model, corpus, client=client, progress=progress)
    return Continuation(updated, new_docs, _check_sgs(model, corpus, model_path), minibatches,
                        {"docs_seen": (updated.info.sgs_state or {})["docs_seen"]})


register_continuer("sgs", Continuer(check=_check_sgs, run=_continue_sgs))
register_continuer("dsgs", Continuer(check=_check_sgs, run=_continue_sgs))
