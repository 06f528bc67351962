"""Driver of the streaming samplers: initialize, run many seeds side by side as actors, trace, save.

For each run (seed ``seed + r``) the driver

1. fits the initialization: batch collapsed Gibbs on the first ``init_docs`` documents, the best of
   ``init_trials`` independent trials (May et al. 2014), run as parallel tasks; or one
   initialization shared by every run (``init_shared``, saved as ``OUT/init``), a saved one
   (``init_model``), or none (``init_docs=0``: the particles start empty);
2. starts an actor holding the run's sampler (:mod:`topicflow.pipeline.streaming.actors`), which reads the rest
   of the stream from the store itself;
3. advances every actor to the next evaluation point together, collects one trace record per run
   (in-sample NMI, out-of-sample NMI and perplexity on a test store, ESS, resampling events, memory),
   and saves the actors' snapshots every ``checkpoint_every`` points.

Everything a run does is a function of its seed and the stream, so the same seed gives the same
trace whatever the number of workers, and a stream resumed from a snapshot (``resume=True``, possibly
after ``topicflow append`` added documents) continues exactly as if it had never stopped.
``algorithm="gibbs"`` runs batch collapsed Gibbs over the whole corpus instead, evaluated every
``eval_every`` sweeps: the reference the online samplers are measured against.
"""
from __future__ import annotations

import concurrent.futures
import logging
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, TopicflowError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.stream_state import (
    RunState,
    read_stream_state,
    write_stream_state,
)
from topicflow.io.output_paths import output_location
from topicflow.io.storage import StoragePath
from topicflow.models.common.blocks import expand_tokens, token_docs
from topicflow.models.lda.gibbs import state as gibbs_state
from topicflow.models.lda.streaming import particle_filter
from topicflow.pipeline.cluster import actor_of, actor_result, current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.streaming.actors import (
    GibbsActor,
    LabelBook,
    ParticleFilterActor,
    StreamSource,
    stream_source,
)
from topicflow.pipeline.streaming.config import StreamConfig, StreamResult
from topicflow.pipeline.streaming.init_trials import (
    InitTrial,
    best_trial,
    run_initialization_trial,
    trial_seed,
)
from topicflow.pipeline.streaming.outputs import (
    StreamOutputs,
    TraceRotation,
    check_resumable,
    check_same_stream,
    held_out_set,
    stream_model,
    summarize,
)

log = logging.getLogger(__name__)

#: Attempts at one call on a run's actor when workers die under it.
MAX_ATTEMPTS = 3


# ----------------------------------------------------------------------------- initialization


def initialize_runs(corpus: Corpus, source: StreamSource, config: StreamConfig, client: Any,
                    out: Path | StoragePath | None = None) -> list[RunState]:
    """Initial snapshot of every run.

    As ``config.particles`` says: the particles start empty (``init_docs=0``), from a saved initial
    model (``init_model``), from one initialization shared by every run (``init_shared``, the best
    of ``init_trials``; saved to ``OUT/init`` when ``out`` is given), or each run from the best of its
    own ``init_trials`` Gibbs trials on the prefix.
    """
    from topicflow.pipeline.streaming.actors import DocumentStream

    settings = config.particles
    n_stream = source.n_docs if config.run.max_docs is None else min(source.n_docs, config.run.max_docs)
    seeds = [config.run_seed(run) for run in range(config.run.runs)]
    if settings.init_model is not None:
        trial = load_initial_model(settings.init_model, source, config)
        prefix = DocumentStream(source).read(0, trial.n_fitted_docs)
        return [initial_run_state(config, source, prefix, trial, seed) for seed in seeds]
    n_prefix = settings.prefix_docs(n_stream)
    if n_prefix == 0:
        return [empty_run_state(config, source, seed) for seed in seeds]
    prefix = DocumentStream(source).read(0, n_prefix)
    if settings.init_shared:
        trials = _run_trials(prefix, config, [trial_seed(config.run.seed, t) for t in range(settings.init_trials)],
                             client)
        chosen = trials[best_trial([t.score for t in trials])]
        log.info("shared initialization: trial seed %d chosen (scores %s)", chosen.seed,
                 ", ".join(f"{t.score:.4f}" for t in trials))
        if out is not None:
            save_initial_model(out / "init", chosen, config)
        return [initial_run_state(config, source, prefix, chosen, seed) for seed in seeds]
    n_trials = settings.init_trials
    trials = _run_trials(prefix, config, [trial_seed(seed, t) for seed in seeds for t in range(n_trials)], client)
    states = []
    for run, seed in enumerate(seeds):
        run_trials = trials[run * n_trials:(run + 1) * n_trials]
        chosen = run_trials[best_trial([t.score for t in run_trials])]
        log.info("run %d: initialization trial seed %d chosen (scores %s)", run, chosen.seed,
                 ", ".join(f"{t.score:.4f}" for t in run_trials))
        states.append(initial_run_state(config, source, prefix, chosen, seed))
    return states


