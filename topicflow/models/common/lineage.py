"""Shared-lineage storage of particle states: a copy-on-write tree of hash-table nodes.

This module owns how the P particles of a streaming sampler store their state so that resampling
(which copies particles) costs O(P) instead of O(P x history), after Canini, Shi and Griffiths
(2009, section 4). It knows nothing about LDA: it stores integer *rows* (vectors of a fixed width,
such as a term's topic counts) and scalar *topics* (a token's assignment), each under a
nonnegative int64 key, per particle. Pure NumPy + numba; must not import dask, distributed, zarr or
logging, and does no I/O.

The structure. Nodes form a tree; each particle points to a leaf of its own; each node holds two
open-addressing hash tables of overrides (row keys -> row index into the row arena, topic keys ->
topic) and a parent pointer. A particle's value of a key is the one held by the first node on the
path from its leaf to the root that holds the key (absent everywhere: a row of zeros, topic -1).
Writes go to the particle's own leaf; a row absent from the leaf is first copied from the nearest
ancestor (copy-on-write). Resampling turns each surviving particle's leaf into an internal node
shared by its copies, each copy getting a fresh empty leaf; nodes no particle descends from are
pruned and an internal node left with a single child is merged with it, so there are at most
2P - 1 nodes and the paths stay short.

Memory. Everything lives in plain arrays (a node table, two slot arenas, a row arena) that numba
kernels mutate in place with bump allocation; a kernel never allocates past an arena's end: it
reports the space it needs (``counters[NEED_*]``) and returns, and :func:`make_room` compacts and
grows the arrays before the kernel is called again. Compaction rebuilds the arenas node by node
keeping only live keys (a :class:`KeyFilter` says which), which drops abandoned tables, overridden
rows, pruned nodes and keys the caller has forgotten (tokens evicted from a reservoir, finished
documents), so with a bounded set of live keys memory stays bounded over an unbounded stream.
Every step is a deterministic function of the operations applied, never of timing.

Glossary (Canini et al. 2009):
    n_particles (P): particles; ``leaf[p]`` is particle p's node
    node: a set of overrides plus a parent; the root (parent -1) holds the initial state
    row key / row: a nonnegative key and its int32 vector of ``row_width`` values
    topic key / topic: a nonnegative key and its int32 scalar value (-1: absent)
    depth of a particle: nodes on the path from its leaf to the root (a lookup's worst-case probes)
    live entries: keys held by all nodes' tables together
    work: a counter of node visits and moved entries in resampling and merging (``counters[WORK]``)

References
----------
Canini, Shi and Griffiths (2009). Online inference of topics with latent Dirichlet allocation.
AISTATS, PMLR 5:65-72 (section 4, the shared-lineage particle representation).
Knuth (1998). The Art of Computer Programming 3, 6.4 (open addressing with linear probing, and
multiplicative "Fibonacci" hashing).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numba
import numpy as np

from topicflow._typing import Int32Array, IntArray
from topicflow.errors import InvalidParameterError

#: Key of an empty hash slot (stored keys are >= 0).
EMPTY_KEY = -1
#: ``nodes[n, PARENT]`` of a node id on the free list.
FREE = -2
#: Smallest nonzero hash-table capacity (a power of two); tables are kept at most half full.
MIN_TABLE = 4

# Columns of the node table.
PARENT, FIRST_CHILD, NEXT_SIBLING, PREV_SIBLING, N_CHILDREN, OWNER = 0, 1, 2, 3, 4, 5
ROW_TABLE, Z_TABLE = 6, 9  # first of three columns (start, capacity, count) of each table
N_NODE_COLUMNS = 12

# Entries of the counter vector.
N_FREE, ROW_SLOTS_USED, Z_SLOTS_USED, ROWS_USED, N_NODES, N_PENDING, WORK = 0, 1, 2, 3, 4, 5, 6
NEED_ROW_SLOTS, NEED_Z_SLOTS, NEED_ROWS = 7, 8, 9
N_COUNTERS = 10

_FIB = 0x9E3779B97F4A7C15
#: Each node keeps, per table, a filter of 2**FILTER_BITS_LOG2 bits: bit h(key) is set for every key the
#: table holds (h: the top bits of the same multiplicative hash), so a lookup skips a node whose bit is
#: clear without reading its table. A walk to a key held far up the lineage then reads the small filters
#: (in cache) instead of one table slot per node (a cache miss each); the root, the last node of every
#: walk, is probed without its filter (o-LDA has no other node). Filters are not state: they are
#: rebuilt from the tables (:func:`with_filters`) and never saved.
FILTER_BITS_LOG2 = 11
FILTER_WORDS = (1 << FILTER_BITS_LOG2) >> 6
_INT64_MAX = np.iinfo(np.int64).max


class LineageStore(NamedTuple):
    """The arrays of a shared-lineage store (a named tuple so numba kernels take it as one argument).

    The tuple is immutable but its arrays are not: kernels mutate them in place, and growth returns
    a new tuple (``store._replace(...)``) with larger arrays. Never share one store between samplers.

    Attributes
    ----------
    nodes : ndarray of shape (node_capacity, N_NODE_COLUMNS), int64
        Per node: parent (-1 root, ``FREE``), first child, next and previous sibling, number of
        children, owner particle (-1 for internal nodes), then (start, capacity, count) of the row
        table and of the topic table.
    free_nodes : ndarray of shape (node_capacity,), int64
        Stack of free node ids, ``counters[N_FREE]`` deep.
    pending : ndarray of shape (node_capacity,), int64
        Internal nodes left with one child by pruning, ``counters[N_PENDING]`` of them, to merge.
    leaf : ndarray of shape (n_particles,), int64
        Node of each particle.
    counters : ndarray of shape (N_COUNTERS,), int64
        Allocation pointers, counts, the work counter and the space a stopped kernel needs.
    row_keys, row_values : ndarray of shape (row_slot_capacity,), int64
        Slot arena of the row tables: key (``EMPTY_KEY``) and row index.
    z_keys : ndarray of shape (z_slot_capacity,), int64
    z_values : ndarray of shape (z_slot_capacity,), int32
        Slot arena of the topic tables.
    rows : ndarray of shape (row_capacity, row_width), int32
        Row arena; each stored row is referenced by exactly one slot.
    row_filter, z_filter : ndarray of shape (node_capacity, FILTER_WORDS), uint64
        Per node, the bits of the keys its row and topic tables hold (a superset; see
        :data:`FILTER_BITS_LOG2`). Derived from the tables, never saved (:data:`PERSISTED_FIELDS`).
    """

    nodes: IntArray
    free_nodes: IntArray
    pending: IntArray
    leaf: IntArray
    counters: IntArray
    row_keys: IntArray
    row_values: IntArray
    z_keys: IntArray
    z_values: Int32Array
    rows: Int32Array
    row_filter: np.ndarray
    z_filter: np.ndarray

    @property
    def n_particles(self) -> int:
        return int(self.leaf.shape[0])

    @property
    def row_width(self) -> int:
        return int(self.rows.shape[1])


@dataclass(frozen=True, slots=True)
class KeyFilter:
    """Which keys are live at a compaction: every key below ``keep_below``, plus ``live_keys``.

    Attributes
    ----------
    keep_below : int
        Keys ``< keep_below`` are always kept.
    live_keys : ndarray of shape (n_live,), int64
        Further live keys; sorted ascending by ``__post_init__``.
    """

    keep_below: int = _INT64_MAX
    live_keys: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep_below", int(self.keep_below))
        object.__setattr__(self, "live_keys", np.sort(np.asarray(self.live_keys, dtype=np.int64).ravel()))

    @classmethod
    def keep_all(cls) -> KeyFilter:
        """The filter that keeps every key (compaction then drops only structural garbage)."""
        return cls()


# --------------------------------------------------------------------------------------------- tables
#
# The small functions a particle's step calls several times (table probes, lookups, reservations,
# writes) are inlined by numba (``inline="always"``): measured, that took a particle filter step at
# P = 100 from 1.1x to 1.5x the speed of the code before the filters, and o-LDA back to its old speed.
# The larger ones (table rebuilds, slot insertion, merges, compaction) stay calls, which keeps the
# first compilation 9 s longer instead of 19 (benchmarks/RESULTS.md, "The particle filter lineage
# lookups").


@numba.njit(nogil=True, cache=True, inline="always")
def _home_slot(key, capacity):
    """Multiplicative (Fibonacci) hash of ``key`` into [0, capacity), capacity a power of two."""
    h = np.uint64(key) * np.uint64(_FIB)
    return np.int64(h >> np.uint64(33)) & (capacity - 1)


@numba.njit(nogil=True, cache=True, inline="always")
def _filter_bit(key):
    """(word, bit mask) of ``key`` in a node's filter: the top bits of its multiplicative hash."""
    h = (np.uint64(key) * np.uint64(_FIB)) >> np.uint64(64 - FILTER_BITS_LOG2)
    return np.int64(h >> np.uint64(6)), np.uint64(1) << (h & np.uint64(63))


