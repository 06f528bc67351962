"""Dask driver of the tree collapsed Gibbs sampler: approximate distributed sampling (AD-LDA) over shards.

Scheme (Newman, Asuncion, Smyth and Welling 2009, AD-LDA; Zhai 2014, sec. 5.2 for the tree sampler):
the corpus is split into shards (a store's shards, or the caller's blocks). Each shard holds its own
chain, a :class:`~topicflow.models.tree_lda.gibbs.TreeGibbsState` (z, y of its tokens and its counts).
A *round* runs ``sync_every`` sweeps of every shard in parallel, each shard with the OTHER shards'
edge-topic counts at the last synchronization as ``pseudo_counts`` (M_ke = N_ke(all) - N_ke(shard));
then the driver gathers each shard's counts (small: K x n_edges), sums them in shard order (integers:
exact) and broadcasts the totals (one scatter per round); each shard's task subtracts its own counts. The sweeps themselves are
:func:`topicflow.models.tree_lda.gibbs.run_sweeps`; this module only schedules them.

Where the states live: as Dask futures (one per shard) on the distributed scheduler: each round's
``sweep_shard`` task takes the shard's previous state future and returns the next, so token arrays
never travel to the driver until the fit ends (only :class:`~topicflow.tasks.tree_gibbs.ShardSummary`
is gathered per round). Without a client, Dask's threaded scheduler runs the shards' sweeps in
parallel threads of this process (the numba kernel releases the GIL) and the states stay in memory.
An actor per shard was not needed: a state future is the same "state on a worker" with Dask's
usual recovery (a lost worker recomputes the shard's chain from its lineage, deterministically).

Determinism: every draw is keyed by (seed, sweep, global document) (counter-based), a shard's round
depends only on its state and the totals of the last synchronization, and the totals are summed in
shard order, so the fit is the same for any number of workers and either scheduler, given the same
shards. With one shard there are no pseudo-counts and the fit is ``run_sweeps`` exactly.

Resume: :meth:`TreeGibbsFit.shard_arrays` returns each shard's
:func:`~topicflow.models.tree_lda.gibbs.to_arrays` snapshot; passing the rebuilt states
(:func:`~topicflow.models.tree_lda.gibbs.from_arrays`) back to :func:`fit_tree_gibbs` continues the
chains exactly (when the earlier fit ended on a synchronization, which it always does).

As a tree model: :func:`fit_gibbs_tree` runs the sampler from a :class:`~topicflow.pipeline.tree_lda.TreeVBConfig`
(``estep="gibbs"``, what ``TreeLDA(inference="gibbs")`` and ``topicflow fit --inference gibbs`` run),
writes and resumes on-disk checkpoints of the chains, and returns the fit as the variational tree
state lambda = N_ke + beta_e (:func:`gibbs_fit_result`) that :func:`~topicflow.pipeline.tree_lda.tree_model` saves.

References
----------
Newman, Asuncion, Smyth and Welling (2009). Distributed algorithms for topic models. JMLR 10.
Zhai (2014). Online and distributed topic models (PhD thesis, University of Maryland), ch. 5.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.storage import StoragePath
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.validation import parse_int
from topicflow.models.lda.state import LDAState
from topicflow.models.tree_lda.gibbs import (
    TreeGibbsParams,
    TreeGibbsState,
    edge_posterior_mean,
    edge_posterior_params,
    from_arrays,
    joint_log_likelihood,
    to_arrays,
    topic_word_distribution,
)
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import tree_vb_layout
from topicflow.models.tree_lda.view import lda_view
from topicflow.pipeline.cluster import current_client
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.tree_lda.batch import TreeFitResult, TreeLDAState, TreeVBConfig
from topicflow.pipeline.tree_lda.resume import check_store_matches_tree, tree_digest
from topicflow.pipeline.vb import IterationRecord
from topicflow.tasks.tree_gibbs import (
    ShardSummary,
    counts_only_state,
    start_shard,
    start_store_shard,
    summarize_shard,
    sweep_shard,
)

log = logging.getLogger(__name__)

#: What :func:`fit_tree_gibbs` accepts as its documents: a store, shards of blocks, or states to resume.
ShardSource = Corpus | Sequence[DocBlock | Mapping[str, DocBlock]] | Sequence[TreeGibbsState]


@dataclass(frozen=True)
class TreeGibbsFit:
    """The result of :func:`fit_tree_gibbs`.

    Attributes
    ----------
    states : tuple of TreeGibbsState
        Each shard's chain after the last round, in shard order.
    edge_topic_counts : ndarray of shape (n_topics, n_edges), int64
        The merged N_ke (sum over shards, at the last synchronization).
    node_topic_counts : ndarray of shape (n_topics, n_groups), int64
        The merged group counts G_kg of the params' normalization (N_ki, one group per node, under "node").
    trace : tuple of float
        log p(w, z, y) of the merged chain after each round.
    trace_sweeps : tuple of int
        The sweep count (``sweeps_done``) at which each ``trace`` entry was taken.
    params : TreeGibbsParams
    tree : PriorTree
    trace_seconds : tuple of float
        Wall time of each round (its sweeps and the synchronization), seconds.
    """

    states: tuple[TreeGibbsState, ...]
    edge_topic_counts: IntArray
    node_topic_counts: IntArray
    trace: tuple[float, ...]
    trace_sweeps: tuple[int, ...]
    params: TreeGibbsParams
    tree: PriorTree
    trace_seconds: tuple[float, ...] = ()

    @property
    def sweeps_done(self) -> int:
        """Sweeps every shard's chain has run since its start."""
        return int(self.states[0].sweeps_done)

    def merged_state(self) -> TreeGibbsState:
        """The merged counts as a document-free state, for the model's topic read-outs.

        Returns
        -------
        TreeGibbsState
        """
        return counts_only_state(self.edge_topic_counts, self.node_topic_counts, self.states[0].doc_topic_prior,
                                 self.params.normalization)

    def edge_topic(self) -> FloatArray:
        """pi, the posterior mean per (topic, edge) of the merged counts.

        Returns
        -------
        ndarray of shape (n_topics, n_edges), float64
        """
        return edge_posterior_mean(self.merged_state(), self.tree)

    def topic_word(self) -> dict[str, FloatArray]:
        """Each topic's word distribution per language, from the merged counts.

        Returns
        -------
        dict of str to ndarray of shape (n_topics, n_terms)
        """
        return topic_word_distribution(self.merged_state(), self.tree)

    def shard_arrays(self) -> list[tuple[dict[str, np.ndarray], dict[str, Any]]]:
        """Each shard's snapshot (:func:`~topicflow.models.tree_lda.gibbs.to_arrays`), for checkpoints.

        Returns
        -------
        list of (dict of str to ndarray, dict of str to Any)
        """
        return [to_arrays(state) for state in self.states]