def _run_trials(prefix: Any, config: StreamConfig, seeds: Sequence[int], client: Any) -> list[InitTrial]:
    """One batch Gibbs trial on the prefix per seed, as tasks on the cluster (threads without one)."""
    settings = config.particles
    kwargs: dict[str, Any] = {"sweeps": settings.init_sweeps, "select": settings.init_select,
                              "n_trials": settings.init_trials, "start": settings.init_start}
    if client is not None:
        shared = client.scatter(prefix, broadcast=False)
        futures = [client.submit(run_initialization_trial, shared, config.gibbs_params(seed), **kwargs, pure=False)
                   for seed in seeds]
        trials: list[InitTrial] = client.gather(futures)
        return trials
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda seed: run_initialization_trial(prefix, config.gibbs_params(seed), **kwargs),
                             seeds))


#: ``kind`` of a saved initial model (the ``stream.json`` of its directory).
INITIAL_MODEL_KIND = "topicflow-initial-model"


def save_initial_model(path: Path | StoragePath, trial: InitTrial, config: StreamConfig) -> None:
    """Write an initialization (the Gibbs state of the prefix) as a directory, for ``init_model``.

    Parameters
    ----------
    path : Path
        Directory to write (replaced atomically).
    trial : InitTrial
        The chosen initialization.
    config : StreamConfig
        The stream's settings (the model's K, alpha and beta are recorded).
    """
    arrays, meta = gibbs_state.to_arrays(trial.state)
    info = {"kind": INITIAL_MODEL_KIND, "seed": trial.seed, "n_fitted_docs": trial.n_fitted_docs,
            "score": None if math.isnan(trial.score) else trial.score, "n_topics": config.n_topics,
            "doc_topic_prior": config.doc_topic_prior, "topic_word_prior": config.topic_word_prior,
            "n_terms": int(trial.state.term_topic_counts.shape[0]), "init_sweeps": config.particles.init_sweeps,
            "init_start": config.particles.init_start, "init_select": config.particles.init_select}
    write_stream_state(output_location(path), info, [(arrays, meta)])


def load_initial_model(path: str | Path | StoragePath, source: StreamSource, config: StreamConfig) -> InitTrial:
    """Read an initialization saved by :func:`save_initial_model` and check it fits the stream.

    Parameters
    ----------
    path : str or Path
        The saved directory.
    source : StreamSource
        The stream it must be the prefix of.
    config : StreamConfig
        The stream's settings; K must match.

    Returns
    -------
    InitTrial

    Raises
    ------
    InvalidParameterError
        Not an initial model, another K or vocabulary size, or the stream's first documents are not
        the ones it was fitted on.
    """
    from topicflow.pipeline.streaming.actors import DocumentStream

    info, runs = read_stream_state(output_location(path))
    if info.get("kind") != INITIAL_MODEL_KIND or len(runs) != 1:
        raise InvalidParameterError(f"{str(path)!r} is not a saved initial model (OUT/init of a stream run with "
                                    "init_shared); pass the directory written there", path=str(path))
    state = gibbs_state.from_arrays(*runs[0])
    n_docs, n_terms = int(info["n_fitted_docs"]), int(info["n_terms"])
    if int(info["n_topics"]) != config.n_topics or n_terms != source.n_terms:
        raise InvalidParameterError(
            f"the initial model {str(path)!r} has K={info['n_topics']} and {n_terms} terms but the stream has "
            f"K={config.n_topics} and {source.n_terms} terms; save an initial model from this store", path=str(path))
    prefix = DocumentStream(source).read(0, n_docs)
    ours = expand_tokens(prefix)
    if prefix.n_docs != n_docs or not (np.array_equal(ours[0], state.token_indptr)
                                       and np.array_equal(ours[1], state.token_terms)):
        raise InvalidParameterError(
            f"the initial model {str(path)!r} was fitted on other documents than the first {n_docs} of "
            f"{source.store!r}; start from the store it was saved with", path=str(path))
    score = info.get("score")
    return InitTrial(seed=int(info["seed"]), score=math.nan if score is None else float(score), state=state,
                     n_fitted_docs=n_docs)


def empty_run_state(config: StreamConfig, source: StreamSource, seed: int) -> RunState:
    """Snapshot of a run without initialization (``init_docs=0``): the particles start with no counts."""
    params = config.pf_params(source.n_terms, seed)
    cloud = particle_filter.initial_cloud(params, np.zeros(0, np.int32), np.zeros(0, np.int64),
                                          np.zeros(0, np.int32), next_doc=0)
    arrays, cloud_meta = particle_filter.cloud_to_arrays(cloud)
    out: dict[str, Any] = {f"cloud/{k}": v for k, v in arrays.items()}
    out.update(LabelBook().arrays())
    meta = {"kind": "particle_filter", "position": 0, "tokens_seen": 0, "seconds": 0.0, "label_codes": {},
            "cloud": cloud_meta}
    return out, meta


