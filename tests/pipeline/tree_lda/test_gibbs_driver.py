"""The Dask driver of the tree Gibbs sampler (AD-LDA over shards).

* One shard: the fit is ``run_sweeps`` in process, exactly, and its trace is the chain's joint.
* Several shards: the fit equals a serial NumPy-free reference loop of the model's own functions
  (each shard swept against the others' counts at the last synchronization), on the threaded and
  the distributed scheduler, with one or two workers; from a store as from blocks.
* Resume from the shards' ``to_arrays`` snapshots continues the chains exactly.
* Statistical: on data drawn from a known tree prior, 2-4 shards recover the topics as one shard does.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from tests.models.tree_lda.test_gibbs import concept_tree, draw_tree_corpus
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.recovery import match_topics
from topicflow.models.common.blocks import DocBlock
from topicflow.models.tree_lda import gibbs as tg
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.pipeline.tree_lda.gibbs import TreeGibbsFit, fit_tree_gibbs
from topicflow.testing.corpora import write_test_store


def _bilingual(n_docs: int = 24, seed: int = 2) -> tuple[PriorTree, dict[str, DocBlock]]:
    tree = concept_tree({"en": 8, "de": 7}, [[("en", 0), ("de", 0)], [("en", 1), ("de", 1)], [("en", 1), ("de", 2)],
                                             [("en", 2), ("en", 3)]], root_prior=0.1, concept_prior=0.5)
    blocks, _ = draw_tree_corpus(tree, 3, n_docs, 12, 0.3, seed=seed)
    return tree, blocks


def _shards(blocks: dict[str, DocBlock], bounds: list[int]) -> list[dict[str, DocBlock]]:
    return [{lang: block.slice(lo, hi) for lang, block in blocks.items()} for lo, hi in itertools.pairwise(bounds)]


def reference(shards: list[dict[str, DocBlock]], tree: PriorTree, params: tg.TreeGibbsParams, sweeps: int,
              sync_every: int = 1) -> tuple[list[tg.TreeGibbsState], list[float]]:
    """AD-LDA as a serial loop of the model's functions: each shard against the others' last-sync counts."""
    states = [tg.initial_state(shard, tree, params) for shard in shards]
    trace = []
    done = 0
    while done < sweeps:
        n = min(sync_every, sweeps - done)
        total = sum(s.edge_topic_counts.astype(np.int64) for s in states)
        states = [tg.run_sweeps(s, tree, params, n, pseudo_counts=None if len(states) == 1
                                else (total - s.edge_topic_counts).astype(np.float64)) for s in states]
        done += n
        merged = tg.state_from_assignments(
            np.concatenate([[0], np.cumsum(np.concatenate([np.diff(s.token_indptr) for s in states]))]),
            np.concatenate([s.token_words for s in states]), np.concatenate([s.topics for s in states]),
            np.concatenate([s.paths for s in states]), tree, params)
        trace.append(tg.joint_log_likelihood(merged, tree))
    return states, trace


def _assert_same_states(fit: TreeGibbsFit, states: list[tg.TreeGibbsState]) -> None:
    assert len(fit.states) == len(states)
    for got, want in zip(fit.states, states):
        got_arrays, got_meta = tg.to_arrays(got)
        want_arrays, want_meta = tg.to_arrays(want)
        assert got_meta == want_meta
        for name, value in want_arrays.items():
            assert_array_equal(got_arrays[name], value, err_msg=name)
    assert_array_equal(fit.edge_topic_counts, sum(s.edge_topic_counts.astype(np.int64) for s in states))
    assert_array_equal(fit.node_topic_counts, sum(s.node_topic_counts for s in states))


def test_one_shard_is_run_sweeps_exactly(client: object) -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=5)
    fit = fit_tree_gibbs([blocks], tree, params, sweeps=4, client=client, seed=5)
    state = tg.initial_state(blocks, tree, params)
    expected_trace = []
    for _ in range(4):
        state = tg.run_sweeps(state, tree, params, 1)
        expected_trace.append(tg.joint_log_likelihood(state, tree))
    _assert_same_states(fit, [state])
    assert_allclose(fit.trace, expected_trace, rtol=1e-12)
    assert fit.trace_sweeps == (1, 2, 3, 4) and fit.sweeps_done == 4
    assert_allclose(fit.edge_topic(), tg.edge_posterior_mean(state, tree))
    for lang, phi in tg.topic_word_distribution(state, tree).items():
        assert_allclose(fit.topic_word()[lang], phi)


@pytest.mark.parametrize("sync_every", [1, 2])
def test_shards_match_the_serial_ad_lda_reference(client: object, sync_every: int) -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=8)
    shards = _shards(blocks, [0, 7, 15, 24])
    fit = fit_tree_gibbs(shards, tree, params, sweeps=5, client=client, sync_every=sync_every)
    states, trace = reference(shards, tree, params, 5, sync_every)
    _assert_same_states(fit, states)
    assert_allclose(fit.trace, trace, rtol=1e-12)
    assert fit.trace_sweeps == ((1, 2, 3, 4, 5) if sync_every == 1 else (2, 4, 5))


def test_same_fit_on_one_worker_and_on_two() -> None:
    from distributed import Client, LocalCluster

    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=9)
    shards = _shards(blocks, [0, 6, 12, 18, 24])
    fits = []
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
                Client(cluster) as connected:
            fits.append(fit_tree_gibbs(shards, tree, params, sweeps=3, client=connected))
    _assert_same_states(fits[0], list(fits[1].states))
    assert fits[0].trace == fits[1].trace


def test_store_shards_fit_like_the_same_blocks(client: object, tmp_path: Path) -> None:
    tree, blocks = _bilingual()
    counts = {lang: sp.csr_matrix((block.counts, block.term_ids, block.indptr), shape=(block.n_docs, block.n_terms))
              for lang, block in blocks.items()}
    corpus = Corpus.open(write_test_store(tmp_path / "store", counts, shard_size=10))
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=4)
    fit = fit_tree_gibbs(corpus, tree, params, sweeps=3, client=client)
    states, _ = reference(_shards(blocks, [0, 10, 20, 24]), tree, params, 3)
    _assert_same_states(fit, states)


def test_resume_from_shard_arrays_continues_the_chains(client: object) -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=6)
    shards = _shards(blocks, [0, 12, 24])
    whole = fit_tree_gibbs(shards, tree, params, sweeps=4, client=client)
    first = fit_tree_gibbs(shards, tree, params, sweeps=2, client=client)
    resumed_states = [tg.from_arrays(arrays, meta) for arrays, meta in first.shard_arrays()]
    second = fit_tree_gibbs(resumed_states, tree, params, sweeps=2, client=client)
    _assert_same_states(second, list(whole.states))
    assert first.trace + second.trace == whole.trace
    assert second.trace_sweeps == (3, 4)


def test_bad_shards_are_refused() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3)
    with pytest.raises(InvalidParameterError, match="first_doc"):
        fit_tree_gibbs([blocks, blocks], tree, params, sweeps=1)
    with pytest.raises(InvalidParameterError, match="no shards"):
        fit_tree_gibbs([], tree, params, sweeps=1)
    state = tg.initial_state(blocks, tree, params)
    with pytest.raises(InvalidParameterError, match="not a mix"):
        fit_tree_gibbs([state, _shards(blocks, [0, 24])[0]], tree, params, sweeps=1)  # type: ignore[list-item]
    later = tg.run_sweeps(tg.initial_state(_shards(blocks, [0, 5])[0], tree, params), tree, params, 1)
    with pytest.raises(InvalidParameterError, match="different numbers of sweeps"):
        fit_tree_gibbs([later, tg.initial_state(_shards(blocks, [5, 24])[0], tree, params)], tree, params, sweeps=1)
    with pytest.raises(InvalidParameterError, match="sweeps"):
        fit_tree_gibbs([blocks], tree, params, sweeps=-1)


@pytest.mark.parametrize("bounds", [[0, 75, 150], [0, 50, 100, 150], [0, 38, 75, 112, 150]], ids=["2", "3", "4"])
def test_shards_recover_topics_like_one_shard(bounds: list[int]) -> None:
    """The synthetic corpus of the model's recovery test (40 en-de concepts, 3 topics, 150 aligned document
    pairs of 2 x 40 tokens; seed 7), split into 2, 3 or 4 shards: after 100 synchronized sweeps the
    per-language topics match the truth with Hellinger < 0.15, as the single chain does (observed: single
    0.074 / 0.098 (en / de), 2 shards 0.074 / 0.089, 3 shards 0.072 / 0.086, 4 shards 0.071 / 0.085:
    AD-LDA's approximation costs nothing visible here), and the sharded topics are within 0.1 of the
    single chain's."""
    tree = concept_tree({"en": 50, "de": 50}, [[("en", i), ("de", i)] for i in range(40)], root_prior=0.05,
                        concept_prior=1.0)
    blocks, pi = draw_tree_corpus(tree, 3, 150, 40, 0.2, seed=7)
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.2, seed=1)
    arrays = tg.tree_arrays(tree)
    true_word = np.add.reduceat(tg.path_probabilities(pi, tree), arrays.word_path_indptr[:-1], axis=1)
    truth = {"en": true_word[:, :50], "de": true_word[:, 50:]}
    truth = {lang: t / t.sum(axis=1, keepdims=True) for lang, t in truth.items()}
    single = fit_tree_gibbs([blocks], tree, params, sweeps=100).topic_word()
    sharded = fit_tree_gibbs(_shards(blocks, bounds), tree, params, sweeps=100).topic_word()
    for lang in ("en", "de"):
        assert match_topics(single[lang], truth[lang]).worst < 0.15
        assert match_topics(sharded[lang], truth[lang]).worst < 0.15
        assert match_topics(sharded[lang], single[lang]).worst < 0.1


