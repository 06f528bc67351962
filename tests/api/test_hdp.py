"""topicflow.HDP and LDA(method="scvb0"): parameters, their translation to the driver's settings, refusals."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import topicflow
from topicflow import HDP, LDA
from topicflow.api._collapsed import parse_step, step_tuple
from topicflow.errors import InvalidParameterError
from topicflow.models.common.step_sizes import PowerStep
from topicflow.models.hdp.params import (
    PAPER_DOC_STEP,
    PAPER_HYPER_STEP,
    PAPER_TOPIC_WORD_STEP,
    HDPParams,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

T = 8


@pytest.fixture(scope="module")
def planted() -> object:
    return draw_planted_corpus(n_docs=80, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=5)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, planted: object) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("api-hdp")
    counts = planted.counts["default"]  # type: ignore[attr-defined]
    train = write_test_store(base / "train.zarr", {"default": counts[:60]}, shard_size=20)
    test = write_test_store(base / "test.zarr", {"default": counts[60:]}, shard_size=10)
    return train, test


def test_hdp_is_exported_and_defaults_are_the_papers() -> None:
    assert "HDP" in topicflow.__all__ and topicflow.HDP is HDP
    config = HDP().config()
    # Bleier sec. 4: T = 200, beta = 0.01, rho^c (10, 1000), rho^d (1, 10), rho^h (5, 100), kappa 0.9; 30 iterations.
    assert config.method == "pcsvb0" and config.passes == 30 and config.batch_size is None
    assert config.params == HDPParams()
    assert config.params.topic_word_step == PAPER_TOPIC_WORD_STEP == PowerStep(10.0, 1000.0, 0.9)
    assert config.params.doc_step == PAPER_DOC_STEP and config.params.hyper_step == PAPER_HYPER_STEP
    assert config.params.truncation == 200 and config.params.topic_word_prior == 0.01
    assert config.topics_in_use_share == 1e-3


def test_params_round_trip_clone_and_repr() -> None:
    model = HDP(truncation=40, method="pcsvb0", batch_size=16, clumping=True, passes=3, alpha=0.5, gamma=2.0,
                learn_gamma=False, topic_word_step=(5.0, 500.0), doc_step=(1.0, 20.0, 0.8), burn_in=1,
                doc_start="zero", keep_doc_state=True, seed=7, split_every=4)
    params = model.get_params()
    assert len(params) == 24 and set(params) == set(HDP._get_param_names())
    assert params["truncation"] == 40 and params["topic_word_step"] == (5.0, 500.0)
    other = HDP().set_params(**params)
    assert other.get_params() == params
    assert clone(model).get_params() == params
    assert repr(HDP(truncation=40)) == "HDP(truncation=40)"


def test_settings_reach_the_driver_config() -> None:
    config = HDP(truncation=40, batch_size=16, clumping=True, passes=3, alpha=0.5, gamma=2.0, learn_alpha=False,
                 alpha_floor=1e-2, topic_word_step=(5, 500), doc_step=(1.0, 20.0, 0.8), hyper_step="4,80",
                 step_power=0.7, burn_in=1, doc_start="zero", shuffle_window=10, eval_every=50,
                 topics_in_use_share=0.01, init_shape=50.0, seed=7, split_every=4).config()
    p = config.params
    assert (config.method, config.batch_size, config.passes, config.shuffle_window, config.eval_every) == (
        "pcsvb0", 16, 3, 10, 50)
    assert config.topics_in_use_share == 0.01
    assert (p.truncation, p.alpha_init, p.gamma_init, p.learn_alpha, p.learn_gamma, p.alpha_floor) == (
        40, 0.5, 2.0, False, True, 1e-2)
    # (s, tau) takes step_power as kappa; (s, tau, kappa) keeps its own.
    assert p.topic_word_step == PowerStep(5.0, 500.0, 0.7) and p.doc_step == PowerStep(1.0, 20.0, 0.8)
    assert p.hyper_step == PowerStep(4.0, 80.0, 0.7)
    assert (p.burn_in, p.doc_start, p.keep_doc_state, p.clumping, p.seed, p.init_shape) == (1, "zero", False, True, 7, 50.0)
    assert config.family == "hdp"


@pytest.mark.parametrize(("params", "fragment"), [
    ({"truncation": 1}, "'truncation' parameter of HDP"),
    ({"method": "scvb0"}, "'method' parameter of HDP must be one of 'pcsvb0', 'pcvb0'"),
    ({"batch_size": 0}, "'batch_size'"),
    ({"alpha": 0.0}, "'alpha'"),
    ({"topic_word_step": (10, 1)}, "'topic_word_step'"),   # first step 10 / 1^0.9 > 1
    ({"doc_step": (1, 2, 3, 4)}, "'doc_step'"),
    ({"topics_in_use_share": 1.0}, "'topics_in_use_share'"),
    ({"doc_start": "uniform"}, "'doc_start'"),
])
def test_bad_values_are_refused_naming_the_parameter(params: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=fragment.replace("(", r"\(")):
        HDP(**params).config()  # type: ignore[arg-type]


def test_kept_document_state_is_word_by_word_only() -> None:
    assert HDP(keep_doc_state=True).config().params.keep_doc_state
    with pytest.raises(InvalidParameterError, match="kept by the word-by-word run"):
        HDP(keep_doc_state=True, batch_size=10).config()


def test_pcvb0_refuses_the_stochastic_settings() -> None:
    assert HDP(method="pcvb0").config().method == "pcvb0"
    assert HDP(method="pcvb0", clumping=True).config().params.clumping
    with pytest.raises(InvalidParameterError, match=r"batch_size=8, burn_in=1 given with method='pcvb0'"):
        HDP(method="pcvb0", batch_size=8, burn_in=1).config()


def test_unfitted_hdp_says_what_to_call() -> None:
    from topicflow.errors import NotFittedError

    with pytest.raises(NotFittedError, match=r"fit\(X\) or HDP.load"):
        HDP().transform("corpus.zarr")


def test_step_parsing_round_trips() -> None:
    assert parse_step((10, 1000)) == PowerStep(10.0, 1000.0, 0.9)
    assert parse_step("1, 10, 0.8") == PowerStep(1.0, 10.0, 0.8)
    assert step_tuple(PowerStep(10.0, 1000.0, 0.9)) == (10.0, 1000.0)
    assert step_tuple(PowerStep(1.0, 10.0, 0.8)) == (1.0, 10.0, 0.8)
    with pytest.raises(InvalidParameterError, match="exceeds 1"):
        parse_step((5, 1))
    with pytest.raises(InvalidParameterError, match=r"\(s, tau\)"):
        parse_step("fast")


# ----------------------------------------------------------------------------- LDA(method="scvb0")


def test_scvb0_defaults_are_bleiers_comparison() -> None:
    config = LDA(20, method="scvb0", batch_size=None, passes=30)._scvb0_config()
    assert config.method == "scvb0" and config.family == "lda" and config.batch_size is None and config.passes == 30
    p = config.params
    # Bleier sec. 4: SCVB0 with alpha = 0.1 fixed, beta = 0.01, the same schedules as rho^c and rho^d.
    assert (p.truncation, p.alpha_init, p.learn_alpha, p.learn_gamma, p.topic_word_prior) == (20, 0.1, False, False, 0.01)
    assert p.topic_word_step == PAPER_TOPIC_WORD_STEP and p.doc_step == PAPER_DOC_STEP and p.burn_in == 1  # Foulds et al.


def test_scvb0_settings_reach_the_config() -> None:
    config = LDA(5, method="scvb0", doc_topic_prior=0.5, topic_word_prior=0.1, batch_size=32, passes=2,
                 shuffle_window=8, seed=3, init_shape=10.0, topic_word_step=(5, 500), doc_step=(1, 20),
                 doc_burn_in=1, split_every=3)._scvb0_config()
    p = config.params
    assert (config.batch_size, config.passes, config.shuffle_window) == (32, 2, 8)
    assert (p.alpha_init, p.topic_word_prior, p.seed, p.init_shape, p.burn_in) == (0.5, 0.1, 3, 10.0, 1)
    assert p.topic_word_step == PowerStep(5.0, 500.0, 0.9) and p.doc_step == PowerStep(1.0, 20.0, 0.9)


@pytest.mark.parametrize(("params", "fragment"), [
    ({"doc_topic_prior": "symmetric"}, "SCVB0 keeps a fixed symmetric alpha"),
    ({"tau0": 5.0}, "tau0=5.0 given with method='scvb0'"),
    ({"optimize_topic_word_prior": True}, "optimize_topic_word_prior=True given with method='scvb0'"),
    ({"n_topics": 1}, "n_topics >= 2"),
])
def test_scvb0_refuses_settings_it_does_not_use(params: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        LDA(**{"method": "scvb0", **params})._scvb0_config()  # type: ignore[arg-type]


def test_word_by_word_is_only_for_scvb0() -> None:
    with pytest.raises(InvalidParameterError, match="batch_size=None .* is a setting of method='scvb0'"):
        LDA(3, method="online", batch_size=None)._online_config()
    with pytest.raises(InvalidParameterError, match="'method' parameter of LDA"):
        LDA(3, method="pcsvb0")._validate_params()


def test_scvb0_model_is_not_continued_by_partial_fit() -> None:
    with pytest.raises(InvalidParameterError, match="SCVB0 model"):
        LDA(3, method="scvb0").partial_fit("corpus.zarr")


# ----------------------------------------------------------------------------- fitting


def in_use_by_numpy(components: np.ndarray, beta: float, min_share: float) -> list[int]:
    """Topics in use recomputed from lambda alone: n_k. = row sums of lambda - beta, share >= min_share."""
    counts = (components - beta).sum(axis=1)
    return sorted(np.flatnonzero(counts / counts.sum() >= min_share).tolist())


def test_fit_save_load_transform_on_the_scheduler(stores: tuple[Path, Path], tmp_path: Path, client: object) -> None:
    train, test = stores
    model = HDP(truncation=T, batch_size=20, passes=2, seed=3).fit(train, client=client, test=test)
    # Topics in use: never the truncation's count by fiat, the model file's number, and lambda's by NumPy.
    assert 1 <= model.n_topics_in_use_ <= T and model.truncation_ == T
    assert model.n_topics_in_use_ == model.model_.info.topics_in_use == len(model.topics_in_use_)
    assert sorted(model.topics_in_use_.tolist()) == in_use_by_numpy(model.components_, 0.01, 1e-3)
    weights = model.stick_weights_[model.topics_in_use_]
    assert np.all(np.diff(weights) <= 0) and model.stick_weights_.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(model.doc_topic_prior_, model.alpha_ * model.stick_weights_)
    assert model.alpha_ > 0 and model.gamma_ > 0 and model.n_docs_seen_ == 120
    assert model.components_.shape == (T, 30) and np.allclose(model.topic_word_.sum(axis=1), 1.0)
    assert any(r["heldout_perplexity"] is not None for r in model.trace_)
    summary = model.topic_summary(5)
    assert [e["topic"] for e in summary] == model.topics_in_use_.tolist() and len(summary[0]["terms"]) == 5
    assert len(model.topic_summary(3, all_topics=True)) == T

    model.save(tmp_path / "model")
    loaded = HDP.load(tmp_path / "model")
    assert loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.components_, model.components_)
    assert (loaded.alpha_, loaded.gamma_, loaded.n_topics_in_use_) == (model.alpha_, model.gamma_, model.n_topics_in_use_)

    theta = loaded.transform(test).compute()
    assert theta.shape == (20, T) and np.allclose(theta.sum(axis=1), 1.0)
    assert np.isfinite(loaded.perplexity(test, client)) and np.isfinite(loaded.score(test, client=client))
    held = loaded.heldout_likelihood(test, "completion-random", client)
    assert held.perplexity == pytest.approx(loaded.perplexity(test, client))


def test_same_model_on_threads_and_on_the_cluster(stores: tuple[Path, Path], local_cluster: object) -> None:
    from distributed import Client

    train, _ = stores
    threads = HDP(truncation=T, batch_size=20, passes=1, seed=2).fit(train)
    with Client(local_cluster) as connected:  # type: ignore[arg-type]
        cluster = HDP(truncation=T, batch_size=20, passes=1, seed=2).fit(train, client=connected)
    np.testing.assert_array_equal(threads.components_, cluster.components_)
    assert (threads.alpha_, threads.gamma_) == (cluster.alpha_, cluster.gamma_)


def test_word_by_word_and_pcvb0_fit(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    word = HDP(truncation=T, passes=1, seed=1).fit(train)
    assert word.model_.info.method == "pcsvb0" and 1 <= word.n_topics_in_use_ <= T
    batch = HDP(truncation=T, method="pcvb0", passes=3, seed=1).fit(train)
    assert batch.model_.info.method == "pcvb0" and 1 <= batch.n_topics_in_use_ <= T
    assert batch.model_.info.family == "hdp"
    batch.save(tmp_path / "pcvb0")
    with pytest.raises(InvalidParameterError, match="'hdp' family; load it with topicflow.HDP.load"):
        LDA.load(tmp_path / "pcvb0")
    assert HDP.load(tmp_path / "pcvb0").get_params() == batch.get_params()


def test_partial_fit_continues_with_new_documents(planted: object) -> None:
    counts = sp.csr_matrix(planted.counts["default"])  # type: ignore[attr-defined]
    model = HDP(truncation=T, batch_size=20, seed=4).partial_fit(counts[:40])
    assert model.n_docs_seen_ == 40
    first = model.components_.copy()
    model.partial_fit(counts[40:80])
    assert model.n_docs_seen_ == 80 and not np.array_equal(first, model.components_)
    with pytest.raises(InvalidParameterError, match="pcvb0 model is a batch fit"):
        HDP(method="pcvb0").partial_fit(counts[:10])


def test_scvb0_fit_and_load(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, test = stores
    model = LDA(3, method="scvb0", batch_size=20, passes=2, seed=1).fit(train, test=test, )
    assert model.model_.info.method == "scvb0" and model.components_.shape == (3, 30)
    np.testing.assert_allclose(model.doc_topic_prior_, 0.1)
    model.save(tmp_path / "scvb0")
    loaded = LDA.load(tmp_path / "scvb0")
    # The same settings, spelled out (the default alpha "auto" loads as its value 0.1).
    assert loaded.method == "scvb0" and loaded._scvb0_config() == model._scvb0_config()
    np.testing.assert_array_equal(loaded.components_, model.components_)
    assert loaded.transform(test).compute().shape == (20, 3)
    with pytest.raises(InvalidParameterError, match="load it with topicflow.LDA.load"):
        HDP.load(tmp_path / "scvb0")


# ----------------------------------------------------------------------------- scikit-learn's checks

#: Small settings: the checks fit dozens of times on tiny matrices of counts.
CHECKED = HDP(truncation=3, passes=2, batch_size=5)


def _sklearn_checks() -> list[object]:
    from functools import partial

    from sklearn.utils.estimator_checks import estimator_checks_generator

    out = []
    for estimator, check in estimator_checks_generator(CHECKED, legacy=True, mark="skip"):
        name = check.func.__name__ if isinstance(check, partial) else check.__name__  # type: ignore[union-attr]
        if name != "check_array_api_input":  # needs SCIPY_ARRAY_API=1 at import (see test_sklearn_checks.py)
            out.append(pytest.param(estimator, check, id=name))
    return out


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("estimator", "check"), _sklearn_checks())
def test_scikit_learn_estimator_checks_pass(estimator: object, check: object) -> None:
    check(estimator)  # type: ignore[operator]  # each check asserts (raises) on a failure
    assert estimator.get_params() == CHECKED.get_params()  # type: ignore[attr-defined]
