"""The minibatch driver of the stochastic collapsed methods (PCSVB0, SCVB0), and what every run shares.

Minibatch form (Bleier sec. 5's "usage of mini-batches"; Foulds et al. 2013's SCVB0): the documents
stream from the store in minibatches planned in a fixed order (:func:`plan_minibatches`, online VB's
plan: it depends only on the shard sizes, the settings and the seed). Per minibatch the driver builds the global view once
(:func:`topicflow.models.common.cvb0.global_view`) and ships it to every worker once (scattered with
``broadcast``), one task per piece runs the local step with the global statistics fixed
(:mod:`topicflow.tasks.collapsed`), the pieces' statistics are tree-reduced in piece order, and the
driver applies the stochastic global step (``apply_minibatch``). So the model is the same on any
number of workers. For another number of pieces the same sums are grouped differently, so the model
agrees to rounding.

Shared by the minibatch and the word-by-word drivers (:mod:`topicflow.pipeline.collapsed.word_by_word`):
trace records and held-out evaluation points (:class:`Recorder`), checkpoints (:class:`Checkpointer`).

Trace records (one per evaluation point and one at the end of every pass): ``docs_seen``,
``tokens_seen``, ``pass``, ``seconds`` (training time so far, evaluation excluded), ``alpha``,
``gamma``, ``topics_in_use`` and ``heldout_perplexity`` (None where the held-out set was not scored).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel
from topicflow.io.storage import StoragePath, as_location
from topicflow.models.hdp.state import HDPState
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.cluster import compute
from topicflow.pipeline.collapsed.config import CollapsedConfig
from topicflow.pipeline.collapsed.model import (
    OPS,
    config_to_dict,
    lda_view,
    raw_arrays,
    state_from_raw,
    topics_in_use,
    training_language,
)
from topicflow.pipeline.evaluation import heldout_likelihood
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import ProgressReporter
from topicflow.pipeline.vb import (
    resumed_minibatches,
    share,
)
from topicflow.tasks.collapsed import map_local_minibatch, tree_merge_stats
from topicflow.tasks.estep import graph_token

log = logging.getLogger(__name__)

#: Share of each held-out document's tokens that estimate its topic proportions (Bleier sec. 4: 70%).
HELDOUT_FRACTION = 0.7
#: Most pieces per minibatch (``config.extra["pieces"]`` overrides); a setting, never the cluster size.
DEFAULT_PIECES = 4
#: The checkpoint interval of a policy made from a bare path: checkpoints at pass ends only.
PASS_ENDS = 1_000_000_000
#: No piece smaller than this many documents (``config.extra["min_piece_docs"]`` overrides).
DEFAULT_MIN_PIECE_DOCS = 16


@dataclass(frozen=True)
class Plan:
    """How documents are grouped into minibatches (the same for any cluster).

    Attributes
    ----------
    batch_size : int
        Documents per minibatch.
    piece_docs : int
        Most documents per piece (a piece is contiguous rows of one shard, one task).
    shuffle_window : int
        Visit documents in a random order within consecutive windows of this many documents (0: store
        order): the window is cut into runs of ``piece_docs`` and the runs are permuted.
    """

    batch_size: int
    piece_docs: int
    shuffle_window: int = 0


def plan_settings(config: CollapsedConfig, batch_size: int) -> Plan:
    """The minibatch plan of ``config`` for documents in batches of ``batch_size``.

    Parameters
    ----------
    config : CollapsedConfig
        ``shuffle_window`` and ``extra["pieces"]`` (most pieces per minibatch, default 4) and
        ``extra["min_piece_docs"]`` (no smaller piece, default 16) are read.
    batch_size : int
        Documents per minibatch (the word-by-word driver plans its feeds with this too).

    Returns
    -------
    Plan
    """
    pieces = int(config.extra.get("pieces", DEFAULT_PIECES))
    min_docs = int(config.extra.get("min_piece_docs", DEFAULT_MIN_PIECE_DOCS))
    if pieces < 1 or min_docs < 1:
        raise InvalidParameterError(f"pieces and min_piece_docs must be at least 1, got {pieces!r} and {min_docs!r}")
    return Plan(batch_size, max(math.ceil(batch_size / pieces), min(batch_size, min_docs)), config.shuffle_window)


def state_summary(state: HDPState, config: CollapsedConfig) -> dict[str, Any]:
    """The scalars a trace record reports about ``state``.

    Parameters
    ----------
    state : HDPState
    config : CollapsedConfig

    Returns
    -------
    dict
        ``docs_seen``, ``tokens_seen``, ``alpha``, ``gamma``, ``topics_in_use``.
    """
    return {"docs_seen": int(state.docs_seen), "tokens_seen": int(state.tokens_seen), "alpha": float(state.alpha),
            "gamma": float(state.gamma), "topics_in_use": topics_in_use(state, config)}


class HeldoutScorer:
    """Held-out perplexity of the current model with Bleier's protocol (sec. 4), by the common evaluator.

    Each held-out document's tokens are split at random (per global document position, seed
    ``seed``): 70% estimate its topic proportions by fold-in, the other 30% are scored
    (:func:`topicflow.pipeline.evaluation.heldout_likelihood`, protocol ``completion-random``) under
    the LDA view of the state (the prior alpha * pi of length T for the HDP: spec P12).

    Parameters
    ----------
    test : Corpus
        The held-out documents (terms the model lacks are left out).
    vocabulary : Vocabulary
        The model's vocabulary.
    language : str
    client : distributed.Client or None
    seed : int
        Seed of the token split.
    """

    def __init__(self, test: Corpus, vocabulary: Any, language: str, *, client: Any, seed: int) -> None:
        self.test = test
        self.vocabularies = {language: vocabulary}
        self.client = client
        self.seed = seed

    def perplexity(self, view: LDAState) -> float:
        """Held-out perplexity of the model ``view`` (exp of minus the log-likelihood per scored token)."""
        model = SavedModel(view, self.vocabularies, ModelInfo(kind="hdp-view"))
        result = heldout_likelihood(model, self.test, "completion-random", client=self.client,
                                    fraction=HELDOUT_FRACTION, seed=self.seed)
        return float(result.perplexity)


class Recorder:
    """The trace of a run: records at evaluation points and pass ends, and the clock.

    Parameters
    ----------
    config : CollapsedConfig
    scorer : HeldoutScorer or None
        Scores the held-out set at evaluation points (every ``config.eval_every`` documents seen, and
        at the end of the run).
    trace : list of dict
        Records so far (of a resumed run); appended to.
    on_record : callable, optional
        ``on_record(record)`` after every record.
    """

    def __init__(self, config: CollapsedConfig, scorer: HeldoutScorer | None, trace: list[dict[str, Any]],
                 on_record: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.config = config
        self.scorer = scorer
        self.trace = trace
        self.on_record = on_record
        self.seconds = float(trace[-1]["seconds"]) if trace else 0.0

    def tick(self, seconds: float) -> None:
        """Add training time."""
        self.seconds += seconds

    def due(self, docs_before: int, docs_after: int) -> bool:
        """Whether an evaluation point (a multiple of ``eval_every`` documents) lies in ``(before, after]``."""
        every = self.config.eval_every
        return every > 0 and docs_after // every > docs_before // every

    def add(self, summary: Mapping[str, Any], view: Callable[[], LDAState], *, pass_index: int,
            evaluate: bool) -> dict[str, Any]:
        """Append a record; score the held-out set first when ``evaluate`` and a test set is given."""
        perplexity = self.scorer.perplexity(view()) if evaluate and self.scorer is not None else None
        record = {**summary, "pass": int(pass_index), "seconds": self.seconds, "heldout_perplexity": perplexity}
        self.trace.append(record)
        log.debug("collapsed trace: %s", record)
        if self.on_record is not None:
            self.on_record(dict(record))
        return record


@dataclass(frozen=True)
class Resumed:
    """What a checkpoint gives back: the state, the last unit done, the trace, the documents' n_dk."""

    state: HDPState
    done: tuple[int, int]
    trace: list[dict[str, Any]]
    doc_state: np.ndarray | None


