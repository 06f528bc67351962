"""Online hybrid inference ([Z] eqs. 8.8-8.12, section 8.3.1): update equations, PCFG special case, learning."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from tests.models.adaptor_grammar.test_inside import TOY
from tests.reference.adaptor_grammar_numpy import enumerate_parses, reference_update
from topicflow.models.adaptor_grammar import (
    KIND_CACHED,
    KIND_UNARY,
    SampledTrees,
    inside_chart,
    load_grammar,
    parse_grammar,
    sample_trees,
    spans_of,
)
from topicflow.models.adaptor_grammar.online import (
    AGStats,
    OnlineParams,
    atom_from_key,
    estep_sentences,
    fit_minibatch,
    initial_state,
    prepare,
    prune,
    ranking_scores,
    rebind_state,
    resample_table_labels,
    sample_segmentations,
    seed_state,
    segment,
    tree_log_weight,
    update_minibatch,
    variational_parameters,
)


def _minibatch(grammar: Any, texts: list[str]) -> list[np.ndarray]:
    return [grammar.encode(t) for t in texts]


def test_update_matches_numpy_reference() -> None:
    """Second minibatch on the two-adaptor toy grammar with b > 0 (P2), non-empty TNGs and f~ != 0."""
    grammar = parse_grammar(TOY).bind("abc")
    params = OnlineParams(corpus_size=40, tau=4.0, kappa=0.7, prune_every=100, n_samples=5, seed=2)
    state = initial_state(grammar, seed=2)
    first = _minibatch(grammar, ["abca", "cab", "abab"])
    state, _ = fit_minibatch(state, first, [0, 1, 2], params)
    assert all(len(t) > 0 for t in state.tngs)
    second = _minibatch(grammar, ["abcab", "ca", "bab", "abca"])
    stats = estep_sentences(grammar, prepare(state), [t.keys for t in state.tngs], second, [3, 4, 5, 6],
                            n_samples=5, seed=2, epoch=2)
    assert sum(map(len, stats.h)) > 0 and int(sum(f.sum() for f in stats.f)) > 0  # both kinds of counts
    new = update_minibatch(state, stats, params)
    eps = (4.0 + 2) ** -0.7
    ref = reference_update(grammar, [t.f_tilde for t in state.tngs], [t.keys for t in state.tngs],
                           state.g_tilde, list(stats.f), list(stats.h), stats.g, 4, 5, 40, eps, state.decay)
    assert new.decay == pytest.approx(ref["decay"], rel=1e-14)
    np.testing.assert_allclose(new.g_tilde, ref["g_tilde"], rtol=1e-12)
    np.testing.assert_allclose(new.gamma, ref["gamma"], rtol=1e-12)
    for m, tng in enumerate(new.tngs):
        assert tng.keys == ref["keys"][m]
        np.testing.assert_allclose(tng.f_tilde, ref["f_tilde"][m], rtol=1e-12)
        np.testing.assert_allclose(new.nu1[m], ref["nu1"][m], rtol=1e-12)
        np.testing.assert_allclose(new.nu2[m], ref["nu2"][m], rtol=1e-12)
    assert grammar.pitman_yor_b[1] == pytest.approx(0.3)  # P adapted with b > 0: nu1 = 1 - b + ...


def test_merged_partitions_give_the_same_model() -> None:
    """Counts are integers, so E-steps over any split of a minibatch merge to the same update."""
    grammar = parse_grammar(TOY).bind("abc")
    params = OnlineParams(corpus_size=10, tau=1.0, kappa=0.6, n_samples=4, seed=5)
    state = initial_state(grammar, seed=5)
    texts = ["abca", "cab", "abab", "ca", "bcab", "aab"]
    xs = _minibatch(grammar, texts)
    pcfg, keys = prepare(state), [t.keys for t in state.tngs]
    whole = estep_sentences(grammar, pcfg, keys, xs, range(6), n_samples=4, seed=5, epoch=1)
    parts = [estep_sentences(grammar, pcfg, keys, xs[a:b], range(a, b), n_samples=4, seed=5, epoch=1)
             for a, b in [(0, 1), (1, 4), (4, 6)]]
    merged = parts[2].merge(parts[0]).merge(parts[1])
    one, two = update_minibatch(state, whole, params), update_minibatch(state, merged, params)
    np.testing.assert_array_equal(one.gamma, two.gamma)
    for a, b in zip(one.tngs, two.tngs):
        assert a.keys == b.keys
        np.testing.assert_array_equal(a.f_tilde, b.f_tilde)
    assert AGStats.zeros(state, 4).merge(whole).g.tolist() == whole.g.tolist()


def test_pcfg_without_adaptors_is_plain_pcfg_estimation() -> None:
    """No adapted nonterminal, B = |X|, kappa = 0: gamma = alpha + expected rule counts (eq. 8.10).

    The sampled counts are checked against the exact expected counts of the posterior over parses, by
    enumeration (independent of the chart), within 5 standard errors of the 4000-sample average.
    """
    grammar = parse_grammar("S -> S S\nS -> A\nA -> 'a'\nA -> 'b'\nA -> A A").bind("ab")
    params = OnlineParams(corpus_size=2, tau=0.0, kappa=0.0, n_samples=4000, seed=1)
    state = initial_state(grammar, seed=1)
    texts = ["abb", "ba"]
    xs = _minibatch(grammar, texts)
    new, stats = fit_minibatch(state, xs, [0, 1], params)
    expected_counts = stats.g / 4000
    np.testing.assert_allclose(new.gamma, grammar.rule_alpha + expected_counts, rtol=1e-12)
    assert new.decay == 0.0 and new.tngs == ()
    exact = np.zeros(grammar.n_rules)
    variance = np.zeros(grammar.n_rules)
    pcfg = prepare(state)
    for x in xs:
        parses = enumerate_parses(grammar, pcfg, [], x, grammar.start, 0, len(x))
        z = sum(p for p, _ in parses)
        mean = np.zeros(grammar.n_rules)
        second = np.zeros(grammar.n_rules)
        for p, tree in parses:
            counts = np.zeros(grammar.n_rules)
            stack = [tree]
            while stack:
                node = stack.pop()
                counts[node[4]] += 1
                stack.extend(c for c in node[5:] if isinstance(c, tuple))
            mean += p / z * counts
            second += p / z * counts ** 2
        exact += mean
        variance += second - mean ** 2  # sentences are parsed independently: variances add
    se = np.sqrt(np.maximum(variance, 1e-12) / 4000)  # of the average over 4000 draws per sentence
    assert np.all(np.abs(expected_counts - exact) <= 5 * se + 1e-9)


def test_bias_modes_and_pruning() -> None:
    grammar = parse_grammar(TOY).bind("abc")
    xs = _minibatch(grammar, ["abca", "cab", "abab", "bcab"])
    base = dict(corpus_size=4, tau=8.0, kappa=0.5, n_samples=3, seed=4)
    states = {}
    for bias in ("correct", "tau-kappa", "none"):
        params = OnlineParams(**base, bias=bias)  # type: ignore[arg-type]
        states[bias], _ = fit_minibatch(initial_state(grammar, seed=4), xs, range(4), params)
    eps = 9.0 ** -0.5
    g = states["none"].g_tilde
    alpha = grammar.rule_alpha
    n_base = states["none"].gamma - alpha - g
    np.testing.assert_allclose(states["correct"].gamma, alpha + g / eps + n_base, rtol=1e-12)  # 1 - (1 - eps)
    np.testing.assert_allclose(states["tau-kappa"].gamma, alpha + g * 8.0 ** 0.5 + n_base, rtol=1e-12)
    # pruning keeps the K best atoms by Lambda = f~ log(eps |s| + 1), and every atom a kept atom refers to
    params = OnlineParams(**base)  # type: ignore[arg-type]
    state = replace(states["correct"], grammar=parse_grammar(TOY).with_adaptors(P=1, W=1).bind("abc"))
    scores = ranking_scores(state, params, eps)
    pruned = prune(state, params, eps)
    best_p = state.tngs[1].atoms[int(np.argmax(scores[1]))]
    assert pruned.tngs[1].keys == [best_p.key]
    kept_w = pruned.tngs[0].keys
    best_w = state.tngs[0].keys[int(np.argmax(scores[0]))]
    assert best_w in kept_w
    assert {k for _, k in best_p.refs} <= set(kept_w)
    assert len(kept_w) == len({best_w} | {k for _, k in best_p.refs})
    sizes = [atom_from_key(grammar, k).size for k in kept_w]
    assert sizes == [len(atom_from_key(grammar, k).yield_ids) for k in kept_w]  # |s| of Word = characters


@pytest.fixture(scope="module")
def lexicon_fit() -> dict[str, Any]:
    """A known unigram adaptor grammar's data: Zipfian words of a 14-word lexicon, spaces removed."""
    rng = np.random.default_rng(0)
    lexicon = ["the", "dog", "saw", "a", "cat", "ran", "big", "house", "you", "look", "at", "this", "is", "what"]
    p = 1.0 / np.arange(1, len(lexicon) + 1)
    p /= p.sum()
    gold = [[lexicon[i] for i in rng.choice(len(lexicon), rng.integers(2, 6), p=p)] for _ in range(300)]
    grammar = load_grammar("unigram").with_adaptors(Word=50).bind(sorted(set("".join(sum(gold, [])))))
    xs = [grammar.encode("".join(ws)) for ws in gold]
    params = OnlineParams(corpus_size=len(xs), tau=16.0, kappa=0.6, prune_every=5, seed=3)
    state = initial_state(grammar, seed=3)
    for _ in range(2):
        for b in range(0, len(xs), 10):
            state, _ = fit_minibatch(state, xs[b:b + 10], range(b, b + 10), params)
    return {"lexicon": lexicon, "gold": gold, "grammar": grammar, "xs": xs, "state": state}


