"""Batch PCVB0 for the HDP in plain NumPy, written from Bleier sec. 2 (eqs. 2-6), no topicflow code.

One document at a time, one token at a time, dense arrays and explicit loops. The schedule is the one
of ``topicflow.models.hdp.pcvb0`` (its module docstring): every document of an iteration reads the
previous iteration's global counts (Jacobi across documents) and its own updates at once (sequential
within the document); counts without the current token are clipped at zero; alpha and gamma are
learned from the second call of the global step on (the first is the random start's).

Documents are given as lists of term ids in ascending order (a token per entry), or, with clumping,
as lists of (term, count) pairs.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma


def stick_weights(tables: np.ndarray, gamma: float) -> np.ndarray:
    """Eq. 3-4: sticks ordered by tables (descending, ties by index), pi_bar = u / (u + v), pi_bar_T = 1."""
    T = len(tables)
    order = sorted(range(T), key=lambda k: (-tables[k], k))
    pi = np.zeros(T)
    rest = 1.0
    for j, k in enumerate(order):
        if j == T - 1:
            pi[k] = rest
            break
        u = 1.0 + tables[k]
        v = gamma + sum(tables[order[l]] for l in range(j + 1, T))
        bar = u / (u + v)
        pi[k] = bar * rest
        rest *= 1.0 - bar
    return pi


def gamma_step(tables: np.ndarray, gamma: float) -> float:
    """Eq. 6 with (u, v) of eq. 4 in stick order at the current gamma."""
    T = len(tables)
    order = sorted(range(T), key=lambda k: (-tables[k], k))
    denom = 0.0
    for j in range(T - 1):
        u = 1.0 + tables[order[j]]
        v = gamma + sum(tables[order[l]] for l in range(j + 1, T))
        denom += digamma(u + v) - digamma(v)
    return (T - 1) / denom


class ReferencePCVB0:
    """State and iterations of batch PCVB0 (dense n_kw, per-unit q lists)."""

    def __init__(self, docs: list[list], q: list[np.ndarray], n_terms: int, *, beta: float, alpha: float,
                 gamma: float, alpha_floor: float = 1e-3, learn_alpha: bool = True, learn_gamma: bool = True,
                 clumping: bool = False, dtype: type = np.float64) -> None:
        self.docs = docs  # word level: [w, ...]; clumping: [(w, c), ...]
        self.q = [np.array(x, dtype=dtype) for x in q]  # q[d] of shape (n_units_d, T)
        self.V = n_terms
        self.T = self.q[0].shape[1]
        self.beta, self.alpha, self.gamma = beta, alpha, gamma
        self.alpha_floor, self.learn_alpha, self.learn_gamma = alpha_floor, learn_alpha, learn_gamma
        self.clumping = clumping
        self.dtype = dtype
        self.log_likelihood = 0.0
        self.global_step(learn=False)

    def units(self, d: int) -> list[tuple[int, int]]:
        return list(self.docs[d]) if self.clumping else [(w, 1) for w in self.docs[d]]

    def statistics(self) -> tuple[np.ndarray, np.ndarray, float]:
        n_kw = np.zeros((self.T, self.V))
        tables = np.zeros(self.T)
        dsum = 0.0
        for d in range(len(self.docs)):
            miss = np.ones(self.T)
            n_d = 0
            for i, (w, c) in enumerate(self.units(d)):
                qi = self.q[d][i].astype(np.float64)
                n_kw[:, w] += c * qi
                miss *= (1.0 - qi) ** c  # E[1(n_dk >= 1)] = 1 - prod_i (1 - q_dik)
                n_d += c
            tables += 1.0 - miss
            dsum += digamma(n_d + self.alpha) - digamma(self.alpha)
        return n_kw, tables, dsum

    def global_step(self, *, learn: bool = True) -> None:
        n_kw, tables, dsum = self.statistics()
        self.n_kw, self.n_k, self.tables = n_kw, n_kw.sum(axis=1), tables
        if learn:
            if self.learn_alpha:
                self.alpha = max(self.alpha_floor, tables.sum() / dsum)  # eq. 5
            if self.learn_gamma:
                self.gamma = gamma_step(tables, self.gamma)  # eq. 6
        self.pi = stick_weights(self.tables, self.gamma)

    def iterate(self) -> None:
        n_kw_prev, n_k_prev = self.n_kw.copy(), self.n_k.copy()
        prior = self.alpha * self.pi
        new_q = []
        loglik = 0.0
        for d in range(len(self.docs)):
            units = self.units(d)
            qd = self.q[d].copy()
            n_kw_doc = n_kw_prev.copy()  # n_kw as document d sees it (its own updates included)
            n_k_doc = n_k_prev.copy()
            for i, (w, c) in enumerate(units):
                old = qd[i].astype(np.float64)
                n_dk = sum(cj * qd[j].astype(np.float64) for j, (_, cj) in enumerate(units))
                a = np.maximum(n_dk - old, 0.0)  # n_dk without token i
                b = np.maximum(n_kw_doc[:, w] - old, 0.0)
                t = np.maximum(n_k_doc - old, 0.0)
                p = (a + prior) * (b + self.beta) / (t + self.V * self.beta)  # eq. 2
                qd[i] = (p / p.sum()).astype(self.dtype)
                new = qd[i].astype(np.float64)
                n_kw_doc[:, w] += c * (new - old)
                n_k_doc += c * (new - old)
            n_dk = sum(cj * qd[j].astype(np.float64) for j, (_, cj) in enumerate(units))
            n_d = sum(c for _, c in units)
            for w, c in units:
                s = sum((n_dk[k] + prior[k]) / (n_d + self.alpha) * (n_kw_prev[k, w] + self.beta)
                        / (n_k_prev[k] + self.V * self.beta) for k in range(self.T))
                loglik += c * math.log(s)
            new_q.append(qd)
        self.q = new_q
        self.log_likelihood = loglik
        self.global_step(learn=True)
