"""Tests of topicflow.models.common.lineage against the copy-everything store in tests/reference/naive_particles.py.

Every lookup of every particle must agree with the naive store after any sequence of writes,
resamplings (arbitrary ancestor vectors), forgets with compaction and arena growth. Small initial
arenas make the kernels stop and resume through make_room many times.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reference.naive_particles import NaiveStore
from topicflow.errors import InvalidParameterError
from topicflow.models.common import lineage as lin

N_KEYS = 12


def _tree_is_consistent(store: lin.LineageStore) -> None:
    """Parent/child links agree, every particle owns its own leaf, and at most 2P - 1 nodes live."""
    nodes = store.nodes
    live = [n for n in range(nodes.shape[0]) if nodes[n, lin.PARENT] != lin.FREE]
    assert len(live) == store.counters[lin.N_NODES] <= 2 * store.n_particles - 1
    assert sum(nodes[n, lin.PARENT] == -1 for n in live) == 1
    for n in live:
        children = []
        child = nodes[n, lin.FIRST_CHILD]
        while child >= 0:
            assert nodes[child, lin.PARENT] == n
            children.append(child)
            child = nodes[child, lin.NEXT_SIBLING]
        assert len(children) == nodes[n, lin.N_CHILDREN]
        # after merging, an internal node has at least two children; a leaf has an owner
        assert nodes[n, lin.OWNER] >= 0 or len(children) >= 2
    assert sorted(store.leaf.tolist()) == sorted(set(store.leaf.tolist()))
    for p, node in enumerate(store.leaf):
        assert nodes[node, lin.OWNER] == p and nodes[node, lin.N_CHILDREN] == 0


def _filters_match_tables(store: lin.LineageStore) -> None:
    """Every node's filters hold exactly the bits of the keys its tables hold (so a clear bit proves a
    key absent): the running filters equal the ones rebuilt from the tables alone."""
    rebuilt = lin.with_filters({name: getattr(store, name) for name in lin.PERSISTED_FIELDS})
    assert np.array_equal(store.row_filter, rebuilt.row_filter)
    assert np.array_equal(store.z_filter, rebuilt.z_filter)
    for node in range(store.nodes.shape[0]):
        for keys, filters, table in ((store.row_keys, store.row_filter, lin.ROW_TABLE),
                                     (store.z_keys, store.z_filter, lin.Z_TABLE)):
            start, capacity = store.nodes[node, table], store.nodes[node, table + 1]
            for key in keys[start:start + capacity]:
                if key != lin.EMPTY_KEY:
                    bit = (int(key) * 0x9E3779B97F4A7C15 % 2**64) >> (64 - lin.FILTER_BITS_LOG2)
                    assert int(filters[node, bit >> 6]) >> (bit & 63) & 1


def _assert_same(store: lin.LineageStore, naive: NaiveStore) -> None:
    _filters_match_tables(store)
    for p in range(store.n_particles):
        for key in range(N_KEYS):
            assert lin.has_row(store, p, key) == naive.has_row(p, key)
            assert np.array_equal(lin.lookup_row(store, p, key), naive.row(p, key))
            assert lin.lookup_topic(store, p, key) == naive.topic(p, key)


@st.composite
def operations(draw):  # type: ignore[no-untyped-def]
    n_particles = draw(st.integers(1, 5))
    width = draw(st.integers(1, 3))
    particle = st.integers(0, n_particles - 1)
    key = st.integers(0, N_KEYS - 1)
    op = st.one_of(
        st.tuples(st.just("add"), particle, key, st.lists(st.integers(-3, 3), min_size=width, max_size=width)),
        st.tuples(st.just("topic"), particle, key, st.integers(0, 9)),
        st.tuples(st.just("resample"), st.lists(particle, min_size=n_particles, max_size=n_particles)),
        st.tuples(st.just("forget"), st.sets(key, max_size=4), st.sets(key, max_size=4)),
    )
    root_rows = draw(st.dictionaries(key, st.lists(st.integers(0, 5), min_size=width, max_size=width), max_size=5))
    root_topics = draw(st.dictionaries(key, st.integers(0, 9), max_size=5))
    return n_particles, width, root_rows, root_topics, draw(st.lists(op, max_size=40))


def _filter_without(forgotten: set[int]) -> lin.KeyFilter:
    return lin.KeyFilter(keep_below=0, live_keys=np.array(sorted(set(range(N_KEYS)) - forgotten), dtype=np.int64))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=operations())
def test_lineage_store_agrees_with_copy_everything_store(case) -> None:  # type: ignore[no-untyped-def]
    n_particles, width, root_rows, root_topics, ops = case
    row_keys = np.array(sorted(root_rows), dtype=np.int64)
    z_keys = np.array(sorted(root_topics), dtype=np.int64)
    store = lin.store_from_root(n_particles, row_keys, np.array([root_rows[k] for k in row_keys], dtype=np.int32)
                                .reshape(len(row_keys), width), z_keys,
                                np.array([root_topics[k] for k in z_keys], dtype=np.int32))
    naive = NaiveStore(n_particles, width, root_rows, root_topics)
    for op in ops:
        if op[0] == "add":
            store = lin.add_to_row(store, op[1], op[2], np.array(op[3]))
            naive.add_to_row(op[1], op[2], op[3])
        elif op[0] == "topic":
            store = lin.set_topic(store, op[1], op[2], op[3])
            naive.set_topic(op[1], op[2], op[3])
        elif op[0] == "resample":
            store = lin.resample_lineage(store, np.array(op[1]))
            naive.resample(op[1])
            _tree_is_consistent(store)
        else:
            store = lin.compact_store(store, _filter_without(op[1]), _filter_without(op[2]))
            naive.forget(op[1], op[2])
        _assert_same(store, naive)


def test_growth_and_compaction_from_tiny_arenas_keep_every_value() -> None:
    """Hundreds of writes into arenas of 4 slots and 1 row: make_room runs many times, values survive."""
    rng = np.random.default_rng(3)
    store = lin.empty_store(4, 3, row_slots=4, z_slots=4, n_rows=1)
    naive = NaiveStore(4, 3)
    for step in range(400):
        p, key = int(rng.integers(4)), int(rng.integers(N_KEYS))
        delta = rng.integers(-2, 3, size=3)
        store = lin.add_to_row(store, p, key, delta)
        naive.add_to_row(p, key, delta)
        store = lin.set_topic(store, p, key, step % 7)
        naive.set_topic(p, key, step % 7)
        if step % 9 == 0:
            ancestors = np.sort(rng.integers(4, size=4))
            store = lin.resample_lineage(store, ancestors)
            naive.resample(ancestors)
    _assert_same(store, naive)
    _tree_is_consistent(store)


def _history_store(n_history: int, n_particles: int) -> lin.LineageStore:
    """A root holding ``n_history`` rows and topics (the past), P particles below it."""
    keys = np.arange(n_history, dtype=np.int64)
    rows = np.ones((n_history, 4), dtype=np.int32)
    return lin.store_from_root(n_particles, keys, rows, keys, np.zeros(n_history, dtype=np.int32))


def _resampling_work(n_history: int) -> list[int]:
    """Work counter of each of 20 resamplings, each after every particle wrote 10 keys."""
    n_particles = 8
    store = _history_store(n_history, n_particles)
    rng = np.random.default_rng(0)
    work = []
    for cycle in range(20):
        for p in range(n_particles):
            for key in rng.integers(0, min(n_history, 1000), size=10):
                store = lin.add_to_row(store, p, int(key), np.ones(4, dtype=np.int32))
                store = lin.set_topic(store, p, int(key) + cycle, 1)
        before = int(store.counters[lin.WORK])
        store = lin.resample_lineage(store, np.sort(rng.integers(n_particles, size=n_particles)))
        work.append(int(store.counters[lin.WORK]) - before)
    return work


def test_resampling_work_does_not_grow_with_history() -> None:
    """Node visits and moved entries of a resampling are the same with 1,000 or 50,000 past entries."""
    short, long = _resampling_work(1_000), _resampling_work(50_000)
    assert short == long
    assert max(long) <= 8 * (2 * 8 + 2 * 10 * 3)  # O(P) node work plus merges of since-last-resampling tables


def test_depth_stays_small_over_many_resamplings() -> None:
    rng = np.random.default_rng(1)
    n_particles = 16
    store = lin.empty_store(n_particles, 2)
    for step in range(300):
        p = int(rng.integers(n_particles))
        store = lin.add_to_row(store, p, step % 50, np.array([1, 0]))
        weights = rng.dirichlet(np.full(n_particles, 0.3))
        store = lin.resample_lineage(store, np.sort(rng.choice(n_particles, size=n_particles, p=weights)))
    _tree_is_consistent(store)
    stats = lin.lineage_stats(store)
    assert stats["n_nodes"] <= 2 * n_particles - 1
    assert stats["depth_max"] <= n_particles


def test_single_particle_writes_in_place_at_the_root() -> None:
    store = lin.store_from_root(1, np.array([0, 1]), np.array([[1, 2], [3, 4]], dtype=np.int32),
                                np.array([5]), np.array([1], dtype=np.int32))
    for _ in range(50):
        store = lin.add_to_row(store, 0, 1, np.array([1, 1]))
        store = lin.resample_lineage(store, np.array([0]))
    stats = lin.lineage_stats(store)
    assert stats["depth_max"] == 1 and stats["n_nodes"] == 1 and stats["n_rows_used"] == 2
    assert lin.lookup_row(store, 0, 1).tolist() == [53, 54]


def test_compaction_bounds_memory_when_old_keys_are_forgotten() -> None:
    """A sliding set of 50 live keys over 5,000 writes: the arenas stop growing."""
    store = lin.empty_store(3, 2)
    sizes = []
    for key in range(5000):
        live = lin.KeyFilter(keep_below=0, live_keys=np.arange(max(0, key - 49), key + 1))
        store = lin.add_to_row(store, key % 3, key, np.array([1, 2]), live, live)
        store = lin.set_topic(store, key % 3, key, 1, live, live)
        if key % 97 == 0:
            store = lin.resample_lineage(store, np.array([key % 3, key % 3, 0]), live, live)
        sizes.append(lin.lineage_stats(store)["nbytes"])
    assert max(sizes[2500:]) == max(sizes[1000:2500])
    store = lin.compact_store(store, live, live)
    assert not any(lin.has_row(store, p, key) or lin.lookup_topic(store, p, key) >= 0
                   for p in range(3) for key in range(0, 4950, 7))
    assert lin.lookup_row(store, 4999 % 3, 4999).tolist() == [1, 2]
    stats = lin.lineage_stats(store)
    assert stats["n_entries"] <= 2 * 50 * stats["n_nodes"]


def test_filters_skip_nodes_without_the_key_and_never_hide_one() -> None:
    """A key written once deep in a lineage is found from every descendant, though most nodes on the
    path have a clear bit for it; a cloud saved without its filters gets them back from its tables."""
    rng = np.random.default_rng(5)
    store = lin.empty_store(6, 2, row_slots=4, z_slots=4, n_rows=1)
    for step in range(300):
        store = lin.add_to_row(store, step % 6, 1000 + step, np.array([1, step]))
        store = lin.set_topic(store, step % 6, 5000 + step, step % 4)
        if step % 7 == 0:
            store = lin.resample_lineage(store, np.sort(rng.integers(6, size=6)))
    _filters_match_tables(store)
    clear = 0
    for p in range(6):
        node = int(store.leaf[p])
        while node >= 0:
            clear += not lin._may_hold(store.row_filter, node, 999_999)
            node = int(store.nodes[node, lin.PARENT])
    assert clear > 0  # an absent key is skipped by filters, not only by probing tables
    found = [lin.lookup_topic(store, p, 5000 + step) for p in range(6) for step in range(300)]
    assert sum(topic >= 0 for topic in found) > 300
    for p in range(6):  # a written row reads back its value from every particle that inherited it
        for step in range(300):
            row = lin.lookup_row(store, p, 1000 + step)
            assert row.tolist() in ([0, 0], [1, step])


def test_make_room_is_deterministic() -> None:
    def run() -> lin.LineageStore:
        store = lin.empty_store(3, 2, row_slots=4, z_slots=4, n_rows=1)
        for key in range(200):
            store = lin.add_to_row(store, key % 3, key % 17, np.array([1, key]))
            if key % 11 == 0:
                store = lin.resample_lineage(store, np.array([0, 0, key % 3]))
        return store

    a, b = run(), run()
    for name in lin.LineageStore._fields:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_invalid_arguments_raise() -> None:
    store = lin.empty_store(2, 2)
    with pytest.raises(InvalidParameterError):
        lin.resample_lineage(store, np.array([0, 2]))
    with pytest.raises(InvalidParameterError):
        lin.lookup_row(store, 2, 0)
    with pytest.raises(InvalidParameterError):
        lin.add_to_row(store, 0, -1, np.array([1, 1]))
    with pytest.raises(InvalidParameterError):
        lin.add_to_row(store, 0, 1, np.array([1, 1, 1]))
    with pytest.raises(InvalidParameterError):
        lin.store_from_root(2, np.array([1, 1]), np.zeros((2, 2), dtype=np.int32), np.array([]), np.array([]))
    with pytest.raises(InvalidParameterError):
        lin.empty_store(0, 2)