def _f1(predicted: list[set[tuple[int, int]]], gold: list[list[str]]) -> float:
    gold_spans = [set(zip(np.cumsum([0] + [len(w) for w in ws[:-1]]).tolist(), np.cumsum([len(w) for w in ws])
                          .tolist())) for ws in gold]
    tp = sum(len(p & g) for p, g in zip(predicted, gold_spans))
    precision = tp / sum(map(len, predicted))
    recall = tp / sum(map(len, gold_spans))
    return 2 * precision * recall / (precision + recall) if tp else 0.0


def test_recovers_the_lexicon_and_segments(lexicon_fit: dict[str, Any]) -> None:
    grammar, state = lexicon_fit["grammar"], lexicon_fit["state"]
    tng = state.tngs[0]
    assert 0 < len(tng) <= 50 + 10 * 5  # pruned to K = 50 every 5 minibatches, 10 sentences' candidates since
    top = {"".join(grammar.terminals[t] for t in tng.atoms[i].yield_ids) for i in np.argsort(-tng.f_tilde)[:8]}
    assert {"the", "dog", "saw", "a", "cat"} <= top  # the five most frequent words
    pcfg = prepare(state)
    word = grammar.nonterminals.index("Word")
    keys = [t.keys for t in state.tngs]
    fitted = [set(segment(pcfg, grammar, keys, x, word, seed=1, sentence=d)) for d, x in enumerate(lexicon_fit["xs"])]
    chars = [{(i, i + 1) for i in range(len(x))} for x in lexicon_fit["xs"]]
    whole = [{(0, len(x))} for x in lexicon_fit["xs"]]
    f1, baseline = _f1(fitted, lexicon_fit["gold"]), max(_f1(chars, lexicon_fit["gold"]),
                                                         _f1(whole, lexicon_fit["gold"]))
    assert baseline < 0.1
    assert f1 > 0.7  # about 0.8-0.99 depending on the seed
    # P10: the F1 averaged over the samples (the reference code's protocol) on the first 50 sentences
    draws = [sample_segmentations(pcfg, grammar, keys, x, word, n_samples=5, seed=1, sentence=d)
             for d, x in enumerate(lexicon_fit["xs"][:50])]
    averaged = np.mean([_f1([set(d[s][1]) for d in draws], lexicon_fit["gold"][:50]) for s in range(5)])
    assert averaged > 0.6
    assert all(np.isfinite(w) and w < 0 for d in draws for w, _ in d)  # log weights of parses under G'