@numba.njit(nogil=True, cache=True, inline="always")
def _may_hold(filters, node, key):
    """False if ``node``'s table cannot hold ``key`` (its filter bit is clear)."""
    word, bit = _filter_bit(key)
    return (filters[node, word] & bit) != np.uint64(0)


@numba.njit(nogil=True, cache=True, inline="always")
def _mark(filters, node, key):
    word, bit = _filter_bit(key)
    filters[node, word] |= bit


@numba.njit(nogil=True, cache=True, inline="always")
def _table_find(keys, nodes, node, table, key):
    """Slot of ``key`` in the ``table`` (ROW_TABLE or Z_TABLE) of ``node``, or -1 (linear probing)."""
    capacity = nodes[node, table + 1]
    if capacity == 0:
        return -1
    start = nodes[node, table]
    i = _home_slot(key, capacity)
    while True:
        stored = keys[start + i]
        if stored == key:
            return start + i
        if stored == EMPTY_KEY:
            return -1
        i = (i + 1) & (capacity - 1)


@numba.njit(nogil=True, cache=True)
def _slot_insert(keys, values, start, capacity, key, value):
    """Write ``key -> value`` in the first free slot of its probe sequence (``key`` known absent)."""
    i = _home_slot(key, capacity)
    while keys[start + i] != EMPTY_KEY:
        i = (i + 1) & (capacity - 1)
    keys[start + i] = key
    values[start + i] = value
    return start + i


@numba.njit(nogil=True, cache=True, inline="always")
def growth_need(count, capacity, extra):
    """Slots a table of ``count`` keys and ``capacity`` slots allocates to take ``extra`` more keys.

    Zero if it stays at most half full, else the smallest power of two >= MIN_TABLE that keeps it so
    (the table is rebuilt once at that size; its old slots become garbage).
    """
    target = count + extra
    if 2 * target <= capacity:
        return 0
    new = max(capacity, MIN_TABLE)
    while new < 2 * target:
        new *= 2
    return new


@numba.njit(nogil=True, cache=True)
def _table_reserve(keys, values, nodes, node, table, extra, counters, used):
    """Rebuild the table at a larger size, if needed, so ``extra`` more keys fit (space checked)."""
    need = growth_need(nodes[node, table + 2], nodes[node, table + 1], extra)
    if need == 0:
        return
    start = counters[used]
    counters[used] += need
    keys[start : start + need] = EMPTY_KEY
    old_start, old_capacity = nodes[node, table], nodes[node, table + 1]
    for s in range(old_start, old_start + old_capacity):
        if keys[s] != EMPTY_KEY:
            _slot_insert(keys, values, start, need, keys[s], values[s])
    nodes[node, table] = start
    nodes[node, table + 1] = need


