"""Speed of the adaptor-grammar inside kernel and tree sampling (``topicflow.models.adaptor_grammar.inside``).

Sentences are KJV passages (``topicflow/data/kjv_passages.jsonl.gz``), lowercased, letters only, spaces
removed, cut into character sequences of each length L. For each grammar (unigram, collocation) and each
TNG size (0 = a fresh model parsed by the base PCFG; N = the N most frequent KJV words cached as Word
atoms, and for collocation the N most frequent word bigrams as Collocation atoms, with random sticks),
it times

- ``inside``: :func:`inside_chart` alone (the trie walk of cached yields included);
- ``inside+sample``: the chart plus 10 tree draws ([Z] footnote 5) and the f/g/h counting of
  :func:`estep_sentences` (what one E-step costs per sentence).

For the ``infvoc-lda`` grammar ([Z] section 8.4.2) a sentence is one token: its document's pseudo-word
``'_j'`` (j cycling through 1..D) and then the word's characters (KJV words of 3+ letters, in order);
``--docs`` sets D (the grammar has D ``Sentence -> Doc_j`` and D x K ``Doc_j -> '_j' Topic_i`` rules),
``--topics`` K, and N atoms are the N most frequent words cached under the topics in turn; the rules'
posterior is flat (gamma = 1). ``--lengths``
does not apply (the row's L is the mean token length + 1).

Rates are sentences per second, best of ``--repeats`` runs (wall clock) after a numba warm-up. The
machine may be shared: run it with ``nice`` and read the numbers as contended unless the machine is quiet.

Usage (one command per table)::

    nice .venv/bin/python benchmarks/bench_adaptor_grammar_inside.py [--lengths 10 20 40 80]
        [--atoms 0 1000] [--sentences 200] [--repeats 3] [--json-only]
    nice .venv/bin/python benchmarks/bench_adaptor_grammar_inside.py --grammars infvoc-lda --docs 500 2000
        [--topics 3000] [--atoms 0 1000]
"""
from __future__ import annotations

import argparse
import gzip
import json
import platform
import re
import time
from collections import Counter
from importlib import resources

import numpy as np

from topicflow.models.adaptor_grammar import (
    atom_from_key,
    derived_pcfg,
    estep_sentences,
    inside_chart,
    load_grammar,
)
from topicflow.models.adaptor_grammar.online import initial_state


def kjv_words() -> list[str]:
    raw = (resources.files("topicflow") / "data" / "kjv_passages.jsonl.gz").read_bytes()
    words: list[str] = []
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        words.extend(re.findall(r"[a-z]+", json.loads(line)["text"].lower()))
    return words