def test_table_label_resampling_rederives_atoms() -> None:
    """A P atom "ab" cached as P -> W('ab') is re-derived as P -> W('a') W('b') when those two W atoms are
    far more probable than W('ab') (probability of that outcome > 0.999 here), with every invariant kept."""

    grammar = parse_grammar(TOY).bind("abc")
    rules = {grammar.rule_text(r): r for r in range(grammar.n_rules)}

    def word(text: str) -> tuple[Any, ...]:
        chars: tuple[Any, ...] = (rules["C -> Ch"], (rules[f"Ch -> {text[-1]!r}"],))
        for ch in reversed(text[:-1]):
            chars = (rules["C -> Ch C"], (rules[f"Ch -> {ch!r}"],), chars)
        return (rules["W -> C"], chars)

    w_keys = [word("a"), word("b"), word("ab")]
    p_key = (rules["P -> W"], word("ab"))
    params = OnlineParams(corpus_size=10, seed=0, table_labels=True)
    base = initial_state(grammar, seed=0)
    state = replace(base, tngs=(
        replace(base.tngs[0], atoms=tuple(atom_from_key(grammar, k) for k in w_keys),
                f_tilde=np.array([5000.0, 5000.0, 0.0])),
        replace(base.tngs[1], atoms=(atom_from_key(grammar, p_key),), f_tilde=np.array([7.0]))), decay=0.0)
    state = variational_parameters(state, replace(params, bias="none"))
    after = resample_table_labels(state, replace(params, bias="none"))
    (p_atom,) = after.tngs[1].atoms
    assert p_atom.key == (rules["P -> W W"], word("a"), word("b"))
    assert p_atom.yield_ids == tuple(grammar.encode("ab").tolist())  # the yield is kept
    assert after.tngs[1].f_tilde.tolist() == [7.0]  # and so is f~
    known = set(after.tngs[0].keys)
    assert all(k in known for tng in after.tngs for a in tng.atoms for _, k in a.refs)  # every reference resolves
    assert after.tngs[0].f_tilde.sum() == pytest.approx(10000.0)
    for tng in after.tngs:
        for a in tng.atoms:
            assert atom_from_key(grammar, a.key).yield_ids == a.yield_ids
    # the Words inside a cached P atom are segments too (cached atoms are leaves of sampled trees)
    s_sym, p_sym = grammar.nonterminals.index("S"), grammar.nonterminals.index("P")
    tree = SampledTrees(grammar.encode("ab"), np.array([0, 2]), np.array([s_sym, p_sym]), np.array([0, 0]),
                        np.array([2, 2]), np.array([KIND_UNARY, KIND_CACHED]), np.array([rules["S -> P"], 0]),
                        np.array([-1, -1]))
    w_sym = grammar.nonterminals.index("W")
    assert spans_of(grammar, tree, 0, w_sym, [t.keys for t in after.tngs]) == [(0, 1), (1, 2)]
    assert spans_of(grammar, tree, 0, p_sym, [t.keys for t in after.tngs]) == [(0, 2)]