def _check_shards(states_or_ranges: Sequence[tuple[int, int]]) -> None:
    ordered = sorted(states_or_ranges)
    for (lo_a, hi_a), (lo_b, hi_b) in itertools.pairwise(ordered):
        if lo_b < hi_a:
            raise InvalidParameterError(
                f"two shards both hold documents {lo_b}..{min(hi_a, hi_b)} (first_doc overlaps): give each shard's "
                "blocks their global first_doc (the random numbers are keyed by it), e.g. "
                "block_from_csr(..., first_doc=start)"
            )


def _block_range(blocks: DocBlock | Mapping[str, DocBlock]) -> tuple[int, int]:
    first = blocks if isinstance(blocks, DocBlock) else next(iter(blocks.values()))
    return int(first.first_doc), int(first.first_doc + first.n_docs)


class _Runner:
    """Runs the per-shard tasks on a distributed client (states as futures) or Dask's threads."""

    def __init__(self, client: Any, tree: PriorTree, params: TreeGibbsParams) -> None:
        self.client, self.tree, self.params = client, tree, params
        self._tree = client.scatter([tree], broadcast=True, hash=False)[0] if client is not None else tree

    def sweep(self, states: Sequence[Any], n_sweeps: int, total: IntArray | None) -> list[Any]:
        if self.client is not None:
            shared = None if total is None else self.client.scatter([total], broadcast=True, hash=False)[0]
            return [self.client.submit(sweep_shard, state, self._tree, self.params, n_sweeps, shared, pure=False)
                    for state in states]
        tasks = [dask.delayed(sweep_shard, pure=False)(state, self.tree, self.params, n_sweeps, total)
                 for state in states]
        return list(dask.compute(*tasks, scheduler="threads"))

    def summaries(self, states: Sequence[Any]) -> list[ShardSummary]:
        if self.client is not None:
            futures = [self.client.submit(summarize_shard, state, self._tree, pure=False) for state in states]
            return list(self.client.gather(futures))
        return [summarize_shard(state, self.tree) for state in states]

    def gather(self, states: Sequence[Any]) -> list[TreeGibbsState]:
        return list(self.client.gather(list(states))) if self.client is not None else list(states)


