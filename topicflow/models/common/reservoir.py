"""Reservoir and recent-window sampling over a stream of items (e.g. global token positions).

This module owns where the n-th item of a stream goes in a fixed-capacity store: Vitter's Algorithm R
keeps a uniform sample of everything seen so far; the recent window keeps the last ``capacity`` items in
a ring buffer. May, Clemmer and Van Durme (2014) draw the rejuvenation tokens of a particle filter from
such a reservoir. The replacement draw for item n depends only on ``(seed, STREAM_RESERVOIR, n)``, so a
stream cut anywhere and resumed gives the same reservoir. Pure NumPy + numba; must not import dask,
distributed, zarr or logging, and does no I/O.

Glossary (Vitter 1985):
    capacity (k): slots in the reservoir or window
    n_seen (n): items of the stream offered before the current one; the current item is number n (0-based)
    slot: index in [0, k) the item is written to, or -1 when Algorithm R drops it
    reservoir ((k, ...)): slot contents; only the first ``min(n_seen, k)`` slots are filled

References
----------
Vitter (1985). Random sampling with a reservoir. ACM Transactions on Mathematical Software 11, 37-57.
May, Clemmer and Van Durme (2014). Particle filter rejuvenation and latent Dirichlet allocation. ACL.
"""
from __future__ import annotations

import numba
import numpy as np

from topicflow._typing import IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.rng import STREAM_RESERVOIR, counter_key, uniform_from_key

_MAX_SEED = 2**63


@numba.njit(nogil=True, cache=True)
def reservoir_key(seed, n_seen):
    """Key of item ``n_seen``'s draw: ``counter_key(seed, STREAM_RESERVOIR, 0, n_seen)``."""
    return counter_key(seed, STREAM_RESERVOIR, 0, n_seen)


@numba.njit(nogil=True, cache=True)
def reservoir_slot(n_seen, capacity, key):
    """Slot of item number ``n_seen`` (0-based) under Vitter's Algorithm R, or -1 if it is dropped.

    Parameters
    ----------
    n_seen : int
        Items offered before this one.
    capacity : int
        Reservoir size k, at least 1.
    key : uint64
        ``reservoir_key(seed, n_seen)`` (from Python, wrap it in ``np.uint64``); the draw is
        ``uniform_from_key(key, 0)``.

    Returns
    -------
    int
        ``n_seen`` while the reservoir is not full; afterwards ``j = floor(u (n_seen + 1))`` if
        ``j < capacity`` (the item replaces slot j), else -1.

    Notes
    -----
    Algorithm R (Vitter 1985): item n is kept with probability k / (n + 1) and replaces a uniformly
    chosen slot, so after N items each of them is in the reservoir with probability k / N.
    NumPy equivalent: ``n if n < k else (j if (j := int(u * (n + 1))) < k else -1)``.
    """
    if n_seen < capacity:
        return n_seen
    slot = int(uniform_from_key(key, 0) * (n_seen + 1))
    return slot if slot < capacity else -1


@numba.njit(nogil=True, cache=True)
def window_slot(n_seen, capacity):
    """Ring-buffer slot ``n_seen % capacity`` of item ``n_seen`` in a window of the last ``capacity`` items."""
    return n_seen % capacity


@numba.njit(nogil=True, cache=True)
def _reservoir_slots(n_seen, capacity, seed, slots):
    """slots[i] = reservoir_slot(n_seen + i, capacity, reservoir_key(seed, n_seen + i))."""
    for i in range(slots.shape[0]):
        n = n_seen + i
        slots[i] = reservoir_slot(n, capacity, reservoir_key(seed, n))


