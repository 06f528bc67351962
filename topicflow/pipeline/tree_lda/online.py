"""Driver of online variational tree LDA (tLDA / ptLDA) on Dask (Hoffman et al. 2010 with a prior tree).

The corpus streams in the minibatches of online LDA (:func:`topicflow.pipeline.vb.plan_minibatches`:
same plan, same pieces, same :class:`~topicflow.pipeline.vb.OnlineConfig`). Per minibatch t:

1. share the per-word topic weights of the current lambda once
   (:func:`~topicflow.models.tree_lda.vb.prepare_tree_topics`) and map the unchanged LDA E-step over
   the minibatch's pieces as Dask tasks, tree-merged in a fixed order;
2. on the driver, move the edge parameters a step rho_t = (tau0 + t) ** -kappa towards the batch
   M-step of D/|S| copies of the minibatch: ``lambda <- (1 - rho_t) lambda + rho_t (beta + D/|S| E[n_ke])``
   (eq. 5.5 of Zhai 2014 inside the online update of sec. 6.1, eqs. 6.3-6.4 = Hoffman et al. 2010,
   Algorithm 2;
   :func:`~topicflow.models.tree_lda.vb.mstep_tree_online`, or
   :func:`~topicflow.models.tree_lda.hybrid.mstep_tree_hybrid_online` with path draws for the
   hybrid E-step, eq. 5.6);
3. move alpha a step rho_t towards its Newton-Raphson optimum for the minibatch, the rule of online
   LDA (:func:`topicflow.models.lda.vb.online.alpha_target` and ``blend``).

Executor: only Dask tasks. Online LDA's E-step servers and driver threads keep a replica of an LDA
lambda moved by sparse steps; a tree's lambda lives on edges, so ``executor="servers"`` or
``"threads"`` is refused (``"auto"`` means tasks here). The plan depends only on the shard sizes,
the settings and the seed: the same model on any number of workers or partitions.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from topicflow import config as tf_config
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.vb.objective import local_elbo_terms
from topicflow.models.lda.vb.online import alpha_target, blend
from topicflow.models.tree_lda.hybrid import mstep_tree_hybrid_online
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import (
    TreeVBLayout,
    check_edge_var,
    initial_edge_var,
    mstep_tree_online,
    prepare_tree_topics,
    tree_topic_elbo_terms,
    tree_vb_layout,
)
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.tree_lda.batch import TreeFitResult, TreeLDAState, TreeVBConfig
from topicflow.pipeline.tree_lda.model import tree_model
from topicflow.pipeline.tree_lda.resume import (
    check_store_matches_tree,
    read_tree_checkpoint,
    tree_digest,
    write_tree_checkpoint,
)
from topicflow.pipeline.vb import (
    MinibatchRecord,
    OnlineConfig,
    resumed_minibatches,
    share,
)
from topicflow.tasks.estep import graph_token, map_piece_estep, tree_merge

log = logging.getLogger(__name__)

#: Executors of :class:`~topicflow.pipeline.vb.OnlineConfig` the tree driver runs (``auto`` = tasks).
TREE_EXECUTORS = ("auto", "tasks")


#: One line of the online trace: online LDA's record (the tree changes only the M-step).
TreeMinibatchRecord = MinibatchRecord


@dataclass(frozen=True, slots=True)
class TreeOnlineResult:
    """The state after the stream, its layout, how far the schedule got and the trace of this run.

    Attributes
    ----------
    state : TreeLDAState
    layout : TreeVBLayout
    t : int
        Minibatches processed in all (the schedule's position; continue with it).
    docs_seen : int
        Documents processed in all.
    trace : tuple of TreeMinibatchRecord
    """

    state: TreeLDAState
    layout: TreeVBLayout
    t: int
    docs_seen: int
    trace: tuple[TreeMinibatchRecord, ...]


def check_tree_executor(online: OnlineConfig) -> None:
    """Refuse the executors the tree driver does not run (module docstring).

    Parameters
    ----------
    online : OnlineConfig

    Raises
    ------
    InvalidParameterError
        ``executor`` is ``servers`` or ``threads``.
    """
    if online.executor not in TREE_EXECUTORS:
        raise InvalidParameterError(
            f"online tree LDA runs its minibatch E-steps as Dask tasks only; executor {online.executor!r} (E-step "
            "servers and driver threads keep an LDA lambda, not a tree's edge parameters) is not available: use "
            "executor 'tasks' or 'auto' (--executor tasks). The model is the same.")


def fit_online_tree(
    corpus: Corpus,
    tree: PriorTree,
    config: TreeVBConfig,
    online: OnlineConfig,
    *,
    state: TreeLDAState | None = None,
    t: int = 0,
    docs_seen: int = 0,
    shards: Sequence[int] | None = None,
    client: Any = None,
    split_every: int | None = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_minibatch: Callable[[TreeMinibatchRecord, TreeLDAState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
) -> TreeOnlineResult:
    """Online VB (or hybrid) of tree LDA over ``shards`` of ``corpus``, continuing from ``state`` and ``t``.

    Parameters
    ----------
    corpus : Corpus
        Its languages and vocabulary sizes must be the tree's.
    tree : PriorTree
    config : TreeVBConfig
        Hyperparameters and the E-step (``vb`` or ``hybrid``); ``max_iter`` and ``tol`` are unused.
    online : OnlineConfig
        Minibatch size, step sizes (tau0, kappa), passes, shuffle, pieces, D (``total_docs``, default the
        store's size) and ``eval_every``; ``executor`` must be ``auto`` or ``tasks``.
    state : TreeLDAState, optional
        Model to continue (a saved model during ``topicflow update``); default lambda
        :func:`~topicflow.models.tree_lda.vb.initial_edge_var` from ``config.seed`` and alpha
        ``config.initial_alpha``.
    t, docs_seen : int
        Minibatches and documents ``state`` has already processed (the step-size schedule continues).
    shards : sequence of int, optional
        Store indices of the shards to stream, in store order (default all).
    client : distributed.Client, optional
    split_every : int, optional
        Fan-in of the statistics' tree reduction (config ``split-every``, default 8).
    progress : ProgressReporter
    on_minibatch : callable, optional
        ``on_minibatch(record, state)`` after every update.
    checkpoint : CheckpointPolicy, optional
        Write the driver state every ``every`` minibatches; with ``resume``, continue from it (the
        result is the uninterrupted run's, bit for bit).

    Returns
    -------
    TreeOnlineResult

    Raises
    ------
    InvalidParameterError
        The store does not match the tree, the executor is not ``auto``/``tasks``, the E-step is not
        ``vb``/``hybrid``, ``state`` has the
        wrong shape, or the checkpoint was written for other settings, store, tree or start.
    """
    check_store_matches_tree(corpus, tree)
    check_tree_executor(online)
    if config.estep not in ("vb", "hybrid"):
        raise InvalidParameterError(
            f"online tree LDA is variational: estep must be 'vb' or 'hybrid', not {config.estep!r} (use the "
            "batch Gibbs sampler for 'gibbs')")
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    layout = tree_vb_layout(tree, config.normalization)
    if state is None:
        state = TreeLDAState(initial_edge_var(config.n_topics, layout, seed=config.seed, shape=config.init_shape),
                             np.full(config.n_topics, config.initial_alpha))
    edge_var = check_edge_var(np.array(state.edge_var, dtype=np.float64), layout)
    if edge_var.shape[0] != config.n_topics or np.shape(state.doc_topic_prior) != (config.n_topics,):
        raise InvalidParameterError(f"the starting state has {edge_var.shape[0]} topics, not {config.n_topics}")
    state = TreeLDAState(edge_var, np.array(state.doc_topic_prior, dtype=np.float64))
    shards = list(range(corpus.n_shards)) if shards is None else [int(s) for s in shards]
    total_docs = online.total_docs or len(corpus)
    schedule = online.schedule()
    shard_sizes = [s.n_docs for s in corpus.shards]
    start_digest = tree_digest(tree, state.edge_var, state.doc_topic_prior)
    run_token = graph_token(corpus.token(), config.to_dict(), online.to_dict(), shards, split_every, t, "tree",
                            start_digest)
    fingerprint = {
        "method": "tree_online", "settings": config.to_dict(),
        "online": {k: v for k, v in online.to_dict().items() if k != "executor"}, "corpus": corpus.token(),
        "shards": shards, "split_every": split_every, "t0": t, "tree_and_start": start_digest,
    }
    trace: list[TreeMinibatchRecord] = []
    done = (0, -1)  # (epoch, minibatch index) of the last processed minibatch
    if checkpoint is not None and checkpoint.resume:
        found = read_tree_checkpoint(checkpoint.path, fingerprint, layout)
        if found is not None:
            saved_edge_var, saved_alpha, saved = found
            state = TreeLDAState(saved_edge_var, saved_alpha)
            t, docs_seen = int(saved.position["t"]), int(saved.position["docs_seen"])
            done = (int(saved.position["epoch"]), int(saved.position["minibatch"]))
            trace = [TreeMinibatchRecord(**record) for record in saved.trace]
            log.info("resuming from %s at pass %d after minibatch %d", checkpoint.path, *done)
    params = config.vb_config().estep_params(online=True)
    blocks = corpus.to_delayed_multi()
    plan, remaining = resumed_minibatches(shard_sizes, shards, online, seed=config.seed, passes=online.passes,
                                          done=done)
    for minibatch in progress.track(plan, total=remaining, desc="online", unit="batch"):
        started = time.perf_counter()
        rho = schedule.rho(t)
        token = f"{run_token}-{minibatch.epoch}-{minibatch.index}"
        topics = share(prepare_tree_topics(state.edge_var, layout), client, name=f"tree-topics-{token}")
        parts = map_piece_estep({s: blocks[s] for s in minibatch.shards}, minibatch.pieces, topics,
                                state.doc_topic_prior, params, epoch=t, token=token)
        (stats,) = compute(tree_merge(parts, split_every=split_every, token=token), client=client)
        bound = math.nan
        if online.eval_every and (t + 1) % online.eval_every == 0:
            scale = total_docs / max(stats.n_docs, 1)
            bound = (scale * local_elbo_terms(stats, state.doc_topic_prior)
                     + tree_topic_elbo_terms(state.edge_var, layout)) / max(scale * stats.n_tokens, 1)
        if config.estep == "hybrid":
            edge_var = mstep_tree_hybrid_online(stats, state.edge_var, layout, samples=config.samples,
                                                seed=config.seed, epoch=t, rho=rho, total_docs=total_docs)
        else:
            edge_var = mstep_tree_online(stats, state.edge_var, layout, rho=rho, total_docs=total_docs)
        alpha = blend(state.doc_topic_prior,
                      alpha_target(state.doc_topic_prior, stats, config.doc_topic_prior_mode), rho)
        state = replace(state, edge_var=edge_var, doc_topic_prior=np.asarray(alpha, dtype=np.float64))
        t += 1
        docs_seen += stats.n_docs
        seconds = time.perf_counter() - started
        record = TreeMinibatchRecord(
            t=t, epoch=minibatch.epoch, minibatch=minibatch.index, docs=stats.n_docs, tokens=stats.n_tokens,
            rho=rho, docs_seen=docs_seen, alpha_sum=float(state.doc_topic_prior.sum()), bound_per_token=bound,
            seconds=seconds, docs_per_second=stats.n_docs / max(seconds, 1e-9),
            tokens_per_second=stats.n_tokens / max(seconds, 1e-9),
        )
        trace.append(record)
        log.debug("tree minibatch %d: rho %.4f, %d docs, %.3f s", t, rho, stats.n_docs, seconds)
        if on_minibatch is not None:
            on_minibatch(record, state)
        if checkpoint is not None and checkpoint.due(len(trace)):
            write_tree_checkpoint(
                checkpoint.path, corpus, layout, state.edge_var, state.doc_topic_prior,
                {"epoch": minibatch.epoch, "minibatch": minibatch.index, "t": t, "docs_seen": docs_seen},
                [r.to_dict() for r in trace], fingerprint)
    return TreeOnlineResult(state=state, layout=layout, t=t, docs_seen=docs_seen, trace=tuple(trace))


def tree_online_position(online: OnlineConfig, result: TreeOnlineResult) -> dict[str, Any]:
    """The ``info.online`` record of an online tree model: what ``topicflow update`` continues from.

    Parameters
    ----------
    online : OnlineConfig
        The settings the run used.
    result : TreeOnlineResult

    Returns
    -------
    dict
        ``{"config": online.to_dict(), "t": result.t, "docs_seen": result.docs_seen}`` (online LDA's record).
    """
    return {"config": online.to_dict(), "t": int(result.t), "docs_seen": int(result.docs_seen)}


def online_tree_model(corpus: Corpus, result: TreeOnlineResult, config: TreeVBConfig, online: OnlineConfig, *,
                      tree_source: str | None = None, shards: Sequence[int] | None = None,
                      seen: Sequence[dict[str, str]] = (), method: str = "online") -> SavedModel:
    """The saved model of an online tree fit: :func:`tree_model` with the online position and trace.

    Parameters
    ----------
    corpus : Corpus
        The training store.
    result : TreeOnlineResult
    config : TreeVBConfig
    online : OnlineConfig
    tree_source : str, optional
        Path of the prior-tree file (provenance).
    shards : sequence of int, optional
        Store positions streamed by this run (default all).
    seen : sequence of dict
        Shards (``{"id", "checksum"}``) processed before this run (an update passes the model's).
    method : str, default "online"
        ``info.method``.

    Returns
    -------
    SavedModel
        ``info.online`` is :func:`tree_online_position`; ``info.trace`` the minibatch records.
    """
    shards = list(range(corpus.n_shards)) if shards is None else list(shards)
    fit = TreeFitResult(state=result.state, layout=result.layout, trace=(), converged=False)
    model = tree_model(corpus, fit, config, tree_source=tree_source, method=method,
                       online=tree_online_position(online, result), shards=shards)
    info = model.info.with_changes(trace=[r.to_dict() for r in result.trace],
                                   corpus=corpus_provenance(corpus, shards, seen))
    return replace(model, info=info)
