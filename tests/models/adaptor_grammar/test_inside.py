"""Inside pass and tree sampling of G' (eqs. 8.4-8.7) against brute-force enumeration of every parse."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

from tests.reference.adaptor_grammar_numpy import decode_trees, enumerate_parses
from topicflow.models.adaptor_grammar import load_grammar, parse_grammar
from topicflow.models.adaptor_grammar.inside import (
    DerivedPCFG,
    derived_pcfg,
    expected_log_sticks,
    inside_chart,
    sample_trees,
)

#: Two adapted levels (P over W, like Collocation over Word), unary chains S -> P -> W -> C -> Ch, a
#: terminal inside a binary rule ('c' W) and lexical rules from <any>.
TOY = """
start S
@ P a=2 b=0.3 K=5
@ W a=1 b=0 K=10
S -> P S
S -> P
S -> 'c' W
P -> W W
P -> W
W -> C
C -> Ch C
C -> Ch
Ch -> <any>
"""


@pytest.fixture(scope="module")
def toy() -> tuple[Any, DerivedPCFG, list[list[tuple[int, ...]]]]:
    grammar = parse_grammar(TOY).bind("abc")
    rng = np.random.default_rng(0)  # a posterior spread over many of its 144 parses
    gamma = rng.uniform(0.5, 3.0, grammar.n_rules)
    a, b, c = (grammar.terminals.index(t) for t in "abc")
    names = [grammar.nonterminals[m] for m in grammar.adapted]
    assert names == ["W", "P"]
    yields = [[(a,), (a, b), (b, c, a), (b,)], [(a, b), (a, b, c), (c,)]]  # two P atoms share no W-yield
    nu1 = [rng.uniform(0.5, 4.0, len(y)) for y in yields]
    nu2 = [rng.uniform(0.5, 4.0, len(y)) for y in yields]
    pcfg = derived_pcfg(grammar, gamma, yields, nu1, nu2)
    return grammar, pcfg, yields


def assert_chart_equals_brute_force(grammar: Any, pcfg: DerivedPCFG, yields: Any, x: np.ndarray) -> Any:
    """Every span and nonterminal of the inside chart against the sum over all its parses; returns the chart."""
    chart = inside_chart(pcfg, x)
    n = len(x)
    for nt in range(grammar.n_nonterminals):
        for i in range(n):
            for j in range(i + 1, n + 1):
                total = sum(p for p, _ in enumerate_parses(grammar, pcfg, yields, x, nt, i, j))
                got = chart.log_inside(nt, i, j)
                if total == 0.0:
                    assert got == -math.inf
                else:
                    assert got == pytest.approx(math.log(total), rel=1e-12, abs=1e-12)
    return chart


@pytest.mark.parametrize("text", ["abca", "cab", "a", "ababc"])
def test_inside_equals_brute_force_sum_over_parses(toy: Any, text: str) -> None:
    grammar, pcfg, yields = toy
    assert_chart_equals_brute_force(grammar, pcfg, yields, grammar.encode(text))


@pytest.mark.parametrize("sentence", [["_2", "a", "b"], ["_3", "b"], ["_1", "a", "b", "a"], ["a", "_1"]])
def test_inside_of_the_infvoc_grammar_equals_brute_force(sentence: list[str]) -> None:
    """The infinite-vocabulary grammar (D Sentence -> Doc_j unaries, a terminal left child '_j', K adapted
    topics, one of whose TNGs caches a word) exercises what the kernel skips: the many nonterminals a span
    does not derive. Every span and nonterminal against the sum over all parses."""
    grammar = load_grammar("infvoc-lda", D=3, K=2).bind(["a", "b", "_1", "_2", "_3"])
    rng = np.random.default_rng(1)
    gamma = rng.uniform(0.5, 3.0, grammar.n_rules)
    a, b = (grammar.terminals.index(t) for t in "ab")
    yields = [[(a, b)], []]  # Topic1 caches "ab", Topic2 nothing
    nu1 = [rng.uniform(0.5, 4.0, len(y)) for y in yields]
    nu2 = [rng.uniform(0.5, 4.0, len(y)) for y in yields]
    pcfg = derived_pcfg(grammar, gamma, yields, nu1, nu2)
    chart = assert_chart_equals_brute_force(grammar, pcfg, yields, grammar.encode(sentence))
    assert (chart.log_inside(grammar.start, 0, len(sentence)) > -math.inf) == (sentence[0] != "a")


def test_sampled_trees_follow_the_exact_posterior(toy: Any) -> None:
    """Chi-square goodness of fit of 40,000 draws against the enumerated posterior over parses.

    Fixed seed; the test fails only if p < 1e-4 (a generous level: with a correct sampler and this seed the
    p-value is far above it; a wrong weight shifts some parse's frequency by many standard errors).
    """
    grammar, pcfg, yields = toy
    x = grammar.encode("abca")
    exact = enumerate_parses(grammar, pcfg, yields, x, grammar.start, 0, len(x))
    assert len(exact) > 20  # a posterior with many parses, atoms and base rules mixed
    probs = np.array([p for p, _ in exact])
    probs /= probs.sum()
    index = {t: k for k, (_, t) in enumerate(exact)}
    chart = inside_chart(pcfg, x)
    draws = sample_trees(pcfg, chart, 40_000, seed=11, epoch=0, sentence=0)
    counts = np.zeros(len(exact))
    for t in decode_trees(grammar, draws):
        counts[index[t]] += 1  # a KeyError would mean a tree that is not a parse
    expected = probs * counts.sum()
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expect = np.append(expected[keep], expected[~keep].sum())
    if expect[-1] == 0:
        observed, expect = observed[:-1], expect[:-1]
    assert stats.chisquare(observed, expect).pvalue > 1e-4
    # and the draws are reproducible from (seed, epoch, sentence)
    again = sample_trees(pcfg, chart, 50, seed=11, epoch=0, sentence=0)
    np.testing.assert_array_equal(again.ident, draws.ident[:again.ident.shape[0]])


def test_long_sentence_does_not_underflow() -> None:
    """A 400-terminal sentence with a single parse: log p is the sum of its rule log weights (p ~ 1e-420)."""
    grammar = parse_grammar("S -> Ch S\nS -> Ch\nCh -> <any>").bind("ab")
    gamma = np.array([1.0, 2.0, 3.0, 5.0])
    pcfg = derived_pcfg(grammar, gamma, [], [], [])
    x = grammar.encode("ab" * 200)
    chart = inside_chart(pcfg, x)
    logw = np.log(pcfg.rule_weight)
    expected = 399 * logw[0] + logw[1] + 200 * (logw[2] + logw[3])
    assert expected < -800
    assert chart.log_inside(grammar.start, 0, len(x)) == pytest.approx(expected, rel=1e-10)
    # E log theta of eq. 8.7 per rule
    np.testing.assert_allclose(logw[:2], special.psi([1.0, 2.0]) - special.psi(3.0), rtol=1e-12)


def test_stick_expectations_eq_8_6_and_empty_tngs() -> None:
    nu1 = np.array([2.0, 0.7, 5.0])
    nu2 = np.array([1.5, 3.0, 0.4])
    elog, leftover = expected_log_sticks(nu1, nu2)
    e1 = special.psi(nu1) - special.psi(nu1 + nu2)
    e2 = special.psi(nu2) - special.psi(nu1 + nu2)
    reference = [e1[i] + e2[:i].sum() for i in range(3)]
    np.testing.assert_allclose(elog, reference, rtol=1e-12)
    assert leftover == pytest.approx(e2.sum(), rel=1e-12)
    # P9: with empty TNGs the left-over stick is 0 and G' is the base PCFG of E log theta
    grammar = parse_grammar(TOY).bind("abc")
    gamma = np.linspace(0.5, 2.0, grammar.n_rules)
    empty = derived_pcfg(grammar, gamma, [[], []], [np.zeros(0)] * 2, [np.zeros(0)] * 2)
    sums = np.bincount(grammar.rule_lhs, weights=gamma)[grammar.rule_lhs]
    np.testing.assert_allclose(np.log(empty.rule_weight), special.psi(gamma) - special.psi(sums), rtol=1e-12)
    assert empty.entry_nt.shape == (0,)


@pytest.mark.parametrize("grammar", [
    load_grammar("unigram").bind("ab"), load_grammar("collocation").bind("ab"),
    load_grammar("infvoc-lda", D=3, K=2).bind("xy"),
    parse_grammar("S -> A\nA -> B\nB -> 'b'\nS -> C D\nC -> 'c'\nD -> E\nE -> F\nF -> G\nG -> 'g'\nA -> 'a'").bind(""),
])
def test_longest_unary_chain_and_leftover_sticks_match_a_brute_force(grammar: Any) -> None:
    from topicflow.models.adaptor_grammar.inside import _longest_unary_chain

    n_nt = grammar.n_nonterminals
    unary = {a: [int(grammar.rule_rhs[r, 0]) for r in range(grammar.n_rules)
                 if grammar.rule_lhs[r] == a and grammar.rule_rhs[r, 1] < 0 and grammar.rule_rhs[r, 0] < n_nt]
             for a in range(n_nt)}

    def longest(a: int) -> int:  # rules on the longest unary path down from a (the grammar has no unary cycle)
        return max((1 + longest(b) for b in unary[a]), default=0)

    assert _longest_unary_chain(grammar) == max(longest(a) for a in range(n_nt))
    # Each adapted nonterminal's base rules carry its leftover stick, the others' none (eq. 8.5).
    rng = np.random.default_rng(0)
    gamma = rng.uniform(0.5, 2.0, grammar.n_rules)
    nu = [rng.uniform(0.5, 2.0, 3) for _ in grammar.adapted]
    pcfg = derived_pcfg(grammar, gamma, [[(0,), (1,), (0, 1)] for _ in grammar.adapted], nu, nu)
    plain = derived_pcfg(grammar, gamma, [[] for _ in grammar.adapted], [np.zeros(0)] * len(nu), [np.zeros(0)] * len(nu))
    for r in range(grammar.n_rules):
        m = int(grammar.adapted_index[grammar.rule_lhs[r]])
        expected = np.exp(expected_log_sticks(nu[m], nu[m])[1]) if m >= 0 else 1.0
        assert pcfg.rule_weight[r] == pytest.approx(plain.rule_weight[r] * expected, rel=1e-12)