class Checkpointer:
    """Writes and reads the checkpoint of a collapsed run (:mod:`topicflow.io.models.checkpoint`).

    The checkpoint holds the LDA view as its model, the exact state arrays with their lazy scale
    unfolded (:func:`~topicflow.pipeline.collapsed.model.raw_arrays`; and, with ``keep_doc_state``,
    every document's n_dk) as its sampler state, and the state's scalars with the position (pass,
    unit) in ``position``. A run resumed from it ends with the model an uninterrupted
    run gives.

    Parameters
    ----------
    policy : CheckpointPolicy
    corpus : Corpus
    config : CollapsedConfig
    shards : sequence of int
    split_every : int
    """

    def __init__(self, policy: CheckpointPolicy, corpus: Corpus, config: CollapsedConfig, shards: Sequence[int],
                 split_every: int) -> None:
        self.policy = policy
        self.corpus = corpus
        self.config = config
        self.language = training_language(corpus)
        self.fingerprint = {"method": config.method, "settings": config_to_dict(config), "corpus": corpus.token(),
                            "shards": list(shards), "split_every": split_every}
        self.units = 0

    def due(self, end_of_pass: bool) -> bool:
        """Whether to write after this unit (every ``policy.every`` units, and at every pass end)."""
        self.units += 1
        return end_of_pass or self.policy.due(self.units)

    def write(self, state: HDPState, done: tuple[int, int], trace: Sequence[Mapping[str, Any]],
              doc_state: np.ndarray | None = None) -> None:
        """Replace the checkpoint with ``state`` after unit ``done`` (``(pass, index)``)."""
        sampler, scalars = raw_arrays(state)
        if doc_state is not None:
            sampler["doc_topic"] = np.asarray(doc_state)
        position = {"pass": int(done[0]), "unit": int(done[1]), "collapsed_state": scalars}
        write_checkpoint(self.policy.path,
                         Checkpoint(lda_view(state, self.config, self.language), position,
                                    [dict(r) for r in trace], self.fingerprint, sampler),
                         {self.language: self.corpus.vocabulary(self.language)})

    def read(self) -> Resumed | None:
        """The checkpoint to resume from, or None (no checkpoint, or the policy does not resume)."""
        if not self.policy.resume:
            return None
        found = read_checkpoint(self.policy.path, self.fingerprint)
        if found is None:
            return None
        position = found.position
        state = state_from_raw(found.sampler_state, position["collapsed_state"], self.config.method)
        log.info("resuming %s from %s after pass %d unit %d", self.config.method, self.policy.path,
                 position["pass"], position["unit"])
        return Resumed(state, (int(position["pass"]), int(position["unit"])), list(found.trace),
                       found.sampler_state.get("doc_topic"))


