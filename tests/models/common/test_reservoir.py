"""Reservoir (Algorithm R) and recent-window sampling over an item stream."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from topicflow.errors import InvalidParameterError
from topicflow.models.common.reservoir import offer_items, offer_window, reservoir_key, reservoir_slot, window_slot
from topicflow.models.common.rng import STREAM_RESERVOIR, counter_key, uniform_from_key


def test_reservoir_slot_follows_algorithm_r() -> None:
    capacity = 4
    for n_seen in range(40):
        key = np.uint64(reservoir_key(3, n_seen))  # numba returns a Python int; keys are uint64
        assert key == counter_key(3, STREAM_RESERVOIR, 0, n_seen)
        slot = reservoir_slot(n_seen, capacity, key)
        if n_seen < capacity:
            assert slot == n_seen
        else:
            j = int(uniform_from_key(key, 0) * (n_seen + 1))
            assert slot == (j if j < capacity else -1)


def test_inclusion_is_uniform_over_the_stream() -> None:
    n_items, capacity, n_seeds = 30, 6, 3000
    stream = np.arange(n_items, dtype=np.int64)
    inclusion = np.zeros(n_items, dtype=np.int64)
    for seed in range(n_seeds):
        reservoir, n_seen = offer_items(np.full(capacity, -1, dtype=np.int64), 0, stream, seed)
        assert n_seen == n_items and np.unique(reservoir).shape == (capacity,)
        inclusion[reservoir] += 1
    p = capacity / n_items
    # Counts of a k-of-N sample have covariance S p (1 - p) N/(N-1) (I - 11^T/N), so this statistic is
    # chi-square with N - 1 degrees of freedom; 1e-5 upper tail keeps a fixed seed comfortably safe.
    scale = n_seeds * p * (1 - p) * n_items / (n_items - 1)
    statistic = float(np.sum((inclusion - n_seeds * p) ** 2) / scale)
    assert statistic < stats.chi2.ppf(1 - 1e-5, n_items - 1), inclusion
    assert inclusion.sum() == n_seeds * capacity


def test_one_call_or_many_give_the_same_reservoir() -> None:
    stream = np.arange(100, 200, dtype=np.int64)
    whole, n_whole = offer_items(np.full(7, -1, dtype=np.int64), 0, stream, 11)
    rng = np.random.default_rng(0)
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, 100), size=6, replace=False))
        reservoir, n_seen = np.full(7, -1, dtype=np.int64), 0
        for part in np.split(stream, cuts):
            reservoir, n_seen = offer_items(reservoir, n_seen, part, 11)
        assert n_seen == n_whole == 100
        assert np.array_equal(reservoir, whole)
    other, _ = offer_items(np.full(7, -1, dtype=np.int64), 0, stream, 12)
    assert not np.array_equal(other, whole)


def test_reservoir_holds_the_first_items_until_full() -> None:
    reservoir, n_seen = np.full(5, -1, dtype=np.int64), 0
    for item in range(5):
        reservoir, n_seen = offer_items(reservoir, n_seen, np.array([item]), 4)
        assert reservoir[: item + 1].tolist() == list(range(item + 1))
        assert np.all(reservoir[item + 1 :] == -1)
    start = reservoir.copy()
    reservoir, _ = offer_items(reservoir, n_seen, np.arange(5, 60), 4)
    assert not np.array_equal(reservoir, start)
    assert np.all((reservoir >= 0) & (reservoir < 60))


def test_reservoir_of_rows_and_input_left_alone() -> None:
    items = np.stack([np.arange(50), np.arange(50) * 10], axis=1)
    store = np.zeros((4, 2), dtype=np.int64)
    rows, _ = offer_items(store, 0, items, 2)
    flat, _ = offer_items(np.zeros(4, dtype=np.int64), 0, items[:, 0], 2)
    assert np.array_equal(rows[:, 0], flat) and np.array_equal(rows[:, 1], flat * 10)
    assert np.all(store == 0)


def test_window_keeps_the_last_items() -> None:
    capacity = 4
    window, n_seen = np.full(capacity, -1, dtype=np.int64), 0
    stream = np.arange(23)
    for part in np.split(stream, [3, 4, 11, 12]):
        window, n_seen = offer_window(window, n_seen, part)
        last = stream[max(0, n_seen - capacity) : n_seen]
        assert sorted(window[window >= 0].tolist()) == last.tolist()
        for item in last:
            assert window[window_slot(int(item), capacity)] == item
    assert n_seen == 23


@pytest.mark.parametrize(
    ("store", "n_seen", "items", "seed", "match"),
    [
        (np.zeros(0, dtype=np.int64), 0, np.arange(3), 0, "at least one slot"),
        (np.zeros(3, dtype=np.int64), 0, np.zeros((3, 2), dtype=np.int64), 0, "do not fit"),
        (np.zeros(3, dtype=np.int64), -1, np.arange(3), 0, "n_seen"),
        (np.zeros(3, dtype=np.int64), 0, np.arange(3), -5, "seed"),
    ],
)
def test_invalid_inputs_raise(store: np.ndarray, n_seen: int, items: np.ndarray, seed: int, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        offer_items(store, n_seen, items, seed)