def test_seed_state_matches_numpy_reference_and_keeps_every_atom() -> None:
    """The seed pass (PyAdaGram's ``seed``): one tree per sentence under the base PCFG, step tau^-kappa,
    counts unscaled when every sentence is given, TNGs sorted by Lambda with nothing removed, l stays 0."""
    grammar = parse_grammar(TOY).bind("abc")
    texts = ["abca", "cab", "abab", "bca", "abcab", "ca"]
    params = OnlineParams(corpus_size=len(texts), tau=4.0, kappa=0.7, prune_every=1, n_samples=5, seed=6)
    state0 = initial_state(grammar, seed=6)
    xs = _minibatch(grammar, texts)
    seeded, stats = seed_state(state0, xs, range(len(xs)), params)
    assert stats.n_samples == 1 and stats.n_sentences == len(texts) and seeded.minibatch == 0
    again = estep_sentences(grammar, prepare(state0), [t.keys for t in state0.tngs], xs, list(range(len(xs))),
                            n_samples=1, seed=6, epoch=0)
    np.testing.assert_array_equal(again.g, stats.g)
    eps = 4.0 ** -0.7
    ref = reference_update(grammar, [t.f_tilde for t in state0.tngs], [t.keys for t in state0.tngs],
                           state0.g_tilde, list(stats.f), list(stats.h), stats.g, len(texts), 1, len(texts), eps,
                           1.0)
    assert seeded.decay == pytest.approx(1.0 - eps, rel=1e-14)
    np.testing.assert_allclose(seeded.g_tilde / eps, stats.g, rtol=1e-12)  # corrected g~ = the counts
    np.testing.assert_allclose(seeded.gamma, ref["gamma"], rtol=1e-12)
    scores = ranking_scores(seeded, params, eps)
    for m, tng in enumerate(seeded.tngs):
        assert sorted(tng.keys) == sorted(ref["keys"][m]) == sorted(stats.h[m])  # every candidate kept
        assert np.all(np.diff(scores[m]) <= 0)  # sorted by Lambda
        by_key = dict(zip(ref["keys"][m], ref["f_tilde"][m]))
        np.testing.assert_allclose(tng.f_tilde, [by_key[k] for k in tng.keys], rtol=1e-12)
        np.testing.assert_allclose(tng.f_tilde / eps, [stats.h[m][k] for k in tng.keys], rtol=1e-12)
    # the online steps continue at l = 1 from the seeded state
    after, _ = fit_minibatch(seeded, xs[:2], [0, 1], params)
    assert after.minibatch == 1 and after.decay == pytest.approx((1.0 - eps) * (1.0 - 5.0 ** -0.7))
    with pytest.raises(ValueError, match="no sentences"):
        seed_state(state0, [], [], params)
    # G' log weight of sampled trees with cached atoms: rule weights and atom weights, summed node by node
    pcfg = prepare(after)
    trees = sample_trees(pcfg, inside_chart(pcfg, xs[4]), 4, seed=1, epoch=0, sentence=4)
    atom_w = {(int(n), int(a)): float(w) for n, a, w in zip(pcfg.entry_nt, pcfg.entry_atom, pcfg.entry_weight)}
    assert (trees.kind == KIND_CACHED).any()
    for s in range(4):
        nodes = range(int(trees.tree_ptr[s]), int(trees.tree_ptr[s + 1]))
        expected = sum(np.log(atom_w[(int(trees.symbol[p]), int(trees.ident[p]))]) if trees.kind[p] == KIND_CACHED
                       else np.log(pcfg.rule_weight[trees.ident[p]]) for p in nodes)
        assert tree_log_weight(pcfg, trees, s) == pytest.approx(expected, rel=1e-12)


