"""The collapsed Gibbs conditional of topicflow.models.lda.gibbs.conditional and its users."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import gibbs_numpy as ref
from topicflow.errors import InvalidParameterError
from topicflow.models.lda.gibbs.conditional import token_conditional
from topicflow.models.lda.streaming import particle_filter as pf


def _counts(n_topics: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    doc, term = rng.integers(0, 5, n_topics), rng.integers(0, 7, n_topics)
    return doc, term, term + rng.integers(0, 30, n_topics)


@pytest.mark.parametrize("alpha", [0.3, np.linspace(0.05, 1.0, 6)])
def test_conditional_of_a_new_token_is_eq_5(alpha: float | np.ndarray) -> None:
    doc, term, topic = _counts(6, 1)
    weights = token_conditional(doc, term, topic, alpha, 0.05, 40)
    assert_allclose(weights, (doc + alpha) * (term + 0.05) / (topic + 40 * 0.05), rtol=1e-14)
    assert_allclose(weights / weights.sum(), ref.conditional(doc, term, topic, np.broadcast_to(alpha, (6,)), 0.05, 40),
                    rtol=1e-12)


def test_excluding_the_token_equals_removing_it_from_the_counts() -> None:
    doc, term, topic = _counts(5, 2)
    doc[3] += 1
    term[3] += 1
    topic[3] += 1
    removed = [a.copy() for a in (doc, term, topic)]
    for a in removed:
        a[3] -= 1
    assert_array_equal(token_conditional(doc, term, topic, 0.2, 0.1, 9, exclude=3),
                       token_conditional(*removed, 0.2, 0.1, 9))
    assert_array_equal(token_conditional(doc.astype(float), term.astype(float), topic.astype(float), 0.2, 0.1, 9,
                                         exclude=3), token_conditional(*removed, 0.2, 0.1, 9))


def test_the_particle_filter_reads_the_same_conditional() -> None:
    params = pf.PFParams(n_topics=4, n_terms=11, doc_topic_prior=0.4, topic_word_prior=0.02)
    doc, term, topic = _counts(4, 3)
    for exclude in (-1, 2):
        counts = [a + (np.arange(4) == exclude) for a in (doc, term, topic)]
        assert_array_equal(pf.token_conditional(counts[1], counts[2], counts[0], params, exclude=exclude),
                           token_conditional(counts[0], counts[1], counts[2], 0.4, 0.02, 11, exclude=exclude))


def test_bad_inputs() -> None:
    doc, term, topic = _counts(3, 4)
    with pytest.raises(InvalidParameterError, match="one shape"):
        token_conditional(doc, term[:2], topic, 0.1, 0.1, 5)
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        token_conditional(doc, term, topic, np.array([0.1, -0.1, 0.1]), 0.1, 5)
    with pytest.raises(InvalidParameterError, match="topic_word_prior"):
        token_conditional(doc, term, topic, 0.1, 0.0, 5)
    with pytest.raises(InvalidParameterError, match="exclude"):
        token_conditional(doc, term, topic, 0.1, 0.1, 5, exclude=3)
