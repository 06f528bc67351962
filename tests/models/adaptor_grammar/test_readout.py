"""Topics read out of the infinite-vocabulary LDA grammar ([Z] section 8.4.2): parses, sticks, ranked words."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from tests.reference.adaptor_grammar_numpy import enumerate_parses
from topicflow.models.adaptor_grammar import (
    OnlineParams,
    derived_pcfg,
    expected_sticks,
    initial_state,
    inside_chart,
    load_grammar,
    top_yields,
    topic_words,
)
from topicflow.models.adaptor_grammar.online import (
    TNG,
    atom_from_key,
    variational_parameters,
)


def test_token_sentence_inside_equals_brute_force() -> None:
    """A document's token ``['_2', 'a', 'b']`` under the shipped grammar (D 2, K 2), with cached words.

    Every span and nonterminal of the chart equals the sum over all parses (the pseudo-word terminal sits
    in the binary rule Doc_j -> '_j' Topic_i; Topic1 caches "ab" and "b", Topic2 caches "a").
    """
    grammar = load_grammar("infvoc-lda", D=2, K=2).bind(["_1", "_2", "a", "b"])
    rng = np.random.default_rng(1)
    gamma = rng.uniform(0.5, 3.0, grammar.n_rules)
    a, b = grammar.terminals.index("a"), grammar.terminals.index("b")
    names = [grammar.nonterminals[int(c)] for c in grammar.adapted]
    yields = [[(a, b), (b,)] if name == "Topic1" else [(a,)] for name in names]
    nu1 = [rng.uniform(0.5, 4.0, len(y)) for y in yields]
    nu2 = [rng.uniform(0.5, 4.0, len(y)) for y in yields]
    pcfg = derived_pcfg(grammar, gamma, yields, nu1, nu2)
    x = grammar.encode(["_2", "a", "b"])
    chart = inside_chart(pcfg, x)
    start = grammar.nonterminals.index("Sentence")
    n_parses = 0
    for nt in range(grammar.n_nonterminals):
        for i in range(3):
            for j in range(i + 1, 4):
                parses = enumerate_parses(grammar, pcfg, yields, x, nt, i, j)
                total = sum(p for p, _ in parses)
                if nt == start and (i, j) == (0, 3):
                    n_parses = len(parses)
                got = chart.log_inside(nt, i, j)
                assert (got == -math.inf) if total == 0.0 else got == pytest.approx(math.log(total), rel=1e-12)
    # per topic: the spelled word "ab" (base rules), plus Topic1's cached "ab": 2 + 1 parses
    assert n_parses == 3
    assert chart.log_inside(start, 0, 3) > -math.inf
    assert chart.log_inside(grammar.nonterminals.index("Doc1"), 0, 3) == -math.inf  # '_2' is document 2's


def test_expected_sticks_match_the_loop() -> None:
    rng = np.random.default_rng(0)
    nu1, nu2 = rng.uniform(0.2, 5.0, 6), rng.uniform(0.2, 5.0, 6)
    want, rest = [], 1.0
    for i in range(6):
        want.append(rest * nu1[i] / (nu1[i] + nu2[i]))
        rest *= nu2[i] / (nu1[i] + nu2[i])
    got = expected_sticks(nu1, nu2)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert got.sum() == pytest.approx(1.0 - rest)  # the rest is the left-over stick
    assert expected_sticks(np.zeros(0), np.zeros(0)).shape == (0,)
    with pytest.raises(ValueError, match="one shape"):
        expected_sticks(nu1, nu2[:3])


def _state_with_words(words: dict[str, list[tuple[str, float]]]) -> tuple[Any, Any]:
    """A state whose Topic TNGs hold ``words`` (each with f~) in the given stick order."""
    grammar = load_grammar("infvoc-lda", D=1, K=2).bind(["_1", *"abcdefghij"])
    state = initial_state(grammar, seed=0)
    rule = {grammar.rule_text(r): r for r in range(grammar.n_rules)}

    def chars_key(word: str) -> tuple:
        char = (rule[f"Char -> '{word[0]}'"],)
        if len(word) == 1:
            return (rule["Chars -> Char"], char)
        return (rule["Chars -> Char Chars"], char, chars_key(word[1:]))

    tngs = []
    for m, c in enumerate(grammar.adapted):
        name = grammar.nonterminals[int(c)]
        entries = words.get(name, [])
        atoms = tuple(atom_from_key(grammar, (rule[f"{name} -> Word"], (rule["Word -> Chars"], chars_key(w))))
                      for w, _ in entries)
        tngs.append(TNG(atoms, np.array([f for _, f in entries], np.float64)))
    filled = replace(state, tngs=tuple(tngs), decay=0.0)
    return variational_parameters(filled, OnlineParams(corpus_size=1, bias="none")), grammar


def test_top_yields_rank_by_stick_and_count() -> None:
    state, grammar = _state_with_words({"Topic1": [("cab", 1.0), ("bad", 9.0), ("fig", 4.0)],
                                        "Topic2": [("ace", 2.0)]})
    m = [grammar.nonterminals[int(c)] for c in grammar.adapted].index("Topic1")
    by_count = top_yields(state, m, 3, by="count")
    assert by_count == [("bad", 9.0), ("fig", 4.0), ("cab", 1.0)]
    by_stick = top_yields(state, m, 3)
    sticks = expected_sticks(state.nu1[m], state.nu2[m])
    assert [w for w, _ in by_stick] == [["cab", "bad", "fig"][i] for i in np.argsort(-sticks, kind="stable")]
    assert [v for _, v in by_stick] == pytest.approx(sorted(sticks, reverse=True))
    assert top_yields(state, m, 2, by="count") == by_count[:2]
    got = topic_words(state, 1, by="count")
    assert got == {"Topic1": [("bad", 9.0)], "Topic2": [("ace", 2.0)]}
    assert list(topic_words(state, 1, nonterminals=["Topic2"])) == ["Topic2"]
    with pytest.raises(ValueError, match="'Word': not an adapted nonterminal.*Topic1, Topic2"):
        topic_words(state, 1, nonterminals=["Word"])
    with pytest.raises(ValueError, match="by must be one of stick, count"):
        top_yields(state, m, 1, by="rank")  # type: ignore[arg-type]
