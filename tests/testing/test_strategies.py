"""The shared hypothesis strategies draw what their docstrings promise (topicflow/testing/strategies.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topicflow.models.common.blocks import DocBlock, concat_blocks
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats
from topicflow.testing import strategies

SETTINGS = settings(max_examples=25, deadline=None)


def assert_valid_block(block: DocBlock) -> None:
    assert block.indptr.dtype == np.int64 and block.term_ids.dtype == np.int32 and block.counts.dtype == np.int32
    assert block.indptr[0] == 0 and np.all(np.diff(block.indptr) >= 0) and block.indptr[-1] == block.counts.size
    for row in range(block.n_docs):
        terms = block.term_ids[block.indptr[row]:block.indptr[row + 1]]
        assert np.all(np.diff(terms) > 0)  # sorted, no duplicates
    assert np.all(block.counts > 0)
    assert np.all((block.term_ids >= 0) & (block.term_ids < block.n_terms))
    assert block.doc_ids.dtype == object and len(set(block.doc_ids.tolist())) == block.n_docs


@SETTINGS
@given(dense=strategies.count_matrices(st.integers(0, 6), 5, max_count=4))
def test_count_matrices_have_the_shape_and_range_asked(dense: np.ndarray) -> None:
    assert dense.dtype == np.int64 and dense.shape[1] == 5 and dense.shape[0] <= 6
    assert dense.min(initial=0) >= 0 and dense.max(initial=0) <= 4


@SETTINGS
@given(required=strategies.count_matrices(st.integers(1, 6), empty_docs=True),
       forbidden=strategies.count_matrices(empty_docs=False),
       single=strategies.count_matrices(max_terms_per_doc=1))
def test_count_matrices_honour_empty_docs_and_terms_per_doc(required: np.ndarray, forbidden: np.ndarray,
                                                            single: np.ndarray) -> None:
    assert np.any(required.sum(axis=1) == 0)
    assert np.all(forbidden.sum(axis=1) > 0)
    assert np.all((single > 0).sum(axis=1) <= 1)


@SETTINGS
@given(block=strategies.doc_blocks(first_doc=17, language="fr"), data=st.data())
def test_doc_blocks_are_valid_and_cut_into_consecutive_pieces(block: DocBlock, data: st.DataObject) -> None:
    assert_valid_block(block)
    assert block.first_doc == 17 and block.language == "fr"
    cuts = data.draw(strategies.document_cuts(block.n_docs, max_parts=3))
    pieces = strategies.cut_documents(block, cuts)
    assert len(pieces) == len(cuts) + 1 <= 3
    joined = concat_blocks(pieces)
    for name in ("indptr", "term_ids", "counts", "doc_ids"):
        assert np.array_equal(getattr(joined, name), getattr(block, name))
    assert [p.first_doc for p in pieces] == [17 + c for c in [0, *cuts]]


@SETTINGS
@given(blocks=strategies.multilingual_blocks(("en", "de"), st.integers(1, 6), {"en": 4, "de": 9}, empty_docs=True))
def test_multilingual_blocks_hold_the_same_documents_in_every_language(blocks: dict[str, DocBlock]) -> None:
    en, de = blocks["en"], blocks["de"]
    assert list(blocks) == ["en", "de"] and (en.n_terms, de.n_terms) == (4, 9)
    assert np.array_equal(en.doc_ids, de.doc_ids) and en.first_doc == de.first_doc
    assert np.any((en.doc_lengths() == 0) & (de.doc_lengths() == 0))
    for block in blocks.values():
        assert_valid_block(block)
    pieces = strategies.cut_documents(blocks, [1])
    assert [strategies.n_docs_of(p) for p in pieces] == [1, en.n_docs - 1]


@SETTINGS
@given(alpha=strategies.positive_vectors(4), lam=strategies.positive_arrays((2, 3), min_value=0.5, max_value=1.5))
def test_positive_arrays_lie_in_their_bounds(alpha: np.ndarray, lam: np.ndarray) -> None:
    assert alpha.shape == (4,) and np.all((alpha >= 0.01) & (alpha <= 2.0))
    assert lam.shape == (2, 3) and np.all((lam >= 0.5) & (lam <= 1.5))


@SETTINGS
@given(stats=strategies.estep_stats(3, ("de", "en")), terms=strategies.topic_term_stats(2, n_terms=5, max_present=3))
def test_statistics_are_well_formed_and_free_of_negative_zeros(stats: EStepStats, terms: TopicTermStats) -> None:
    assert sorted(stats.topic_terms) == ["de", "en"] and stats.alpha_suff.shape == (3,)
    assert 0 <= stats.n_capped <= stats.n_docs
    for part in (*stats.topic_terms.values(), terms):
        assert part.term_ids.dtype == np.int64 and np.all(np.diff(part.term_ids) > 0)
        assert np.all(part.values >= 0) and not np.any(np.signbit(part.values))
    assert terms.values.shape == (2, terms.term_ids.size) and terms.term_ids.size <= 3
    assert np.all(terms.term_ids < 5)
    assert not np.any(np.signbit(stats.alpha_suff) & (stats.alpha_suff == 0))
