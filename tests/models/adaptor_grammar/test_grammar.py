"""Grammar files: the shipped grammars of [Z] Table 8.1, the compiled form and every validation error."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.errors import InputError
from topicflow.models.adaptor_grammar import (
    SHIPPED_GRAMMARS,
    load_grammar,
    parse_grammar,
)


def test_shipped_grammars_load_and_bind() -> None:
    uni = load_grammar("unigram").bind("ab")
    assert uni.nonterminals[uni.start] == "Sentence"
    assert [uni.nonterminals[c] for c in uni.adapted] == ["Word"]
    assert uni.pitman_yor_a.tolist() == [100.0] and uni.pitman_yor_b.tolist() == [0.0]
    assert uni.truncation.tolist() == [1500]
    assert sorted(uni.rule_text(r) for r in range(uni.n_rules) if uni.rule_lhs[r] == uni.nonterminals.index("Char")) \
        == ["Char -> 'a'", "Char -> 'b'"]
    col = load_grammar("collocation").bind("ab")
    # specific before general: Word is reachable from Collocation, so it comes first ([Z] 8.1.2)
    assert [col.nonterminals[c] for c in col.adapted] == ["Word", "Collocation"]
    lda = load_grammar("infvoc-lda", D=3, K=2).bind("xy")
    assert [lda.nonterminals[c] for c in lda.adapted] == ["Topic1", "Topic2"]
    assert lda.terminals[:3] == ("_1", "_2", "_3")
    doc_rules = [lda.rule_text(r) for r in range(lda.n_rules) if lda.nonterminals[lda.rule_lhs[r]].startswith("Doc")]
    assert len(doc_rules) == 6 and "Doc2 -> '_2' Topic1" in doc_rules
    assert set(SHIPPED_GRAMMARS) == {"unigram", "collocation", "infvoc-lda"}


def test_compiled_arrays_and_defaults() -> None:
    g = parse_grammar("S -> A B alpha=2\nS -> A\nA -> 'x'\nB -> <any>\n@ A a=3 b=0.5 K=7\n").bind(["x", "y"])
    assert g.rule_alpha.tolist() == [2.0, 0.5, 1.0, 0.5, 0.5]  # default 1/|R(lhs)|
    assert g.rule_rhs.tolist()[1] == [1, -1]
    # unary closure order: A before S (S -> A)
    order = g.unary_order.tolist()
    assert order.index(1) < order.index(0)
    np.testing.assert_array_equal(g.encode("yx"), [1, 0])
    with pytest.raises(InputError, match="'z' is not in the grammar's alphabet"):
        g.encode("z", where="in.txt line 4")
    spec = load_grammar("unigram").with_adaptors(Word=20)
    assert spec.bind("a").truncation.tolist() == [20]


@pytest.mark.parametrize(("text", "match"), [
    ("S -> A B C\nA -> 'a'\nB -> 'b'\nC -> 'c'", r"line 1: rules must be binarized: 3"),
    ("S -> A\nA -> A 'a'\nA -> 'a'\n@ A", r"line 4: adapted nonterminal 'A' is recursive"),
    ("S -> A\nA -> B\nB -> A\nB -> 'b'", r"line 2: cycle of unary rules A -> B -> A"),
    ("S -> 'a'\nT -> 'b'", r"line 2: nonterminal 'T' cannot be reached"),
    ("S -> A\nA -> A 'a'", r"line 1: nonterminal\(s\) 'S', 'A' derive no finite string"),
    ("S -> Word", r"line 1: nonterminal 'Word' has no rule; quote terminals"),
    ("S -> 'a'\n@ S a=1 b=1.5", r"line 2: b \(discount\) must lie in \[0, 1\)"),
    ("S -> 'a'\n@ S K=0", r"line 2: K \(truncation\) must be an integer >= 1"),
    ("S -> 'a'\n@ S c=1", r"line 2: unknown field 'c=1'"),
    ("S -> 'a'\nS -> 'a'", r"line 2: duplicate rule S -> 'a' \(first on line 1\)"),
    ("S -> 'a' <any>", r"line 1: <any> must be the only"),
    ("start T\nS -> 'a'", r"line 1: start symbol 'T' has no rule"),
    ("S -> D{j} for j=1..N\nD1 -> 'a'", r"line 1: range bound 'N' is neither"),
    ("S -> 'a' alpha=-1", r"line 1: alpha must be > 0"),
    ("S -> D{j} for i=1..2\nD1 -> 'a'", r"line 1: \{j\} is used but no 'for j=..' range"),
    ("S -> D{j} alpha={j} for j=0..1\nD0 -> 'a'\nD1 -> 'b'", r"line 1: alpha must be > 0"),
    ("S -> D{j} for j=1..2\nD1 -> 'a'", r"line 1: nonterminal 'D2' has no rule"),
])
def test_validation_errors_name_file_and_line(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as info:
        parse_grammar(text, path="g.txt")
    assert info.value.path == "g.txt"
    assert str(info.value).startswith("g.txt")


def test_missing_file_and_unknown_truncation(tmp_path: object) -> None:
    with pytest.raises(InputError, match="not found"):
        load_grammar("/nonexistent/file.grammar")
    with pytest.raises(InputError, match="'Colloc' is not an adapted nonterminal"):
        load_grammar("unigram").with_adaptors(Colloc=3)


def test_unquoted_wildcard_leaves_out_the_files_terminals() -> None:
    """``Char -> <unquoted>`` of the topic grammar spells words from characters, never from '_j'."""
    grammar = load_grammar("infvoc-lda", D=3, K=2).bind(["_1", "_2", "_3", "a", "b"])
    char = grammar.nonterminals.index("Char")
    spelled = {grammar.terminals[int(grammar.rule_rhs[r, 0]) - grammar.n_nonterminals]
               for r in range(grammar.n_rules) if grammar.rule_lhs[r] == char}
    assert spelled == {"a", "b"}
    assert all(grammar.rule_alpha[r] == 0.5 for r in range(grammar.n_rules) if grammar.rule_lhs[r] == char)
    anyone = parse_grammar("S -> 'x' C\nC -> <any>").bind(["x", "y"])
    assert anyone.n_rules == 3  # <any> keeps 'x'
    assert parse_grammar("S -> 'x' C\nC -> <unquoted>").bind(["x", "y"]).n_rules == 2
    with pytest.raises(InputError, match="line 2: <unquoted> must be the only right-hand-side symbol"):
        parse_grammar("S -> C\nC -> <unquoted> C")


def test_templates_expand_to_every_binding_in_order() -> None:
    """The expansion of ``for`` lines, written out by hand (the parser takes a fast path after a line's first
    binding: it must give the same rules)."""
    text = ("start S\n@ T{i} a=5 b=0.5 K=7  for i=1..2\nS -> Doc{j} alpha=1  for j=1..2\n"
            "Doc{j} -> '_{j}' T{i}  for j=1..2, i=1..2\nT{i} -> W alpha={i}  for i=1..2\nW -> 'w'\n")
    spec = parse_grammar(text)
    assert [(r.lhs, r.rhs, r.alpha, r.line) for r in spec.rules] == [
        ("S", ("Doc1",), 1.0, 3), ("S", ("Doc2",), 1.0, 3),
        ("Doc1", ("'_1'", "T1"), None, 4), ("Doc1", ("'_1'", "T2"), None, 4),
        ("Doc2", ("'_2'", "T1"), None, 4), ("Doc2", ("'_2'", "T2"), None, 4),
        ("T1", ("W",), 1.0, 5), ("T2", ("W",), 2.0, 5),
        ("W", ("'w'",), None, 6),
    ]
    assert [(a.symbol, a.a, a.b, a.truncation) for a in spec.adaptors] == [("T1", 5.0, 0.5, 7), ("T2", 5.0, 0.5, 7)]
    assert spec.terminals() == ("_1", "_2", "w")
