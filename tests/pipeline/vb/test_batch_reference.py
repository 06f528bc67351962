"""The Dask batch-VB fit equals the plain-NumPy reference loop to 1e-8.

Covers plain LDA, informed priors (an eta matrix) and polylingual LDA with a document missing a
language, on a store of several shards computed on both schedulers. Alpha is fixed here so the
reference stays a few obvious lines; the Newton step is checked against scipy below.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from tests.reference.corpora import random_counts
from tests.reference.vb_lda_numpy import batch_vb_reference
from topicflow.io.corpus.reader import Corpus
from topicflow.models.common.dirichlet import dirichlet_objective, newton_alpha
from topicflow.models.lda.priors import SeedTopic
from topicflow.models.lda.vb.objective import initial_topic_word_var
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb, initial_state
from topicflow.testing.corpora import write_test_store

N_TOPICS, ITERATIONS, ALPHA, ETA = 3, 4, 0.3, 0.05


def reference_docs(dense: dict[str, np.ndarray]) -> dict[str, list[dict[int, int]]]:
    return {
        lang: [{int(w): int(c) for w, c in zip(np.flatnonzero(row), row[row > 0])} for row in matrix]
        for lang, matrix in dense.items()
    }


def run_both(tmp_path: Path, dense: dict[str, np.ndarray], config: VBConfig, client: object) -> tuple:
    path = write_test_store(tmp_path / "c.zarr", {k: sp.csr_matrix(v) for k, v in dense.items()}, shard_size=7)
    corpus = Corpus.open(path)
    result = fit_batch_vb(corpus, config, client=client, split_every=2)
    start, _ = initial_state(corpus, config)
    lam0 = {lang: initial_topic_word_var(N_TOPICS, dense[lang].shape[1], seed=config.seed, language_index=i)
            for i, lang in enumerate(corpus.languages)}
    for lang in lam0:
        np.testing.assert_array_equal(start.topic_word_var[lang], lam0[lang])
    eta = {lang: start.topic_word_prior[lang] for lang in corpus.languages}
    lams, elbos = batch_vb_reference(reference_docs(dense), lam0, eta, np.full(N_TOPICS, ALPHA),
                                     ITERATIONS, config.max_doc_iter, config.doc_tol, warm_start=config.warm_start)
    return result, lams, elbos


def config(**changes: object) -> VBConfig:
    base = dict(n_topics=N_TOPICS, doc_topic_prior_mode="fixed", doc_topic_prior=ALPHA, topic_word_prior=ETA,
                max_iter=ITERATIONS, tol=0.0,
                max_doc_iter=50, doc_tol=1e-6, seed=5, warm_start=False, cold_iterations=0)
    base.update(changes)
    return VBConfig(**base)  # type: ignore[arg-type]


def assert_same(result: object, lams: list, elbos: list) -> None:
    np.testing.assert_allclose([r.elbo for r in result.trace], elbos, rtol=1e-8)  # type: ignore[attr-defined]
    for lang, lam in lams[-1].items():
        np.testing.assert_allclose(result.state.topic_word_var[lang], lam, rtol=1e-8, atol=1e-10)  # type: ignore[attr-defined]


@pytest.mark.parametrize("warm_start", [False, True])
def test_lda_matches_reference(tmp_path: Path, client: object, warm_start: bool) -> None:
    dense = {"default": random_counts(30, 25, seed=1, empty_rows=(4,))}
    assert_same(*run_both(tmp_path, dense, config(warm_start=warm_start), client))
    assert not list(tmp_path.glob(".topicflow-scratch-*")), "the gamma scratch was not removed"


def test_informed_prior_matches_reference(tmp_path: Path, client: object) -> None:
    dense = {"default": random_counts(30, 25, seed=2)}
    seeds = (SeedTopic("first", ("de00001", "de00002"), (1.0, 2.0)),)
    result, lams, elbos = run_both(tmp_path, dense, config(seed_topics=seeds, seed_strength=3.0), client)
    assert np.ndim(result.state.topic_word_prior["default"]) == 2
    assert_same(result, lams, elbos)


def test_polylingual_matches_reference(tmp_path: Path, client: object) -> None:
    english = random_counts(30, 20, seed=3)
    german = random_counts(30, 15, seed=4, empty_rows=(0, 9, 17))  # three documents lack German
    assert_same(*run_both(tmp_path, {"en": english, "de": german}, config(warm_start=True), client))


@pytest.mark.parametrize("n_docs", [50, 5000])
def test_newton_alpha_maximizes_the_alpha_objective(n_docs: int) -> None:
    rng = np.random.default_rng(n_docs)
    theta = rng.dirichlet([0.2, 0.5, 1.5, 3.0], size=n_docs)
    suff = np.log(theta).sum(axis=0)
    ours, _ = newton_alpha(np.full(4, 1.0), suff, n_docs)
    best = minimize(lambda a: -dirichlet_objective(np.exp(a), suff, n_docs), np.zeros(4), method="Nelder-Mead",
                    options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    np.testing.assert_allclose(ours, np.exp(best.x), rtol=1e-4)
    assert dirichlet_objective(ours, suff, n_docs) >= -best.fun - 1e-8