@numba.njit(nogil=True, cache=True, inline="always")
def _table_add(keys, values, nodes, filters, node, table, key, value):
    """Insert an absent key into a table that has been reserved for it (and into its filter)."""
    if 2 * (nodes[node, table + 2] + 1) > nodes[node, table + 1]:
        raise RuntimeError("lineage: hash table written without a reservation")
    _slot_insert(keys, values, nodes[node, table], nodes[node, table + 1], key, value)
    _mark(filters, node, key)
    nodes[node, table + 2] += 1


# ----------------------------------------------------------------------------------- space checks


@numba.njit(nogil=True, cache=True, inline="always")
def node_space(st, node, n_row_keys, n_z_keys, out):
    """Add to ``out`` (row slots, topic slots) what reserving ``node`` for new keys would allocate."""
    out[0] += growth_need(st.nodes[node, ROW_TABLE + 2], st.nodes[node, ROW_TABLE + 1], n_row_keys)
    out[1] += growth_need(st.nodes[node, Z_TABLE + 2], st.nodes[node, Z_TABLE + 1], n_z_keys)


@numba.njit(nogil=True, cache=True, inline="always")
def has_space(st, row_slots, z_slots, n_rows):
    """True if the arenas can take the allocation; otherwise record it in ``counters[NEED_*]``."""
    c = st.counters
    ok = (c[ROW_SLOTS_USED] + row_slots <= st.row_keys.shape[0]
          and c[Z_SLOTS_USED] + z_slots <= st.z_keys.shape[0]
          and c[ROWS_USED] + n_rows <= st.rows.shape[0])
    if not ok:
        c[NEED_ROW_SLOTS] = row_slots
        c[NEED_Z_SLOTS] = z_slots
        c[NEED_ROWS] = n_rows
    return ok


@numba.njit(nogil=True, cache=True, inline="always")
def reserve_node(st, node, n_row_keys, n_z_keys):
    """Grow ``node``'s tables so that ``n_row_keys`` and ``n_z_keys`` more keys fit (space checked)."""
    _table_reserve(st.row_keys, st.row_values, st.nodes, node, ROW_TABLE, n_row_keys, st.counters,
                   ROW_SLOTS_USED)
    _table_reserve(st.z_keys, st.z_values, st.nodes, node, Z_TABLE, n_z_keys, st.counters, Z_SLOTS_USED)


@numba.njit(nogil=True, cache=True, inline="always")
def reserve_leaf(st, particle, n_row_keys, n_z_keys, n_rows):
    """Check space and reserve ``particle``'s leaf for one write unit; False (nothing done) if full."""
    need = np.zeros(2, dtype=np.int64)
    node_space(st, st.leaf[particle], n_row_keys, n_z_keys, need)
    if not has_space(st, need[0], need[1], n_rows):
        return False
    reserve_node(st, st.leaf[particle], n_row_keys, n_z_keys)
    return True


# ------------------------------------------------------------------------------ lookups and writes


@numba.njit(nogil=True, cache=True, inline="always")
def find_row(st, node, key):
    """Row index of ``key`` as seen from ``node`` (first holder on the path to the root), or -1."""
    while node >= 0:
        parent = st.nodes[node, PARENT]
        if parent < 0 or _may_hold(st.row_filter, node, key):
            s = _table_find(st.row_keys, st.nodes, node, ROW_TABLE, key)
            if s >= 0:
                return st.row_values[s]
        node = parent
    return -1


@numba.njit(nogil=True, cache=True, inline="always")
def find_topic(st, node, key):
    """Topic of ``key`` as seen from ``node``, or -1 if no node on the path holds it."""
    while node >= 0:
        parent = st.nodes[node, PARENT]
        if parent < 0 or _may_hold(st.z_filter, node, key):
            s = _table_find(st.z_keys, st.nodes, node, Z_TABLE, key)
            if s >= 0:
                return np.int64(st.z_values[s])
        node = parent
    return -1


@numba.njit(nogil=True, cache=True, inline="always")
def find_row_holder(st, node, key):
    """Find the row of ``key`` seen from ``node``, and the node that holds it.

    Returns (row index, holder): the first node on the path to the root that holds the key, and its
    row; (-1, -1) if none does. :func:`own_row` turns it into a writable row without walking the path
    again.
    """
    while node >= 0:
        parent = st.nodes[node, PARENT]
        if parent < 0 or _may_hold(st.row_filter, node, key):
            s = _table_find(st.row_keys, st.nodes, node, ROW_TABLE, key)
            if s >= 0:
                return st.row_values[s], node
        node = parent
    return -1, -1


@numba.njit(nogil=True, cache=True, inline="always")
def _copy_row(st, node, key, source):
    """Give ``node`` its own row for ``key``, a copy of row ``source`` (zeros if -1); return its index."""
    r = st.counters[ROWS_USED]
    if r >= st.rows.shape[0]:
        raise RuntimeError("lineage: row written without a reservation")
    st.counters[ROWS_USED] += 1
    for k in range(st.rows.shape[1]):
        st.rows[r, k] = st.rows[source, k] if source >= 0 else 0
    _table_add(st.row_keys, st.row_values, st.nodes, st.row_filter, node, ROW_TABLE, key, r)
    return r


