"""The batch tokenizer gives exactly the Python tokenizer's tokens, on any text and every setting.

The reference is :func:`topicflow.io.tokenizer.tokenize` (Python ``re`` on one lowercased text),
which is itself checked against ``re.findall`` in ``test_tokenizer.py``; the batch tokenizer's
vectorized path (NumPy over UTF-8 bytes, pyarrow dictionary encoding) must agree token for token,
and its terms and ids must be those of the plain-Python batch path; so must ``tokenize_arrow``, which
ingest uses on the Arrow texts of the JSON reader (Arrow's lowercasing for ASCII texts).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topicflow.io.tokenizer import (
    DEFAULT_TOKEN_PATTERN,
    RUN_PATTERNS,
    TokenBatch,
    TokenizerConfig,
    _tokenize_python,
    tokenize,
    tokenize_arrow,
    tokenize_batch,
)

#: Characters where tokenizers disagree: case folding that changes length or depends on context
#: ('İ' -> 'i̇', 'ß', final sigma), combining marks (not \w for Python), digits of other scripts,
#: apostrophes, underscores, joiners, letters of many scripts, non-BMP letters and digits.
TRICKY = ("İıIißẞΣσςΑΒΓ ΟΔΟΣ ǅǄǆ Ωω K Å ﬁ ŉ ΐ " "e\u0301\u0308\u20dd" "'’‘`-_" "\u200c\u200d\u00ad\u2060"
          "0123456789٣٤۵߁१২௩๓႓①½²³Ⅻↂ〇" "東京日本語한국어ไทยעבריתالعربيةᏣᎳᎩ" "𝐀𝐚𝟎𝟙𐐀𐐨🙂\U0001F600"
          " \t\n\r.,;:!?()[]{}\"/\\")

tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=60)
any_text = st.text(max_size=60)
texts_strategy = st.lists(st.one_of(tricky_text, any_text), max_size=6)

CONFIGS = [
    TokenizerConfig(),
    TokenizerConfig(lowercase=False),
    TokenizerConfig(min_length=1, stop_words_name="none", stop_words=()),
    TokenizerConfig(min_length=3, stop_words_name="file", stop_words=("straße", "σας", "東京", "İi", "the")),
    TokenizerConfig(lowercase=False, min_length=1, stop_words_name="file", stop_words=("Σ", "ß")),
    *(TokenizerConfig(token_pattern=p, min_length=1) for p in RUN_PATTERNS if p != DEFAULT_TOKEN_PATTERN),
    TokenizerConfig(token_pattern=r"[^\W\d]+", min_length=1),  # not a run pattern: the Python path
]


def check_batch(texts: list[str], config: TokenizerConfig) -> TokenBatch:
    batch = tokenize_batch(texts, config)
    assert [batch.tokens(i) for i in range(len(texts))] == [tokenize(t, config) for t in texts]
    reference = _tokenize_python(texts, config)
    assert batch.terms.tolist() == reference.terms.tolist()
    assert batch.token_ids.dtype == np.int32 and batch.indptr.dtype == np.int64
    np.testing.assert_array_equal(batch.token_ids, reference.token_ids)
    np.testing.assert_array_equal(batch.indptr, reference.indptr)
    return batch


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.token_pattern}-{c.lowercase}-{c.min_length}")
@settings(max_examples=30, deadline=None)
@given(texts=texts_strategy)
def test_batch_tokens_equal_python_tokens(config: TokenizerConfig, texts: list[str]) -> None:
    check_batch(texts, config)


@given(texts=texts_strategy)
@settings(deadline=None)
def test_bags_are_the_per_text_unique_counts(texts: list[str]) -> None:
    batch = tokenize_batch(texts, TokenizerConfig(min_length=1, stop_words_name="none", stop_words=()))
    indptr, term_ids, counts = batch.bags()
    for i in range(len(texts)):
        ids, expected = np.unique(batch.token_ids[batch.indptr[i]:batch.indptr[i + 1]], return_counts=True)
        np.testing.assert_array_equal(term_ids[indptr[i]:indptr[i + 1]], ids)
        np.testing.assert_array_equal(counts[indptr[i]:indptr[i + 1]], expected)


def test_every_code_point_is_classified_and_lowercased_as_python_does() -> None:
    # Each code point between spaces, and the same code points as one run: word-ness, case mapping
    # and length of every character of Unicode, in both the isolated and the joined form.
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    config = TokenizerConfig(min_length=1, stop_words_name="none", stop_words=())
    chunks = [chars[i:i + 4096] for i in range(0, len(chars), 4096)]
    check_batch([" ".join(chunk) for chunk in chunks] + ["".join(chunk) for chunk in chunks], config)


def test_texts_with_lone_surrogates_take_the_python_path() -> None:
    texts = ["bad \udc80 surrogate word", "good text"]
    batch = check_batch(texts, TokenizerConfig())
    assert batch.tokens(0) == ["bad", "surrogate", "word"]


def test_empty_batches_and_empty_texts() -> None:
    assert check_batch([], TokenizerConfig()).indptr.tolist() == [0]
    assert check_batch(["", "the of", ""], TokenizerConfig()).indptr.tolist() == [0, 0, 0, 0]


# ----------------------------------------------------------------------------- Arrow texts (ingest's path)

def check_arrow(texts: list[str | None], config: TokenizerConfig, start: int = 0) -> TokenBatch:
    """``tokenize_arrow`` on ``texts[start:]`` as a (sliced) Arrow array equals the batch tokenizer's."""
    array = pa.array(texts, pa.string()).slice(start)
    batch = tokenize_arrow(array, config)
    rest = ["" if t is None else t for t in texts[start:]]
    reference = _tokenize_python(rest, config)
    assert [batch.tokens(i) for i in range(len(rest))] == [tokenize(t, config) for t in rest]
    assert batch.terms.tolist() == reference.terms.tolist()
    np.testing.assert_array_equal(batch.token_ids, reference.token_ids)
    np.testing.assert_array_equal(batch.indptr, reference.indptr)
    return batch


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.token_pattern}-{c.lowercase}-{c.min_length}")
@settings(max_examples=30, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), tricky_text, any_text, st.text(alphabet="AbC dEf,", max_size=20)),
                      max_size=6), start=st.integers(0, 2))
def test_arrow_tokens_equal_python_tokens(config: TokenizerConfig, texts: list[str | None], start: int) -> None:
    # Some texts pure ASCII (Arrow lowercases them), some not (Python does), nulls, sliced arrays.
    check_arrow(texts, config, min(start, len(texts)))


def test_arrow_on_every_code_point_and_on_empty_input() -> None:
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    chunks = [" ".join(chars[i:i + 4096]) for i in range(0, len(chars), 4096)]
    check_arrow(chunks + ["ASCII Only TEXT", None], TokenizerConfig(min_length=1, stop_words_name="none", stop_words=()))
    assert check_arrow([], TokenizerConfig()).indptr.tolist() == [0]
    assert check_arrow([None, "", "the of"], TokenizerConfig()).indptr.tolist() == [0, 0, 0, 0]