def as_policy(checkpoint: CheckpointPolicy | str | Path | StoragePath | None, resume: bool) -> CheckpointPolicy | None:
    """A checkpoint policy from a policy or a path (written at every pass end; ``resume`` continues it).

    Parameters
    ----------
    checkpoint : CheckpointPolicy, path or None
    resume : bool

    Returns
    -------
    CheckpointPolicy or None

    Raises
    ------
    InvalidParameterError
        ``resume`` without a checkpoint.
    """
    if checkpoint is None:
        if resume:
            raise InvalidParameterError("resume needs a checkpoint path to resume from (pass checkpoint=PATH)")
        return None
    if isinstance(checkpoint, CheckpointPolicy):
        return checkpoint if not resume or checkpoint.resume else CheckpointPolicy(checkpoint.path, checkpoint.every,
                                                                                   True)
    return CheckpointPolicy(as_location(checkpoint), every=PASS_ENDS, resume=resume)


@dataclass
class StreamRun:
    """One run of a stochastic driver over some shards: what it needs besides the state.

    Attributes
    ----------
    corpus : Corpus
    config : CollapsedConfig
    shards : list of int
        Store indices to visit, in store order.
    passes : int
    client : distributed.Client or None
    split_every : int
    progress : ProgressReporter
    recorder : Recorder
    checkpointer : Checkpointer or None
    done : (int, int)
        The last unit done (from a checkpoint), ``(0, -1)`` for a fresh run.
    doc_state : ndarray or None
        Every document's n_dk from a checkpoint (word by word with ``keep_doc_state``).
    """

    corpus: Corpus
    config: CollapsedConfig
    shards: list[int]
    passes: int
    client: Any
    split_every: int
    progress: ProgressReporter
    recorder: Recorder
    checkpointer: Checkpointer | None = None
    done: tuple[int, int] = (0, -1)
    doc_state: np.ndarray | None = None

    @property
    def language(self) -> str:
        return training_language(self.corpus)

    @property
    def shard_sizes(self) -> list[int]:
        return [s.n_docs for s in self.corpus.shards]

    @property
    def n_docs(self) -> int:
        return sum(self.corpus.shards[s].n_docs for s in self.shards)


def run_minibatches(run: StreamRun, state: HDPState) -> HDPState:
    """PCSVB0 / SCVB0 by minibatch over ``run.shards``, ``run.passes`` times, continuing ``state`` in place.

    Parameters
    ----------
    run : StreamRun
        ``run.config.batch_size`` documents per minibatch.
    state : HDPState
        The start (fresh, saved, or from a checkpoint); updated in place and returned.

    Returns
    -------
    HDPState
        ``state``.
    """
    config, client = run.config, run.client
    assert config.batch_size is not None  # the caller dispatches on it
    ops, params = OPS[config.method], config.params
    plan = plan_settings(config, config.batch_size)
    blocks = dict(zip(run.shards, run.corpus.to_delayed(run.language, shards=run.shards)))
    run_token = graph_token(run.corpus.token(), config_to_dict(config), run.shards, run.split_every)
    per_pass = math.ceil(run.n_docs / config.batch_size)
    units, remaining = resumed_minibatches(run.shard_sizes, run.shards, plan, seed=params.seed, passes=run.passes,
                                           done=run.done)
    for minibatch in run.progress.track(units, total=remaining, desc=config.method, unit="batch"):
        started = time.perf_counter()
        token = f"{run_token}-{minibatch.epoch}-{minibatch.index}"
        view = share(ops.view(state), client, name=f"cvb0-view-{token}")
        parts = map_local_minibatch({s: blocks[s] for s in minibatch.shards}, minibatch.pieces, view, ops.local,
                                    params, token=token)
        (stats,) = compute(tree_merge_stats(parts, split_every=run.split_every, token=token), client=client)
        before = state.docs_seen
        ops.apply(state, stats, params)
        run.recorder.tick(time.perf_counter() - started)
        end_of_pass = minibatch.index == per_pass - 1
        last = end_of_pass and minibatch.epoch == run.passes - 1
        due = run.recorder.due(before, state.docs_seen)
        if due or end_of_pass:
            run.recorder.add(state_summary(state, config), lambda: lda_view(state, config, run.language),
                             pass_index=minibatch.epoch, evaluate=due or last)
        if run.checkpointer is not None and run.checkpointer.due(end_of_pass):
            run.checkpointer.write(state, (minibatch.epoch, minibatch.index), run.recorder.trace)
    return state
