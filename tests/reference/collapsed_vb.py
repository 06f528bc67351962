"""Plain NumPy transcriptions of PCSVB0 (Bleier, Algorithm 1) and SCVB0 (Foulds et al. 2013).

Slow and literal on purpose: dense n_kw of shape (T, V) whose *every* entry decays at every token
(eq. 9 as written, no lazy scale), one token at a time in CSR order, E[1(n_dk >= 1)] as the product
1 - prod_i (1 - q_i), the sticks recomputed from scratch (sorted by table count, eqs. 3-4), gamma by
eq. 6, alpha by eq. 12. A clumped term of count c is c literal repetitions with q held fixed. The
minibatch form keeps the per-document loop and accumulates sum q densely.

The random start of n_dk is not what these references test: they take each document's starting
row from the caller (the package's ``start_doc_topic``), so both sides start from the same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import digamma


def rho(step, t):
    """s / (tau + t)^kappa of a PowerStep-like (scale, delay, power)."""
    return step.scale / (step.delay + t) ** step.power


def doc_tokens(block, d, clumping):
    """[(term, count)] of document d: one entry per token (word by word) or per distinct term (clumped)."""
    lo, hi = int(block.indptr[d]), int(block.indptr[d + 1])
    terms, counts = block.term_ids[lo:hi].tolist(), block.counts[lo:hi].tolist()
    if clumping:
        return list(zip(terms, counts))
    return [(w, 1) for w, c in zip(terms, counts) for _ in range(c)]


def stick_prior(tables, gamma):
    """pi per physical topic: sticks in order of decreasing table count (stable), eqs. 1, 3-4, pi_bar_T = 1."""
    T = tables.shape[0]
    order = np.argsort(-tables, kind="stable")
    a = tables[order]
    pi_sorted = np.zeros(T)
    remaining = 1.0
    for j in range(T):
        if j == T - 1:
            pi_sorted[j] = remaining
            break
        u = 1.0 + a[j]
        v = gamma + a[j + 1:].sum()
        bar = u / (u + v)
        pi_sorted[j] = bar * remaining
        remaining *= 1.0 - bar
    pi = np.zeros(T)
    pi[order] = pi_sorted
    return pi


def gamma_eq6(tables, gamma):
    """Eq. 6 from (u, v) of the first T - 1 sticks (v with the current gamma)."""
    T = tables.shape[0]
    a = tables[np.argsort(-tables, kind="stable")]
    u = np.array([1.0 + a[j] for j in range(T - 1)])
    v = np.array([gamma + a[j + 1:].sum() for j in range(T - 1)])
    return (T - 1) / np.sum(digamma(u + v) - digamma(v))


@dataclass
class DenseCollapsed:
    """Dense global state of the references (n_kw and n_k as numbers, no scale)."""

    n_kw: np.ndarray
    n_k: np.ndarray
    tables: np.ndarray
    alpha: float
    gamma: float
    beta: float
    n_tokens: int
    n_docs: int
    t_c: int = 0
    t_h: int = 0
    doc_tables: list = field(default_factory=list)   # E[1(n_dk >= 1)] of every document processed
    doc_qs: list = field(default_factory=list)       # final-pass q's of the last document

    @classmethod
    def from_state(cls, state):
        return cls(n_kw=state.topic_word_counts().copy(), n_k=state.topic_sums().copy(), tables=state.tables.copy(),
                   alpha=float(state.alpha), gamma=float(state.gamma), beta=float(state.beta),
                   n_tokens=int(state.n_tokens), n_docs=int(state.n_docs), t_c=int(state.t_topic_word),
                   t_h=int(state.t_hyper))

    def q_of(self, n_dk, prior, w, word_factor=None):
        """Eq. 7 (no exclusion of the current token)."""
        V = self.n_kw.shape[1]
        factor = (self.n_kw[:, w] + self.beta) / (self.n_k + V * self.beta) if word_factor is None else word_factor[:, w]
        q = (n_dk + prior) * factor
        return q / q.sum()


def _doc_passes(g, block, d, n_dk, prior, *, doc_step, burn_in, clumping, on_final, word_factor=None):
    """Burn-in passes then the final pass over document d; ``on_final(w, q)`` per final-pass update."""
    n_d = float(block.counts[block.indptr[d]:block.indptr[d + 1]].sum())
    t_d = 0
    for sweep in range(burn_in + 1):
        for w, c in doc_tokens(block, d, clumping):
            q = g.q_of(n_dk, prior, w, word_factor)
            for _ in range(c):                                     # c identical updates, q fixed
                r = rho(doc_step, t_d)
                n_dk = (1.0 - r) * n_dk + r * n_d * q              # eq. 8
                t_d += 1
                if sweep == burn_in:
                    on_final(w, q)
    return n_dk


def pcsvb0_pass(g, block, params, *, starts, prior_fixed=None, learn_tables=True):
    """One pass of Algorithm 1 over the block (lines 4-12); ``starts`` (n_docs, T) are the n_dk starts.

    ``prior_fixed`` replaces alpha * pi and skips the hyperparameter step (SCVB0 word by word).
    Returns the final n_dk rows.
    """
    finals = []
    for d in range(block.n_docs):
        prior = g.alpha * stick_prior(g.tables, g.gamma) if prior_fixed is None else prior_fixed
        acc = {"miss": np.ones_like(g.n_k), "qs": []}

        def on_final(w, q, acc=acc):
            r = rho(params.topic_word_step, g.t_c)
            g.n_kw = (1.0 - r) * g.n_kw                            # eq. 9: every entry decays
            g.n_kw[:, w] += r * g.n_tokens * q
            g.n_k = (1.0 - r) * g.n_k + r * g.n_tokens * q
            g.t_c += 1
            acc["miss"] = acc["miss"] * (1.0 - q)
            acc["qs"].append(q)

        n_dk = _doc_passes(g, block, d, starts[d].copy(), prior, doc_step=params.doc_step, burn_in=params.burn_in,
                           clumping=params.clumping, on_final=on_final)
        finals.append(n_dk)
        e = 1.0 - acc["miss"]                                      # E[1(n_dk >= 1)] = 1 - prod (1 - q)
        g.doc_tables.append(e)
        g.doc_qs = acc["qs"]
        if prior_fixed is not None:
            continue
        n_d = float(block.counts[block.indptr[d]:block.indptr[d + 1]].sum())
        r = rho(params.hyper_step, g.t_h)
        if learn_tables:
            g.tables = (1.0 - r) * g.tables + r * g.n_docs * e     # eqs. 10-11 (table form)
        old_alpha = g.alpha
        if params.learn_gamma:
            g.gamma = gamma_eq6(g.tables, g.gamma)                  # eq. 6
        if params.learn_alpha and n_d > 0:                        # eq. 12 is 0/0 for an empty document
            target = e.sum() / (digamma(n_d + old_alpha) - digamma(old_alpha))
            g.alpha = max(params.alpha_floor, (1.0 - r) * old_alpha + r * target)   # eq. 12
        g.t_h += 1
    return np.array(finals)


def minibatch_local(g, block, params, *, starts, prior):
    """Foulds' local step with the global statistics frozen: (sum q as dense (T, V), table sums, digamma sum, n_dk)."""
    V = g.n_kw.shape[1]
    word_factor = (g.n_kw + g.beta) / (g.n_k + V * g.beta)[:, None]
    sums = np.zeros_like(g.n_kw)
    tables = np.zeros_like(g.n_k)
    finals = []
    for d in range(block.n_docs):
        acc = {"miss": np.ones_like(g.n_k)}

        def on_final(w, q, acc=acc):
            sums[:, w] += q
            acc["miss"] = acc["miss"] * (1.0 - q)

        finals.append(_doc_passes(g, block, d, starts[d].copy(), prior, doc_step=params.doc_step,
                                  burn_in=params.burn_in, clumping=params.clumping, on_final=on_final,
                                  word_factor=word_factor))
        tables += 1.0 - acc["miss"]
    lengths = np.array([block.counts[block.indptr[d]:block.indptr[d + 1]].sum() for d in range(block.n_docs)], float)
    dig = float(np.sum(digamma(lengths + g.alpha) - digamma(g.alpha)))
    return sums, tables, dig, np.array(finals)


