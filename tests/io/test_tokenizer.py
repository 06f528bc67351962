"""Tokenizer, term counts and vocabulary pruning."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topicflow.errors import InputError, InvalidParameterError
from topicflow.io.tokenizer import (
    LanguageCounts,
    PruneConfig,
    TermCounts,
    TokenizerConfig,
    count_document,
    load_builtin_stop_words,
    prune_vocabulary,
    tokenize,
)


def test_builtin_english_stop_words() -> None:
    words = load_builtin_stop_words("english")
    assert 280 <= len(words) <= 340
    assert {"the", "and", "of", "which", "themselves"} <= set(words)
    assert list(words) == sorted(set(words))


@pytest.mark.parametrize("config,text,expected", [
    (TokenizerConfig(), "The Cat sat on THE mat; a cat!", ["cat", "sat", "mat", "cat"]),
    (TokenizerConfig(lowercase=False, stop_words_name="none", stop_words=()), "The Cat the", ["The", "Cat", "the"]),
    (TokenizerConfig(min_length=4), "tree bee honey", ["tree", "honey"]),
    (TokenizerConfig(token_pattern=r"[a-z]+", min_length=1, stop_words_name="none", stop_words=()), "x1y22 zz", ["x", "y", "zz"]),
    (TokenizerConfig(), "", []),
    (TokenizerConfig(), "Straße ÉCOLE 東京", ["straße", "école", "東京"]),
])
def test_tokenize_examples(config: TokenizerConfig, text: str, expected: list[str]) -> None:
    assert tokenize(text, config) == expected


@given(st.text(max_size=200))
def test_tokenize_matches_plain_regex_reference(text: str) -> None:
    config = TokenizerConfig(stop_words_name="none", stop_words=(), min_length=1)
    assert tokenize(text, config) == re.findall(r"(?u)\b\w+\b", text.lower())


def test_stop_word_file_and_round_trip(tmp_path: Path) -> None:
    (tmp_path / "stop.txt").write_text("# mine\nfoo\n\nbar  \nfoo\n", encoding="utf-8")
    config = TokenizerConfig.from_options(stop_words=str(tmp_path / "stop.txt"))
    assert config.stop_words == ("bar", "foo") and config.stop_words_name == "file"
    assert tokenize("foo the bar baz", config) == ["the", "baz"]
    assert TokenizerConfig.from_dict(config.to_dict()) == config
    assert config.differences(TokenizerConfig()) == [
        "stop_words_name: 'file' != 'english'", "stop_words: 2 words != 302 words"]
    with pytest.raises(InputError, match="missing.txt' does not exist"):
        TokenizerConfig.from_options(stop_words=str(tmp_path / "missing.txt"))


def test_invalid_settings_raise() -> None:
    with pytest.raises(InvalidParameterError, match="not a valid regular expression"):
        TokenizerConfig(token_pattern="(")
    with pytest.raises(InvalidParameterError, match="min_length"):
        TokenizerConfig(min_length=0)
    with pytest.raises(InvalidParameterError, match="max_df_fraction"):
        PruneConfig(max_df_fraction=0.0)


bags = st.lists(st.dictionaries(st.sampled_from("abcde"), st.integers(1, 5), max_size=4), max_size=6)


def counts_of(docs: list[dict[str, int]]) -> TermCounts:
    total = TermCounts()
    for doc in docs:
        total = total.merge(count_document({"default": Counter(doc)}))
    return total


@given(a=bags, b=bags, c=bags)
def test_term_counts_merge_is_associative_commutative_with_identity(a: list, b: list, c: list) -> None:
    x, y, z = counts_of(a), counts_of(b), counts_of(c)
    assert x.merge(y).merge(z) == x.merge(y.merge(z)) == z.merge(y).merge(x)
    assert TermCounts().merge(x) == x.merge(TermCounts()) == x
    assert counts_of(a + b).merge(TermCounts()) == x.merge(y)
    assert x.merge(y).without(y).get("default") == x.get("default")


def test_prune_vocabulary_cuts_in_canonical_order() -> None:
    counts = LanguageCounts(Counter({"a": 5, "b": 2, "c": 2, "d": 1}), Counter({"a": 9, "b": 3, "c": 3, "d": 7}), 5)
    assert prune_vocabulary(counts, PruneConfig()).terms.tolist() == ["a", "d", "b", "c"]
    assert prune_vocabulary(counts, PruneConfig(min_df=2, max_df_fraction=0.9)).terms.tolist() == ["b", "c"]
    vocab = prune_vocabulary(counts, PruneConfig(max_vocab=2))
    assert vocab.terms.tolist() == ["a", "d"] and vocab.corpus_freq.tolist() == [9, 7]
