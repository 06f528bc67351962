"""Plain-loop reference of one minibatch of infinite-vocabulary online LDA, written from the spec (section 3).

Zhai 2014, ch. 7, as transcribed in /work/shared/specs/unbuilt-families.md sec. 3.3-3.5 and P1-P7: every
formula is a Python loop over topics, TOS positions and tokens, with dicts and lists instead of CSR
arrays; only the counter-keyed uniforms (topicflow.models.common.rng) are shared with the package, so
that draws can be compared one for one. Slow and obvious on purpose.

State: ``tos[k]`` is a list of [word, nu1, nu2] in TOS order; ``log_rank[k]`` a dict word -> log R_k(w)
(absent = R of 0); ``n_updates`` the minibatches applied.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import digamma

from topicflow.models.common.rng import (
    STREAM_INFVOC_GIBBS,
    counter_key,
    uniform_from_key,
)


@dataclass
class RefState:
    tos: list[list[list[float]]]
    log_rank: list[dict[int, float]]
    n_updates: int = 0
    extra: dict = field(default_factory=dict)


def empty(n_topics: int) -> RefState:
    return RefState([[] for _ in range(n_topics)], [{} for _ in range(n_topics)])


def stick_expectations(entries: list[list[float]]) -> tuple[list[float], float]:
    """E[log beta_t] = psi(nu1_t) - psi(nu1_t + nu2_t) + sum_{s<t} [psi(nu2_s) - psi(nu1_s + nu2_s)] (P1)."""
    out, prefix = [], 0.0
    for _, nu1, nu2 in entries:
        out.append(float(digamma(nu1) - digamma(nu1 + nu2)) + prefix)
        prefix += float(digamma(nu2) - digamma(nu1 + nu2))
    return out, prefix  # prefix at the end = eq. 7.4's remaining stick


def weights(state: RefState, words: list[int]) -> tuple[list[int], list[list[float]]]:
    """Distinct words ascending, and per word exp(E[log beta_k, T_k(w)] - max over k)."""
    present = sorted(set(words))
    K = len(state.tos)
    logw = [[0.0] * K for _ in present]
    for k in range(K):
        elog, remaining = stick_expectations(state.tos[k])
        where = {int(e[0]): t for t, e in enumerate(state.tos[k])}
        for i, w in enumerate(present):
            logw[i][k] = elog[where[w]] if w in where else remaining
    return present, [[math.exp(v - max(row)) for v in row] for row in logw]


def draw(p: list[float], u: float) -> int:
    total = 0.0
    for v in p:
        total += v
    x, running = u * total, 0.0
    for k, v in enumerate(p):
        running += v
        if running > x:
            return k
    return len(p) - 1


def estep(docs: list[list[int]], first_doc: int, present: list[int], W: list[list[float]], K: int, alpha: float,
          seed: int, minibatch: int, burn_in: int, samples: int, stream: int = STREAM_INFVOC_GIBBS
          ) -> tuple[dict[tuple[int, int], int], list[list[int]]]:
    """Eq. 7.2 by Gibbs: random start (sweep 0), B burn-in, M kept sweeps.

    Returns the kept-sweep counts per (word, topic) and the last sweep's n_dk per document.
    """
    col = {w: i for i, w in enumerate(present)}
    kept: dict[tuple[int, int], int] = {}
    last = []
    for d, doc in enumerate(docs):
        key = np.uint64(counter_key(seed, stream, minibatch, first_doc + d))  # a Python int from numba
        n = len(doc)
        z = [min(int(uniform_from_key(key, t) * K), K - 1) for t in range(n)]
        counts = [z.count(k) for k in range(K)]
        for sweep in range(1, 1 + burn_in + samples):
            for t in range(n):
                counts[z[t]] -= 1
                p = [(counts[k] + alpha) * W[col[doc[t]]][k] for k in range(K)]
                z[t] = draw(p, uniform_from_key(key, sweep * n + t))
                counts[z[t]] += 1
            if sweep > burn_in:
                for t in range(n):
                    kept[(doc[t], z[t])] = kept.get((doc[t], z[t]), 0) + 1
        last.append(counts)
    return kept, last


def update(state: RefState, kept: dict[tuple[int, int], int], n_docs: int, n_docs_total: int, samples: int,
           alpha_beta: float, new_nu2: float, eps: float, truncation: int, reorder_every: int,
           log_g0: dict[int, float] | None = None, restate_tail: bool = False) -> RefState:
    """Expansion, eqs. 7.6-7.7, eq. 7.8 (log space), then reorder + contract if i mod U == 0.

    With ``restate_tail``, after the contraction each position's nu2 = alpha^beta + the sum of (nu1 - 1)
    over the positions behind it (topicflow's option, not the chapter's).
    """
    K = len(state.tos)
    scale = n_docs_total / n_docs
    phi = {key: v / samples for key, v in kept.items()}
    minibatch_words = sorted({w for w, _ in kept})
    tos = [[list(e) for e in entries] for entries in state.tos]
    for k in range(K):  # expansion: nu1 = 1, nu2 = new_nu2, appended in first-seen (= id) order
        have = {int(e[0]) for e in tos[k]}
        for w in minibatch_words:
            if w not in have:
                tos[k].append([w, 1.0, new_nu2])
    for k in range(K):  # eq. 7.6-7.7
        c = [scale * phi.get((int(e[0]), k), 0.0) for e in tos[k]]
        tail, acc = [0.0] * len(c), 0.0
        for t in range(len(c) - 1, -1, -1):
            tail[t] = acc
            acc += c[t]
        for t, e in enumerate(tos[k]):
            e[1] = (1.0 - eps) * e[1] + eps * (1.0 + c[t])
            e[2] = (1.0 - eps) * e[2] + eps * (alpha_beta + tail[t])
    log_rank = []
    for k in range(K):  # eq. 7.8: R = (1 - eps) R + eps * G0 * scale * phi
        old = {} if eps >= 1.0 else {w: v + math.log1p(-eps) for w, v in state.log_rank[k].items()}
        for (w, kk), v in phi.items():
            if kk == k and v > 0:
                g0 = 0.0 if log_g0 is None else log_g0[w]
                new = math.log(eps) + g0 + math.log(scale * v)
                old[w] = new if w not in old else float(_logaddexp(old[w], new))
        log_rank.append(old)
    i = state.n_updates + 1
    if i % reorder_every == 0:
        for k in range(K):
            tos[k] = sorted(tos[k], key=lambda e: (-log_rank[k].get(int(e[0]), -math.inf), int(e[0])))[:truncation]
            if restate_tail:
                for t, e in enumerate(tos[k]):
                    behind = 0.0
                    for later in tos[k][t + 1:]:
                        behind += later[1] - 1.0
                    e[2] = alpha_beta + behind
    return RefState(tos, log_rank, i)


def _logaddexp(a: float, b: float) -> float:
    hi, lo = max(a, b), min(a, b)
    return hi + math.log1p(math.exp(lo - hi))
