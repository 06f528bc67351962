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
from topicflow.pipeline.cluster import current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.streaming.config import StreamConfig, StreamResult
from topicflow.pipeline.streaming.particles import run_particle_streams
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

__all__ = ["RUNNERS", "run_stream"]


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
    """Run ``config.run.runs`` independent streams of ``config.algorithm`` over ``corpus``.

    Parameters
    ----------
    corpus : Corpus
        A monolingual store, read in store order.
    config : StreamConfig
        What to run.
    client : distributed.Client, optional
        Default: the current client, else threads of this process.
    test_corpus : Corpus, optional
        Scored at every evaluation point (out-of-sample NMI with labels, and perplexity).
    out : Path, optional
        Directory for ``state/``, ``trace.jsonl``, ``summary.json`` and ``model``.
    resume : bool
        Continue the runs saved in ``out/state``.
    checkpoint_every : int
        Actor-held runs: save snapshots every this many evaluation points (0: at the end).
    recovery_every : int
        Actor-held runs: keep snapshots in memory every this many evaluation points.
    progress : ProgressReporter
        Progress of the evaluation points or runs.

    Returns
    -------
    StreamResult
        Trace records, summary, the model of run 0 and every run's snapshot.

    Raises
    ------
    InvalidParameterError
        Bad settings for this store (see the runners).
    """
    return RUNNERS[config.algorithm](corpus, config, client=current_client(client), test_corpus=test_corpus,
                                     out=out, resume=resume, checkpoint_every=checkpoint_every,
                                     recovery_every=recovery_every, progress=progress)
