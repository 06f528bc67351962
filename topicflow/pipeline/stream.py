"""Driver of the streaming samplers: initialize, run many seeds side by side as actors, trace, save.

For each run (seed ``seed + r``) the driver

1. fits the initialization: batch collapsed Gibbs on the first ``init_docs`` documents, the best of
   ``init_trials`` independent trials (May et al. 2014), run as parallel tasks;
2. starts an actor holding the run's sampler (:mod:`topicflow.pipeline.actors`), which reads the rest
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
import json
import logging
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow._typing import InitSelection, RejuvenationSource, ResamplingScheme, StreamAlgorithm
from topicflow.errors import InvalidParameterError, TopicflowError
from topicflow.io.atomic import atomic_write_bytes, atomic_write_json
from topicflow.io.model_store import SavedModel
from topicflow.io.stream_state import RunState, read_stream_state, write_stream_state
from topicflow.io.zarr_shards import Corpus
from topicflow.models import particle_filter
from topicflow.models.gibbs_lda import GibbsParams
from topicflow.models.init_tuning import InitTrial, best_trial, run_initialization_trial, trial_seed
from topicflow.models.lda_model import LDAState
from topicflow.pipeline.actors import (
    GibbsActor,
    HeldOutSet,
    LabelBook,
    ParticleFilterActor,
    StreamSource,
    stream_source,
)
from topicflow.pipeline.cluster import current_client
from topicflow.pipeline.estimators import corpus_provenance
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

log = logging.getLogger(__name__)

STREAM_ALGORITHMS: tuple[str, ...] = ("gibbs", "olda", "incgibbs", "pf", "sgs", "dsgs")
#: Streaming Gibbs with decay (Gao et al. 2016): minibatch samplers, run by :mod:`topicflow.pipeline.sgs_stream`.
MINIBATCH_ALGORITHMS: tuple[str, ...] = ("sgs", "dsgs")

#: Attempts at one call on a run's actor when workers die under it.
MAX_ATTEMPTS = 3

#: Trace fields averaged over runs in the summary.
SUMMARY_FIELDS = ("nmi_in", "nmi_out", "perplexity_out", "log_evidence_per_token", "log_likelihood_per_token",
                  "perplexity_train",
                  "seconds", "ess_min", "resamples", "depth_max", "n_nodes", "nbytes")


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """What a stream computes (hyperparameters, initialization, runs); validated at construction.

    Attributes
    ----------
    algorithm : {"gibbs", "olda", "incgibbs", "pf"}
        Batch collapsed Gibbs, o-LDA, the incremental Gibbs sampler, or the particle filter.
    n_topics : int
    doc_topic_prior, topic_word_prior : float
        alpha and beta (symmetric).
    n_particles : int
        Particles of ``"pf"`` (the other samplers keep one).
    ess_threshold : float
        ``"pf"`` resamples when the effective sample size falls below this share of the particles.
    resampling : {"multinomial", "residual", "stratified", "systematic"}
    rejuvenation_steps : int
        Tokens resampled per rejuvenation (after each resampling for ``"pf"``, after each token for
        ``"incgibbs"``).
    rejuvenation_source : {"history", "window", "reservoir"}
    reservoir_size : int
        Capacity of the reservoir, or length of the window, in tokens.
    init_docs, init_sweeps : int
        Size of the initialization prefix, and Gibbs sweeps on it.
    init_trials : int
        Independent initializations per run; the best by ``init_select`` is kept.
    init_select : {"nmi", "perplexity"}
    runs : int
        Independent runs, seeds ``seed, seed + 1, ...``.
    eval_every : int
        Documents between evaluation points (sweeps for ``"gibbs"``).
    sweeps : int
        Sweeps of ``"gibbs"``.
    optimize_every : int
        ``"gibbs"``: learn an asymmetric alpha and a symmetric beta (Minka's fixed point) every this
        many sweeps after the first 50 (0: keep them fixed).
    batch_size, decay, max_iters, patience : int, float, int, int
        ``"sgs"``/``"dsgs"``: documents per minibatch; the factor lambda that scales the counts after
        each minibatch; the sweeps of a minibatch at most, and without improvement of its training
        perplexity.
    sgs_init : {"posterior", "random"}
        ``"sgs"``/``"dsgs"``: start of each minibatch's assignments.
    staleness, sync_first, n_workers : int or None
        ``"dsgs"``: the staleness bound (None: fully asynchronous), minibatches run in order before
        the loops go asynchronous, and the sampler loops (default: one per worker).
    max_docs : int or None
        Stop the stream after this many documents (default: the whole store).
    seed : int
    """

    algorithm: StreamAlgorithm = "pf"
    n_topics: int = 10
    doc_topic_prior: float = 0.1
    topic_word_prior: float = 0.01
    n_particles: int = 100
    ess_threshold: float = 0.5
    resampling: ResamplingScheme = "systematic"
    rejuvenation_steps: int = 30
    rejuvenation_source: RejuvenationSource = "reservoir"
    reservoir_size: int = 1000
    init_docs: int = 100
    init_sweeps: int = 100
    init_trials: int = 1
    init_select: InitSelection = "perplexity"
    runs: int = 1
    eval_every: int = 100
    sweeps: int = 200
    optimize_every: int = 0
    batch_size: int = 256
    decay: float = 1.0
    max_iters: int = 100
    patience: int = 10
    sgs_init: str = "posterior"
    staleness: int | None = None
    sync_first: int = 0
    n_workers: int | None = None
    max_docs: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        choices = {"algorithm": STREAM_ALGORITHMS, "resampling": ("multinomial", "residual", "stratified", "systematic"),
                   "rejuvenation_source": ("history", "window", "reservoir"), "init_select": ("nmi", "perplexity")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise InvalidParameterError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")
        positive = ("n_topics", "n_particles", "reservoir_size", "init_trials", "runs", "eval_every", "init_sweeps")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise InvalidParameterError(f"{name} must be at least 1; got {getattr(self, name)!r}")
        if self.init_docs < 1 and self.algorithm != "gibbs":
            raise InvalidParameterError(f"init_docs must be at least 1; got {self.init_docs!r}")
        if not 0.0 < self.ess_threshold <= 1.0:
            raise InvalidParameterError(
                f"ess_threshold is a share of the particles, in (0, 1]; got {self.ess_threshold!r}")
        if self.doc_topic_prior <= 0 or self.topic_word_prior <= 0:
            raise InvalidParameterError("alpha and beta must be positive; got "
                                        f"{self.doc_topic_prior!r} and {self.topic_word_prior!r}")
        if self.algorithm in MINIBATCH_ALGORITHMS:
            from topicflow.pipeline.sgs_stream import sgs_params

            sgs_params(self, self.seed)  # validates the minibatch settings with the model's own checks
        if self.optimize_every < 0:
            raise InvalidParameterError(f"optimize_every must be >= 0; got {self.optimize_every!r}")
        if self.rejuvenation_steps < 0:
            raise InvalidParameterError(f"rejuvenation_steps must be >= 0; got {self.rejuvenation_steps!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> StreamConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in payload.items() if k in names})

    def run_seed(self, run: int) -> int:
        return self.seed + run

    def gibbs_params(self, seed: int) -> GibbsParams:
        return GibbsParams(n_topics=self.n_topics, doc_topic_prior=self.doc_topic_prior,
                           topic_word_prior=self.topic_word_prior, seed=seed)

    def pf_params(self, n_terms: int, seed: int) -> particle_filter.PFParams:
        """The sampler of ``algorithm``: o-LDA and incremental Gibbs are one-particle filters."""
        single = self.algorithm in ("olda", "incgibbs")
        return particle_filter.PFParams(
            n_topics=self.n_topics, n_terms=n_terms, doc_topic_prior=self.doc_topic_prior,
            topic_word_prior=self.topic_word_prior, n_particles=1 if single else self.n_particles,
            ess_threshold=self.ess_threshold, resampling=self.resampling,
            rejuvenation_steps=0 if self.algorithm == "olda" else self.rejuvenation_steps,
            rejuvenation_source=self.rejuvenation_source, source_size=self.reservoir_size,
            rejuvenate_after="token" if self.algorithm == "incgibbs" else "resample", seed=seed,
        )

    def fingerprint(self) -> dict[str, Any]:
        """Settings a resumed stream must share with the saved one (all but where it stops)."""
        payload = self.to_dict()
        for name in ("max_docs", "eval_every", "sweeps"):
            payload.pop(name)
        return payload


@dataclass(frozen=True)
class StreamResult:
    """Outcome of :func:`run_stream`.

    Attributes
    ----------
    config : StreamConfig
    records : list of dict
        One trace record per run and evaluation point (``run``, ``seed``, ``docs_seen``, metrics).
    summary : list of dict
        Per evaluation point, the mean and standard deviation of every metric over runs.
    model : SavedModel
        Run 0's topics as an LDA model (usable by ``topics``, ``infer``, ``evaluate``, ``export``).
    snapshots : list of (arrays, meta)
        Every run's final sampler state.
    """

    config: StreamConfig
    records: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    model: SavedModel
    snapshots: list[RunState] = field(repr=False)


# ----------------------------------------------------------------------------- initialization


def initialize_runs(corpus: Corpus, source: StreamSource, config: StreamConfig, client: Any) -> list[RunState]:
    """Initial snapshot of every run: the best of ``init_trials`` Gibbs trials on the prefix, as a cloud."""
    from topicflow.pipeline.actors import DocumentStream

    prefix = DocumentStream(source).read(0, min(config.init_docs, source.n_docs))
    jobs = [(run, trial) for run in range(config.runs) for trial in range(config.init_trials)]

    def trial_args(run: int, trial: int) -> tuple[Any, ...]:
        return (prefix, config.gibbs_params(trial_seed(config.run_seed(run), trial)))

    kwargs: dict[str, Any] = {"sweeps": config.init_sweeps, "select": config.init_select,
                              "n_trials": config.init_trials}
    if client is not None:
        shared = client.scatter(prefix, broadcast=False)
        futures = [client.submit(run_initialization_trial, shared, trial_args(r, t)[1], **kwargs, pure=False)
                   for r, t in jobs]
        trials: list[InitTrial] = client.gather(futures)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            trials = list(pool.map(lambda job: run_initialization_trial(*trial_args(*job), **kwargs), jobs))
    states = []
    for run in range(config.runs):
        run_trials = trials[run * config.init_trials:(run + 1) * config.init_trials]
        chosen = run_trials[best_trial([t.score for t in run_trials])]
        log.info("run %d: initialization trial seed %d chosen (scores %s)", run, chosen.seed,
                 ", ".join(f"{t.score:.4f}" for t in run_trials))
        states.append(initial_run_state(config, source, prefix, chosen, config.run_seed(run)))
    return states


def initial_run_state(config: StreamConfig, source: StreamSource, prefix: Any, trial: InitTrial, seed: int) -> RunState:
    """Snapshot of a run that starts from ``trial``: every particle holds the trial's assignments."""
    state = trial.state
    params = config.pf_params(source.n_terms, seed)
    token_docs = np.repeat(np.arange(state.first_doc, state.first_doc + state.doc_topic_counts.shape[0], dtype=np.int64),
                           np.diff(state.token_indptr))
    cloud = particle_filter.initial_cloud(params, state.token_terms, token_docs, state.topics)
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
            self.actors = [f.result() for f in futures]

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
        pending = [getattr(actor, method)(*args) for actor in self.actors]
        return [self._result(run, future, method, args) for run, future in enumerate(pending)]

    def _result(self, run: int, future: Any, method: str, args: tuple[Any, ...]) -> Any:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return future.result()
            except TopicflowError:
                raise
            except Exception as exc:  # noqa: BLE001 - a lost worker surfaces as several comm/actor errors
                if attempt == MAX_ATTEMPTS:
                    raise
                log.warning("run %d lost its actor (%s: %s); rebuilding it from its last snapshot and replaying "
                            "%d evaluation points", run, type(exc).__name__, exc, len(self.replay))
                self.actors[run] = self._rebuild(run)
                future = getattr(self.actors[run], method)(*args)
        raise AssertionError("unreachable")

    def _rebuild(self, run: int) -> Any:
        actor = self.client.submit(self.actor_class, *self.args[run], actor=True, pure=False).result()
        for point in self.replay:
            actor.advance(point, False).result()
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


def summarize(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mean and standard deviation over runs of every metric, per evaluation point."""
    by_point: dict[int, list[Mapping[str, Any]]] = {}
    for record in records:
        by_point.setdefault(int(record["point"]), []).append(record)
    summary = []
    for point in sorted(by_point):
        group = by_point[point]
        row: dict[str, Any] = {"point": point, "docs_seen": group[0]["docs_seen"], "runs": len(group)}
        for name in SUMMARY_FIELDS:
            values = [float(r[name]) for r in group if r.get(name) is not None]
            if values:
                row[f"{name}_mean"] = float(np.mean(values))
                row[f"{name}_std"] = float(np.std(values))
        summary.append(row)
    return summary


def run_stream(
    corpus: Corpus,
    config: StreamConfig,
    *,
    client: Any = None,
    test_corpus: Corpus | None = None,
    out: Path | None = None,
    resume: bool = False,
    checkpoint_every: int = 0,
    recovery_every: int = 10,
    progress: ProgressReporter = NO_PROGRESS,
) -> StreamResult:
    """Run ``config.runs`` independent streams of ``config.algorithm`` over ``corpus``.

    Parameters
    ----------
    corpus : Corpus
        A monolingual store, read in store order.
    config : StreamConfig
    client : distributed.Client, optional
        Runs become actors on its workers; default: the current client, else threads of this process.
    test_corpus : Corpus, optional
        Scored at every evaluation point (out-of-sample NMI with labels, and perplexity); it must use
        the training store's vocabulary (``topicflow append`` into a copy, or ingest with ``--vocab``).
    out : Path, optional
        Directory for ``state/`` (snapshots), ``trace.jsonl`` and ``summary.json``.
    resume : bool
        Continue the runs saved in ``out/state``; the settings must match (see
        :meth:`StreamConfig.fingerprint`), the stream may have grown.
    checkpoint_every : int
        Save snapshots every this many evaluation points (0: only at the end, when ``out`` is given).
    recovery_every : int
        Without a checkpoint, keep the runs' snapshots in the driver's memory every this many
        evaluation points: a run whose worker dies is rebuilt from there (0: from its start).
    progress : ProgressReporter

    Returns
    -------
    StreamResult

    Raises
    ------
    InvalidParameterError
        A multilingual store, a test store with another vocabulary, NMI selection without labels, or
        a resumed stream with other settings.
    """
    client = current_client(client)
    if config.algorithm in MINIBATCH_ALGORITHMS:
        from topicflow.pipeline.sgs_stream import run_sgs_stream

        return run_sgs_stream(corpus, config, client=client, test_corpus=test_corpus, out=out, resume=resume,
                              progress=progress)
    source = stream_source(corpus)
    held_out = held_out_set(test_corpus, source, config)
    terms = corpus.vocabulary(source.language).terms
    stop = source.n_docs if config.max_docs is None else min(source.n_docs, config.max_docs)
    records: list[dict[str, Any]] = []
    if resume:
        if out is None:
            raise InvalidParameterError("resume needs the output directory of the stream to continue")
        info, states = read_stream_state(out / "state")
        check_resumable(info, config, out)
        check_same_stream(info, corpus, out)
        records = list(info.get("records", []))
    elif config.algorithm == "gibbs":
        states = [({}, {"kind": "gibbs"}) for _ in range(config.runs)]
    else:
        states = initialize_runs(corpus, source, config, client)
    args: list[tuple[Any, ...]]
    if config.algorithm == "gibbs":
        args = [(source, config.gibbs_params(config.run_seed(r)), states[r], held_out, config.optimize_every)
                for r in range(config.runs)]
        actors = ActorSet(client, GibbsActor, args)
        start, stop = int(states[0][1].get("gibbs", {}).get("sweeps_done", 0)), config.sweeps
    else:
        args = [(source, config.pf_params(source.n_terms, config.run_seed(r)), states[r], held_out)
                for r in range(config.runs)]
        actors = ActorSet(client, ParticleFilterActor, args)
        start = int(states[0][1]["position"])
    try:
        if not records:
            records.extend(_records(actors.advance(start, held_out is not None), start, config, terms))
        points = evaluation_points(start, stop, config.eval_every)
        for i, point in enumerate(progress.track(points, total=len(points), desc=f"stream {config.algorithm}", unit="eval")):
            new = _records(actors.advance(point, held_out is not None), point, config, terms)
            records.extend(new)
            _log_point(new)
            if out is not None and checkpoint_every and (i + 1) % checkpoint_every == 0 and i + 1 < len(points):
                save_outputs(out, corpus, config, records, actors.snapshots())
            elif recovery_every and (i + 1) % recovery_every == 0 and client is not None:
                actors.snapshots()
        snapshots = actors.snapshots()
        parameters = actors.call("model_parameters")[0]
    finally:
        actors.close()
    summary = summarize(records)
    counts, alpha, beta = parameters
    model = stream_model(corpus, algorithm=config.algorithm, topic_word_counts=counts, doc_topic_prior=alpha,
                         topic_word_prior=beta, info={"settings": config.to_dict(), "summary": summary})
    if out is not None:
        save_outputs(out, corpus, config, records, snapshots)
    return StreamResult(config, records, summary, model, snapshots)


def held_out_set(test_corpus: Corpus | None, source: StreamSource, config: StreamConfig) -> HeldOutSet | None:
    """The test store, with its term ids translated to the training vocabulary (by term string)."""
    if test_corpus is None:
        return None
    test = stream_source(test_corpus)
    train_vocab = Corpus.open(source.store).vocabulary(source.language)
    test_vocab = test_corpus.vocabulary(test.language)
    term_map = None
    if len(test_vocab) != len(train_vocab) or not np.array_equal(test_vocab.terms, train_vocab.terms):
        ids = train_vocab.ids_of(str(t) for t in test_vocab.terms)
        term_map = np.array([-1 if i is None else i for i in ids], dtype=np.int64)
    return HeldOutSet(test, source.n_terms, term_map, seed=config.seed)


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


def check_resumable(info: Mapping[str, Any], config: StreamConfig, out: Path) -> None:
    """Check that a saved stream was run with the settings of ``config``, so it can be resumed.

    Parameters
    ----------
    info : mapping of str to Any
        The saved stream's ``info`` (its ``config`` entry is compared).
    config : StreamConfig
        Settings of the run that would resume it.
    out : Path
        The stream's output directory, named in the error message.

    Raises
    ------
    InvalidParameterError
        If the settings differ; the message lists which.
    """
    saved = StreamConfig.from_dict(info.get("config", {})).fingerprint()
    if saved != config.fingerprint():
        differ = sorted(k for k in saved if saved[k] != config.fingerprint().get(k))
        raise InvalidParameterError(
            f"the stream saved in {str(out)!r} used other settings ({', '.join(differ)} differ); resume it with "
            "the same settings, or start a new stream in another directory",
            path=str(out),
        )


def check_same_stream(info: Mapping[str, Any], corpus: Corpus, out: Path) -> None:
    """The shards a saved stream has read must still open the store, unchanged (it may have grown)."""
    saved = [(entry["id"], entry["checksum"]) for entry in info.get("corpus", {}).get("shards", [])]
    current = [(s.shard_id, s.checksum) for s in corpus.shards[: len(saved)]]
    if saved != current:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} is not the store the stream in {str(out)!r} was reading: its first "
            f"{len(saved)} shards differ (rebuilt, or another store). Resume only on the same store, grown with "
            "`topicflow append`, or start a new stream.",
            path=str(corpus.path),
        )


def save_outputs(out: Path, corpus: Corpus, config: StreamConfig, records: list[dict[str, Any]],
          snapshots: Sequence[RunState]) -> None:
    """Write a stream's state, trace and summary under ``out``, each file atomically.

    Parameters
    ----------
    out : Path
        The stream's output directory; gets ``state/``, ``trace.jsonl`` and ``summary.json``.
    corpus : Corpus
        The store read, recorded with every shard's checksum.
    config : StreamConfig
        The stream's settings.
    records : list of dict
        One evaluation record per run and evaluation point.
    snapshots : sequence of RunState
        Each run's sampler state, as its actor exported it.
    """
    info = {"config": config.to_dict(), "records": records,
            "corpus": corpus_provenance(corpus, range(corpus.n_shards))}
    write_stream_state(out / "state", info, snapshots)
    lines = "".join(_json_line(r) for r in records)
    atomic_write_bytes(out / "trace.jsonl", lines.encode("utf-8"))
    atomic_write_json(out / "summary.json", {"config": config.to_dict(), "summary": summarize(records)})


def _json_line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True) + "\n"


def stream_model(corpus: Corpus, *, algorithm: str, topic_word_counts: np.ndarray, doc_topic_prior: np.ndarray,
                 topic_word_prior: float, info: Mapping[str, Any]) -> SavedModel:
    """A streaming sampler's topic-word counts as an LDA model: lambda = counts + beta, alpha, eta = beta.

    Every streaming sampler saves its model this way, so ``topics``, ``infer``, ``evaluate`` and
    ``export`` treat it like a variational one. ``info`` adds to the description (settings, summary).
    """
    language = corpus.languages[0]
    state = LDAState(topic_word_var={language: np.asarray(topic_word_counts, dtype=np.float64) + topic_word_prior},
                     doc_topic_prior=np.asarray(doc_topic_prior, dtype=np.float64),
                     topic_word_prior={language: float(topic_word_prior)})
    description = {"kind": "stream", "algorithm": algorithm, **info,
                   "corpus": corpus_provenance(corpus, range(corpus.n_shards))}
    return SavedModel(state, {language: corpus.vocabulary(language)}, description)
