"""Drivers of the streaming samplers: the one module that imports every runner.

``RUNNERS`` maps each ``topicflow stream --algo`` name to its driver: the actor-held samplers
(batch collapsed Gibbs, o-LDA, incremental Gibbs, particle filters) in
:mod:`~topicflow.pipeline.streaming.particles`, streaming Gibbs with decay and its parameter-server
form in :mod:`~topicflow.pipeline.streaming.sgs_runs`. :func:`run_stream` looks the algorithm up
there (the role of xarray's ``plugins.py``): a new streaming sampler adds its runner and one entry.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from topicflow.io.corpus.reader import Corpus
from topicflow.io.storage import StoragePath
from topicflow.pipeline.cluster import current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

# Re-exported (``as``) for the other pipeline packages, which import this package only through here.
from topicflow.pipeline.streaming.config import StreamConfig as StreamConfig
from topicflow.pipeline.streaming.config import StreamResult as StreamResult
from topicflow.pipeline.streaming.dsgs import run_dsgs as run_dsgs
from topicflow.pipeline.streaming.outputs import TraceRotation as TraceRotation
from topicflow.pipeline.streaming.particles import run_particle_streams
from topicflow.pipeline.streaming.sgs import run_sgs as run_sgs
from topicflow.pipeline.streaming.sgs_runs import run_sgs_stream

#: The driver of each streaming algorithm.
RUNNERS: dict[str, Callable[..., StreamResult]] = {
    "gibbs": run_particle_streams,
    "olda": run_particle_streams,
    "incgibbs": run_particle_streams,
    "pf": run_particle_streams,
    "sgs": run_sgs_stream,
    "dsgs": run_sgs_stream,
}

# run_sgs, run_dsgs and TraceRotation are imported for the other pipeline packages and the CLI (they may use this package only
# through its __init__); they are documented where they are defined.
__all__ = ["RUNNERS", "run_stream", "stream_config"]


def run_stream(
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
    """Run ``config.run.runs`` independent streams of ``config.algorithm`` over ``corpus``.

    Parameters
    ----------
    corpus : Corpus
        A monolingual store, read in store order.
    config : StreamConfig
        What to run (the algorithm selects the runner in :data:`RUNNERS`).
    client : distributed.Client, optional
        Runs become actors on its workers; default: the current client, else threads of this process.
    test_corpus : Corpus, optional
        Scored at every evaluation point (out-of-sample NMI with labels, and perplexity); it must use
        the training store's vocabulary (``topicflow append`` into a copy, or ingest with ``--vocab``).
    out : Path, optional
        Directory for ``state/`` (snapshots), ``trace.jsonl`` (rotated into ``trace-NNNNNN.jsonl.gz``)
        and ``summary.json``; their size is bounded by ``trace``.
    resume : bool
        Continue the runs saved in ``out/state``; the settings must match (see
        :meth:`StreamConfig.fingerprint`), the stream may have grown. The result's ``records`` are
        then those of the current trace segment (every record since the start unless rotated) and
        its ``summary`` the last ``trace.summary_points`` points.
    checkpoint_every : int
        Save snapshots every this many evaluation points (0: only at the end, when ``out`` is given).
    recovery_every : int
        Without a checkpoint, keep the runs' snapshots in the driver's memory every this many
        evaluation points: a run whose worker dies is rebuilt from there (0: from its start).
    progress : ProgressReporter
        Progress of the evaluation points or runs.
    trace : TraceRotation
        When ``trace.jsonl`` is rotated, how many rotated segments are kept, and how many points
        ``summary.json`` keeps.

    Returns
    -------
    StreamResult
        Trace records, summary, the model of run 0 and every run's snapshot.

    Raises
    ------
    InvalidParameterError
        A multilingual store, a test store with another vocabulary, NMI selection without labels, or
        a resumed stream with other settings.
    """
    return RUNNERS[config.algorithm](corpus, config, client=current_client(client), test_corpus=test_corpus,
                                     out=out, resume=resume, checkpoint_every=checkpoint_every,
                                     recovery_every=recovery_every, progress=progress, trace=trace)


def stream_config(**settings: Any) -> StreamConfig:
    """The config of ``settings["algorithm"]`` from flat settings, dropping those it does not take.

    For the other pipeline packages, which use this one only through this module (a reproduction
    runs several algorithms from one table of settings).

    Parameters
    ----------
    **settings
        Flat settings as :meth:`StreamConfig.create` takes them (``algorithm`` defaults to ``"pf"``);
        settings of other algorithms' samplers are ignored.

    Returns
    -------
    StreamConfig
    """
    names = StreamConfig.setting_names(settings.get("algorithm", "pf"))
    return StreamConfig.create(**{name: value for name, value in settings.items() if name in names})
