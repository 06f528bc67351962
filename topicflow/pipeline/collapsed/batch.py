"""Driver of batch PCVB0 for the HDP (Sato, Kurihara & Nakagawa 2012, as Bleier sec. 2 writes it) on Dask.

Per iteration (one pass over the corpus): share the previous iteration's global statistics once
(:class:`~topicflow.models.hdp.pcvb0.PCVB0View`), map one sweep task per shard (each reads its shard's
q of the previous iteration from scratch, updates it by eq. 2 and writes it back as this iteration's),
tree-merge the shards' statistics in store order, then set n_kw, the tables, alpha (eq. 5) and gamma
(eq. 6) on the driver (:func:`~topicflow.models.hdp.pcvb0.update_state`). The math and the schedule
(Jacobi across documents, sequential within a document, hence the same model whatever the number of
shards or workers) are documented in :mod:`topicflow.models.hdp.pcvb0`; q's storage in
:mod:`topicflow.io.outputs.assignment_scratch`.

Stopping: ``config.passes`` iterations, or earlier when the relative change of the per-token
log-likelihood proxy between two iterations is at most ``tol`` (0, the default: never early).

Checkpoints: with a :class:`~topicflow.pipeline.policies.CheckpointPolicy`, q lives in the checkpoint
directory and every ``checkpoint.every`` iterations the state is written there; ``resume`` continues
from the last complete iteration found, and ends with the model an uninterrupted run gives. A finished
fit leaves only its final state in the checkpoint (q is removed). A checkpoint on object storage (a
:class:`~topicflow.io.storage.StoragePath`) holds q too: the tasks read and write it there, and
``latest.json`` is put last. Without a checkpoint q lives in a scratch directory beside the store
(:func:`~topicflow.io.outputs.assignment_layer.scratch_location`), on object storage for a store on a
URL; so a store and checkpoint there need no disk shared by the driver and the workers.
"""
from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import numpy as np

from topicflow import config as tf_config
from topicflow.errors import InvalidParameterError, ModelFormatError, NumericalError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.outputs import assignment_scratch as scratch_io
from topicflow.io.storage import Location, StoragePath
from topicflow.models.hdp.pcvb0 import (
    PCVB0View,
    check_dtype,
    initial_state,
    prior_start_weights,
    update_state,
)
from topicflow.models.hdp.state import HDPState
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.collapsed.config import CollapsedConfig
from topicflow.pipeline.policies import CheckpointPolicy, has_converged
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.estep import graph_token
from topicflow.tasks.pcvb0 import map_start, map_sweep, slice_rows_for, tree_merge

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PCVB0Record:
    """One line of the PCVB0 trace (one iteration).

    Attributes
    ----------
    iteration : int
        0-based.
    seconds : float
        Wall time of the iteration.
    alpha, gamma : float
        After the iteration's step.
    topics_in_use : int
        Topics holding at least ``config.topics_in_use_share`` of the expected tokens.
    log_likelihood : float
        Per-token log-likelihood proxy (:mod:`topicflow.models.hdp.pcvb0`): training tokens under the
        documents' new q and the previous iteration's topics.
    q_change : float
        ``sum_k |q_new - q_old|`` per token, averaged.
    converged : bool
        The relative change of ``log_likelihood`` fell to ``tol`` (never when ``tol`` is 0).
    """

    iteration: int
    seconds: float
    alpha: float
    gamma: float
    topics_in_use: int
    log_likelihood: float
    q_change: float
    converged: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True)
class PCVB0Result:
    """What :func:`run_pcvb0` returns.

    Attributes
    ----------
    state : HDPState
        The fitted global state (n_kw, n_k., tables, alpha, gamma, beta, n, D), scale folded in.
    trace : tuple of PCVB0Record
        One record per iteration, including those before a resume.
    converged : bool
        Stopped by the tolerance (False when it ran ``config.passes`` iterations without reaching it).
    language : str
        The corpus language fitted.
    settings : dict
        Run settings to record with the model (method, q dtype, tolerance, passes, clumping).
    """

    state: HDPState
    trace: tuple[PCVB0Record, ...]
    converged: bool
    language: str
    settings: dict[str, Any] = field(default_factory=dict)