def initial_run_state(config: StreamConfig, source: StreamSource, prefix: Any, trial: InitTrial, seed: int) -> RunState:
    """Snapshot of a run that starts from ``trial``: every particle holds the trial's assignments."""
    state = trial.state
    params = config.pf_params(source.n_terms, seed)
    docs = token_docs(state.token_indptr, first_doc=state.first_doc)
    cloud = particle_filter.initial_cloud(params, state.token_terms, docs, state.topics)
    book = LabelBook()
    book.add(None if prefix.labels is None else prefix.labels[: trial.n_fitted_docs],
             np.argmax(state.doc_topic_counts, axis=1))
    arrays, cloud_meta = particle_filter.cloud_to_arrays(cloud)
    out = {f"cloud/{k}": v for k, v in arrays.items()}
    out.update(book.arrays())
    meta = {"kind": "particle_filter", "position": trial.n_fitted_docs, "tokens_seen": int(state.token_terms.shape[0]),
            "seconds": 0.0, "label_codes": book.codes, "cloud": cloud_meta, "init_seed": trial.seed,
            "init_score": None if math.isnan(trial.score) else trial.score}
    return out, meta


# ----------------------------------------------------------------------------- running


class ActorSet:
    """The runs' actors, on the cluster (one Dask actor each) or as local objects run by threads.

    Actors die with their worker. The set keeps each run's last snapshot and the evaluation points
    advanced since; a run whose actor is lost is rebuilt from its snapshot on a live worker and
    replayed to where it was. Every run is a pure function of its seed and the stream, so the replay
    ends in the very state the lost actor had.
    """

    def __init__(self, client: Any, actor_class: type, args: Sequence[tuple[Any, ...]]) -> None:
        self.client = client
        self.actor_class = actor_class
        self.args = [tuple(a) for a in args]  # (source, params, state, held_out); the state is replaced by snapshots
        self.replay: list[int] = []
        self._pool = None if client is not None else concurrent.futures.ThreadPoolExecutor(max_workers=2)
        if client is None:
            self.actors = [actor_class(*a) for a in self.args]
        else:
            futures = [client.submit(actor_class, *a, actor=True, pure=False) for a in self.args]
            self.actors = [actor_of(f) for f in futures]

    def advance(self, point: int, evaluate: bool) -> list[Any]:
        results = self.call("advance", point, evaluate)
        self.replay.append(point)
        return results

    def snapshots(self) -> list[RunState]:
        """Every run's state; also the point a lost actor is rebuilt from."""
        snapshots = self.call("snapshot")
        self.args = [(a[0], a[1], snapshot, *a[3:]) for a, snapshot in zip(self.args, snapshots)]
        self.replay = []
        return snapshots

    def call(self, method: str, *args: Any) -> list[Any]:
        if self.client is None:
            assert self._pool is not None
            return list(self._pool.map(lambda actor: getattr(actor, method)(*args), self.actors))
        pending = [self._start(actor, method, args) for actor in self.actors]
        return [self._result(run, future, method, args) for run, future in enumerate(pending)]

    @staticmethod
    def _start(actor: Any, method: str, args: tuple[Any, ...]) -> Any:
        """The call's future, or None when the actor is already known to be lost (the call is retried)."""
        try:
            return getattr(actor, method)(*args)
        except Exception:  # noqa: BLE001 - "Worker holding Actor was lost" once the scheduler removed it
            return None

    def _result(self, run: int, future: Any, method: str, args: tuple[Any, ...]) -> Any:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                if future is None:  # lost before the call started: start it again here, where it is retried
                    future = getattr(self.actors[run], method)(*args)
                return actor_result(self.client, self.actors[run], future)
            except TopicflowError:
                raise
            except Exception as exc:  # noqa: BLE001 - a lost worker surfaces as several comm/actor errors
                if attempt == MAX_ATTEMPTS:
                    raise
                log.warning("run %d lost its actor (%s: %s); rebuilding it from its last snapshot and replaying "
                            "%d evaluation points", run, type(exc).__name__, exc, len(self.replay))
                self.actors[run] = self._rebuild(run)
                future = None
        raise AssertionError("unreachable")

    def _rebuild(self, run: int) -> Any:
        actor = actor_of(self.client.submit(self.actor_class, *self.args[run], actor=True, pure=False))
        for point in self.replay:
            actor_result(self.client, actor, actor.advance(point, False))
        return actor

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        self.actors = []


