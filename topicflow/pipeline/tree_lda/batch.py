"""Driver of batch variational tree LDA (tLDA / ptLDA) on Dask: variational or hybrid E-step.

Per iteration, as batch VB of LDA (:mod:`topicflow.pipeline.vb.batch`): share the per-word topic
weights once (:func:`~topicflow.models.tree_lda.vb.prepare_tree_topics`), map the unchanged LDA
E-step over every block, tree-merge the statistics in a fixed order, then on the driver compute the
ELBO (eq. 5.4), update the edge parameters lambda (eq. 5.5, or 5.6 for the hybrid E-step) and alpha
(Newton-Raphson). The math is in :mod:`topicflow.models.tree_lda`; the graphs in :mod:`topicflow.tasks`.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from topicflow import config as tf_config
from topicflow._typing import AlphaMode, FloatArray, TreeNormalization
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.models.common.dirichlet import newton_alpha, newton_symmetric_alpha
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.models.tree_lda.hybrid import mstep_tree_hybrid
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import (
    TREE_NORMALIZATIONS,
    TreeVBLayout,
    check_edge_var,
    full_elbo_tree,
    initial_edge_var,
    mstep_tree,
    prepare_tree_topics,
    tree_vb_layout,
)
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.policies import CheckpointPolicy, has_converged
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.tree_lda.resume import (
    check_store_matches_tree,
    read_tree_checkpoint,
    tree_digest,
    write_tree_checkpoint,
)
from topicflow.pipeline.vb import IterationRecord, VBConfig, share
from topicflow.tasks.estep import graph_token, map_estep, tree_merge

log = logging.getLogger(__name__)

#: Tree inference schemes (``TreeVBConfig.estep``, ``TreeLDA(inference=)``, ``fit --inference``).
TreeInference = Literal["vb", "hybrid", "gibbs"]
TREE_INFERENCE: tuple[str, ...] = ("vb", "hybrid", "gibbs")


@dataclass(frozen=True, slots=True)
class TreeVBConfig:
    """What batch tree VB computes; validated once here.

    Attributes
    ----------
    n_topics : int
    normalization : {"node", "node_language"}
        Dirichlet groups of the edges (:mod:`topicflow.models.tree_lda.vb`): ``node`` is the chapter's
        model (a flat tree = LDA over the stacked vocabularies), ``node_language`` normalizes per
        language under each node (a flat tree = polylingual LDA).
    estep : {"vb", "hybrid", "gibbs"}
        The inference scheme: dense coordinate ascent per document, Gibbs sampling within VB with path
        draws at the M-step (eq. 5.6), or collapsed Gibbs sampling of (z, y) (eq. 5.2; AD-LDA over the
        shards, :mod:`topicflow.pipeline.tree_lda.gibbs`). ``gibbs`` keeps alpha fixed
        (``doc_topic_prior_mode="fixed"``) and runs ``max_iter`` sweeps (no ELBO, so ``tol`` is unused).
    doc_topic_prior_mode : {"auto", "symmetric", "fixed"}
    doc_topic_prior : float or None
        Initial (or fixed) alpha_k; default 1 / n_topics.
    max_iter, tol, max_doc_iter, doc_tol, seed, burn_in, samples, hybrid_init, hybrid_alpha_stats, init_shape
        As in :class:`topicflow.pipeline.vb.VBConfig` (for ``gibbs``, ``max_iter`` counts sweeps and
        ``max_doc_iter``, ``doc_tol`` are the fold-in settings of the saved model's readers).
    sync_every : int, default 1
        Gibbs: sweeps of every shard between two synchronizations of the edge counts (AD-LDA).
    sparse : bool, default False
        Gibbs: draw from the bucket decomposition (``TreeGibbsParams.sparse``): the same conditional,
        other draws.
    """

    n_topics: int
    normalization: TreeNormalization = "node"
    estep: TreeInference = "vb"
    doc_topic_prior_mode: AlphaMode = "auto"
    doc_topic_prior: float | None = None
    max_iter: int = 50
    tol: float = 1e-4
    max_doc_iter: int = 100
    doc_tol: float = 1e-3
    seed: int = 0
    burn_in: int = 5
    samples: int = 5
    hybrid_init: str = "progressive"
    hybrid_alpha_stats: str = "mean"
    init_shape: float = 100.0
    sync_every: int = 1
    sparse: bool = False

    def __post_init__(self) -> None:
        if self.normalization not in TREE_NORMALIZATIONS:
            raise InvalidParameterError(
                f"normalization must be one of {list(TREE_NORMALIZATIONS)} (got {self.normalization!r})")
        if self.estep not in TREE_INFERENCE:
            raise InvalidParameterError(f"inference (estep) must be one of {list(TREE_INFERENCE)} (got {self.estep!r})")
        if self.estep == "gibbs" and self.doc_topic_prior_mode != "fixed":
            raise InvalidParameterError(
                f"alpha {self.doc_topic_prior_mode!r} with inference 'gibbs': the tree Gibbs sampler keeps alpha "
                "fixed; give a number (Zhai 2014, ch. 5: 0.01) or use inference 'vb' or 'hybrid' to learn it")
        if isinstance(self.sync_every, bool) or not isinstance(self.sync_every, int) or self.sync_every < 1:
            raise InvalidParameterError(f"sync_every must be an integer >= 1 (got {self.sync_every!r})")
        self.vb_config()  # validates the shared settings

    def vb_config(self) -> VBConfig:
        """The LDA settings of the same E-step (selects and parameterizes the kernel; ``gibbs``: the VB
        fold-in of the saved model)."""
        return VBConfig(
            n_topics=self.n_topics, doc_topic_prior_mode=self.doc_topic_prior_mode,
            doc_topic_prior=self.doc_topic_prior, max_iter=self.max_iter, tol=self.tol,
            max_doc_iter=self.max_doc_iter, doc_tol=self.doc_tol, seed=self.seed,
            estep="vb" if self.estep == "gibbs" else self.estep,
            burn_in=self.burn_in, samples=self.samples, hybrid_init=self.hybrid_init,  # type: ignore[arg-type]
            hybrid_alpha_stats=self.hybrid_alpha_stats, init_shape=self.init_shape,  # type: ignore[arg-type]
        )

    @property
    def initial_alpha(self) -> float:
        return self.doc_topic_prior if self.doc_topic_prior is not None else 1.0 / self.n_topics

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (model files keep it as ``settings``); :meth:`from_dict` inverts it."""
        payload = {name: getattr(self, name) for name in self.__slots__}
        payload["doc_topic_prior"] = self.initial_alpha
        return payload

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> TreeVBConfig:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        return cls(**{name: payload[name] for name in cls.__slots__ if name in payload})


@dataclass(frozen=True, slots=True)
class TreeLDAState:
    """Variational state of tree LDA: edge parameters lambda and alpha.

    Attributes
    ----------
    edge_var : ndarray of shape (n_topics, n_edges)
    doc_topic_prior : ndarray of shape (n_topics,)
    """

    edge_var: FloatArray
    doc_topic_prior: FloatArray


@dataclass(frozen=True, slots=True)
class TreeFitResult:
    """The fitted state, the layout it lives in, the trace and whether the ELBO converged.

    Attributes
    ----------
    state : TreeLDAState
    layout : TreeVBLayout
    trace : tuple of IterationRecord
    converged : bool
    """

    state: TreeLDAState
    layout: TreeVBLayout
    trace: tuple[IterationRecord, ...]
    converged: bool


def tree_mstep(state: TreeLDAState, stats: EStepStats, layout: TreeVBLayout, config: TreeVBConfig, *,
               iteration: int) -> TreeLDAState:
    """Edge parameters by eq. 5.5 (VB) or 5.6 (hybrid), then alpha by Newton-Raphson as configured.

    Parameters
    ----------
    state : TreeLDAState
        The state the E-step used.
    stats : EStepStats
        Merged statistics of the corpus.
    layout : TreeVBLayout
    config : TreeVBConfig
    iteration : int
        Epoch of the hybrid path draws.

    Returns
    -------
    TreeLDAState

    Raises
    ------
    InvalidParameterError
        ``config.estep`` is ``"gibbs"`` (the sampler has no M-step: fit it with
        :func:`topicflow.pipeline.tree_lda.fit_gibbs_tree`).
    """
    if config.estep == "gibbs":
        raise InvalidParameterError("inference 'gibbs' is the collapsed sampler, which has no VB M-step: fit it with "
                                    "topicflow.pipeline.tree_lda.fit_gibbs_tree (or TreeLDA(inference='gibbs'))")
    if config.estep == "hybrid":
        edge_var = mstep_tree_hybrid(stats, state.edge_var, layout, samples=config.samples, seed=config.seed,
                                     epoch=iteration)
    else:
        edge_var = mstep_tree(stats, state.edge_var, layout)
    alpha = state.doc_topic_prior
    if config.doc_topic_prior_mode == "auto":
        alpha, _ = newton_alpha(alpha, stats.alpha_suff, stats.n_docs)
    elif config.doc_topic_prior_mode == "symmetric":
        shared, _ = newton_symmetric_alpha(float(alpha[0]), stats.alpha_suff, stats.n_docs)
        alpha = np.full(config.n_topics, shared)
    return replace(state, edge_var=edge_var, doc_topic_prior=np.asarray(alpha, dtype=np.float64))


def fit_batch_tree_vb(
    corpus: Corpus,
    tree: PriorTree,
    config: TreeVBConfig,
    *,
    client: Any = None,
    split_every: int | None = None,
    initial: FloatArray | None = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_iteration: Callable[[IterationRecord, TreeLDAState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
) -> TreeFitResult:
    """Fit tree LDA (polylingual with several languages) by batch VB or hybrid VB on Dask.

    Parameters
    ----------
    corpus : Corpus
        Its languages must be the tree's, in the tree's order, with the tree's vocabulary sizes (check
        the vocabularies themselves with :func:`topicflow.io.trees.check_tree_matches` first).
    tree : PriorTree
    config : TreeVBConfig
    client : distributed.Client, optional
    split_every : int, optional
        Fan-in of the statistics' tree reduction (config ``split-every``, default 8).
    initial : ndarray of shape (n_topics, n_edges), optional
        Starting lambda (default :func:`~topicflow.models.tree_lda.vb.initial_edge_var`).
    progress : ProgressReporter
    on_iteration : callable, optional
        ``on_iteration(record, state)`` after every M-step.
    checkpoint : CheckpointPolicy, optional
        Write lambda, alpha and the trace every ``checkpoint.every`` iterations
        (:mod:`topicflow.pipeline.tree_lda.resume`); with ``checkpoint.resume``, continue from the
        checkpoint found there (written for the same store, settings, tree and start): the result is
        the uninterrupted run's, bit for bit.

    Returns
    -------
    TreeFitResult

    Raises
    ------
    InvalidParameterError
        The corpus' languages or vocabulary sizes differ from the tree's, or the checkpoint to resume
        from was written for another store, settings, tree or start.
    NumericalError
        The ELBO became non-finite.
    """
    check_store_matches_tree(corpus, tree)
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    layout = tree_vb_layout(tree, config.normalization)
    edge_var = (initial_edge_var(config.n_topics, layout, seed=config.seed, shape=config.init_shape)
                if initial is None else check_edge_var(np.array(initial, dtype=np.float64), layout))
    if edge_var.shape[0] != config.n_topics:
        raise InvalidParameterError(f"initial lambda has {edge_var.shape[0]} topics, not {config.n_topics}")
    state = TreeLDAState(edge_var, np.full(config.n_topics, config.initial_alpha))
    params = config.vb_config().estep_params()
    run_token = graph_token(corpus.token(), config.to_dict(), split_every, "tree", tree.edge_prior.tobytes(),
                            tree.path_edges.tobytes(), edge_var.tobytes())
    blocks = corpus.to_delayed_multi()
    n_tokens = corpus.n_tokens
    trace: list[IterationRecord] = []
    fingerprint = {"method": "tree_batch", "settings": config.to_dict(), "corpus": corpus.token(),
                   "split_every": split_every, "tree_and_start": tree_digest(tree, edge_var)}
    start = 0
    if checkpoint is not None and checkpoint.resume:
        found = read_tree_checkpoint(checkpoint.path, fingerprint, layout)
        if found is not None:
            edge_var, alpha, saved = found
            state = TreeLDAState(edge_var, alpha)
            start = int(saved.position["iteration"]) + 1
            trace = [IterationRecord(**record) for record in saved.trace]
            log.info("resuming from %s after iteration %d", checkpoint.path, start - 1)
    if has_converged([r.elbo for r in trace], config.tol):
        start = config.max_iter
    iterations = progress.track(range(start, config.max_iter), total=config.max_iter - start, desc="fit", unit="iter")
    for iteration in iterations:
        started = time.perf_counter()
        token = f"{run_token}-{iteration}"
        topics = share(prepare_tree_topics(state.edge_var, layout), client, name=f"tree-topics-{token}")
        parts = map_estep(blocks, topics, state.doc_topic_prior, params, token=token, epoch=iteration)
        (stats,) = compute(tree_merge(parts, split_every=split_every, token=token), client=client)
        elbo = full_elbo_tree(stats, state.edge_var, layout, state.doc_topic_prior)
        state = tree_mstep(state, stats, layout, config, iteration=iteration)
        seconds = time.perf_counter() - started
        record = IterationRecord(
            iteration=iteration, elbo=elbo, elbo_per_token=elbo / max(n_tokens, 1),
            alpha_sum=float(state.doc_topic_prior.sum()), eta=float(np.mean(tree.edge_prior)),
            seconds=seconds, tokens_per_second=n_tokens / max(seconds, 1e-9), docs_capped=stats.n_capped,
        )
        trace.append(record)
        log.info("tree iteration %d: ELBO %.6e (%.4f per token), alpha sum %.4f, %.2f s",
                 iteration, elbo, record.elbo_per_token, record.alpha_sum, seconds)
        if on_iteration is not None:
            on_iteration(record, state)
        if checkpoint is not None and checkpoint.due(iteration + 1):
            write_tree_checkpoint(checkpoint.path, corpus, layout, state.edge_var, state.doc_topic_prior,
                                  {"iteration": iteration}, [r.to_dict() for r in trace], fingerprint)
        if has_converged([r.elbo for r in trace], config.tol):
            break
    return TreeFitResult(state=state, layout=layout, trace=tuple(trace),
                         converged=has_converged([r.elbo for r in trace], config.tol))