def rule_ids(grammar, lhs_names) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The ids of the rules of the named left-hand sides, by their text (not every rule: infvoc-lda has D K)."""
    codes = [grammar.nonterminals.index(name) for name in lhs_names if name in grammar.nonterminals]
    return {grammar.rule_text(int(r)): int(r) for r in np.flatnonzero(np.isin(grammar.rule_lhs, codes))}


def word_key(grammar, word: str, rules: dict[str, int] | None = None) -> tuple:  # type: ignore[no-untyped-def]
    """The tree Word -> Chars -> Char Chars ... -> Char 'x' of a word, as a key (see online.py)."""
    nt = grammar.nonterminals
    rules = rule_ids(grammar, ["Word", "Chars", "Char"]) if rules is None else rules
    chars: tuple = (rules["Chars -> Char"], (rules[f"Char -> {word[-1]!r}"],))
    for ch in reversed(word[:-1]):
        chars = (rules["Chars -> Char Chars"], (rules[f"Char -> {ch!r}"],), chars)
    del nt
    return (rules["Word -> Chars"], chars)


def colloc_key(grammar, pair: tuple[str, str]) -> tuple:  # type: ignore[no-untyped-def]
    rules = {grammar.rule_text(r): r for r in range(grammar.n_rules)}
    words = (rules["Words -> Word Words"], word_key(grammar, pair[0]),
             (rules["Words -> Word"], word_key(grammar, pair[1])))
    return (rules["Collocation -> Words"], words)


def setup(name: str, n_atoms: int, words: list[str], seed: int):  # type: ignore[no-untyped-def]
    grammar = load_grammar(name).bind("abcdefghijklmnopqrstuvwxyz")
    rng = np.random.default_rng(seed)
    state = initial_state(grammar, seed=seed)
    keys: list[list[tuple]] = [[] for _ in grammar.adapted]
    if n_atoms:
        top = [w for w, _ in Counter(words).most_common(n_atoms)]
        for m, c in enumerate(grammar.adapted):
            if grammar.nonterminals[c] == "Word":
                keys[m] = [word_key(grammar, w) for w in top]
            else:
                pairs = [p for p, _ in Counter(zip(words, words[1:])).most_common(n_atoms)]
                keys[m] = [colloc_key(grammar, p) for p in pairs]
    yields = [[atom_from_key(grammar, k).yield_ids for k in ks] for ks in keys]
    nu1 = [rng.uniform(1.0, 50.0, len(ks)) for ks in keys]
    nu2 = [rng.uniform(100.0, 5000.0, len(ks)) for ks in keys]
    return grammar, derived_pcfg(grammar, state.gamma, yields, nu1, nu2), keys


def setup_infvoc(n_docs: int, n_topics: int, n_atoms: int, words: list[str], seed: int):  # type: ignore[no-untyped-def]
    """The infvoc-lda grammar for D documents and K topics, the N most frequent words cached in turn."""
    alphabet = sorted(set("".join(words))) + [f"_{j}" for j in range(1, n_docs + 1)]
    grammar = load_grammar("infvoc-lda", D=n_docs, K=n_topics).bind(alphabet)
    rng = np.random.default_rng(seed)
    gamma = np.ones(grammar.n_rules)  # a flat posterior: initial_state's random gamma underflows K = 3,000 rules
    topics = [grammar.nonterminals[c] for c in grammar.adapted]
    rules = rule_ids(grammar, ["Word", "Chars", "Char", *topics])
    keys: list[list[tuple]] = [[] for _ in grammar.adapted]
    for rank, w in enumerate(w for w, _ in Counter(words).most_common(n_atoms)):
        m = rank % len(grammar.adapted)
        keys[m].append((rules[f"{topics[m]} -> Word"], word_key(grammar, w, rules)))
    yields = [[atom_from_key(grammar, k).yield_ids for k in ks] for ks in keys]
    nu1 = [rng.uniform(1.0, 50.0, len(ks)) for ks in keys]
    nu2 = [rng.uniform(100.0, 5000.0, len(ks)) for ks in keys]
    return grammar, derived_pcfg(grammar, gamma, yields, nu1, nu2), keys


def time_case(name: str, n_atoms: int, length: int, words: list[str], n_sentences: int, repeats: int,
              n_docs: int = 0, n_topics: int = 0) -> dict[str, object]:
    if name == "infvoc-lda":
        grammar, pcfg, keys = setup_infvoc(n_docs, n_topics, n_atoms, words, seed=0)
        tokens = [w for w in words if len(w) >= 3][:n_sentences]
        sentences = [grammar.encode([f"_{i % n_docs + 1}", *w]) for i, w in enumerate(tokens)]
        length = round(float(np.mean([len(x) for x in sentences])))
    else:
        grammar, pcfg, keys = setup(name, n_atoms, words, seed=0)
        text = "".join(words)
        sentences = [grammar.encode(text[i * length:(i + 1) * length]) for i in range(n_sentences)]
    inside_chart(pcfg, sentences[0])  # numba warm-up (compile or load the cache)
    estep_sentences(grammar, pcfg, keys, sentences[:2], [0, 1], n_samples=10, seed=0, epoch=1)
    best_inside = best_full = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for x in sentences:
            inside_chart(pcfg, x)
        best_inside = min(best_inside, time.perf_counter() - start)
        start = time.perf_counter()
        estep_sentences(grammar, pcfg, keys, sentences, range(n_sentences), n_samples=10, seed=0, epoch=1)
        best_full = min(best_full, time.perf_counter() - start)
    return {"grammar": name, "n_rules": grammar.n_rules, "n_docs": n_docs, "n_topics": n_topics,
            "n_atoms": n_atoms, "length": length,
            "n_sentences": n_sentences, "inside_sentences_per_s": n_sentences / best_inside,
            "estep_sentences_per_s": n_sentences / best_full}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--atoms", type=int, nargs="+", default=[0, 1000])
    parser.add_argument("--grammars", nargs="+", default=["unigram", "collocation"])
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--docs", type=int, nargs="+", default=[500, 2000], help="D of infvoc-lda.")
    parser.add_argument("--topics", type=int, default=3000, help="K of infvoc-lda ([Z]: 3,000).")
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    words = kjv_words()
    rows = []
    for name in args.grammars:
        for n_atoms in args.atoms:
            cases = [(0, d) for d in args.docs] if name == "infvoc-lda" else [(length, 0) for length in args.lengths]
            for length, n_docs in cases:
                row = time_case(name, n_atoms, length, words, args.sentences, args.repeats,
                                n_docs=n_docs, n_topics=args.topics if n_docs else 0)
                row["machine"] = platform.machine()
                print(json.dumps(row), flush=True)
                rows.append(row)
    if not args.json_only:
        print()
        print(f"{'grammar':<12}{'D':>6}{'atoms':>7}{'L':>5}{'inside sent/s':>16}{'E-step sent/s':>16}")
        for r in rows:
            print(f"{r['grammar']:<12}{r['n_docs']:>6}{r['n_atoms']:>7}{r['length']:>5}"
                  f"{r['inside_sentences_per_s']:>16.0f}{r['estep_sentences_per_s']:>16.0f}")


if __name__ == "__main__":
    main()