def minibatch_apply(g, sums, tables, dig, n_docs, n_tokens, params, *, hyper=True):
    """The driver's step: n_kw <- (1 - rho) n_kw + rho (n / |M|) sum q; tables, gamma, alpha (HDP only)."""
    r = rho(params.topic_word_step, g.t_c)
    g.n_kw = (1.0 - r) * g.n_kw + r * (g.n_tokens / n_tokens) * sums
    g.n_k = (1.0 - r) * g.n_k + r * (g.n_tokens / n_tokens) * sums.sum(axis=1)
    g.t_c += 1
    if not hyper:
        return
    rh = rho(params.hyper_step, g.t_h)
    g.tables = (1.0 - rh) * g.tables + rh * (g.n_docs / n_docs) * tables
    old_alpha = g.alpha
    if params.learn_gamma:
        g.gamma = gamma_eq6(g.tables, g.gamma)
    if params.learn_alpha:
        g.alpha = max(params.alpha_floor, (1.0 - rh) * old_alpha + rh * tables.sum() / dig)
    g.t_h += 1


def cvb0_local_fixed_point(word_factor, prior, terms, counts, *, iters=5000, tol=1e-14):
    """The fixed point n_dk = sum_i q_i(n_dk) of eq. 7 for one document with the word factor frozen.

    Brute-force iteration of the map (no step sizes, no token order): the point the stochastic document
    step (eq. 8) approaches as rho^d -> 0. ``word_factor`` is (T, V).
    """
    n_dk = np.full(prior.shape[0], counts.sum() / prior.shape[0])
    for _ in range(iters):
        q = (n_dk[:, None] + prior[:, None]) * word_factor[:, terms]
        q /= q.sum(axis=0, keepdims=True)
        new = (q * counts[None, :]).sum(axis=1)
        if np.abs(new - n_dk).max() < tol:
            return new
        n_dk = new
    return n_dk