def evaluation_points(start: int, stop: int, every: int) -> list[int]:
    """Stream positions (documents, or sweeps for Gibbs) after ``start`` where the runs report."""
    if stop <= start:
        return []
    return list(range((start // every + 1) * every, stop, every)) + [stop]


def run_particle_streams(
    corpus: Corpus,
    config: StreamConfig,
    *,
    client: Any = None,
    test_corpus: Corpus | None = None,
    out: Path | StoragePath | None = None,
    resume: bool = False,
    checkpoint_every: int = 0,
    recovery_every: int = 10,
    progress: ProgressReporter = NO_PROGRESS,
    trace: TraceRotation = TraceRotation(),
) -> StreamResult:
    """:func:`topicflow.pipeline.streaming.run_stream` for the actor-held samplers (gibbs, olda, incgibbs, pf).

    Each run is an actor on a worker (threads of this process without a cluster); the parameters and
    what it returns and raises are documented on :func:`~topicflow.pipeline.streaming.run_stream`.
    """
    client = current_client(client)
    source = stream_source(corpus)
    held_out = held_out_set(test_corpus, source, config)
    terms = corpus.vocabulary(source.language).terms
    stop = source.n_docs if config.run.max_docs is None else min(source.n_docs, config.run.max_docs)
    records: list[dict[str, Any]] = []  # this invocation's; the earlier ones are on disk
    outputs = None if out is None or resume else StreamOutputs(out, trace)
    if resume:
        if out is None:
            raise InvalidParameterError("resume needs the output directory of the stream to continue")
        info, states = read_stream_state(out / "state")
        check_resumable(info, config, out)
        check_same_stream(info, corpus, out)
        outputs = StreamOutputs(out, trace, info)
    elif config.algorithm == "gibbs":
        states = [({}, {"kind": "gibbs"}) for _ in range(config.run.runs)]
    else:
        states = initialize_runs(corpus, source, config, client, out)
    args: list[tuple[Any, ...]]
    if config.algorithm == "gibbs":
        args = [(source, config.gibbs_params(config.run_seed(r)), states[r], held_out, config.gibbs.optimize_every,
                 config.gibbs.gibbs_start, config.gibbs.gibbs_partitions, config.gibbs.gibbs_threads)
                for r in range(config.run.runs)]
        actors = ActorSet(client, GibbsActor, args)
        start, stop = int(states[0][1].get("gibbs", {}).get("sweeps_done", 0)), config.gibbs.sweeps
    else:
        args = [(source, config.pf_params(source.n_terms, config.run_seed(r)), states[r], held_out)
                for r in range(config.run.runs)]
        actors = ActorSet(client, ParticleFilterActor, args)
        start = int(states[0][1]["position"])
    try:
        if not resume:
            records.extend(_records(actors.advance(start, held_out is not None), start, config, terms))
        points = evaluation_points(start, stop, config.run.eval_every)
        for i, point in enumerate(progress.track(points, total=len(points), desc=f"stream {config.algorithm}", unit="eval")):
            new = _records(actors.advance(point, held_out is not None), point, config, terms)
            records.extend(new)
            _log_point(new)
            if outputs is not None and checkpoint_every and (i + 1) % checkpoint_every == 0 and i + 1 < len(points):
                outputs.save(corpus, config, records, actors.snapshots())
            elif recovery_every and (i + 1) % recovery_every == 0 and client is not None:
                actors.snapshots()
        snapshots = actors.snapshots()
        parameters = actors.call("model_parameters")[0]
    finally:
        actors.close()
    summary = summarize(records)
    if outputs is not None:
        outputs.save(corpus, config, records, snapshots)
        records, summary = outputs.records, outputs.summary
    counts, alpha, beta = parameters
    model = stream_model(corpus, algorithm=config.algorithm, topic_word_counts=counts, doc_topic_prior=alpha,
                         topic_word_prior=beta, info={"settings": config.to_dict(), "summary": summary})
    return StreamResult(config, records, summary, model, snapshots)


def _records(results: Sequence[Mapping[str, Any]], point: int, config: StreamConfig,
             terms: np.ndarray) -> list[dict[str, Any]]:
    """Trace records of one evaluation point, with each topic's top terms spelled out."""
    records = []
    for run, result in enumerate(results):
        record = {"run": run, "seed": config.run_seed(run), "point": point, **result}
        record["top_terms"] = [[str(terms[i]) for i in topic] for topic in result["top_terms"]]
        records.append(record)
    return records


def _log_point(records: Sequence[Mapping[str, Any]]) -> None:
    first = records[0]
    nmi = [r["nmi_in"] for r in records if r.get("nmi_in") is not None]
    log.info("docs %d: %s%.1f s per run", first["docs_seen"],
             f"in-sample NMI {np.mean(nmi):.3f} +- {np.std(nmi):.3f}, " if nmi else "",
             float(np.mean([r["seconds"] for r in records])))
