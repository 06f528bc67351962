"""TopicModelEstimator: parameters, clone, repr, the constraints table, the not-fitted check."""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from topicflow import LDA, StreamingLDA
from topicflow.api._base import Boolean, Interval, Options, SequenceOf, check_parameter, split_client
from topicflow.errors import InvalidParameterError, NotFittedError
from topicflow.models.lda.priors import SeedTopic

X = sp.csr_matrix(np.array([[2, 1, 0, 0], [0, 0, 3, 1], [1, 0, 0, 2]], dtype=np.int64))


def test_get_params_lists_every_init_parameter_unchanged() -> None:
    model = LDA(7, doc_topic_prior=0.3, seed_topics=(), split_every=None)
    params = model.get_params()
    assert params["n_topics"] == 7 and params["doc_topic_prior"] == 0.3 and params["split_every"] is None
    assert set(params) == set(LDA._get_param_names())
    assert len(params) == 37  # + block_size, optimize_every, threads, gibbs_start (method="gibbs")


def test_alpha_may_be_a_number_written_as_a_string() -> None:
    model = LDA(2, doc_topic_prior="0.5", max_iter=2).fit(X)  # as the CLI passes it
    np.testing.assert_array_equal(model.doc_topic_prior_, [0.5, 0.5])


def test_set_params_round_trip() -> None:
    model = LDA()
    params = LDA(3, doc_topic_prior="symmetric", topic_word_prior=0.5, method="online", batch_size=16).get_params()
    assert model.set_params(**params) is model
    assert model.get_params() == params


def test_set_params_refuses_unknown_names_listing_valid_ones() -> None:
    with pytest.raises(InvalidParameterError, match="has no parameter 'n_components'.*n_topics"):
        LDA().set_params(n_components=3)


def test_clone_copies_parameters_not_fitted_state() -> None:
    seeds = (SeedTopic("first", ("t0",), (1.0,)),)
    model = LDA(2, max_iter=2, seed_topics=seeds).fit(X)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert copy.seed_topics == seeds
    assert not hasattr(copy, "model_") and not hasattr(copy, "components_")


def test_streaming_settings_are_parameters_of_their_own() -> None:
    model = StreamingLDA("olda", n_topics=3, runs=2)
    trace = {"trace_max_bytes": 16 * 2**20, "trace_keep": 4, "summary_points": 1000}  # explicit keyword parameters
    assert model.get_params() == {"algorithm": "olda", "n_topics": 3, **trace, "runs": 2}
    copy = clone(model)
    assert copy.settings == {"runs": 2} and copy.settings is not model.settings
    copy.set_params(n_particles=5, n_topics=4)
    assert copy.get_params() == {"algorithm": "olda", "n_topics": 4, **trace, "runs": 2, "n_particles": 5}
    assert model.settings == {"runs": 2}
    with pytest.raises(InvalidParameterError, match="has no parameter 'particles'.*n_particles"):
        model.set_params(particles=5)


def test_repr_shows_parameters_that_differ_from_their_defaults() -> None:
    assert repr(LDA()) == "LDA()"
    assert repr(LDA(5, doc_topic_prior=0.1, method="online")) == "LDA(n_topics=5, doc_topic_prior=0.1, method='online')"
    assert repr(StreamingLDA("pf", n_topics=3, n_particles=8)) == "StreamingLDA(n_topics=3, n_particles=8)"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_topics": 0}, r"'n_topics' parameter of LDA must be an int in the range \[1, inf\); got 0 \(int\)"),
        ({"n_topics": 2.0}, r"'n_topics' .* got 2.0 \(float\)"),
        ({"doc_topic_prior": "sym"}, r"'doc_topic_prior' .* must be 'auto', 'symmetric' or a positive float \(or a str holding one\)"),
        ({"doc_topic_prior": -1.0}, r"'doc_topic_prior' .* got -1.0"),
        ({"doc_topic_prior": float("inf")}, r"'doc_topic_prior' .* got inf"),
        ({"topic_word_prior": float("nan")}, r"'topic_word_prior' parameter of LDA must be a float in the range \(0, inf\); got nan"),
        ({"method": "stochastic"}, r"'method' .* one of 'batch', 'online', 'svb', 'scvb0', 'gibbs'; got 'stochastic'"),
        ({"kappa": 1.5}, r"'kappa' .* a float in the range \[0, 1\]"),
        ({"split_every": 1}, r"'split_every' .* must be None or an int in the range \[2, inf\)"),
        ({"optimize_topic_word_prior": "yes"}, r"'optimize_topic_word_prior' .* must be a bool"),
        ({"seed_topics": ["fruit"]}, r"'seed_topics' .* a list or tuple of SeedTopic"),
        ({"executor": "gpu"}, r"'executor' .* one of 'auto', 'servers', 'threads', 'tasks'"),
        ({"total_docs": 0}, r"'total_docs' .* must be None or an int in the range \[1, inf\)"),
    ],
)
def test_fit_checks_the_constraints_table_first(params: dict[str, Any], message: str) -> None:
    model = LDA(**params)  # nothing is checked before fit ...
    with pytest.raises(InvalidParameterError, match=message):
        model.fit("no-such-store")  # ... and fit checks before touching the data