def _start(source: ShardSource, runner: _Runner, tree: PriorTree, params: TreeGibbsParams) -> list[Any]:
    if isinstance(source, Corpus):
        sizes = source.vocab_sizes()
        languages = {lang: sizes[lang] for lang in tree.languages if lang in sizes}
        if not languages:
            raise InvalidParameterError(
                f"the corpus {str(source.path)!r} has languages {sorted(sizes)!r} but the prior tree has "
                f"{list(tree.languages)!r}: build the tree for this corpus"
            )
        store, shards = str(source.path), list(source.shards)
        if not shards:
            raise InvalidParameterError(f"the corpus {str(source.path)!r} has no shards: ingest documents first")
        if runner.client is not None:
            tree_ref = runner._tree
            return [runner.client.submit(start_store_shard, store, shard, languages, tree_ref, params, pure=False)
                    for shard in shards]
        tasks = [dask.delayed(start_store_shard, pure=False)(store, shard, languages, tree, params) for shard in shards]
        return list(dask.compute(*tasks, scheduler="threads"))
    items = list(source)
    if not items:
        raise InvalidParameterError("no shards given: pass a Corpus, a list of blocks (one per shard) or states")
    resumed = [item for item in items if isinstance(item, TreeGibbsState)]
    if len(resumed) == len(items):
        done = {int(state.sweeps_done) for state in resumed}
        if len(done) != 1:
            raise InvalidParameterError(
                f"the states to resume have run different numbers of sweeps {sorted(done)!r}: resume the shards of "
                "one fit, all saved at the same synchronization"
            )
        _check_shards([(s.first_doc, s.first_doc + s.n_docs) for s in resumed])
        if runner.client is not None:
            return list(runner.client.scatter(resumed, hash=False))
        return list(resumed)
    if resumed:
        raise InvalidParameterError("pass either blocks (to start) or states (to resume), not a mix of both")
    blocks = [item for item in items if not isinstance(item, TreeGibbsState)]
    _check_shards([_block_range(item) for item in blocks])
    if runner.client is not None:
        tree_ref = runner._tree
        return [runner.client.submit(start_shard, item, tree_ref, params, pure=False) for item in blocks]
    tasks = [dask.delayed(start_shard, pure=False)(item, tree, params) for item in blocks]
    return list(dask.compute(*tasks, scheduler="threads"))


def _merge(summaries: Sequence[ShardSummary]) -> tuple[IntArray, IntArray]:
    edge = np.zeros(summaries[0].edge_topic_counts.shape, dtype=np.int64)
    node = np.zeros(summaries[0].node_topic_counts.shape, dtype=np.int64)
    for summary in summaries:  # shard order (integer sums: exact whatever the order)
        edge += summary.edge_topic_counts
        node += summary.node_topic_counts
    return edge, node


