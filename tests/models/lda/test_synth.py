"""Tests of the generative math in topicflow.models.lda.synth (no Dask, no I/O)."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from topicflow.errors import InvalidParameterError
from topicflow.models.lda.synth import (
    SynthParams,
    TermFrequencyStats,
    block_topic_word,
    draw_doc_lengths,
    draw_mixture_counts,
    draw_shard,
    draw_topic_word,
    language_names,
    parse_doc_topic_prior,
    term_names,
)


def make_params(**overrides: object) -> SynthParams:
    values: dict[str, object] = dict(
        n_docs=100, n_topics=3, n_terms=30, doc_length=20.0, doc_topic_prior=(0.5,),
        topic_word_prior=0.1, seed=7,
    )
    values.update(overrides)
    return SynthParams(**values)  # type: ignore[arg-type]


def topics_of(params: SynthParams) -> dict[str, np.ndarray]:
    return {lang: draw_topic_word(params, lang) for lang in params.languages}


def block_diagonal_topics(n_topics: int, terms_per_topic: int) -> np.ndarray:
    """Topic k is uniform over its own block of terms and zero elsewhere."""
    topic_word = np.zeros((n_topics, n_topics * terms_per_topic))
    for k in range(n_topics):
        topic_word[k, k * terms_per_topic : (k + 1) * terms_per_topic] = 1.0 / terms_per_topic
    return topic_word


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.5, (0.5,) * 3), ("0.5", (0.5,) * 3), ("1,2, 3", (1.0, 2.0, 3.0)), ([1, 2, 3], (1.0, 2.0, 3.0))],
)
def test_parse_doc_topic_prior_accepts_scalars_and_lists(value: object, expected: tuple[float, ...]) -> None:
    assert parse_doc_topic_prior(value, 3) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["1,2", "a", "0", "-1,1,1", "nan", "1,inf,1"])
def test_parse_doc_topic_prior_rejects_bad_values(value: str) -> None:
    with pytest.raises(InvalidParameterError, match="alpha"):
        parse_doc_topic_prior(value, 3)


@pytest.mark.parametrize(
    ("field", "value"),
    [("n_docs", 0), ("n_topics", -1), ("n_terms", 2.5), ("doc_length", 0.0), ("topic_word_prior", -0.1),
     ("seed", -1), ("n_langs", 0)],
)
def test_params_reject_out_of_range_values(field: str, value: object) -> None:
    with pytest.raises(InvalidParameterError):
        make_params(**{field: value})


def test_params_round_trip_through_dict() -> None:
    params = make_params(n_langs=2, labels=True, doc_topic_prior=(0.1, 0.2, 0.3))
    assert SynthParams.from_dict(params.to_dict()) == params
    assert params.languages == ("l0", "l1")


def test_names() -> None:
    assert language_names(1) == ("default",)
    assert language_names(3) == ("l0", "l1", "l2")
    assert list(term_names(2, "default")) == ["w00000", "w00001"]
    assert term_names(200000, "l0")[-1] == "l0-w199999"


def test_topic_word_rows_are_distributions_and_languages_differ() -> None:
    params = make_params(n_langs=2)
    topics = topics_of(params)
    for matrix in topics.values():
        assert matrix.shape == (3, 30)
        assert np.all(matrix >= 0)
        assert_allclose(matrix.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert not np.allclose(topics["l0"], topics["l1"])
    assert_array_equal(draw_topic_word(params, "l1"), topics["l1"])


def test_topic_word_with_tiny_eta_is_finite() -> None:
    matrix = draw_topic_word(make_params(topic_word_prior=1e-4, n_terms=500), "default")
    assert np.all(np.isfinite(matrix))
    assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-12)


def test_shard_arrays_are_valid_csr() -> None:
    params = make_params(labels=True)
    shard = draw_shard(params, topics_of(params), first_doc=10, n_docs=25)
    indptr, term_ids, counts = shard.bags["default"]
    assert indptr.dtype == np.int64 and term_ids.dtype == np.int32 and counts.dtype == np.int32
    assert indptr[0] == 0 and indptr[-1] == len(term_ids) == len(counts)
    assert np.all(counts > 0) and np.all((term_ids >= 0) & (term_ids < 30))
    for d in range(25):
        ids = term_ids[indptr[d] : indptr[d + 1]]
        assert len(ids) >= 1 and np.all(np.diff(ids) > 0)
    assert shard.doc_ids[0] == "doc-00000010"
    assert_allclose(shard.doc_topic.sum(axis=1), 1.0, atol=1e-12)
    assert list(shard.labels) == [f"topic-{k}" for k in shard.doc_topic.argmax(axis=1)]  # type: ignore[arg-type]


def test_documents_do_not_depend_on_how_the_corpus_is_split() -> None:
    params = make_params(n_langs=2)
    topics = topics_of(params)
    whole = draw_shard(params, topics, 0, 30)
    parts = [draw_shard(params, topics, first, n) for first, n in [(0, 7), (7, 1), (8, 22)]]
    assert_array_equal(whole.doc_topic, np.concatenate([p.doc_topic for p in parts]))
    assert_array_equal(whole.doc_ids, np.concatenate([p.doc_ids for p in parts]))
    for lang in params.languages:
        assert_array_equal(whole.bags[lang][1], np.concatenate([p.bags[lang][1] for p in parts]))
        assert_array_equal(whole.bags[lang][2], np.concatenate([p.bags[lang][2] for p in parts]))


def test_one_topic_word_frequencies_match_topic_word() -> None:
    """With one topic every token is drawn from topic_word[0]: 100k tokens, tolerance > 6 sigma."""
    params = make_params(n_topics=1, n_terms=20, doc_length=50.0, topic_word_prior=1.0, n_docs=2000)
    topics = topics_of(params)
    shard = draw_shard(params, topics, 0, 2000)
    _, term_ids, counts = shard.bags["default"]
    freq = np.bincount(term_ids, weights=counts, minlength=20) / counts.sum()
    assert_allclose(freq, topics["default"][0], atol=0.01)


def test_doc_lengths_are_poisson_with_the_given_mean() -> None:
    params = make_params(doc_length=50.0)
    shard = draw_shard(params, topics_of(params), 0, 2000)
    indptr, _, counts = shard.bags["default"]
    lengths = np.add.reduceat(counts, indptr[:-1])
    # Poisson(50): mean and variance 50; std of the mean of 2000 draws is 0.16.
    assert abs(lengths.mean() - 50.0) < 1.0
    assert 40 < lengths.var() < 60


def test_short_documents_have_at_least_one_token() -> None:
    params = make_params(doc_length=0.01)
    indptr, _, counts = draw_shard(params, topics_of(params), 0, 200).bags["default"]
    assert np.all(np.add.reduceat(counts, indptr[:-1]) >= 1)


def test_asymmetric_alpha_sets_the_mean_topic_proportions() -> None:
    alpha = np.array([0.5, 1.0, 2.0, 4.0])
    params = make_params(n_topics=4, doc_topic_prior=tuple(alpha))
    shard = draw_shard(params, topics_of(params), 0, 2000)
    # E[theta] = alpha / sum(alpha); the std of each mean over 2000 documents is below 0.005.
    assert_allclose(shard.doc_topic.mean(axis=0), alpha / alpha.sum(), atol=0.02)


def test_words_follow_each_documents_topic_mixture() -> None:
    """With disjoint topics, the share of a document's tokens in topic k's terms estimates theta[d, k]."""
    params = make_params(n_topics=3, n_terms=30, doc_length=400.0)
    topic_word = block_diagonal_topics(3, 10)
    shard = draw_shard(params, {"default": topic_word}, 0, 300)
    indptr, term_ids, counts = shard.bags["default"]
    share = np.zeros((300, 3))
    for d in range(300):
        lo, hi = indptr[d], indptr[d + 1]
        np.add.at(share[d], term_ids[lo:hi] // 10, counts[lo:hi])
    share /= share.sum(axis=1, keepdims=True)
    # Binomial error of one share with ~400 tokens is at most 0.025.
    assert np.abs(share - shard.doc_topic).mean() < 0.03
    assert np.abs(share - shard.doc_topic).max() < 0.15


def test_languages_share_theta_but_draw_their_own_lengths() -> None:
    params = make_params(n_langs=2, doc_length=30.0)
    shard = draw_shard(params, topics_of(params), 0, 200)
    lengths = {
        lang: np.add.reduceat(counts, indptr[:-1]) for lang, (indptr, _, counts) in shard.bags.items()
    }
    assert not np.array_equal(lengths["l0"], lengths["l1"])
    assert abs(lengths["l0"].mean() - lengths["l1"].mean()) < 2.0


def test_term_frequency_stats_form_a_monoid() -> None:
    params = make_params(n_langs=2)
    topics = topics_of(params)
    shards = [draw_shard(params, topics, first, 10) for first in (0, 10, 20)]
    a, b, c = (TermFrequencyStats.of_shard(s, 30) for s in shards)
    left, right = a.merge(b).merge(c), a.merge(b.merge(c))
    zero = TermFrequencyStats.zeros({lang: 30 for lang in params.languages})
    whole = TermFrequencyStats.of_shard(draw_shard(params, topics, 0, 30), 30)
    for lang in params.languages:
        assert_array_equal(left.doc_freq[lang], right.doc_freq[lang])
        assert_array_equal(left.corpus_freq[lang], whole.corpus_freq[lang])
        assert_array_equal(left.doc_freq[lang], whole.doc_freq[lang])
        assert_array_equal(a.merge(zero).corpus_freq[lang], a.corpus_freq[lang])
        assert_array_equal(a.merge(b).doc_freq[lang], b.merge(a).doc_freq[lang])
    assert whole.corpus_freq["l0"].sum() == sum(int(s.bags["l0"][2].sum()) for s in shards)


def test_block_topics_own_disjoint_terms() -> None:
    topic_word = block_topic_word(4, 42)
    assert_allclose(topic_word.sum(axis=1), 1.0, rtol=1e-15)
    owner = topic_word.argmax(axis=0)
    assert owner[:40].tolist() == [k for k in range(4) for _ in range(10)]
    assert topic_word[0, 0] / topic_word[0, 10] == pytest.approx(1000.0)  # background 1e-3 of an owned term
    assert_array_equal(block_topic_word(2, 4, background=0.0), [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])


def test_document_lengths_are_poisson_and_never_zero() -> None:
    lengths = draw_doc_lengths(np.random.default_rng(0), 30.0, 20000)
    assert lengths.dtype == np.int64 and lengths.min() >= 1
    assert abs(lengths.mean() - 30.0) < 0.2 and abs(lengths.var() - 30.0) < 1.5
    assert (draw_doc_lengths(np.random.default_rng(1), 0.01, 500) == 1).mean() == 1.0


def test_mixture_counts_have_the_lengths_and_the_mixture_mean() -> None:
    rng = np.random.default_rng(2)
    topic_word = block_topic_word(3, 9, background=0.0)
    doc_topic = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    counts = draw_mixture_counts(rng, doc_topic, topic_word, np.array([6, 40000]))
    assert counts.shape == (2, 9) and counts.dtype == np.int64
    assert counts.sum(axis=1).tolist() == [6, 40000]
    assert counts[0, 3:].sum() == 0 and counts[1, :3].sum() == 0
    assert_allclose(counts[1] / 40000, doc_topic[1] @ topic_word, atol=0.01)
    assert draw_mixture_counts(rng, doc_topic[:0], topic_word, np.zeros(0, dtype=np.int64)).shape == (0, 9)