def test_every_lda_parameter_has_a_constraint_and_the_defaults_satisfy_it() -> None:
    assert set(LDA._parameter_constraints) == set(LDA._get_param_names())
    LDA()._validate_params()
    StreamingLDA()._validate_params()


def test_streaming_constraints() -> None:
    with pytest.raises(InvalidParameterError, match="'algorithm' parameter of StreamingLDA must be one of 'gibbs'"):
        StreamingLDA("lda").fit(X)


def test_constraint_objects() -> None:
    assert Interval(Integral, 0, 2**63, closed="left").is_satisfied_by(2**63 - 1)
    assert not Interval(Integral, 0, 2**63, closed="left").is_satisfied_by(2**63)
    assert Interval(Integral, 1, None, closed="left").is_satisfied_by(np.int64(3))
    assert not Interval(Integral, 0, None, closed="left").is_satisfied_by(True)
    assert Interval(Real, 0, None, closed="neither").is_satisfied_by(2)
    assert not Interval(Real, 0, None, closed="neither").is_satisfied_by(float("inf"))
    assert not Interval(Real, 0, 1, closed="right").is_satisfied_by(0.0)
    assert str(Interval(Real, 0, 1, closed="right")) == "a float in the range (0, 1]"
    assert Options(("a", "b")).is_satisfied_by("a") and not Options(("a", "b")).is_satisfied_by(["a"])
    assert Boolean().is_satisfied_by(np.bool_(True)) and not Boolean().is_satisfied_by(1)
    assert SequenceOf(str).is_satisfied_by(("x",)) and not SequenceOf(str).is_satisfied_by("x")
    check_parameter("M", "p", None, [None, Boolean()])
    with pytest.raises(InvalidParameterError, match="'p' parameter of M must be None or a bool; got 0"):
        check_parameter("M", "p", 0, [None, Boolean()])


def test_not_fitted_errors_say_what_to_call() -> None:
    with pytest.raises(NotFittedError, match=r"this LDA is not fitted yet; call fit\(X\) or LDA.load\(path\) first"):
        LDA().transform(X)
    assert isinstance(NotFittedError("x"), AttributeError)  # what scikit-learn's checks expect
    model = LDA(2, max_iter=2)
    assert not model.__sklearn_is_fitted__()
    assert model.fit(X).__sklearn_is_fitted__()


def test_fit_transform_is_fit_then_transform() -> None:
    theta = LDA(2, max_iter=3).fit_transform(X)
    np.testing.assert_array_equal(theta, LDA(2, max_iter=3).fit(X).transform(X))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)


def test_y_is_ignored_and_a_client_given_second_is_the_client(local_cluster: object) -> None:
    from distributed import Client

    assert split_client(np.ones(3), None) is None
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        assert split_client(client, None) is client
        with pytest.raises(InvalidParameterError, match="client was given twice"):
            split_client(client, client)
        by_position = LDA(2, max_iter=2).fit(X, client).components_
    np.testing.assert_array_equal(by_position, LDA(2, max_iter=2).fit(X, np.zeros(3)).components_)


def test_sklearn_tags_describe_count_data() -> None:
    tags = LDA().__sklearn_tags__()
    assert tags.input_tags.sparse and tags.input_tags.positive_only and tags.input_tags.categorical
    assert tags.transformer_tags is not None and tags.requires_fit
    assert StreamingLDA().__sklearn_tags__().transformer_tags is None  # no transform


def test_works_inside_scikit_learn_pipelines_and_searches() -> None:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    texts = ["apple banana cherry apple", "banana cherry grape", "rust python java rust", "java golang python"] * 6
    pipeline = make_pipeline(CountVectorizer(), LDA(2, max_iter=5))
    theta = pipeline.fit_transform(texts)
    assert theta.shape == (24, 2) and np.allclose(theta.sum(axis=1), 1.0)
    np.testing.assert_array_equal(theta, pipeline.transform(texts))
    search = GridSearchCV(LDA(max_iter=5), {"n_topics": [2, 3]}, cv=2).fit(CountVectorizer().fit_transform(texts))
    assert search.best_params_["n_topics"] in (2, 3) and np.isfinite(search.best_score_)