def fit_tree_gibbs(
    corpus_or_blocks: ShardSource,
    tree: PriorTree,
    params: TreeGibbsParams,
    *,
    sweeps: int,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
    sync_every: int = 1,
    seed: int | None = None,
) -> TreeGibbsFit:
    """Fit the tree topic model by collapsed Gibbs sampling, one chain per shard, synchronized AD-LDA style.

    Parameters
    ----------
    corpus_or_blocks : Corpus, sequence of DocBlock / mapping of str to DocBlock, or sequence of TreeGibbsState
        The shards: a store (each of its shards is read on a worker, in the tree's languages), the
        caller's blocks (one entry per shard; a mapping holds the aligned blocks of several languages;
        shards must not overlap in ``first_doc``), or the states of an earlier fit to resume.
    tree : PriorTree
    params : TreeGibbsParams
    sweeps : int
        Sweeps to run (each shard), at least 0.
    client : distributed.Client, optional
        Run on this cluster (the states stay on the workers as futures); None: Dask's threaded scheduler.
    progress : ProgressReporter, default NO_PROGRESS
        Told of each round.
    sync_every : int, default 1
        Sweeps per round between synchronizations (the last round runs what remains).
    seed : int, optional
        Overrides ``params.seed`` (the chains' random numbers are keyed by it).

    Returns
    -------
    TreeGibbsFit

    Raises
    ------
    InvalidParameterError
        No shards, overlapping shards, states of different sweeps, a corpus without the tree's
        languages, or bad counts of sweeps.

    Notes
    -----
    Round r of shard j runs ``run_sweeps(state_j, tree, params, n, pseudo_counts=N - N_j)`` where N is
    the sum of the shards' N_ke after round r - 1 (AD-LDA; with one shard, no pseudo-counts, so the
    fit is ``run_sweeps`` exactly). The trace entry of a round is ``sum_j doc_part(state_j) +
    topic_part(N)``: the joint log-likelihood of the merged chain, with each part from
    :func:`~topicflow.models.tree_lda.gibbs.joint_log_likelihood`.
    """
    sweeps = parse_int("sweeps", sweeps, 0)
    sync_every = parse_int("sync_every", sync_every, 1)
    if seed is not None:
        params = dataclasses.replace(params, seed=parse_int("seed", seed, 0))
    runner = _Runner(client, tree, params)
    states = _start(corpus_or_blocks, runner, tree, params)
    summaries = runner.summaries(states)
    edge, node = _merge(summaries)
    single = len(states) == 1
    trace: list[float] = []
    trace_sweeps: list[int] = []
    seconds: list[float] = []
    rounds = math.ceil(sweeps / sync_every)
    for index in progress.track(range(rounds), total=rounds, desc="tree Gibbs", unit="round"):
        started = time.perf_counter()
        n_sweeps = min(sync_every, sweeps - index * sync_every)
        states = runner.sweep(states, n_sweeps, None if single else edge)
        summaries = runner.summaries(states)
        edge, node = _merge(summaries)
        alpha = params.alpha
        topic_part = joint_log_likelihood(counts_only_state(edge, node, alpha, params.normalization), tree)
        trace.append(float(sum(s.doc_log_likelihood for s in summaries) + topic_part))
        trace_sweeps.append(index * sync_every + n_sweeps)
        seconds.append(time.perf_counter() - started)
    final = runner.gather(states)
    start = int(final[0].sweeps_done) - sweeps
    return TreeGibbsFit(tuple(final), edge, node, tuple(trace), tuple(start + s for s in trace_sweeps), params, tree,
                        tuple(seconds))


def gibbs_params(config: TreeVBConfig) -> TreeGibbsParams:
    """The sampler's hyperparameters of a tree fit with ``estep="gibbs"``.

    Parameters
    ----------
    config : TreeVBConfig
        Its alpha (fixed), seed, number of topics and normalization.

    Returns
    -------
    TreeGibbsParams
    """
    return TreeGibbsParams(n_topics=config.n_topics, doc_topic_prior=config.initial_alpha, seed=config.seed,
                           normalization=config.normalization, sparse=bool(config.sparse))


