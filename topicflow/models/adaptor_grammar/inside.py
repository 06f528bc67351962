"""The derived PCFG G' of [Z] eqs. 8.5-8.7, the inside algorithm over it and sampling trees from the chart.

G' has the base rules R of the grammar and, for every adapted nonterminal c, one rule c => z per cached
subtree z in TNG_c ([Z] section 8.2.2). Log weights:

- cached subtree i of c: E_q[log pi_{c,i}] (eq. 8.6, :func:`expected_log_sticks`);
- base rule c -> beta: E_q[log theta_{c->beta}] = psi(gamma_{c->beta}) - psi(sum_{R(c)} gamma) (eq. 8.7 per rule),
  plus, when c is adapted, the left-over stick E_q[log prod_{j<=K_c} (1 - pi'_{c,j})] (eq. 8.5, second case:
  the weight of a *new* subtree of c is the left-over stick times its base probability, whose inner nodes
  are again drawn from G'). With an empty TNG the left-over stick is 0 and G' is the base PCFG (P9).

The inside pass (:func:`inside_chart`) is CKY over spans with the unary closure done in a fixed topological
order of the unary rules (no unary cycles, P7); a cached subtree contributes to the span whose characters
equal its yield (looked up in a trie of all cached yields). Each span (i, j) of length >= 2 is stored
scaled to max_A = 1 with its log scale kept apart, so long sentences never underflow. Sampling
(:func:`sample_trees`) draws trees top-down (Chappelier and Rajman 2000) independently from one chart:
[Z]'s ten "MCMC" samples per sentence (footnote 5) are i.i.d. draws from G' given q, not a Markov chain (P4).

Trees are returned as flat preorder node arrays (:class:`SampledTrees`): per node its symbol, span, kind
(:data:`KIND_BINARY`, :data:`KIND_UNARY`, :data:`KIND_LEXICAL`, :data:`KIND_CACHED`) and the base rule or
the cached subtree it used. Children follow their parent in preorder, left child first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np

from topicflow.models.adaptor_grammar.grammar import Grammar
from topicflow.models.common.rng import counter_key, uniform_from_key
from topicflow.models.common.special import digamma_array

#: Node kinds of a sampled tree.
KIND_BINARY = 0  # base rule A -> B C (B or C may be terminals)
KIND_UNARY = 1  # base rule A -> B, B a nonterminal
KIND_LEXICAL = 2  # base rule A -> 'x'
KIND_CACHED = 3  # cached subtree of an adapted A (a leaf of the sampled tree)

#: Random-number streams of the tree draws and of table-label resampling (apart from other families').
STREAM_AG_PARSE = 41
STREAM_AG_RELABEL = 43


def expected_log_sticks(nu1: np.ndarray, nu2: np.ndarray) -> tuple[np.ndarray, float]:
    """Compute E_q[log pi_i] of a truncated stick (eq. 8.6) and the left-over stick.

    Parameters
    ----------
    nu1, nu2 : ndarray of float64, shape (K,)
        Beta parameters of the sticks pi'_1..pi'_K, in TNG order.

    Returns
    -------
    elog_pi : ndarray of float64, shape (K,)
        The values psi(nu1_i) - psi(nu1_i + nu2_i) + sum_{j<i} [psi(nu2_j) - psi(nu1_j + nu2_j)].
    leftover : float
        The sum_{j<=K} [psi(nu2_j) - psi(nu1_j + nu2_j)]: E_q[log] of the stick left after K atoms (0 if K = 0).

    Notes
    -----
    NumPy equivalent: ``t = psi(nu1 + nu2); e1 = psi(nu1) - t; e2 = psi(nu2) - t;
    elog_pi = e1 + concatenate([[0], cumsum(e2)[:-1]]); leftover = e2.sum()``.
    """
    nu1 = np.asarray(nu1, dtype=np.float64)
    nu2 = np.asarray(nu2, dtype=np.float64)
    if nu1.size == 0:
        return np.zeros(0), 0.0
    total = digamma_array(nu1 + nu2)
    e1 = digamma_array(nu1) - total
    e2 = digamma_array(nu2) - total
    csum = np.cumsum(e2)
    elog = e1.copy()
    elog[1:] += csum[:-1]
    return elog, float(csum[-1])


def expected_log_theta(grammar: Grammar, gamma: np.ndarray) -> np.ndarray:
    """Compute E_q[log theta_r] = psi(gamma_r) - psi(sum_{r' in R(lhs r)} gamma_r') of every base rule.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    gamma : ndarray of float64, shape (R,)
        Variational Dirichlet parameters of the rules.

    Returns
    -------
    ndarray of float64, shape (R,)
    """
    gamma = np.asarray(gamma, dtype=np.float64)
    sums = np.bincount(grammar.rule_lhs, weights=gamma, minlength=grammar.n_nonterminals)
    return digamma_array(gamma) - digamma_array(sums)[grammar.rule_lhs]


@dataclass(frozen=True)
class DerivedPCFG:
    """The approximate PCFG G' of eq. 8.5, in the arrays the numba kernels read.

    Parameters
    ----------
    n_nonterminals : int
        Number of nonterminals of the grammar.
    start : int
        Start symbol.
    rule_lhs, rule_rhs : ndarray of int64
        The grammar's base rules (see :class:`~topicflow.models.adaptor_grammar.grammar.Grammar`).
    rule_weight : ndarray of float64, shape (R,)
        The exp of each base rule's G' log weight (E log theta, plus the left-over stick if its lhs is adapted).
    by_lhs_ptr, by_lhs_rule : ndarray of int64
        CSR of the binary and nonterminal-unary rules by left-hand side.
    lex_ptr, lex_rule : ndarray of int64
        CSR of the lexical rules A -> 'x' by terminal id.
    by_left_ptr, by_left_rule : ndarray of int64
        CSR of the binary rules by left child symbol code (nonterminals and terminals).
    unary_order : ndarray of int64, shape (n_nonterminals,)
        The nonterminals with every unary rule's child before its parent; ``unary_rank`` is its inverse.
    unary_rank : ndarray of int64, shape (n_nonterminals,)
        Position of each nonterminal in ``unary_order``.
    by_unary_rhs_ptr, by_unary_rhs_rule : ndarray of int64
        CSR of the nonterminal-unary rules A -> B by their child B.
    trie_ptr, trie_sym, trie_next, trie_yield : ndarray of int64
        A trie over the distinct yields of every cached subtree: children of node v are
        ``trie_sym/trie_next[trie_ptr[v]:trie_ptr[v+1]]`` sorted by terminal id; ``trie_yield[v]`` is the
        yield ending at v or -1. Node 0 is the root.
    yield_ptr, entry_nt, entry_atom : ndarray of int64
        CSR from a yield to its cached subtrees: adapted nonterminal and index in that TNG.
    entry_weight : ndarray of float64
        The exp(E log pi) of each such subtree.
    max_unary_chain : int
        Longest chain of unary rules between nonterminals (bounds the size of a tree).
    """

    n_nonterminals: int
    start: int
    rule_lhs: np.ndarray
    rule_rhs: np.ndarray
    rule_weight: np.ndarray
    by_lhs_ptr: np.ndarray
    by_lhs_rule: np.ndarray
    lex_ptr: np.ndarray
    lex_rule: np.ndarray
    by_left_ptr: np.ndarray
    by_left_rule: np.ndarray
    unary_order: np.ndarray
    unary_rank: np.ndarray
    by_unary_rhs_ptr: np.ndarray
    by_unary_rhs_rule: np.ndarray
    trie_ptr: np.ndarray
    trie_sym: np.ndarray
    trie_next: np.ndarray
    trie_yield: np.ndarray
    yield_ptr: np.ndarray
    entry_nt: np.ndarray
    entry_atom: np.ndarray
    entry_weight: np.ndarray
    max_unary_chain: int


def _csr(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable").astype(np.int64)
    ptr = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=ptr[1:])
    return ptr, order


def _longest_unary_chain(grammar: Grammar) -> int:
    """Rules in the longest chain of unary rules A -> B -> ... (children before parents in ``unary_order``)."""
    n_nt = grammar.n_nonterminals
    depth = np.zeros(n_nt, dtype=np.int64)
    unary = np.flatnonzero((grammar.rule_rhs[:, 1] < 0) & (grammar.rule_rhs[:, 0] < n_nt))
    ptr, order = _csr(grammar.rule_lhs[unary], n_nt)  # each nonterminal's unary rules, in one pass
    children = grammar.rule_rhs[unary[order], 0]
    for a in grammar.unary_order.tolist():
        lo, hi = int(ptr[a]), int(ptr[a + 1])
        if hi > lo:
            depth[a] = int(depth[children[lo:hi]].max()) + 1
    return int(depth.max(initial=0))


def derived_pcfg(grammar: Grammar, gamma: np.ndarray, tng_yields: Sequence[Sequence[Sequence[int]]],
                 nu1: Sequence[np.ndarray], nu2: Sequence[np.ndarray]) -> DerivedPCFG:
    """Build G' (eqs. 8.5-8.7) from the variational parameters and the TNGs.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    gamma : ndarray of float64, shape (R,)
        Variational Dirichlet parameters of the base rules.
    tng_yields : sequence of sequences of int sequences
        Per adapted nonterminal (in ``grammar.adapted`` order), the terminal ids of each cached subtree's yield.
    nu1, nu2 : sequence of ndarray
        Per adapted nonterminal, the Beta parameters of its sticks (same order as its TNG).

    Returns
    -------
    DerivedPCFG
    """
    n_nt = grammar.n_nonterminals
    n_sym = n_nt + len(grammar.terminals)
    logw = expected_log_theta(grammar, gamma)
    entries_nt: list[int] = []
    entries_atom: list[int] = []
    entries_logw: list[float] = []
    entries_yield: list[int] = []
    yield_ids: dict[tuple[int, ...], int] = {}
    leftover_of = np.zeros(n_nt)  # each adapted nonterminal's base rules share its leftover stick
    for m, c in enumerate(grammar.adapted):
        elog_pi, leftover_of[c] = expected_log_sticks(nu1[m], nu2[m])
        for i, y in enumerate(tng_yields[m]):
            key = tuple(int(t) for t in y)
            yid = yield_ids.setdefault(key, len(yield_ids))
            entries_nt.append(int(c))
            entries_atom.append(i)
            entries_logw.append(float(elog_pi[i]))
            entries_yield.append(yid)
    logw += leftover_of[grammar.rule_lhs]
    # trie over the distinct yields
    children: list[dict[int, int]] = [{}]
    node_yield = [-1]
    for y, yid in yield_ids.items():
        node = 0
        for t in y:
            nxt = children[node].get(t)
            if nxt is None:
                nxt = len(children)
                children[node][t] = nxt
                children.append({})
                node_yield.append(-1)
            node = nxt
        node_yield[node] = yid
    trie_ptr = np.zeros(len(children) + 1, dtype=np.int64)
    trie_ptr[1:] = np.cumsum([len(ch) for ch in children])
    trie_sym = np.empty(int(trie_ptr[-1]), dtype=np.int64)
    trie_next = np.empty(int(trie_ptr[-1]), dtype=np.int64)
    for v, ch in enumerate(children):
        items = sorted(ch.items())
        trie_sym[trie_ptr[v]:trie_ptr[v + 1]] = [t for t, _ in items]
        trie_next[trie_ptr[v]:trie_ptr[v + 1]] = [n for _, n in items]
    ent_yield = np.asarray(entries_yield, dtype=np.int64)
    yield_ptr, order = _csr(ent_yield, len(yield_ids))
    binary = grammar.rule_rhs[:, 1] >= 0
    left_keys = np.where(binary, grammar.rule_rhs[:, 0], n_sym)
    by_left_ptr, by_left_rule = _csr(left_keys, n_sym + 1)
    by_left_ptr = by_left_ptr[:n_sym + 1]
    lexical = (~binary) & (grammar.rule_rhs[:, 0] >= n_nt)
    by_lhs_ptr, by_lhs_rule = _csr(np.where(lexical, n_nt, grammar.rule_lhs), n_nt + 1)
    by_lhs_rule = by_lhs_rule[:int(by_lhs_ptr[n_nt])]
    by_lhs_ptr = by_lhs_ptr[:n_nt + 1]
    n_t = len(grammar.terminals)
    lex_ptr, lex_rule = _csr(np.where(lexical, grammar.rule_rhs[:, 0] - n_nt, n_t), n_t + 1)
    lex_rule = lex_rule[:int(lex_ptr[n_t])]
    lex_ptr = lex_ptr[:n_t + 1]
    unary = (~binary) & (grammar.rule_rhs[:, 0] < n_nt)
    by_urhs_ptr, by_urhs_rule = _csr(np.where(unary, grammar.rule_rhs[:, 0], n_nt), n_nt + 1)
    unary_rank = np.empty(n_nt, dtype=np.int64)
    unary_rank[grammar.unary_order] = np.arange(n_nt, dtype=np.int64)
    return DerivedPCFG(
        n_nonterminals=n_nt, start=int(grammar.start),
        rule_lhs=grammar.rule_lhs, rule_rhs=grammar.rule_rhs, rule_weight=np.exp(logw),
        by_lhs_ptr=by_lhs_ptr, by_lhs_rule=by_lhs_rule, lex_ptr=lex_ptr, lex_rule=lex_rule,
        by_left_ptr=by_left_ptr, by_left_rule=by_left_rule[:int(by_left_ptr[-1])],
        unary_order=grammar.unary_order, unary_rank=unary_rank,
        by_unary_rhs_ptr=by_urhs_ptr[:n_nt + 1], by_unary_rhs_rule=by_urhs_rule[:int(by_urhs_ptr[n_nt])],
        trie_ptr=trie_ptr, trie_sym=trie_sym, trie_next=trie_next,
        trie_yield=np.asarray(node_yield, dtype=np.int64),
        yield_ptr=yield_ptr,
        entry_nt=np.asarray(entries_nt, dtype=np.int64)[order],
        entry_atom=np.asarray(entries_atom, dtype=np.int64)[order],
        entry_weight=np.exp(np.asarray(entries_logw, dtype=np.float64))[order],
        max_unary_chain=_longest_unary_chain(grammar),
    )


@numba.njit(nogil=True, cache=True)
def _span_yields(x, trie_ptr, trie_sym, trie_next, trie_yield):
    """span_yield[i, j] = id of the cached yield equal to x[i:j], or -1 (a trie walk from every start)."""
    n = x.shape[0]
    out = np.full((n, n + 1), -1, dtype=np.int64)
    for i in range(n):
        node = 0
        for j in range(i, n):
            lo = trie_ptr[node]
            hi = trie_ptr[node + 1]
            t = x[j]
            while lo < hi:  # binary search among the children
                mid = (lo + hi) // 2
                if trie_sym[mid] < t:
                    lo = mid + 1
                else:
                    hi = mid
            if lo >= trie_ptr[node + 1] or trie_sym[lo] != t:
                break
            node = trie_next[lo]
            out[i, j + 1] = trie_yield[node]
    return out


@numba.njit(nogil=True, cache=True)
def _child(chart, x, n_nt, code, i, j):
    """Scaled inside value of symbol ``code`` over span (i, j); a terminal is 1 on its own position."""
    if code < n_nt:
        return chart[i, j, code]
    if j == i + 1 and x[i] == code - n_nt:
        return 1.0
    return 0.0


@numba.njit(nogil=True, cache=True, inline="always")
def _activate(a, value, acc, flag, active, na):
    """Add ``value`` to ``acc[a]``, listing ``a`` among the span's active nonterminals; returns the new count."""
    if not flag[a]:
        flag[a] = True
        active[na] = a
        na += 1
    acc[a] += value
    return na


@numba.njit(nogil=True, cache=True)
def _heap_push(heap, size, value):
    heap[size] = value
    c = size
    while c > 0:
        parent = (c - 1) // 2
        if heap[parent] <= heap[c]:
            break
        heap[parent], heap[c] = heap[c], heap[parent]
        c = parent
    return size + 1


@numba.njit(nogil=True, cache=True)
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    c = 0
    while True:
        left = 2 * c + 1
        if left >= size:
            break
        m = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            m = left + 1
        if heap[c] <= heap[m]:
            break
        heap[c], heap[m] = heap[m], heap[c]
        c = m
    return top, size


@numba.njit(nogil=True, cache=True)
def _inside(x, n_nt, rule_lhs, rule_rhs, rule_weight, lex_ptr, lex_rule, by_left_ptr, by_left_rule,
            unary_order, unary_rank, by_urhs_ptr, by_urhs_rule, span_yield, yield_ptr, entry_nt, entry_weight):
    """The scaled inside chart, visiting only the nonterminals a span derives.

    Each span keeps the sorted list of its nonzero nonterminals (``nz``); the binary rules loop over the
    left child's list, and the unary closure pushes values up from the active nonterminals in topological
    order (a heap of ranks in ``unary_order``, rules indexed by their child). A nonterminal that no span
    derives costs nothing, so a grammar with many rules that rarely apply (``Sentence -> Doc_j`` of the
    infinite-vocabulary grammar, one per document) pays for the few that do.
    """
    n = x.shape[0]
    chart = np.zeros((n, n + 1, n_nt))
    logscale = np.full((n, n + 1), -np.inf)
    acc = np.zeros(n_nt)
    flag = np.zeros(n_nt, dtype=np.bool_)
    active = np.empty(n_nt, dtype=np.int64)
    heap = np.empty(n_nt, dtype=np.int64)
    nz_ptr = np.zeros((n, n + 1), dtype=np.int64)
    nz_len = np.zeros((n, n + 1), dtype=np.int64)
    nz = np.empty(max(16, n * (n + 1) * min(n_nt, 8)), dtype=np.int64)
    used = 0
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            na = 0
            yid = span_yield[i, j]
            if length == 1:
                ref = 0.0  # spans of one terminal are never rescaled (every weight there is at most 1)
            else:
                ref = -np.inf
                for k in range(i + 1, j):
                    s = logscale[i, k] + logscale[k, j]
                    if s > ref:
                        ref = s
                if yid >= 0:
                    for e in range(yield_ptr[yid], yield_ptr[yid + 1]):
                        lw = math.log(entry_weight[e])
                        if lw > ref:
                            ref = lw
                if ref == -np.inf:
                    continue
            # cached subtrees whose yield is x[i:j] (eq. 8.5, first case)
            if yid >= 0:
                for e in range(yield_ptr[yid], yield_ptr[yid + 1]):
                    na = _activate(entry_nt[e], entry_weight[e] * math.exp(-ref), acc, flag, active, na)
            if length == 1:
                t = x[i]
                for p in range(lex_ptr[t], lex_ptr[t + 1]):
                    r = lex_rule[p]
                    na = _activate(rule_lhs[r], rule_weight[r], acc, flag, active, na)
            # binary rules A -> B C over every split, B among the left span's nonterminals (in increasing
            # order) and then the terminal x[i] when the left span is that one terminal (its value is 1 and
            # its log scale 0, so the factor below holds for terminal children too)
            for k in range(i + 1, j):
                s = logscale[i, k] + logscale[k, j]
                if s == -np.inf:
                    continue
                factor = math.exp(s - ref)
                left_len = nz_len[i, k]
                for q in range(left_len + 1):
                    if q < left_len:
                        b = nz[nz_ptr[i, k] + q]
                        vb = chart[i, k, b]
                        code = b
                    else:
                        if k != i + 1:
                            break
                        vb = 1.0
                        code = n_nt + x[i]
                    for p in range(by_left_ptr[code], by_left_ptr[code + 1]):
                        r = by_left_rule[p]
                        vc = _child(chart, x, n_nt, rule_rhs[r, 1], k, j)
                        if vc != 0.0:
                            na = _activate(rule_lhs[r], rule_weight[r] * vb * vc * factor, acc, flag, active, na)
            # unary closure A -> B, children before parents (no unary cycles, P7): pop the active
            # nonterminals by topological rank and push each one's value to the parents of its unary rules
            size = 0
            for q in range(na):
                size = _heap_push(heap, size, unary_rank[active[q]])
            while size > 0:
                rank, size = _heap_pop(heap, size)
                b = unary_order[rank]
                vb = acc[b]
                if vb == 0.0:
                    continue
                for p in range(by_urhs_ptr[b], by_urhs_ptr[b + 1]):
                    r = by_urhs_rule[p]
                    a = rule_lhs[r]
                    if not flag[a]:
                        size = _heap_push(heap, size, unary_rank[a])
                    na = _activate(a, rule_weight[r] * vb, acc, flag, active, na)
            mx = 0.0
            for q in range(na):
                if acc[active[q]] > mx:
                    mx = acc[active[q]]
            if length == 1:
                logscale[i, j] = 0.0  # also when no nonterminal derives x[i]: a terminal child is 1 there
            if mx > 0.0:
                found = np.sort(active[:na])
                if used + na > nz.shape[0]:
                    grown = np.empty(max(2 * nz.shape[0], used + na), dtype=np.int64)
                    grown[:used] = nz[:used]
                    nz = grown
                nz_ptr[i, j] = used
                count = 0
                scale = 1.0 if length == 1 else 1.0 / mx
                for q in range(na):
                    a = found[q]
                    if acc[a] > 0.0:
                        chart[i, j, a] = acc[a] * scale
                        nz[used + count] = a
                        count += 1
                nz_len[i, j] = count
                used += count
                if length > 1:
                    logscale[i, j] = ref + math.log(mx)
            for q in range(na):
                acc[active[q]] = 0.0
                flag[active[q]] = False
    return chart, logscale


@dataclass(frozen=True)
class Chart:
    """The inside chart of one sentence under G'.

    Parameters
    ----------
    x : ndarray of int64, shape (n,)
        The sentence's terminal ids.
    inside : ndarray of float64, shape (n, n + 1, n_nonterminals)
        Scaled inside probabilities: the inside probability of A over x[i:j] is
        ``inside[i, j, A] * exp(logscale[i, j])``.
    logscale : ndarray of float64, shape (n, n + 1)
        Log scale of each span (-inf when no nonterminal derives it).
    span_yield : ndarray of int64, shape (n, n + 1)
        Id of the cached yield equal to x[i:j], or -1.
    """

    x: np.ndarray
    inside: np.ndarray
    logscale: np.ndarray
    span_yield: np.ndarray

    def log_inside(self, nonterminal: int, i: int, j: int) -> float:
        """Return the log inside probability of a nonterminal over x[i:j] (-inf if it cannot derive it).

        Parameters
        ----------
        nonterminal : int
            A nonterminal code.
        i, j : int
            The span, 0 <= i < j <= n.

        Returns
        -------
        float
        """
        v = float(self.inside[i, j, nonterminal])
        return math.log(v) + float(self.logscale[i, j]) if v > 0.0 else -math.inf


def inside_chart(pcfg: DerivedPCFG, x: np.ndarray) -> Chart:
    """Run the inside algorithm of G' over one sentence.

    Parameters
    ----------
    pcfg : DerivedPCFG
        G' of the current variational parameters.
    x : ndarray of int64, shape (n,)
        Terminal ids of the sentence (n >= 1).

    Returns
    -------
    Chart
        ``chart.log_inside(pcfg.start, 0, n)`` is log p(x) under G' (-inf if x has no parse).
    """
    x = np.ascontiguousarray(x, dtype=np.int64)
    span_yield = _span_yields(x, pcfg.trie_ptr, pcfg.trie_sym, pcfg.trie_next, pcfg.trie_yield)
    chart, logscale = _inside(x, pcfg.n_nonterminals, pcfg.rule_lhs, pcfg.rule_rhs, pcfg.rule_weight,
                              pcfg.lex_ptr, pcfg.lex_rule, pcfg.by_left_ptr, pcfg.by_left_rule,
                              pcfg.unary_order, pcfg.unary_rank, pcfg.by_unary_rhs_ptr, pcfg.by_unary_rhs_rule,
                              span_yield, pcfg.yield_ptr, pcfg.entry_nt, pcfg.entry_weight)
    return Chart(x, chart, logscale, span_yield)


@numba.njit(nogil=True, cache=True)
def _sample(x, chart, logscale, span_yield, n_nt, start, rule_lhs, rule_rhs, rule_weight, by_lhs_ptr, by_lhs_rule,
            lex_ptr, lex_rule, yield_ptr, entry_nt, entry_atom, entry_weight, n_samples, key, max_nodes,
            out_sym, out_i, out_j, out_kind, out_id, out_split, out_tree_ptr):
    n = x.shape[0]
    draw = 0
    pos = 0
    stack_sym = np.empty(max_nodes, dtype=np.int64)
    stack_i = np.empty(max_nodes, dtype=np.int64)
    stack_j = np.empty(max_nodes, dtype=np.int64)
    for s in range(n_samples):
        out_tree_ptr[s] = pos
        top = 0
        stack_sym[0] = start
        stack_i[0] = 0
        stack_j[0] = n
        top = 1
        while top > 0:
            top -= 1
            a = stack_sym[top]
            i = stack_i[top]
            j = stack_j[top]
            total = chart[i, j, a]
            target = uniform_from_key(key, draw) * total
            draw += 1
            cum = 0.0
            kind = -1
            ident = -1
            split = -1
            last_kind = -1
            last_id = -1
            last_split = -1
            # cached subtrees of a (scale: exp(-logscale) for spans > 1, 1 for spans of one terminal)
            yid = span_yield[i, j]
            if yid >= 0:
                sc = math.exp(-logscale[i, j])  # 0 for spans of one terminal
                for e in range(yield_ptr[yid], yield_ptr[yid + 1]):
                    if entry_nt[e] != a:
                        continue
                    w = entry_weight[e] * sc
                    if w <= 0.0:
                        continue
                    cum += w
                    last_kind = 3
                    last_id = entry_atom[e]
                    if cum >= target:
                        kind = 3
                        ident = entry_atom[e]
                        break
            if kind < 0 and j == i + 1:
                t = x[i]
                for p in range(lex_ptr[t], lex_ptr[t + 1]):
                    r = lex_rule[p]
                    if rule_lhs[r] != a:
                        continue
                    cum += rule_weight[r]
                    last_kind = 2
                    last_id = r
                    if cum >= target:
                        kind = 2
                        ident = r
                        break
            if kind < 0:
                for p in range(by_lhs_ptr[a], by_lhs_ptr[a + 1]):
                    r = by_lhs_rule[p]
                    b = rule_rhs[r, 0]
                    c = rule_rhs[r, 1]
                    if c < 0:
                        w = rule_weight[r] * chart[i, j, b]
                        if w <= 0.0:
                            continue
                        cum += w
                        last_kind = 1
                        last_id = r
                        if cum >= target:
                            kind = 1
                            ident = r
                            break
                        continue
                    for k in range(i + 1, j):
                        vb = _child(chart, x, n_nt, b, i, k)
                        if vb == 0.0:
                            continue
                        vc = _child(chart, x, n_nt, c, k, j)
                        if vc == 0.0:
                            continue
                        w = rule_weight[r] * vb * vc * math.exp(logscale[i, k] + logscale[k, j] - logscale[i, j])
                        cum += w
                        last_kind = 0
                        last_id = r
                        last_split = k
                        if cum >= target:
                            kind = 0
                            ident = r
                            split = k
                            break
                    if kind >= 0:
                        break
            if kind < 0:  # rounding: the target fell past the last option
                kind = last_kind
                ident = last_id
                split = last_split
            out_sym[pos] = a
            out_i[pos] = i
            out_j[pos] = j
            out_kind[pos] = kind
            out_id[pos] = ident
            out_split[pos] = split
            pos += 1
            if kind == 1:
                stack_sym[top] = rule_rhs[ident, 0]
                stack_i[top] = i
                stack_j[top] = j
                top += 1
            elif kind == 0:
                c = rule_rhs[ident, 1]
                if c < n_nt:
                    stack_sym[top] = c
                    stack_i[top] = split
                    stack_j[top] = j
                    top += 1
                b = rule_rhs[ident, 0]
                if b < n_nt:
                    stack_sym[top] = b
                    stack_i[top] = i
                    stack_j[top] = split
                    top += 1
    out_tree_ptr[n_samples] = pos
    return pos


@dataclass(frozen=True)
class SampledTrees:
    """Parse trees drawn from one chart, as flat preorder node arrays.

    Parameters
    ----------
    x : ndarray of int64
        The sentence's terminal ids.
    tree_ptr : ndarray of int64, shape (n_samples + 1,)
        Nodes of tree s are ``tree_ptr[s]:tree_ptr[s + 1]``.
    symbol, start, end, kind, ident, split : ndarray of int64, shape (n_nodes,)
        Per node: nonterminal, span [start, end), kind (``KIND_*``), base rule (kinds 0-2) or index of
        the cached subtree in its TNG (kind 3), and the split point of a binary rule (else -1).
    """

    x: np.ndarray
    tree_ptr: np.ndarray
    symbol: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    ident: np.ndarray
    split: np.ndarray

    @property
    def n_samples(self) -> int:
        """Return the number of trees."""
        return int(self.tree_ptr.shape[0] - 1)


def sample_trees(pcfg: DerivedPCFG, chart: Chart, n_samples: int, *, seed: int, epoch: int,
                 sentence: int, root: int | None = None, stream: int = STREAM_AG_PARSE) -> SampledTrees:
    """Draw ``n_samples`` independent parse trees of one sentence from its inside chart ([Z] eq. 8.4).

    Parameters
    ----------
    pcfg : DerivedPCFG
        G' used to fill the chart.
    chart : Chart
        The sentence's inside chart.
    n_samples : int
        Number of trees ([Z] uses 10).
    seed : int
        Random seed.
    epoch : int
        Minibatch counter (part of the random-number key).
    sentence : int
        Global index of the sentence (part of the key), so draws do not depend on partitioning.
    root : int, optional
        Nonterminal at the root of the trees (default: the start symbol).
    stream : int
        Random-number stream (table-label resampling uses its own).

    Returns
    -------
    SampledTrees

    Raises
    ------
    ValueError
        If the sentence has no parse under the grammar.
    """
    x = chart.x
    n = x.shape[0]
    top = pcfg.start if root is None else int(root)
    if not chart.inside[0, n, top] > 0.0:
        raise ValueError("the sentence has no parse under the grammar")
    max_nodes = n_samples * (2 * n) * (pcfg.max_unary_chain + 2) + 1
    sym, i, j, kind, ident, split = (np.empty(max_nodes, dtype=np.int64) for _ in range(6))
    tree_ptr = np.empty(n_samples + 1, dtype=np.int64)
    # counter_key returns a Python int when called from Python: make it uint64 again, or numba would type it
    # int64 and uniform_from_key would only return values below 0.5
    key = np.uint64(counter_key(seed, stream, epoch, sentence))
    used = _sample(x, chart.inside, chart.logscale, chart.span_yield, pcfg.n_nonterminals, top,
                   pcfg.rule_lhs, pcfg.rule_rhs, pcfg.rule_weight, pcfg.by_lhs_ptr, pcfg.by_lhs_rule,
                   pcfg.lex_ptr, pcfg.lex_rule, pcfg.yield_ptr,
                   pcfg.entry_nt, pcfg.entry_atom, pcfg.entry_weight, n_samples, key, max_nodes, sym, i, j,
                   kind, ident, split, tree_ptr)
    return SampledTrees(x, tree_ptr, sym[:used].copy(), i[:used].copy(), j[:used].copy(), kind[:used].copy(),
                        ident[:used].copy(), split[:used].copy())
