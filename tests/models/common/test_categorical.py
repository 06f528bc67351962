"""Inverse-CDF draws of topicflow.models.common.categorical against their NumPy equivalents."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.models.common.categorical import (
    SMOOTHING_CHUNK,
    add_sorted_count,
    draw_dense,
    draw_two_bucket,
    draw_uniform,
    remove_sorted_count,
    smoothing_chunk_sums,
)


def test_dense_draw_inverts_the_cumulative_sum() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        weights = rng.gamma(0.5, size=int(rng.integers(1, 12)))
        u = rng.random()
        k, total = draw_dense(weights, u)
        cum = np.cumsum(weights)
        assert k == min(int(np.searchsorted(cum, u * cum[-1], "right")), len(weights) - 1)
        assert total == pytest.approx(cum[-1], rel=1e-15)
    assert draw_dense(np.array([1.0, 2.0]), np.nextafter(1.0, 0.0))[0] == 1  # u * total rounding up stays in range


def test_uniform_draw_covers_every_index_and_stays_in_range() -> None:
    assert [draw_uniform(u, 4) for u in (0.0, 0.24, 0.25, 0.99)] == [0, 0, 1, 3]
    assert draw_uniform(1.0, 4) == 3  # u * n that reached n (by rounding) stays in range


def _two_bucket_reference(u, counts, smoothing, column):
    """The NumPy equivalent of the docstring, with the rounding fallback."""
    r_cum = np.cumsum(counts * column)
    s_cum = np.cumsum(smoothing * column)
    x = u * (s_cum[-1] + r_cum[-1])
    if x < r_cum[-1]:
        return int(np.searchsorted(r_cum, x, "right"))
    k = int(np.searchsorted(s_cum, x - r_cum[-1], "right"))
    return k if k < len(s_cum) else int(np.searchsorted(s_cum, s_cum[-1], "left"))


@pytest.mark.parametrize("n_components", [1, 5, SMOOTHING_CHUNK, 3 * SMOOTHING_CHUNK + 7])
def test_two_bucket_draw_matches_the_dense_inverse_cdf(n_components: int) -> None:
    rng = np.random.default_rng(n_components)
    n_terms = 6
    term_topic = rng.gamma(0.3, size=(n_terms, n_components))
    term_topic[2] = 0.0  # a term no component uses: goes to component 0
    smoothing = rng.gamma(1.0, size=n_components)
    chunk_cum = np.empty((n_terms, -(-n_components // SMOOTHING_CHUNK)))
    assert smoothing_chunk_sums(np.arange(n_terms), term_topic, smoothing, SMOOTHING_CHUNK, chunk_cum) == 0
    counts = np.zeros(n_components, dtype=np.int64)
    nonzero = np.empty(n_components, dtype=np.int64)
    n_nonzero = 0
    for k in rng.integers(0, n_components, size=3 * n_components):
        n_nonzero = add_sorted_count(int(k), counts, nonzero, n_nonzero)
    assert nonzero[:n_nonzero].tolist() == np.flatnonzero(counts).tolist()
    scratch = np.empty(n_components)
    for _ in range(300):
        w, u = int(rng.integers(n_terms)), rng.random()
        got = draw_two_bucket(u, w, w, term_topic, smoothing, chunk_cum, SMOOTHING_CHUNK, counts, nonzero,
                              n_nonzero, scratch)
        assert got == _two_bucket_reference(u, counts, smoothing, term_topic[w])
    for k in np.flatnonzero(counts):
        while counts[k]:
            n_nonzero = remove_sorted_count(int(k), counts, nonzero, n_nonzero)
            assert nonzero[:n_nonzero].tolist() == np.flatnonzero(counts).tolist()
    assert n_nonzero == 0


def test_chunk_sums_count_bad_weights() -> None:
    term_topic = np.array([[1.0, -1.0, np.inf], [0.5, 0.5, 0.5]])
    out = np.empty((2, 1))
    assert smoothing_chunk_sums(np.array([0, 1]), term_topic, np.ones(3), SMOOTHING_CHUNK, out) == 2
    assert out[1, 0] == 1.5