# ----------------------------------------------------------------------------- the fit as a tree model


def _counted_edge_var(states: list[tg.TreeGibbsState], tree: PriorTree, n_topics: int) -> np.ndarray:
    """Plain loops: tokens of topic k whose path uses edge e, over every shard, plus beta_e."""
    counts = np.zeros((n_topics, tree.n_edges))
    for state in states:
        for topic, path in zip(state.topics, state.paths):
            for edge in tree.path_edges[tree.path_indptr[path]:tree.path_indptr[path + 1]]:
                counts[topic, edge] += 1
    return counts + tree.edge_prior[None, :]


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_gibbs_fit_result_is_the_posterior_of_the_merged_chain(normalization: str) -> None:
    """The saved state is lambda = N_ke + beta_e of the final assignments (counted here by plain loops), alpha
    the sampler's; the LDA view's topics are the chain's own posterior-mean read-out; one record per round."""
    from topicflow.models.tree_lda.view import lda_view
    from topicflow.pipeline.tree_lda import TreeVBConfig, gibbs_fit_result, gibbs_params

    tree, blocks = _bilingual()
    config = TreeVBConfig(n_topics=3, estep="gibbs", doc_topic_prior_mode="fixed", doc_topic_prior=0.3, seed=5,
                          max_iter=5, sync_every=2, normalization=normalization)  # type: ignore[arg-type]
    fit = fit_tree_gibbs(_shards(blocks, [0, 10, 24]), tree, gibbs_params(config), sweeps=5, sync_every=2)
    result = gibbs_fit_result(fit, config)
    assert_array_equal(result.state.edge_var, _counted_edge_var(list(fit.states), tree, 3))
    assert_array_equal(result.state.doc_topic_prior, np.full(3, 0.3))
    assert [r.iteration for r in result.trace] == [2, 4, 5] and not result.converged
    assert [r.elbo for r in result.trace] == list(fit.trace)
    n_tokens = sum(int(b.counts.sum()) for b in blocks.values())
    assert_allclose([r.elbo_per_token for r in result.trace], np.array(fit.trace) / n_tokens)
    view, _ = lda_view(result.state.edge_var, result.layout)
    for lang, words in fit.topic_word().items():
        assert_allclose(view[lang] / view[lang].sum(axis=1, keepdims=True), words, rtol=1e-12, atol=1e-15)