@numba.njit(nogil=True, cache=True, inline="always")
def writable_row(st, node, key):
    """Index of ``node``'s own row for ``key``, copied from the nearest ancestor (or zeros) if absent.

    The caller has reserved one row key and one row (see :func:`reserve_leaf`).
    """
    if st.nodes[node, PARENT] < 0 or _may_hold(st.row_filter, node, key):
        s = _table_find(st.row_keys, st.nodes, node, ROW_TABLE, key)
        if s >= 0:
            return st.row_values[s]
    return _copy_row(st, node, key, find_row(st, st.nodes[node, PARENT], key))


@numba.njit(nogil=True, cache=True, inline="always")
def own_row(st, node, key, row, holder):
    """Return :func:`writable_row` of ``key`` from a lookup already made.

    ``(row, holder) = find_row_holder(st, node, key)``, taken after the last write of ``key`` to the
    store (a reservation in between does not matter: it moves no row).
    """
    if holder == node:
        return row
    return _copy_row(st, node, key, row)


@numba.njit(nogil=True, cache=True, inline="always")
def write_topic(st, node, key, topic):
    """Set ``key``'s topic in ``node``'s own table (the caller reserved one topic key)."""
    s = -1
    if st.nodes[node, PARENT] < 0 or _may_hold(st.z_filter, node, key):
        s = _table_find(st.z_keys, st.nodes, node, Z_TABLE, key)
    if s >= 0:
        st.z_values[s] = topic
    else:
        _table_add(st.z_keys, st.z_values, st.nodes, st.z_filter, node, Z_TABLE, key, topic)


@numba.njit(nogil=True, cache=True)
def depth(st, node):
    """Nodes on the path from ``node`` to the root, both included."""
    n = 0
    while node >= 0:
        n += 1
        node = st.nodes[node, PARENT]
    return n


# -------------------------------------------------------------------------------------- the tree


@numba.njit(nogil=True, cache=True)
def _link_child(nodes, parent, child):
    """Make ``child`` the first child of ``parent``."""
    head = nodes[parent, FIRST_CHILD]
    nodes[child, PARENT] = parent
    nodes[child, PREV_SIBLING] = -1
    nodes[child, NEXT_SIBLING] = head
    if head >= 0:
        nodes[head, PREV_SIBLING] = child
    nodes[parent, FIRST_CHILD] = child
    nodes[parent, N_CHILDREN] += 1


@numba.njit(nogil=True, cache=True)
def _unlink_child(nodes, child):
    """Remove ``child`` from its parent's list of children (the parent must exist)."""
    parent, prev, nxt = nodes[child, PARENT], nodes[child, PREV_SIBLING], nodes[child, NEXT_SIBLING]
    if prev >= 0:
        nodes[prev, NEXT_SIBLING] = nxt
    else:
        nodes[parent, FIRST_CHILD] = nxt
    if nxt >= 0:
        nodes[nxt, PREV_SIBLING] = prev
    nodes[parent, N_CHILDREN] -= 1


@numba.njit(nogil=True, cache=True)
def _alloc_node(st, parent, owner):
    """A fresh empty node under ``parent`` (-1: a root), owned by particle ``owner`` (-1: none)."""
    c = st.counters
    if c[N_FREE] == 0:
        raise RuntimeError("lineage: node table full")
    c[N_FREE] -= 1
    node = st.free_nodes[c[N_FREE]]
    st.nodes[node, :] = 0
    st.row_filter[node, :] = 0
    st.z_filter[node, :] = 0
    st.nodes[node, FIRST_CHILD] = -1
    st.nodes[node, NEXT_SIBLING] = -1
    st.nodes[node, PREV_SIBLING] = -1
    st.nodes[node, OWNER] = owner
    st.nodes[node, PARENT] = -1
    if parent >= 0:
        _link_child(st.nodes, parent, node)
    c[N_NODES] += 1
    return node


@numba.njit(nogil=True, cache=True)
def _free_node(st, node):
    """Return ``node`` to the free list; its tables and rows become garbage until compaction."""
    st.nodes[node, :] = 0
    st.nodes[node, PARENT] = FREE
    st.row_filter[node, :] = 0
    st.z_filter[node, :] = 0
    st.free_nodes[st.counters[N_FREE]] = node
    st.counters[N_FREE] += 1
    st.counters[N_NODES] -= 1


@numba.njit(nogil=True, cache=True)
def _prune(st, node):
    """Free ``node`` and its ancestors while they have neither an owner nor children.

    An ancestor left with exactly one child (and no owner) is queued in ``pending`` for merging.
    """
    nodes = st.nodes
    while node >= 0 and nodes[node, OWNER] < 0 and nodes[node, N_CHILDREN] == 0:
        parent = nodes[node, PARENT]
        if parent >= 0:
            _unlink_child(nodes, node)
        _free_node(st, node)
        st.counters[WORK] += 1
        if parent >= 0 and nodes[parent, N_CHILDREN] == 1 and nodes[parent, OWNER] < 0:
            st.pending[st.counters[N_PENDING]] = parent
            st.counters[N_PENDING] += 1
        node = parent


@numba.njit(nogil=True, cache=True)
def rewire(st, ancestors):
    """Point new particle i at a copy of old particle ``ancestors[i]``'s state, in O(P) node work.

    An ancestor copied once hands its leaf over; one copied c >= 2 times keeps its leaf as an
    internal node under which c fresh empty leaves are made; leaves of particles not copied are
    pruned. Single-child internal nodes are queued in ``pending`` (see :func:`merge_pending`).
    """
    n_particles = st.leaf.shape[0]
    old_leaf = st.leaf.copy()
    copies = np.zeros(n_particles, dtype=np.int64)
    for i in range(n_particles):
        copies[ancestors[i]] += 1
    for q in range(n_particles):
        st.nodes[old_leaf[q], OWNER] = -1
    for q in range(n_particles):
        if copies[q] == 0:
            _prune(st, old_leaf[q])
    for i in range(n_particles):
        source = old_leaf[ancestors[i]]
        if copies[ancestors[i]] == 1:
            st.leaf[i] = source
            st.nodes[source, OWNER] = i
        else:
            st.leaf[i] = _alloc_node(st, source, i)
        st.counters[WORK] += 1


