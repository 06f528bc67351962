"""Plain references for adaptor grammars: every parse of a string under G' by recursion, and the online
update of [Z] eqs. 8.8-8.12 written out with loops (P1: sum over j > i; P2: 1 - b; P3: bias correction)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from topicflow.models.adaptor_grammar.grammar import Grammar
from topicflow.models.adaptor_grammar.inside import (
    KIND_BINARY,
    KIND_CACHED,
    KIND_LEXICAL,
    KIND_UNARY,
    DerivedPCFG,
    SampledTrees,
)


def enumerate_parses(grammar: Grammar, pcfg: DerivedPCFG, yields: list[list[tuple[int, ...]]], x: np.ndarray,
                     nt: int, i0: int, j0: int) -> list[tuple[float, tuple[Any, ...]]]:
    """Every parse of x[i0:j0] from nt under G' with its probability: plain recursion, no chart.

    A parse is a nested tuple ``(symbol, i, j, kind, rule_or_atom[, split], children...)``.
    """
    n_nt = grammar.n_nonterminals
    adapted = {int(c): m for m, c in enumerate(grammar.adapted)}

    @lru_cache(maxsize=None)
    def parses(a: int, i: int, j: int) -> tuple[tuple[float, tuple[Any, ...]], ...]:
        out: list[tuple[float, tuple[Any, ...]]] = []
        if a in adapted:
            for e in range(pcfg.entry_nt.shape[0]):
                if pcfg.entry_nt[e] == a and tuple(yields[adapted[a]][pcfg.entry_atom[e]]) == tuple(x[i:j]):
                    out.append((pcfg.entry_weight[e], (a, i, j, KIND_CACHED, int(pcfg.entry_atom[e]))))
        for r in range(grammar.n_rules):
            if grammar.rule_lhs[r] != a:
                continue
            w = pcfg.rule_weight[r]
            b, c = (int(s) for s in grammar.rule_rhs[r])
            if c < 0 and b >= n_nt:
                if j == i + 1 and x[i] == b - n_nt:
                    out.append((w, (a, i, j, KIND_LEXICAL, r)))
            elif c < 0:
                out.extend((w * p, (a, i, j, KIND_UNARY, r, t)) for p, t in parses(b, i, j))
            else:
                for k in range(i + 1, j):
                    left = [(1.0, None)] if b >= n_nt and k == i + 1 and x[i] == b - n_nt else \
                        list(parses(b, i, k)) if b < n_nt else []
                    right = [(1.0, None)] if c >= n_nt and j == k + 1 and x[k] == c - n_nt else \
                        list(parses(c, k, j)) if c < n_nt else []
                    for pl, tl in left:
                        for pr, tr in right:
                            kids = tuple(t for t in (tl, tr) if t is not None)
                            out.append((w * pl * pr, (a, i, j, KIND_BINARY, r, k) + kids))
        return tuple(out)

    return list(parses(nt, i0, j0))


def decode_trees(grammar: Grammar, samples: SampledTrees) -> list[tuple[Any, ...]]:
    """The sampled trees as nested tuples in :func:`enumerate_parses`'s format (preorder decoding)."""
    n_nt = grammar.n_nonterminals
    out = []
    for s in range(samples.n_samples):
        pos = int(samples.tree_ptr[s])

        def build() -> tuple[Any, ...]:
            nonlocal pos
            p = pos
            pos += 1
            kind = int(samples.kind[p])
            r = int(samples.ident[p])
            head = (int(samples.symbol[p]), int(samples.start[p]), int(samples.end[p]), kind, r)
            if kind in (KIND_LEXICAL, KIND_CACHED):
                return head
            if kind == KIND_UNARY:
                return head + (build(),)
            n_kids = sum(1 for c in grammar.rule_rhs[r] if 0 <= c < n_nt)
            return head + (int(samples.split[p]),) + tuple(build() for _ in range(n_kids))

        out.append(build())
        assert pos == samples.tree_ptr[s + 1]
    return out


def rule_counts_of_key(grammar: Grammar, key: tuple[Any, ...]) -> tuple[dict[int, int], list[tuple[int, Any]]]:
    """n(r, z) of an atom by recursion on its key: base rules at its level and its inner adapted atoms."""
    position = {int(c): m for m, c in enumerate(grammar.adapted)}
    rules: dict[int, int] = {}
    refs: list[tuple[int, Any]] = []

    def walk(k: tuple[Any, ...]) -> None:
        r = k[0]
        rules[r] = rules.get(r, 0) + 1
        kids = list(k[1:])
        for s in grammar.rule_rhs[r]:
            if 0 <= s < grammar.n_nonterminals:
                child = kids.pop(0)
                if int(s) in position:
                    refs.append((position[int(s)], child))
                else:
                    walk(child)

    walk(key)
    return rules, refs


def reference_update(grammar: Grammar, old_f: list[np.ndarray], old_keys: list[list[Any]], old_g: np.ndarray,
                     f_counts: list[np.ndarray], h_counts: list[dict[Any, int]], g_counts: np.ndarray,
                     n_sentences: int, n_samples: int, corpus_size: int, eps: float, decay_before: float
                     ) -> dict[str, Any]:
    """One online step written out: eqs. 8.8-8.12 with loops, f~ and g~ divided by 1 - prod(1 - eps)."""
    scale = corpus_size / (n_sentences * n_samples)
    decay = decay_before * (1.0 - eps)
    correction = 1.0 / (1.0 - decay)
    keys: list[list[Any]] = []
    f_tilde: list[np.ndarray] = []
    for m in range(len(old_keys)):
        ks = list(old_keys[m])
        counts = list(f_counts[m].astype(float))
        for key, v in sorted(h_counts[m].items(), key=lambda kv: (-kv[1], kv[0])):
            if key in ks:
                counts[ks.index(key)] += v
            else:
                ks.append(key)
                counts.append(float(v))
        prev = list(old_f[m]) + [0.0] * (len(ks) - len(old_f[m]))
        f_tilde.append(np.array([(1 - eps) * prev[i] + eps * scale * counts[i] for i in range(len(ks))]))
        keys.append(ks)
    g_tilde = np.array([(1 - eps) * old_g[r] + eps * scale * g_counts[r] for r in range(grammar.n_rules)])
    n_base = np.zeros(grammar.n_rules)
    n_adapted = [np.zeros(len(k)) for k in keys]
    for m in range(len(keys)):
        for key in keys[m]:
            rules, refs = rule_counts_of_key(grammar, key)
            for r, c in rules.items():
                n_base[r] += c
            for mm, k in refs:
                n_adapted[mm][keys[mm].index(k)] += 1
    gamma = grammar.rule_alpha + correction * g_tilde + n_base
    nu1, nu2 = [], []
    for m in range(len(keys)):
        a, b = grammar.pitman_yor_a[m], grammar.pitman_yor_b[m]
        total = [correction * f_tilde[m][i] + n_adapted[m][i] for i in range(len(keys[m]))]
        nu1.append(np.array([1 - b + total[i] for i in range(len(total))]))
        nu2.append(np.array([a + (i + 1) * b + sum(total[j] for j in range(i + 1, len(total)))
                             for i in range(len(total))]))
    return {"keys": keys, "f_tilde": f_tilde, "g_tilde": g_tilde, "gamma": gamma, "nu1": nu1, "nu2": nu2,
            "decay": decay}