def test_fit_gibbs_tree_same_model_on_one_and_two_workers(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    from topicflow.pipeline.tree_lda import TreeVBConfig, fit_gibbs_tree

    tree, blocks = _bilingual()
    counts = {lang: sp.csr_matrix((block.counts, block.term_ids, block.indptr), shape=(block.n_docs, block.n_terms))
              for lang, block in blocks.items()}
    corpus = Corpus.open(write_test_store(tmp_path / "store", counts, shard_size=7))
    config = TreeVBConfig(n_topics=3, estep="gibbs", doc_topic_prior_mode="fixed", doc_topic_prior=0.3,
                          max_iter=4, sync_every=2, normalization="node_language")
    results = []
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
                Client(cluster) as connected:
            results.append(fit_gibbs_tree(corpus, tree, config, client=connected))
    threads = fit_gibbs_tree(corpus, tree, config)
    for result in results:
        assert_array_equal(result.state.edge_var, threads.state.edge_var)
        assert [r.elbo for r in result.trace] == [r.elbo for r in threads.trace]


def test_gibbs_settings_are_checked() -> None:
    from topicflow.pipeline.tree_lda import TreeVBConfig, fit_gibbs_tree, tree_mstep

    tree, _ = _bilingual()
    with pytest.raises(InvalidParameterError, match="keeps alpha fixed; give a number"):
        TreeVBConfig(n_topics=2, estep="gibbs")
    with pytest.raises(InvalidParameterError, match="sync_every"):
        TreeVBConfig(n_topics=2, estep="gibbs", doc_topic_prior_mode="fixed", sync_every=0)
    with pytest.raises(InvalidParameterError, match="inference"):
        TreeVBConfig(n_topics=2, estep="mcmc")  # type: ignore[arg-type]
    gibbs = TreeVBConfig(n_topics=2, estep="gibbs", doc_topic_prior_mode="fixed", doc_topic_prior=0.5, sync_every=3)
    with pytest.raises(InvalidParameterError, match="fit_batch_tree_vb"):
        fit_gibbs_tree(None, tree, TreeVBConfig(n_topics=2))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="no VB M-step"):
        tree_mstep(None, None, None, gibbs, iteration=0)  # type: ignore[arg-type]
    # Model files keep the settings; a file written before Gibbs existed (no sync_every) still reads.
    assert TreeVBConfig.from_dict(gibbs.to_dict()) == gibbs
    old = {key: value for key, value in TreeVBConfig(n_topics=2, doc_topic_prior=0.5).to_dict().items()
           if key != "sync_every"}
    assert TreeVBConfig.from_dict(old) == TreeVBConfig(n_topics=2, doc_topic_prior=0.5)