@numba.njit(nogil=True, cache=True)
def _merge_tables(keys, values, nodes, filters, parent, child, table, counters, used):
    """Give ``child`` the union of both tables, the child's entries winning (space checked).

    The smaller table is inserted into the larger one, so the cost is the smaller table's size; the
    child's filter becomes the union of both filters.
    """
    for w in range(filters.shape[1]):
        filters[child, w] |= filters[parent, w]
    n_parent, n_child = nodes[parent, table + 2], nodes[child, table + 2]
    if n_parent > n_child:
        for j in range(3):  # the parent's table becomes the child's base
            nodes[parent, table + j], nodes[child, table + j] = nodes[child, table + j], nodes[parent, table + j]
    _table_reserve(keys, values, nodes, child, table, nodes[parent, table + 2], counters, used)
    start, capacity = nodes[parent, table], nodes[parent, table + 1]
    for s in range(start, start + capacity):
        key = keys[s]
        if key == EMPTY_KEY:
            continue
        found = _table_find(keys, nodes, child, table, key)
        if found < 0:
            _table_add(keys, values, nodes, filters, child, table, key, values[s])
        elif n_parent > n_child:  # the other table is the child's own: it overrides
            values[found] = values[s]
    counters[WORK] += min(n_parent, n_child)


@numba.njit(nogil=True, cache=True)
def _merge_into_child(st, node):
    """Merge internal ``node`` into its only child, which takes its place (space checked)."""
    nodes = st.nodes
    child, grandparent = nodes[node, FIRST_CHILD], nodes[node, PARENT]
    _merge_tables(st.row_keys, st.row_values, nodes, st.row_filter, node, child, ROW_TABLE, st.counters,
                  ROW_SLOTS_USED)
    _merge_tables(st.z_keys, st.z_values, nodes, st.z_filter, node, child, Z_TABLE, st.counters, Z_SLOTS_USED)
    _unlink_child(nodes, child)
    if grandparent >= 0:
        _unlink_child(nodes, node)
        _link_child(nodes, grandparent, child)
    else:
        nodes[child, PARENT] = -1
    _free_node(st, node)


@numba.njit(nogil=True, cache=True)
def merge_pending(st):
    """Merge every queued single-child internal node into its child; False if an arena is full.

    Each merge is all-or-nothing, so after :func:`make_room` the call resumes where it stopped.
    """
    need = np.zeros(2, dtype=np.int64)
    while st.counters[N_PENDING] > 0:
        node = st.pending[st.counters[N_PENDING] - 1]
        nodes = st.nodes
        if nodes[node, PARENT] != FREE and nodes[node, OWNER] < 0 and nodes[node, N_CHILDREN] == 1:
            child = nodes[node, FIRST_CHILD]
            need[:] = 0
            for table, j in ((ROW_TABLE, 0), (Z_TABLE, 1)):
                a, b = nodes[node, table + 2], nodes[child, table + 2]
                big = node if a > b else child
                need[j] += growth_need(nodes[big, table + 2], nodes[big, table + 1], min(a, b))
            if not has_space(st, need[0], need[1], 0):
                return False
            _merge_into_child(st, node)
        st.counters[N_PENDING] -= 1
    return True


# ---------------------------------------------------------------------------------- compaction


@numba.njit(nogil=True, cache=True)
def _is_live(key, keep_below, live_keys):
    if key < keep_below:
        return True
    i = np.searchsorted(live_keys, key)
    return i < live_keys.shape[0] and live_keys[i] == key


@numba.njit(nogil=True, cache=True)
def _compact_table(old_keys, old_values, new_keys, new_values, old_nodes, new_nodes, new_filters, node, table,
                   counters, used, keep_below, live_keys, old_rows, new_rows, copy_rows):
    """Rebuild one table in the new arenas with its live keys only (rows copied when ``copy_rows``), and
    its filter from them (``new_filters`` zero on entry)."""
    start, capacity = old_nodes[node, table], old_nodes[node, table + 1]
    n_live = 0
    for s in range(start, start + capacity):
        if old_keys[s] != EMPTY_KEY and _is_live(old_keys[s], keep_below, live_keys):
            n_live += 1
    new_capacity = growth_need(0, 0, n_live) if n_live > 0 else 0
    new_start = counters[used]
    counters[used] += new_capacity
    new_keys[new_start : new_start + new_capacity] = EMPTY_KEY
    for s in range(start, start + capacity):
        key = old_keys[s]
        if key == EMPTY_KEY or not _is_live(key, keep_below, live_keys):
            continue
        value = old_values[s]
        if copy_rows:
            r = counters[ROWS_USED]
            counters[ROWS_USED] += 1
            new_rows[r, :] = old_rows[value, :]
            value = r
        _slot_insert(new_keys, new_values, new_start, new_capacity, key, value)
        _mark(new_filters, node, key)
    new_nodes[node, table] = new_start
    new_nodes[node, table + 1] = new_capacity
    new_nodes[node, table + 2] = n_live