#: <any> in the middle of the file, so new terminals' rules shift the numbers of the rules after it;
#: Vowel names its terminals, and its default alpha 1/2 must not move.
GROWING = """start Sentence
@ Word a=10 b=0.1 K=50
Sentence -> Word Sentence
Sentence -> Word
Word -> Chars
Chars -> Char Chars
Char -> <any>
Chars -> Vowel
Chars -> Char
Vowel -> 'a'
Vowel -> 'e'
"""


def test_rebind_state_renumbers_rules_and_moves_gamma_only_by_the_prior() -> None:
    spec = parse_grammar(GROWING)
    grammar = spec.bind("abcd")
    params = OnlineParams(corpus_size=30, tau=4.0, kappa=0.7, prune_every=2, n_samples=3, seed=4)
    state = initial_state(grammar, seed=4)
    for lo, texts in enumerate([["abca", "cab", "dab"], ["bad", "cade", "abba"], ["dad", "acab"]]):
        state, _ = fit_minibatch(state, _minibatch(grammar, texts), range(3 * lo, 3 * lo + len(texts)), params)
    grown_grammar = spec.bind([*grammar.terminals, "x", "z"])
    grown = rebind_state(state, grown_grammar, params)
    g = grown.grammar
    assert g.terminals == ("a", "e", "b", "c", "d", "x", "z") and g.n_rules == grammar.n_rules + 2
    # Rules are found again by their text; the two new ones are Char's, inserted before the rules after <any>.
    old_text = [grammar.rule_text(r) for r in range(grammar.n_rules)]
    new_text = [g.rule_text(r) for r in range(g.n_rules)]
    where = [new_text.index(t) for t in old_text]
    assert sorted(set(new_text) - set(old_text)) == ["Char -> 'x'", "Char -> 'z'"]
    assert where != list(range(grammar.n_rules))  # the rules after <any> moved
    # Char's default prior 1/n_Char shrank for every Char rule; Vowel's did not move.
    char_rules = [r for r in range(g.n_rules) if new_text[r].startswith("Char ->")]
    np.testing.assert_allclose(g.rule_alpha[char_rules], 1.0 / 7)
    # gamma = alpha + g~ + n(r, atoms): only the prior moved for old rules; a new rule's gamma is its prior;
    # the sticks (nu) do not depend on the terminals at all.
    np.testing.assert_allclose(grown.gamma[where] - state.gamma, g.rule_alpha[where] - grammar.rule_alpha, atol=1e-12)
    new_rules = [r for r in range(g.n_rules) if r not in where]
    np.testing.assert_array_equal(grown.gamma[new_rules], g.rule_alpha[new_rules])
    np.testing.assert_array_equal(grown.g_tilde[where], state.g_tilde)
    for old_t, new_t, n1, m1, n2, m2 in zip(state.tngs, grown.tngs, state.nu1, grown.nu1, state.nu2, grown.nu2):
        assert ["".join(g.terminals[i] for i in a.yield_ids) for a in new_t.atoms] == \
               ["".join(grammar.terminals[i] for i in a.yield_ids) for a in old_t.atoms]
        np.testing.assert_array_equal(new_t.f_tilde, old_t.f_tilde)
        np.testing.assert_array_equal(n1, m1)
        np.testing.assert_array_equal(n2, m2)
        for a_old, a_new in zip(old_t.atoms, new_t.atoms):  # the same trees, in the new rule numbers
            assert sorted((new_text[r], c) for r, c in a_new.rule_counts) == \
                   sorted((old_text[r], c) for r, c in a_old.rule_counts)
    # The grown state parses and learns sentences with the new characters.
    more, _ = fit_minibatch(grown, _minibatch(g, ["zax", "xaz", "zz"]), [8, 9, 10], params)
    assert any("z" in "".join(g.terminals[i] for i in a.yield_ids) for t in more.tngs for a in t.atoms)
    assert rebind_state(state, grammar, params) is state  # nothing new
    # Matched by name, so a binding that moves every terminal's code carries the state over all the same.
    moved = rebind_state(state, spec.bind("xabcd"), params)
    assert [[m.yield_ids for m in t.atoms] for t in moved.tngs] != [[m.yield_ids for m in t.atoms] for t in state.tngs]
    assert [["".join(moved.grammar.terminals[i] for i in m.yield_ids) for m in t.atoms] for t in moved.tngs] == \
           [["".join(grammar.terminals[i] for i in m.yield_ids) for m in t.atoms] for t in state.tngs]
    with pytest.raises(ValueError, match="lacks the state's symbols 'd'"):
        rebind_state(state, parse_grammar(GROWING.replace("Char -> <any>", "Char -> <any>\nChar -> 'q'")).bind("abc"),
                     params)