def _check_store(store: np.ndarray, n_seen: int, items: np.ndarray, seed: int | None) -> None:
    if store.ndim < 1 or store.shape[0] == 0:
        raise InvalidParameterError(f"the store needs at least one slot, got shape {store.shape!r}")
    if items.shape[1:] != store.shape[1:]:
        raise InvalidParameterError(
            f"items of shape {items.shape[1:]!r} do not fit slots of shape {store.shape[1:]!r}"
        )
    if int(n_seen) < 0:
        raise InvalidParameterError(f"n_seen must be nonnegative, got {n_seen!r}")
    if seed is not None and not (0 <= int(seed) < _MAX_SEED):
        raise InvalidParameterError(f"seed must be in [0, 2**63), got {seed!r}")


def _write_last_wins(store: np.ndarray, slots: IntArray, items: np.ndarray) -> np.ndarray:
    """Copy of ``store`` where each slot holds the last item sent to it (slots -1 are dropped)."""
    out = store.copy()
    kept = np.flatnonzero(slots >= 0)
    # np.unique on the reversed slots finds each slot's last writer; NumPy leaves the winner of
    # repeated fancy-index assignment unspecified, so it is not used directly.
    unique_slots, first_rev = np.unique(slots[kept][::-1], return_index=True)
    winners = kept[::-1][first_rev]
    out[unique_slots] = items[winners]
    return out


def offer_items(reservoir: IntArray, n_seen: int, items: IntArray, seed: int) -> tuple[IntArray, int]:
    """Offer ``items`` in order to a reservoir; return the new contents and the new ``n_seen``.

    Parameters
    ----------
    reservoir : ndarray of shape (capacity, ...)
        Current contents; slots at or beyond ``n_seen`` are unused (any value).
    n_seen : int
        Items offered so far.
    items : ndarray of shape (n_items, ...)
        Stream items in order, with the same trailing shape and a dtype castable to ``reservoir``'s.
    seed : int
        In [0, 2**63).

    Returns
    -------
    reservoir : ndarray of shape (capacity, ...)
        New array (the input is not modified).
    n_seen : int
        ``n_seen + n_items``.

    Raises
    ------
    InvalidParameterError
        Empty reservoir, mismatched item shape, negative ``n_seen`` or seed out of range.

    Notes
    -----
    Item i of ``items`` is stream item ``n_seen + i`` and goes to
    ``reservoir_slot(n_seen + i, capacity, reservoir_key(seed, n_seen + i))``; later items win a slot.
    Offering a stream in one call or in many gives the same reservoir.

    Examples
    --------
    >>> res, n = offer_items(np.full(3, -1), 0, np.array([10, 11]), seed=0)
    >>> res.tolist(), n
    ([10, 11, -1], 2)
    """
    store = np.asarray(reservoir)
    values = np.asarray(items)
    _check_store(store, n_seen, values, seed)
    slots = np.empty(values.shape[0], dtype=np.int64)
    _reservoir_slots(int(n_seen), store.shape[0], int(seed), slots)
    return _write_last_wins(store, slots, values), int(n_seen) + values.shape[0]


def offer_window(window: IntArray, n_seen: int, items: IntArray) -> tuple[IntArray, int]:
    """Offer ``items`` in order to a ring buffer of the last ``capacity`` items.

    Parameters
    ----------
    window : ndarray of shape (capacity, ...)
    n_seen : int
        Items offered so far.
    items : ndarray of shape (n_items, ...)

    Returns
    -------
    window : ndarray of shape (capacity, ...)
        New array; item ``n`` of the stream sits in slot ``window_slot(n, capacity)``.
    n_seen : int
        ``n_seen + n_items``.

    Raises
    ------
    InvalidParameterError
        Empty window, mismatched item shape or negative ``n_seen``.

    Examples
    --------
    >>> win, n = offer_window(np.zeros(2, dtype=np.int64), 0, np.array([1, 2, 3]))
    >>> win.tolist(), n
    ([3, 2], 3)
    """
    store = np.asarray(window)
    values = np.asarray(items)
    _check_store(store, n_seen, values, None)
    slots = (int(n_seen) + np.arange(values.shape[0], dtype=np.int64)) % store.shape[0]
    return _write_last_wins(store, slots, values), int(n_seen) + values.shape[0]