@numba.njit(nogil=True, cache=True)
def _compact_into(old, new, row_keep_below, live_row_keys, z_keep_below, live_z_keys):
    """Copy the live part of ``old`` into the empty arenas of ``new``, node by node in id order."""
    new.counters[ROW_SLOTS_USED] = 0
    new.counters[Z_SLOTS_USED] = 0
    new.counters[ROWS_USED] = 0
    for node in range(old.nodes.shape[0]):
        if old.nodes[node, PARENT] == FREE:
            continue
        _compact_table(old.row_keys, old.row_values, new.row_keys, new.row_values, old.nodes, new.nodes,
                       new.row_filter, node, ROW_TABLE, new.counters, ROW_SLOTS_USED, row_keep_below, live_row_keys,
                       old.rows, new.rows, True)
        _compact_table(old.z_keys, old.z_values, new.z_keys, new.z_values, old.nodes, new.nodes,
                       new.z_filter, node, Z_TABLE, new.counters, Z_SLOTS_USED, z_keep_below, live_z_keys,
                       old.rows, new.rows, False)


# ------------------------------------------------------------------------------- Python wrappers


def empty_store(n_particles: int, row_width: int, *, row_slots: int = 64, z_slots: int = 64,
                n_rows: int = 16) -> LineageStore:
    """A store whose particles all share one empty root (``leaf[p]`` is a fresh leaf when P > 1).

    Parameters
    ----------
    n_particles : int
        P >= 1.
    row_width : int
        Length of every row (for LDA, n_topics), >= 1.
    row_slots, z_slots, n_rows : int
        Initial arena capacities; they grow on demand.

    Returns
    -------
    LineageStore

    Raises
    ------
    InvalidParameterError
        ``n_particles`` or ``row_width`` below 1.

    Examples
    --------
    >>> store = empty_store(3, 2)
    >>> lineage_stats(store)["n_nodes"], lookup_row(store, 0, 5).tolist()
    (4.0, [0, 0])
    """
    if n_particles < 1 or row_width < 1:
        raise InvalidParameterError(
            f"a lineage store needs n_particles >= 1 and row_width >= 1, got {n_particles!r} and {row_width!r}"
        )
    node_capacity = 4 * n_particles + 4  # at most 2P - 1 nodes at rest, plus P new leaves
    store = LineageStore(
        nodes=np.zeros((node_capacity, N_NODE_COLUMNS), dtype=np.int64),
        free_nodes=np.arange(node_capacity - 1, -1, -1, dtype=np.int64),
        pending=np.zeros(node_capacity, dtype=np.int64),
        leaf=np.zeros(n_particles, dtype=np.int64),
        counters=np.zeros(N_COUNTERS, dtype=np.int64),
        row_keys=np.full(max(row_slots, MIN_TABLE), EMPTY_KEY, dtype=np.int64),
        row_values=np.zeros(max(row_slots, MIN_TABLE), dtype=np.int64),
        z_keys=np.full(max(z_slots, MIN_TABLE), EMPTY_KEY, dtype=np.int64),
        z_values=np.zeros(max(z_slots, MIN_TABLE), dtype=np.int32),
        rows=np.zeros((max(n_rows, 1), row_width), dtype=np.int32),
        row_filter=np.zeros((node_capacity, FILTER_WORDS), dtype=np.uint64),
        z_filter=np.zeros((node_capacity, FILTER_WORDS), dtype=np.uint64),
    )
    store.nodes[:, PARENT] = FREE
    store.counters[N_FREE] = node_capacity
    _init_tree(store)
    return store


@numba.njit(nogil=True, cache=True)
def _init_tree(st):
    root = _alloc_node(st, -1, 0 if st.leaf.shape[0] == 1 else -1)
    for p in range(st.leaf.shape[0]):
        st.leaf[p] = root if st.leaf.shape[0] == 1 else _alloc_node(st, root, p)


@numba.njit(nogil=True, cache=True)
def _fill_root(st, row_keys, rows, z_keys, z_values):
    """Insert the initial entries into the root's tables (space checked by the caller)."""
    root = st.leaf[0]
    while st.nodes[root, PARENT] >= 0:
        root = st.nodes[root, PARENT]
    reserve_node(st, root, row_keys.shape[0], z_keys.shape[0])
    for i in range(row_keys.shape[0]):
        r = writable_row(st, root, row_keys[i])
        st.rows[r, :] = rows[i, :]
    for i in range(z_keys.shape[0]):
        write_topic(st, root, z_keys[i], z_values[i])