def _share(value: Any, client: Any, *, name: str) -> Any:
    if client is not None:
        return client.scatter([value], broadcast=True, hash=False)[0]
    return dask.delayed(value, name=name, traverse=False)


def run_pcvb0(
    corpus: Corpus | str | Path,
    config: CollapsedConfig,
    *,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_iteration: Callable[[PCVB0Record, HDPState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
    resume: bool = False,
    split_every: int | None = None,
    tol: float | None = None,
    q_dtype: str | None = None,
    q_start: str | None = None,
    scratch_dir: str | None = None,
) -> PCVB0Result:
    """Fit the HDP by batch PCVB0 (see the module docstring).

    Parameters
    ----------
    corpus : Corpus or path
        A monolingual store: PCVB0 fits the store's only language.
    config : CollapsedConfig
        ``method`` must be "pcvb0"; ``passes`` iterations at most; ``params`` the model settings
        (truncation, beta, alpha_init, gamma_init, learn_alpha, learn_gamma, alpha_floor, clumping,
        seed; the step sizes, burn-in and document-start settings belong to the stochastic methods and
        are unused). ``config.extra`` may give ``tol`` and ``q_dtype`` when the keywords are None.
    client : distributed.Client, optional
        Default: the current client, else Dask's threaded scheduler.
    progress : ProgressReporter
    on_iteration : callable, optional
        ``on_iteration(record, state)`` after every iteration (must not change ``state``).
    checkpoint : CheckpointPolicy, optional
        Keep q and the state in ``checkpoint.path`` (see the module docstring).
    resume : bool, default False
        Continue from the checkpoint (also when ``checkpoint.resume``).
    split_every : int, optional
        Fan-in of the tree merge (default: the ``split-every`` setting).
    tol : float, optional
        Relative change of the per-token log-likelihood proxy that stops the fit (default
        ``config.extra.get("tol", 0.0)``; 0 runs every pass).
    q_dtype : {"float32", "float64"}, optional
        Storage of q (default ``config.extra.get("q_dtype", "float32")``).
    q_start : {"prior", "flat"}, optional
        Start of q (:mod:`topicflow.models.hdp.pcvb0`): random around the prior mean of pi ("prior", the
        default, ``config.extra.get("q_start", "prior")``) or a flat-Dirichlet draw ("flat").
    scratch_dir : str, optional
        Parent directory of the scratch, a local directory or a URL (default: the ``scratch-dir``
        setting, else beside the store, on object storage for a store there).

    Returns
    -------
    PCVB0Result

    Raises
    ------
    InvalidParameterError
        Wrong method, a multilingual store, an empty corpus, bad ``tol`` / ``q_dtype``, or a checkpoint
        written for other settings or another corpus.
    NumericalError
        An iteration produced non-finite statistics.
    ModelFormatError
        A damaged checkpoint.
    """
    if config.method != "pcvb0":
        raise InvalidParameterError(f"run_pcvb0 fits method 'pcvb0', got config.method={config.method!r}")
    corpus = as_corpus(corpus)
    try:
        language = corpus.resolve_language(None)
    except ValueError as exc:
        raise InvalidParameterError(f"PCVB0 fits one language: {exc} Ingest the language on its own.") from exc
    dtype = q_dtype if q_dtype is not None else str(config.extra.get("q_dtype", "float32"))
    check_dtype(dtype)
    q_start = q_start if q_start is not None else str(config.extra.get("q_start", "prior"))
    if q_start not in ("prior", "flat"):
        raise InvalidParameterError(f"q_start must be 'prior' or 'flat', got {q_start!r}")
    tol = float(tol if tol is not None else config.extra.get("tol", 0.0))
    if not (tol >= 0 and math.isfinite(tol)):
        raise InvalidParameterError(f"tol must be a non-negative number, got {tol!r}")
    if len(corpus) == 0 or corpus.n_tokens == 0:
        raise InvalidParameterError(f"store {str(corpus.path)!r} has no tokens to fit; ingest documents first.")
    client = current_client(client)
    split_every = int(split_every or tf_config.get("split-every", 8))
    params = config.params
    settings = {"method": "pcvb0", "q_dtype": dtype, "q_start": q_start, "tol": tol, "passes": config.passes,
                "clumping": params.clumping, "split_every": split_every}
    fingerprint = {"method": "pcvb0", "params": params.to_dict(), "q_dtype": dtype, "q_start": q_start,
                   "corpus": corpus.token(),
                   "language": language}
    fingerprint = json.loads(json.dumps(fingerprint))  # as a checkpoint reads it back
    token = graph_token(fingerprint)
    resume = resume or (checkpoint is not None and checkpoint.resume)
    directory: Location
    if checkpoint is not None:  # q lives in the checkpoint, local or on object storage
        directory = checkpoint.path if isinstance(checkpoint.path, StoragePath) else Path(checkpoint.path)
        if not resume:
            _clear_checkpoint(directory)
    else:
        directory = scratch_io.scratch_location(corpus.path, token, scratch_dir or tf_config.get("scratch-dir"))
    fit = _Fit(corpus, config, language, dtype, q_start, tol, client, split_every, directory, fingerprint, token, checkpoint)
    try:
        state, trace, converged = fit.run(resume, progress, on_iteration)
    finally:
        if checkpoint is None:
            scratch_io.remove_scratch(directory)
    return PCVB0Result(state=state, trace=tuple(trace), converged=converged, language=language, settings=settings)


def _clear_checkpoint(directory: Location) -> None:
    if isinstance(directory, StoragePath):
        scratch_io.remove_scratch(directory)  # the whole prefix, as the mirrored checkpoint was cleared
        return
    scratch_io.remove_q(directory)
    for name in ("latest.json",):
        (directory / name).unlink(missing_ok=True)
    for old in directory.glob("state-*.*"):
        old.unlink(missing_ok=True)


class _Fit:
    """The loop of one PCVB0 fit (holds what every iteration needs)."""

    def __init__(self, corpus: Corpus, config: CollapsedConfig, language: str, dtype: str, q_start: str, tol: float,
                 client: Any,
                 split_every: int, directory: Location, fingerprint: dict[str, Any], token: str,
                 checkpoint: CheckpointPolicy | None) -> None:
        self.corpus, self.config, self.params = corpus, config, config.params
        self.language, self.dtype, self.tol, self.client = language, dtype, tol, client
        self.weights = prior_start_weights(self.params) if q_start == "prior" else None
        self.split_every, self.directory, self.fingerprint, self.token = split_every, directory, fingerprint, token
        self.checkpoint = checkpoint
        self.blocks = corpus.to_delayed(language)
        self.shard_ids = [shard.shard_id for shard in corpus.shards]
        self.slice_rows = slice_rows_for(self.params.truncation, dtype)
        self.n_terms = len(corpus.vocabulary(language))
        self.n_tokens = int(corpus.tokens_by_language()[language])
        self.last_saved = -2  # the iteration whose q a checkpoint names (-2: none)

    # ------------------------------------------------------------------ start / resume

    def start(self) -> HDPState:
        state = initial_state(self.params, n_terms=self.n_terms, n_tokens=self.n_tokens, n_docs=len(self.corpus))
        parts = map_start(self.blocks, self.shard_ids, truncation=self.params.truncation, seed=self.params.seed,
                          clumping=self.params.clumping, dtype=self.dtype, alpha=state.alpha,
                          scratch=str(self.directory), slice_rows=self.slice_rows, token=self.token,
                          weights=self.weights)
        (stats,) = compute(tree_merge(parts, split_every=self.split_every, name=f"pcvb0-merge-{self.token}-start"),
                           client=self.client)
        update_state(state, stats, self.params, learn=False)
        return state

    def resumed(self) -> tuple[HDPState, int, list[PCVB0Record]] | None:
        found = scratch_io.read_checkpoint_state(self.directory)
        if found is None:
            return None
        iteration, arrays, record = found
        saved = record.get("fingerprint", {})
        differing = sorted(k for k in set(saved) | set(self.fingerprint) if saved.get(k) != self.fingerprint.get(k))
        if differing:
            raise InvalidParameterError(
                f"the checkpoint {str(self.directory)!r} was written for other settings or another corpus "
                f"(differing: {', '.join(differing)}); pass another checkpoint path or fit without resuming.",
                path=str(self.directory))
        state = HDPState.from_arrays(arrays, record["scalars"])
        trace = [PCVB0Record(**item) for item in record["trace"]]
        self.last_saved = iteration
        log.info("resuming PCVB0 from %s after iteration %d", self.directory, iteration)
        return state, iteration + 1, trace

    # ------------------------------------------------------------------ loop

    def run(self, resume: bool, progress: ProgressReporter,
            on_iteration: Callable[[PCVB0Record, HDPState], None] | None) -> tuple[HDPState, list[PCVB0Record], bool]:
        found = self.resumed() if resume else None
        trace: list[PCVB0Record]
        if found is None:
            state, first, trace = self.start(), 0, []
        else:
            state, first, trace = found
        converged = bool(trace and trace[-1].converged)
        if converged:
            first = self.config.passes
        if first < self.config.passes and found is not None and not scratch_io.q_exists(
                self.directory, first - 1, self.shard_ids[0]):
            raise ModelFormatError(
                f"the checkpoint {str(self.directory)!r} holds a finished fit without its assignments q, so it "
                "cannot run more passes; delete it to fit again.", path=str(self.directory))
        last = first - 1
        for iteration in progress.track(range(first, self.config.passes), total=self.config.passes - first,
                                        desc="pcvb0", unit="iter"):
            record = self.iterate(state, iteration, trace)
            trace.append(record)
            last = iteration
            if on_iteration is not None:
                on_iteration(record, state)
            if self.checkpoint is not None and self.checkpoint.due(iteration + 1):
                self.save(state, iteration, trace)
            if record.converged:
                converged = True
                break
        if self.checkpoint is not None:
            self.save(state, last, trace)
            scratch_io.remove_q(self.directory)
        state.fold_scale()
        return state, trace, converged

    def iterate(self, state: HDPState, iteration: int, trace: list[PCVB0Record]) -> PCVB0Record:
        started = time.perf_counter()
        view = _share(PCVB0View.from_state(state), self.client, name=f"pcvb0-view-{self.token}-{iteration}")
        parts = map_sweep(self.blocks, view, self.shard_ids, clumping=self.params.clumping, dtype=self.dtype,
                          scratch=str(self.directory), iteration=iteration, slice_rows=self.slice_rows,
                          token=self.token)
        (stats,) = compute(tree_merge(parts, split_every=self.split_every,
                                      name=f"pcvb0-merge-{self.token}-{iteration}"), client=self.client)
        if not (np.isfinite(stats.log_likelihood) and np.all(np.isfinite(stats.table_sums))
                and np.all(np.isfinite(stats.topic_word.values))):
            raise NumericalError(f"PCVB0 iteration {iteration} produced non-finite statistics "
                                 f"(alpha {state.alpha}, gamma {state.gamma}); check the corpus and the priors.")
        update_state(state, stats, self.params)
        self.drop_before(iteration)
        loglik = stats.log_likelihood / max(stats.n_tokens, 1)
        history = [r.log_likelihood for r in trace] + [loglik]
        converged = self.tol > 0 and has_converged(history, self.tol)
        record = PCVB0Record(iteration=iteration, seconds=time.perf_counter() - started, alpha=float(state.alpha),
                             gamma=float(state.gamma),
                             topics_in_use=state.topics_in_use(self.config.topics_in_use_share),
                             log_likelihood=float(loglik), q_change=float(stats.q_change / max(stats.n_tokens, 1)),
                             converged=bool(converged))
        log.info("PCVB0 iteration %d: log-likelihood proxy %.5f per token, alpha %.4g, gamma %.4g, %d topics in "
                 "use, %.2f s", iteration, loglik, state.alpha, state.gamma, record.topics_in_use, record.seconds)
        return record

    def drop_before(self, iteration: int) -> None:
        scratch_io.drop_iterations(self.directory, iteration, keep=self.last_saved)

    def save(self, state: HDPState, iteration: int, trace: list[PCVB0Record]) -> None:
        if iteration == self.last_saved:
            return
        arrays, scalars = state.to_arrays()
        scratch_io.write_checkpoint_state(self.directory, iteration, arrays, {
            "scalars": scalars, "trace": [r.to_dict() for r in trace], "fingerprint": self.fingerprint})
        self.last_saved = iteration
        self.drop_before(iteration)
