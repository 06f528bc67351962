"""Online tree VB on Dask: plain-loop reference, flat tree = polylingual online VB, any cluster, checkpoints."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.reference import tree_vb as ref
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.models.tree_lda.vb import initial_edge_var, tree_vb_layout
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.tree_lda import (
    TreeLDAState,
    TreeVBConfig,
    fit_batch_tree_vb,
    fit_online_tree,
    online_tree_model,
    saved_tree,
    saved_tree_state,
)
from topicflow.pipeline.vb import OnlineConfig, VBConfig
from topicflow.pipeline.vb.batch import initial_state
from topicflow.pipeline.vb.online import fit_online
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

ETA = 0.05


def _edge_counts_from(docs, first, lam, edges, paths, alpha, max_iter, tol, per_language, seed):
    """The reference E-step's edge counts (tests/reference/tree_vb.py, one loop per document and path),
    started, as online VB starts each document, at Gamma(100, 1/100) draws keyed by its store position."""
    from scipy.special import digamma as psi

    from topicflow.models.lda.vb.estep import random_initial_gamma

    elog = ref.elog_pi(lam, edges, paths, per_language)
    counts = np.zeros_like(lam)
    for d in range(len(docs["en"])):
        tokens = [(lang, w, n) for lang in docs for w, n in docs[lang][d].items()]
        gamma = random_initial_gamma(1, len(alpha), seed=seed, first_doc=first + d)[0]

        def joint(lang, w, gamma):
            elog_theta = psi(gamma) - psi(gamma.sum())
            return np.array([np.exp(elog_theta + ref.path_log_weight(lam, edges, s, lang, elog, per_language))
                             for s in paths[lang][w]])

        for _ in range(max_iter):
            new_gamma = alpha.copy()
            for lang, w, n in tokens:
                phi = joint(lang, w, gamma)
                new_gamma = new_gamma + n * phi.sum(axis=0) / (phi.sum() + ref.PHI_NORM_EPS)
            change = np.mean(np.abs(new_gamma - gamma))
            gamma = new_gamma
            if change < tol:
                break
        for lang, w, n in tokens:
            phi = joint(lang, w, gamma)
            for s, path in enumerate(paths[lang][w]):
                for e in path:
                    counts[:, e] += n * phi[s] / (phi.sum() + ref.PHI_NORM_EPS)
    return counts


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def bilingual(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=20, doc_length=30, alpha=0.3, seed=4,
                                languages=("en", "de"))
    return write_test_store(tmp_path_factory.mktemp("tree-online") / "bi.zarr", truth.counts, shard_size=32)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, sp.csr_matrix]]:
    rng = np.random.default_rng(17)
    counts = {lang: sp.csr_matrix(rng.poisson(1.5, size=(40, 3))) for lang in ("en", "de")}
    return write_test_store(tmp_path_factory.mktemp("tree-toy") / "toy.zarr", counts, shard_size=7), counts


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_online_matches_the_plain_loop_reference_on_a_two_sense_tree(
        toy: tuple[Path, dict[str, sp.csr_matrix]], client: object, normalization: str) -> None:
    """Each minibatch: the reference E-step (joint q(z, y), one loop per document), then
    lambda <- (1 - rho) lambda + rho (beta + D/S edge counts), rho = (tau0 + t)^-kappa."""
    path, counts = toy
    tree, edges, paths = ref.toy_tree()
    config = TreeVBConfig(n_topics=3, normalization=normalization, doc_topic_prior_mode="fixed",  # type: ignore[arg-type]
                          doc_topic_prior=0.4, max_doc_iter=500, doc_tol=1e-10, seed=2)
    online = OnlineConfig(batch_size=16, tau0=2.0, kappa=0.6, pieces=3, min_piece_docs=1, eval_every=0)
    result = fit_online_tree(Corpus.open(path), tree, config, online, client=client, split_every=2)
    docs = {lang: [{w: int(n) for w, n in zip(row.indices, row.data)} for row in counts[lang]]
            for lang in ("en", "de")}
    lam = initial_edge_var(3, tree_vb_layout(tree, normalization), seed=2)
    beta = np.array([b for _, _, b in edges])
    for t, lo in enumerate(range(0, 40, 16)):
        batch = {lang: docs[lang][lo:lo + 16] for lang in docs}
        counts = _edge_counts_from(batch, lo, lam, edges, paths, np.full(3, 0.4), 500, 1e-10,
                                   normalization == "node_language", 2)
        rho = (2.0 + t) ** -0.6
        lam = (1 - rho) * lam + rho * (beta + 40 / len(batch["en"]) * counts)
    np.testing.assert_allclose(result.state.edge_var, lam, rtol=1e-7)
    assert result.t == 3 and result.docs_seen == 40
    assert [r.rho for r in result.trace] == pytest.approx([(2.0 + t) ** -0.6 for t in range(3)])
    np.testing.assert_array_equal(result.state.doc_topic_prior, np.full(3, 0.4))


def _flat_pair(corpus: Corpus, estep: str, online: OnlineConfig, mode: str = "auto"):
    vb = VBConfig(n_topics=3, seed=2, topic_word_prior=ETA, estep=estep, doc_tol=1e-6,  # type: ignore[arg-type]
                  doc_topic_prior_mode=mode)  # type: ignore[arg-type]
    lda = fit_online(corpus, vb, online)
    start = initial_state(corpus, vb)[0]
    sizes = [len(corpus.vocabulary(lang)) for lang in corpus.languages]
    config = TreeVBConfig(n_topics=3, normalization="node_language", estep=estep, seed=2, doc_tol=1e-6,  # type: ignore[arg-type]
                          doc_topic_prior_mode=mode)  # type: ignore[arg-type]
    state = TreeLDAState(np.hstack([start.topic_word_var[lang] for lang in corpus.languages]),
                         start.doc_topic_prior)
    tree = fit_online_tree(corpus, flat_tree(corpus.languages, sizes, beta=ETA), config, online, state=state)
    return lda, tree


@pytest.mark.parametrize("estep", ["vb", "hybrid"])
def test_flat_bilingual_tree_equals_polylingual_online_vb(bilingual: Path, estep: str) -> None:
    corpus = Corpus.open(bilingual)
    online = OnlineConfig(batch_size=25, tau0=3.0, kappa=0.7, passes=2, shuffle_window=50, pieces=3,
                          min_piece_docs=1, executor="tasks", eval_every=2)
    lda, tree = _flat_pair(corpus, estep, online)
    lam = np.hstack([lda.state.topic_word_var[lang] for lang in corpus.languages])
    np.testing.assert_allclose(tree.state.edge_var, lam, rtol=1e-9, atol=0)
    np.testing.assert_allclose(tree.state.doc_topic_prior, lda.state.doc_topic_prior, rtol=1e-9)
    assert (tree.t, tree.docs_seen) == (lda.t, lda.docs_seen) == (10, 240)
    assert [r.rho for r in tree.trace] == [r.rho for r in lda.trace]
    np.testing.assert_allclose([r.bound_per_token for r in tree.trace], [r.bound_per_token for r in lda.trace],
                               rtol=1e-9)
    assert sum(np.isfinite(r.bound_per_token) for r in tree.trace) == 5


def test_same_model_on_any_scheduler_worker_count_and_sharding(bilingual: Path, tmp_path: Path,
                                                               client: object) -> None:
    from distributed import Client, LocalCluster

    corpus = Corpus.open(bilingual)
    tree = flat_tree(corpus.languages, [20, 20], beta=ETA)
    config = TreeVBConfig(n_topics=3, estep="hybrid", seed=5)
    online = OnlineConfig(batch_size=30, passes=2, shuffle_window=60, pieces=4, min_piece_docs=1)
    reference = fit_online_tree(corpus, tree, config, online).state
    on_client = fit_online_tree(Corpus.open(bilingual), tree, config, online, client=client).state
    np.testing.assert_array_equal(on_client.edge_var, reference.edge_var)
    np.testing.assert_array_equal(on_client.doc_topic_prior, reference.doc_topic_prior)
    with (LocalCluster(n_workers=3, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
          Client(cluster) as three):
        on_three = fit_online_tree(Corpus.open(bilingual), tree, config, online, client=three).state
    np.testing.assert_array_equal(on_three.edge_var, reference.edge_var)
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=20, doc_length=30, alpha=0.3, seed=4,
                                languages=("en", "de"))
    resharded = Corpus.open(write_test_store(tmp_path / "s50.zarr", truth.counts, shard_size=50))
    other = fit_online_tree(resharded, tree, config, online).state
    np.testing.assert_allclose(other.edge_var, reference.edge_var, rtol=1e-10)


@pytest.mark.parametrize("estep", ["vb", "hybrid"])
def test_online_resume_after_a_crash_equals_uninterrupted(toy: tuple[Path, dict[str, sp.csr_matrix]],
                                                          tmp_path: Path, estep: str) -> None:
    path, _ = toy
    tree = ref.toy_tree()[0]
    config = TreeVBConfig(n_topics=3, estep=estep, seed=4)  # type: ignore[arg-type]
    online = OnlineConfig(batch_size=8, passes=2, shuffle_window=16, pieces=2, min_piece_docs=1, eval_every=3)
    full = fit_online_tree(Corpus.open(path), tree, config, online)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=3, resume=True)

    def crash_at_seven(record: object, state: object) -> None:
        if record.t == 7:  # type: ignore[attr-defined]
            raise Interrupted

    with pytest.raises(Interrupted):
        fit_online_tree(Corpus.open(path), tree, config, online, checkpoint=policy, on_minibatch=crash_at_seven)
    resumed = fit_online_tree(Corpus.open(path), tree, config, online, checkpoint=policy)
    assert [r.t for r in resumed.trace] == list(range(1, 11)) == [r.t for r in full.trace]
    np.testing.assert_array_equal(resumed.state.edge_var, full.state.edge_var)
    np.testing.assert_array_equal(resumed.state.doc_topic_prior, full.state.doc_topic_prior)
    assert (resumed.t, resumed.docs_seen) == (full.t, full.docs_seen)
    # Another tree (or start) is refused by name, not silently resumed.
    with pytest.raises(InvalidParameterError, match="tree_and_start"):
        fit_online_tree(Corpus.open(path), tree, dataclasses.replace(config, seed=5), online, checkpoint=policy)


def test_batch_resume_after_a_crash_equals_uninterrupted(toy: tuple[Path, dict[str, sp.csr_matrix]],
                                                         tmp_path: Path) -> None:
    path, _ = toy
    tree = ref.toy_tree()[0]
    config = TreeVBConfig(n_topics=3, estep="hybrid", max_iter=7, tol=0.0, seed=4)
    full = fit_batch_tree_vb(Corpus.open(path), tree, config)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=2, resume=True)

    def crash_at_five(record: object, state: object) -> None:
        if record.iteration == 5:  # type: ignore[attr-defined]
            raise Interrupted

    with pytest.raises(Interrupted):
        fit_batch_tree_vb(Corpus.open(path), tree, config, checkpoint=policy, on_iteration=crash_at_five)
    seen: list[int] = []
    resumed = fit_batch_tree_vb(Corpus.open(path), tree, config, checkpoint=policy,
                                on_iteration=lambda record, state: seen.append(record.iteration))
    assert seen == [4, 5, 6]  # the checkpoint of iteration 3 was the last one written
    assert [r.iteration for r in resumed.trace] == list(range(7))
    np.testing.assert_array_equal(resumed.state.edge_var, full.state.edge_var)
    np.testing.assert_array_equal(resumed.state.doc_topic_prior, full.state.doc_topic_prior)
    assert [r.elbo for r in resumed.trace] == [r.elbo for r in full.trace]
    with pytest.raises(InvalidParameterError, match="settings"):
        fit_batch_tree_vb(Corpus.open(path), tree, dataclasses.replace(config, n_topics=2), checkpoint=policy)


def test_servers_and_threads_executors_are_refused(toy: tuple[Path, dict[str, sp.csr_matrix]]) -> None:
    path, _ = toy
    for executor in ("servers", "threads"):
        with pytest.raises(InvalidParameterError, match="Dask tasks only"):
            fit_online_tree(Corpus.open(path), ref.toy_tree()[0], TreeVBConfig(n_topics=2),
                            OnlineConfig(executor=executor))


def test_saved_online_model_records_its_position_and_reloads_bit_for_bit(
        toy: tuple[Path, dict[str, sp.csr_matrix]], tmp_path: Path) -> None:
    path, _ = toy
    corpus = Corpus.open(path)
    tree = ref.toy_tree()[0]
    config = TreeVBConfig(n_topics=2, seed=1)
    online = OnlineConfig(batch_size=10, eval_every=0)
    result = fit_online_tree(corpus, tree, config, online, shards=[0, 1, 2])
    save_model(tmp_path / "m", online_tree_model(corpus, result, config, online, shards=[0, 1, 2]))
    model = load_model(tmp_path / "m")
    assert model.info.method == "online" and model.info.kind == "tree_lda"
    assert model.info.online == {"config": online.to_dict(), "t": 3, "docs_seen": 21}
    assert [s["id"] for s in model.info.corpus["shards"]] == [corpus.shards[i].shard_id for i in range(3)]
    assert len(model.info.trace) == 3 and model.info.trace[0]["t"] == 1
    state, _ = saved_tree_state(model)
    np.testing.assert_array_equal(state.edge_var, result.state.edge_var)
    assert saved_tree(model).n_edges == tree.n_edges