def store_from_root(n_particles: int, row_keys: IntArray, rows: Int32Array, z_keys: IntArray,
                    z_values: Int32Array) -> LineageStore:
    """A store whose root holds the given rows and topics, shared by all ``n_particles`` particles.

    Parameters
    ----------
    n_particles : int
    row_keys : ndarray of shape (n_row_keys,), int64
        Distinct nonnegative keys.
    rows : ndarray of shape (n_row_keys, row_width), int32
    z_keys : ndarray of shape (n_z_keys,), int64
        Distinct nonnegative keys.
    z_values : ndarray of shape (n_z_keys,), int32

    Returns
    -------
    LineageStore
        Arenas sized for the root with room to spare (at most half full).

    Raises
    ------
    InvalidParameterError
        Shapes disagree, or keys are negative or repeated.
    """
    row_keys = np.ascontiguousarray(row_keys, dtype=np.int64)
    z_keys = np.ascontiguousarray(z_keys, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    z_values = np.ascontiguousarray(z_values, dtype=np.int32)
    if rows.ndim != 2 or rows.shape[0] != row_keys.shape[0] or z_values.shape != z_keys.shape:
        raise InvalidParameterError(
            f"root rows of shape {rows.shape!r} and topics of shape {z_values.shape!r} do not match "
            f"{row_keys.shape[0]!r} row keys and {z_keys.shape[0]!r} topic keys"
        )
    for name, keys in (("row", row_keys), ("topic", z_keys)):
        if keys.size and (keys.min() < 0 or np.unique(keys).size != keys.size):
            raise InvalidParameterError(f"{name} keys must be distinct and nonnegative")
    row_slots = 4 * int(growth_need(0, 0, max(row_keys.shape[0], 1)))
    z_slots = 4 * int(growth_need(0, 0, max(z_keys.shape[0], 1)))
    store = empty_store(n_particles, rows.shape[1], row_slots=row_slots, z_slots=z_slots,
                        n_rows=2 * row_keys.shape[0] + 16)
    _fill_root(store, row_keys, rows, z_keys, z_values)
    return store


#: The fields a serializer saves; the filters are rebuilt from them by :func:`with_filters`.
PERSISTED_FIELDS = tuple(name for name in LineageStore._fields if name not in ("row_filter", "z_filter"))


@numba.njit(nogil=True, cache=True)
def _rebuild_filters(nodes, keys, filters, table):
    filters[:] = 0
    for node in range(nodes.shape[0]):
        if nodes[node, PARENT] == FREE:
            continue
        start = nodes[node, table]
        for s in range(start, start + nodes[node, table + 1]):
            if keys[s] != EMPTY_KEY:
                _mark(filters, node, keys[s])


def with_filters(arrays: dict[str, np.ndarray]) -> LineageStore:
    """The store of the arrays named by :data:`PERSISTED_FIELDS`, its filters rebuilt from its tables.

    Parameters
    ----------
    arrays : dict of str to ndarray
        One array per persisted field (extra keys are ignored).

    Returns
    -------
    LineageStore
    """
    node_capacity = arrays["nodes"].shape[0]
    store = LineageStore(**{name: arrays[name] for name in PERSISTED_FIELDS},
                         row_filter=np.zeros((node_capacity, FILTER_WORDS), dtype=np.uint64),
                         z_filter=np.zeros((node_capacity, FILTER_WORDS), dtype=np.uint64))
    _rebuild_filters(store.nodes, store.row_keys, store.row_filter, ROW_TABLE)
    _rebuild_filters(store.nodes, store.z_keys, store.z_filter, Z_TABLE)
    return store


def compact_store(store: LineageStore, rows_filter: KeyFilter, topics_filter: KeyFilter) -> LineageStore:
    """A copy of ``store`` whose arenas hold only the live keys of live nodes (same capacities).

    Parameters
    ----------
    store : LineageStore
    rows_filter, topics_filter : KeyFilter
        Live row keys and topic keys; entries of other keys are dropped from every node.

    Returns
    -------
    LineageStore
        New arrays; node ids, the tree and every live key's value seen by every particle unchanged.

    Notes
    -----
    Nodes are visited in id order and each table is rebuilt at the smallest capacity that keeps it at
    most half full, so the result is a deterministic function of the input. Cost: O(used slots +
    live rows x row_width).
    """
    new = LineageStore(
        nodes=store.nodes.copy(), free_nodes=store.free_nodes.copy(), pending=store.pending.copy(),
        leaf=store.leaf.copy(), counters=store.counters.copy(),
        row_keys=np.full_like(store.row_keys, EMPTY_KEY), row_values=np.zeros_like(store.row_values),
        z_keys=np.full_like(store.z_keys, EMPTY_KEY), z_values=np.zeros_like(store.z_values),
        rows=np.zeros_like(store.rows),
        row_filter=np.zeros_like(store.row_filter), z_filter=np.zeros_like(store.z_filter),
    )
    _compact_into(store, new, rows_filter.keep_below, rows_filter.live_keys, topics_filter.keep_below,
                  topics_filter.live_keys)
    return new


def _grown(array: np.ndarray, capacity: int, fill: int) -> np.ndarray:
    if capacity == array.shape[0]:  # compaction has just made fresh arrays
        return array
    out = np.full((capacity,) + array.shape[1:], fill, dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


def make_room(store: LineageStore, rows_filter: KeyFilter, topics_filter: KeyFilter) -> LineageStore:
    """Compact, then double each arena until its live part fills at most half of it plus the need.

    Called when a kernel returned because an arena was full (``counters[NEED_*]`` say how much one
    step needs). Compacting first keeps memory bounded when most of the arena is garbage; doubling
    whenever more than half stays used keeps the total compaction work proportional to the
    allocations (amortized O(1) per slot or row).

    Returns
    -------
    LineageStore
        New arrays; the NEED counters are cleared.
    """
    new = compact_store(store, rows_filter, topics_filter)
    c = new.counters
    caps = {}
    for name, used, need in (("row_keys", ROW_SLOTS_USED, NEED_ROW_SLOTS), ("z_keys", Z_SLOTS_USED, NEED_Z_SLOTS),
                             ("rows", ROWS_USED, NEED_ROWS)):
        capacity = getattr(new, name).shape[0]
        while 2 * (int(c[used]) + int(c[need])) > capacity:
            capacity *= 2
        caps[name] = capacity
    c[NEED_ROW_SLOTS] = c[NEED_Z_SLOTS] = c[NEED_ROWS] = 0
    return new._replace(
        row_keys=_grown(new.row_keys, caps["row_keys"], EMPTY_KEY),
        row_values=_grown(new.row_values, caps["row_keys"], 0),
        z_keys=_grown(new.z_keys, caps["z_keys"], EMPTY_KEY),
        z_values=_grown(new.z_values, caps["z_keys"], 0),
        rows=_grown(new.rows, caps["rows"], 0),
    )


def _check_particle(store: LineageStore, particle: int) -> int:
    if not 0 <= int(particle) < store.n_particles:
        raise InvalidParameterError(f"particle {particle!r} is not in [0, {store.n_particles})")
    return int(particle)


def _check_key(key: int) -> int:
    if not 0 <= int(key) < _INT64_MAX:
        raise InvalidParameterError(f"keys must be nonnegative int64 values, got {key!r}")
    return int(key)


def lookup_row(store: LineageStore, particle: int, key: int) -> Int32Array:
    """Particle ``particle``'s row for ``key`` (a copy; zeros if no node on its path holds the key)."""
    r = find_row(store, store.leaf[_check_particle(store, particle)], _check_key(key))
    return store.rows[r].copy() if r >= 0 else np.zeros(store.row_width, dtype=np.int32)


def has_row(store: LineageStore, particle: int, key: int) -> bool:
    """Whether a node on the particle's path holds ``key`` (a forgotten key is absent after compaction)."""
    return bool(find_row(store, store.leaf[_check_particle(store, particle)], _check_key(key)) >= 0)


def lookup_topic(store: LineageStore, particle: int, key: int) -> int:
    """Particle ``particle``'s topic for ``key``, or -1 if no node on its path holds the key."""
    return int(find_topic(store, store.leaf[_check_particle(store, particle)], _check_key(key)))


@numba.njit(nogil=True, cache=True)
def _add_to_row(st, particle, key, delta):
    if not reserve_leaf(st, particle, 1, 0, 1):
        return False
    r = writable_row(st, st.leaf[particle], key)
    for k in range(delta.shape[0]):
        st.rows[r, k] += delta[k]
    return True


@numba.njit(nogil=True, cache=True)
def _set_topic(st, particle, key, topic):
    if not reserve_leaf(st, particle, 0, 1, 0):
        return False
    write_topic(st, st.leaf[particle], key, topic)
    return True


def add_to_row(store: LineageStore, particle: int, key: int, delta: Int32Array,
               rows_filter: KeyFilter | None = None, topics_filter: KeyFilter | None = None) -> LineageStore:
    """Add ``delta`` to particle ``particle``'s row ``key`` (copy-on-write); returns the store.

    The filters say what a compaction may drop if the arenas must be rebuilt (default: nothing).
    The input store's arrays may be mutated or replaced: use only the returned store afterwards.
    """
    particle, key = _check_particle(store, particle), _check_key(key)
    delta = np.ascontiguousarray(delta, dtype=np.int32)
    if delta.shape != (store.row_width,):
        raise InvalidParameterError(f"delta must have shape ({store.row_width},), got {delta.shape!r}")
    while not _add_to_row(store, particle, key, delta):
        store = make_room(store, rows_filter or KeyFilter.keep_all(), topics_filter or KeyFilter.keep_all())
    return store


def set_topic(store: LineageStore, particle: int, key: int, topic: int,
              rows_filter: KeyFilter | None = None, topics_filter: KeyFilter | None = None) -> LineageStore:
    """Set particle ``particle``'s topic for ``key``; returns the store (see :func:`add_to_row`)."""
    particle, key = _check_particle(store, particle), _check_key(key)
    while not _set_topic(store, particle, key, np.int32(topic)):
        store = make_room(store, rows_filter or KeyFilter.keep_all(), topics_filter or KeyFilter.keep_all())
    return store


def resample_lineage(store: LineageStore, ancestors: IntArray, rows_filter: KeyFilter | None = None,
                     topics_filter: KeyFilter | None = None) -> LineageStore:
    """New particle i becomes a copy of old particle ``ancestors[i]``; returns the store.

    Parameters
    ----------
    store : LineageStore
    ancestors : ndarray of shape (n_particles,), int64
        Any values in [0, n_particles) (sorted or not).

    Returns
    -------
    LineageStore
        Only the returned store may be used afterwards.

    Notes
    -----
    Canini et al. (2009), section 4: no state is copied. The node work is O(P); merging a
    single-child node costs the size of the smaller of its and its child's tables, which holds only
    writes made since the earlier resampling, so the cost does not grow with the history.
    """
    ancestors = np.ascontiguousarray(ancestors, dtype=np.int64)
    if ancestors.shape != (store.n_particles,) or ancestors.min() < 0 or ancestors.max() >= store.n_particles:
        raise InvalidParameterError(
            f"ancestors must have shape ({store.n_particles},) with values in [0, {store.n_particles})"
        )
    rewire(store, ancestors)
    while not merge_pending(store):
        store = make_room(store, rows_filter or KeyFilter.keep_all(), topics_filter or KeyFilter.keep_all())
    return store


@numba.njit(nogil=True, cache=True)
def _depths(st, out):
    for p in range(st.leaf.shape[0]):
        out[p] = depth(st, st.leaf[p])


@numba.njit(nogil=True, cache=True)
def _n_entries(st):
    total = 0
    for node in range(st.nodes.shape[0]):
        if st.nodes[node, PARENT] != FREE:
            total += st.nodes[node, ROW_TABLE + 2] + st.nodes[node, Z_TABLE + 2]
    return total


def particle_depths(store: LineageStore) -> IntArray:
    """Depth of each particle's leaf (nodes from leaf to root, both included), shape (n_particles,)."""
    out = np.empty(store.n_particles, dtype=np.int64)
    _depths(store, out)
    return out


def lineage_stats(store: LineageStore) -> dict[str, float]:
    """Size of the store: depths, nodes, live entries and bytes.

    Returns
    -------
    dict
        ``depth_max``, ``depth_mean`` (over particles), ``n_nodes``, ``n_entries`` (keys held by all
        tables, garbage excluded), ``n_rows_used``, ``slots_used`` (row and topic slots in use,
        garbage included) and ``nbytes`` (all arrays, at their capacity).
    """
    depths = particle_depths(store)
    c = store.counters
    return {
        "depth_max": float(depths.max()),
        "depth_mean": float(depths.mean()),
        "n_nodes": float(c[N_NODES]),
        "n_entries": float(_n_entries(store)),
        "n_rows_used": float(c[ROWS_USED]),
        "slots_used": float(c[ROW_SLOTS_USED] + c[Z_SLOTS_USED]),
        "nbytes": float(sum(a.nbytes for a in store)),
    }