def gibbs_fit_result(fit: TreeGibbsFit, config: TreeVBConfig) -> TreeFitResult:
    """A Gibbs fit as the variational tree state every tree-model reader understands.

    Parameters
    ----------
    fit : TreeGibbsFit
    config : TreeVBConfig
        The fit's settings (``normalization`` gives the layout, ``sync_every`` and ``max_iter`` the
        sweeps of the first round).

    Returns
    -------
    TreeFitResult
        ``state.edge_var`` = N_ke + beta_e, the Dirichlet parameters of the collapsed chain's posterior
        over each topic's edge probabilities given its merged assignments (so the saved topics are the
        chain's posterior means, :meth:`TreeGibbsFit.edge_topic`); ``state.doc_topic_prior`` the
        sampler's alpha. One :class:`~topicflow.pipeline.vb.IterationRecord` per round: ``iteration``
        is the number of sweeps done, ``elbo`` the joint log-likelihood log p(w, z, y) of the merged
        chain (not an ELBO), ``docs_capped`` 0. ``converged`` is False: a sampler has no convergence test.
    """
    tree = fit.tree
    edge_var = edge_posterior_params(fit.merged_state(), tree)
    alpha = np.array(fit.states[0].doc_topic_prior, dtype=np.float64)
    n_tokens = sum(state.n_tokens for state in fit.states)
    seconds = fit.trace_seconds or (0.0,) * len(fit.trace)
    records = []
    previous = fit.trace_sweeps[0] - min(config.sync_every, config.max_iter) if fit.trace_sweeps else 0
    for log_lik, done, spent in zip(fit.trace, fit.trace_sweeps, seconds):
        swept = n_tokens * (done - previous)
        previous = done
        records.append(IterationRecord(
            iteration=int(done), elbo=float(log_lik), elbo_per_token=float(log_lik) / max(n_tokens, 1),
            alpha_sum=float(alpha.sum()), eta=float(np.mean(tree.edge_prior)), seconds=float(spent),
            tokens_per_second=swept / max(spent, 1e-9), docs_capped=0))
    layout = tree_vb_layout(tree, config.normalization)
    return TreeFitResult(state=TreeLDAState(edge_var, alpha), layout=layout, trace=tuple(records), converged=False)


def fit_gibbs_tree(corpus: Corpus, tree: PriorTree, config: TreeVBConfig, *, client: Any = None,
                   progress: ProgressReporter = NO_PROGRESS,
                   checkpoint: CheckpointPolicy | None = None) -> TreeFitResult:
    """Fit tree LDA by collapsed Gibbs sampling over the store's shards and return it as a tree-VB result.

    Parameters
    ----------
    corpus : Corpus
        One chain per shard (AD-LDA, :func:`fit_tree_gibbs`).
    tree : PriorTree
        Built for the corpus' vocabularies (check them with
        :func:`topicflow.io.trees.check_tree_matches` first).
    config : TreeVBConfig
        ``estep="gibbs"``: ``max_iter`` sweeps, synchronized every ``sync_every``, fixed alpha.
    client : distributed.Client, optional
        The cluster (the chains live on its workers); None: Dask's threads in this process.
    progress : ProgressReporter, optional
    checkpoint : CheckpointPolicy, optional
        Write every shard's chain (:func:`~topicflow.models.tree_lda.gibbs.to_arrays`) and the trace
        every ``every`` rounds (the chains come to the driver for it); with ``resume``, continue from
        the checkpoint found there: the chains continue exactly, so the result is the uninterrupted
        fit's.

    Returns
    -------
    TreeFitResult
        See :func:`gibbs_fit_result`; save it with
        ``tree_model(corpus, result, config, method="gibbs")``.

    Raises
    ------
    InvalidParameterError
        ``config.estep`` is not ``"gibbs"``, the corpus does not fit the tree, or the checkpoint was
        written for other settings, another store or another tree.
    """
    if config.estep != "gibbs":
        raise InvalidParameterError(f"fit_gibbs_tree runs inference 'gibbs', not {config.estep!r}: use "
                                    "fit_batch_tree_vb for 'vb' and 'hybrid'")
    check_store_matches_tree(corpus, tree)
    params, client = gibbs_params(config), current_client(client)
    if checkpoint is None:
        fit = fit_tree_gibbs(corpus, tree, params, sweeps=config.max_iter, client=client, progress=progress,
                             sync_every=config.sync_every)
        return gibbs_fit_result(fit, config)
    fingerprint = {"method": "tree_gibbs", "settings": config.to_dict(), "corpus": corpus.token(),
                   "tree": tree_digest(tree)}
    source: ShardSource = corpus
    done, rounds = 0, _Rounds()
    found = read_checkpoint(checkpoint.path, fingerprint) if checkpoint.resume else None
    if found is not None:
        source, done, rounds = _resume_chains(found, checkpoint.path)
        log.info("resuming the tree Gibbs chains from %s after sweep %d", checkpoint.path, done)
    segment = checkpoint.every * config.sync_every  # whole rounds, so the rounds are the uninterrupted run's
    while True:
        n_sweeps = min(segment, config.max_iter - done)
        fit = fit_tree_gibbs(source, tree, params, sweeps=n_sweeps, client=client, progress=progress,
                             sync_every=config.sync_every)
        done += n_sweeps
        rounds = rounds.extended(fit)
        _write_chains(checkpoint.path, corpus, fit, config, done, rounds, fingerprint)
        if done >= config.max_iter:
            break
        source = list(fit.states)
    whole = dataclasses.replace(fit, trace=rounds.trace, trace_sweeps=rounds.sweeps, trace_seconds=rounds.seconds)
    return gibbs_fit_result(whole, config)


