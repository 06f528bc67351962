"""The vectorized merges of the ingest tree equal the chained pairwise merges they replace.

``merge_summaries`` merges its children at once: term counts as Arrow tables
(:class:`~topicflow.io.tokenizer.TermTable`, one hash group-by), Counters with one group-by
(:meth:`~topicflow.io.tokenizer.LanguageCounts.merge_all`), id hashes with one ``np.unique``. The
reference is ``functools.reduce`` over the pairwise ``merge`` (Counter additions); the vocabulary
look-up of the write pass (:class:`~topicflow.tasks.ingest.VocabIndex`) is checked against dict gets.
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topicflow.io.corpus.id_index import hash_ids
from topicflow.io.tokenizer import LanguageCounts, TermCounts, TermTable
from topicflow.tasks.ingest import (
    IdHashes,
    PartitionSummary,
    VocabIndex,
    merge_summaries,
)

terms = st.sampled_from(["a", "b", "é", "東京", "x y", "", "zz", "\udc80"])
bag = st.dictionaries(terms, st.integers(1, 5), max_size=5)
language_counts = st.builds(lambda df, extra, n: LanguageCounts(Counter(df), Counter({t: c + extra for t, c in df.items()}), n),
                            bag, st.integers(0, 3), st.integers(0, 9))
term_counts = st.dictionaries(st.sampled_from(["en", "de"]), language_counts, max_size=2).map(TermCounts)


def pairwise(parts: list[TermCounts]) -> TermCounts:
    return functools.reduce(TermCounts.merge, parts, TermCounts())


def as_table(counts: TermCounts) -> TermTable | None:
    tables = []
    for lang, c in counts.languages.items():
        keys = list(c.doc_freq)
        found = TermTable.of(np.array(keys, dtype=object), np.array([c.doc_freq[k] for k in keys], np.int64),
                             np.array([c.corpus_freq[k] for k in keys], np.int64), c.n_docs, lang)
        if found is None:
            return None
        tables.append(found)
    return TermTable.merge_all(tables) if tables else TermTable({}, {})


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(term_counts, min_size=1, max_size=5))
def test_merge_all_equals_pairwise_merges(parts: list[TermCounts]) -> None:
    expected = pairwise(parts)
    assert TermCounts.merge_all(parts) == expected
    tables = [as_table(p) for p in parts]
    if all(t is not None for t in tables):             # no lone surrogate: the columnar route
        assert TermTable.merge_all(tables).to_counts() == expected
    summaries = [PartitionSummary(t if t is not None and i % 2 else p, IdHashes(), 1, {"bad": i})
                 for i, (p, t) in enumerate(zip(parts, tables))]          # columnar and Counter parts mixed
    merged = merge_summaries(*summaries)
    assert merged.with_counters().counts == expected
    assert (merged.n_records, merged.skipped) == (len(parts), {"bad": sum(range(len(parts)))} if len(parts) > 1
                                                  else {"bad": 0})


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=6), min_size=1, max_size=5))
def test_id_hashes_merge_all_equals_pairwise(groups: list[list[str]]) -> None:
    parts = [IdHashes.of(hash_ids(g)) for g in groups]
    chained, at_once = functools.reduce(IdHashes.merge, parts), IdHashes.merge_all(parts)
    np.testing.assert_array_equal(at_once.unique, chained.unique)
    np.testing.assert_array_equal(at_once.repeated, chained.repeated)
    assert at_once.unique.dtype == at_once.repeated.dtype == np.uint64


@given(vocab=st.lists(st.text(max_size=4), unique=True, max_size=8),
       wanted=st.lists(st.text(max_size=4), unique=True, max_size=8))
def test_vocab_index_ids_equal_dict_gets(vocab: list[str], wanted: list[str]) -> None:
    index = VocabIndex(vocab)
    terms = np.array(wanted, dtype=object)
    assert index.ids_of(terms).tolist() == [index.get(t, -1) for t in wanted]
    assert dict(index) == {t: i for i, t in enumerate(vocab)}