@dataclass(frozen=True)
class _Rounds:
    """The trace of the rounds so far (across checkpoint segments)."""

    trace: tuple[float, ...] = ()
    sweeps: tuple[int, ...] = ()
    seconds: tuple[float, ...] = ()

    def extended(self, fit: TreeGibbsFit) -> _Rounds:
        return _Rounds(self.trace + fit.trace, self.sweeps + fit.trace_sweeps,
                       self.seconds + (fit.trace_seconds or (0.0,) * len(fit.trace)))

    def records(self) -> list[dict[str, Any]]:
        return [{"log_likelihood": t, "sweeps": s, "seconds": c} for t, s, c in zip(self.trace, self.sweeps,
                                                                                   self.seconds)]


def _write_chains(path: Path | StoragePath, corpus: Corpus, fit: TreeGibbsFit, config: TreeVBConfig, done: int, rounds: _Rounds,
                  fingerprint: dict[str, Any]) -> None:
    result = gibbs_fit_result(fit, config)
    view, priors = lda_view(result.state.edge_var, result.layout)
    arrays: dict[str, np.ndarray] = {"edge_var": result.state.edge_var}
    metas = []
    for index, (shard_arrays, meta) in enumerate(fit.shard_arrays()):
        arrays.update({f"shard{index}/{name}": value for name, value in shard_arrays.items()})
        metas.append(meta)
    state = LDAState(view, result.state.doc_topic_prior, dict(priors))
    write_checkpoint(path, Checkpoint(state, {"sweeps_done": done, "shards": metas}, rounds.records(), fingerprint,
                                      arrays), {lang: corpus.vocabulary(lang) for lang in fit.tree.languages})


def _resume_chains(found: Checkpoint, path: Path | StoragePath) -> tuple[list[TreeGibbsState], int, _Rounds]:
    metas = found.position.get("shards")
    if not isinstance(metas, list) or not metas:
        raise ModelFormatError(f"checkpoint {str(path)!r} holds no Gibbs chains; delete it, or run the fit without "
                               "--resume.", path=str(path), field="position/shards")
    states = []
    for index, meta in enumerate(metas):
        prefix = f"shard{index}/"
        arrays = {name[len(prefix):]: value for name, value in found.sampler_state.items() if name.startswith(prefix)}
        states.append(from_arrays(arrays, meta))
    records = found.trace
    rounds = _Rounds(tuple(float(r["log_likelihood"]) for r in records), tuple(int(r["sweeps"]) for r in records),
                     tuple(float(r["seconds"]) for r in records))
    return states, int(found.position["sweeps_done"]), rounds
