"""The pieces of the held-out protocols: exact mergeable sums, per-document completion, ordered splits."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from tests.reference.corpora import lda_block
from topicflow.errors import InvalidParameterError
from topicflow.metrics.heldout import (
    HeldoutStats,
    bag_token_sequences,
    completion_doc_log_likelihood,
    completion_log_likelihood,
    join_language_sequences,
    merge_heldout_stats,
    ordered_term_ids,
    split_doc_tokens,
    split_ordered_tokens,
)
from topicflow.models.common.blocks import OrderedBlock, block_from_csr
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.models.lda.vb.layout import prepare_topics
from topicflow.models.lda.vb.params import VBParams

finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False)


@given(values=st.lists(finite, min_size=0, max_size=30), cuts=st.lists(st.integers(0, 30), max_size=4),
       data=st.data())
def test_merged_sum_is_the_exactly_rounded_sum_in_any_grouping_and_order(values: list[float], cuts: list[int],
                                                                         data: st.DataObject) -> None:
    exact = float(sum((Fraction(v) for v in values), Fraction(0)))
    bounds = sorted({0, len(values), *[min(c, len(values)) for c in cuts]})
    parts = [HeldoutStats.from_documents(np.array(values[a:b]), np.ones(b - a, dtype=np.int64))
             for a, b in itertools.pairwise(bounds)]
    order = data.draw(st.permutations(range(len(parts))))
    merged = merge_heldout_stats(*(parts[i] for i in order))
    assert merged.log_lik == exact  # correctly rounded, whatever the partition and order
    assert merged.n_docs == merged.n_tokens == len(values)
    assert merged.merge(HeldoutStats.zeros()) == merged


def test_impossible_documents_make_the_sum_minus_infinity() -> None:
    stats = HeldoutStats.from_documents(np.array([-1.0, -np.inf, -2.0]), np.array([1, 2, 3]))
    assert stats.log_lik == -math.inf and stats.n_impossible == 1 and stats.perplexity == math.inf
    assert HeldoutStats.from_documents(np.array([-1.0]), np.array([2])).perplexity == pytest.approx(math.exp(0.5))
    assert math.isnan(HeldoutStats.zeros().perplexity)
    with pytest.raises(InvalidParameterError, match="NaN"):
        HeldoutStats.from_documents(np.array([np.nan]), np.array([1]))


def test_per_document_completion_is_the_fold_in_score_of_each_document() -> None:
    rng = np.random.default_rng(3)
    topic_word = rng.dirichlet(np.full(20, 0.3), size=3)
    block = lda_block(15, topic_word, 0.3, seed=4, doc_len=12)
    observed, heldout = split_doc_tokens(block, seed=2)
    params = VBParams(n_topics=3)
    doc_ll, doc_n = completion_doc_log_likelihood(observed, heldout, {"default": topic_word}, 0.3, params)
    theta = fold_in_block(observed, {"default": topic_word}, 0.3, params)
    for d in range(block.n_docs):
        bag = heldout.doc_bag(d)
        want = sum(n * math.log(theta[d] @ topic_word[:, w]) for w, n in bag.items())
        assert doc_ll[d] == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert doc_n[d] == sum(bag.values())
    total, n_tokens = completion_log_likelihood(observed, heldout, {"default": topic_word}, 0.3, params)
    assert total == math.fsum(doc_ll) and n_tokens == heldout.n_tokens


def test_polylingual_completion_shares_theta_across_languages() -> None:
    rng = np.random.default_rng(5)
    en, de = rng.dirichlet(np.full(8, 0.5), size=2), rng.dirichlet(np.full(5, 0.5), size=2)
    blocks = {"en": block_from_csr(sp.csr_matrix(rng.integers(0, 3, size=(4, 8))), language="en"),
              "de": block_from_csr(sp.csr_matrix(rng.integers(0, 3, size=(4, 5))), language="de")}
    split = {lang: split_doc_tokens(b, seed=1) for lang, b in blocks.items()}
    observed = {lang: s[0] for lang, s in split.items()}
    heldout = {lang: s[1] for lang, s in split.items()}
    params = VBParams(n_topics=2)
    doc_ll, doc_n = completion_doc_log_likelihood(observed, heldout, {"en": en, "de": de}, 0.5, params)
    theta = fold_in_block(observed, {"en": en, "de": de}, 0.5, params)
    for d in range(4):
        want = sum(n * math.log(theta[d] @ phi[:, w]) for lang, phi in (("en", en), ("de", de))
                   for w, n in heldout[lang].doc_bag(d).items())
        assert doc_ll[d] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert doc_n.sum() == heldout["en"].n_tokens + heldout["de"].n_tokens


def test_first_half_split_by_hand() -> None:
    # Reading order: doc 0 = [2, 0, 1, 0, 2] (3 observed), doc 1 = [] , doc 2 = [1] (1 observed).
    indptr, terms = np.array([0, 5, 5, 6]), np.array([2, 0, 1, 0, 2, 1])
    bag = block_from_csr(sp.csr_matrix(np.array([[2, 1, 2], [0, 0, 0], [0, 1, 0]])), first_doc=7)
    observed, heldout = split_ordered_tokens(indptr, terms, bag)
    assert observed.to_csr().toarray().tolist() == [[1, 1, 1], [0, 0, 0], [0, 1, 0]]
    assert heldout.to_csr().toarray().tolist() == [[1, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert observed.first_doc == heldout.first_doc == 7 and list(heldout.doc_ids) == list(bag.doc_ids)
    observed, heldout = split_ordered_tokens(indptr, terms, bag, fraction=0.2)
    assert observed.to_csr().toarray().tolist()[0] == [0, 0, 1]  # floor(0.2 * 5 + 0.5) = 1 observed
    with pytest.raises(InvalidParameterError, match="fraction"):
        split_ordered_tokens(indptr, terms, bag, fraction=1.0)
    with pytest.raises(InvalidParameterError, match="do not fit"):
        split_ordered_tokens(indptr, terms + 1, bag)


def test_ordered_term_ids_drop_oov_and_unknown_terms_and_keep_order() -> None:
    block = OrderedBlock(indptr=np.array([0, 5, 7]), tokens=np.array([3, -1, 0, 2, 3, -2, 1], dtype=np.int32),
                         oov_terms=np.array(["xx", "yy"], dtype=object), doc_ids=np.array(["a", "b"], dtype=object),
                         first_doc=0, n_terms=4)
    indptr, terms = ordered_term_ids(block)
    assert indptr.tolist() == [0, 4, 5] and terms.tolist() == [3, 0, 2, 3, 1]
    # A grown store: the map covers more terms than the shard's vocabulary; term 2 is unknown to the model.
    indptr, terms = ordered_term_ids(block, np.array([10, 11, -1, 13, 14]))
    assert indptr.tolist() == [0, 3, 4] and terms.tolist() == [13, 10, 13, 11]
    with pytest.raises(InvalidParameterError, match="cover"):
        ordered_term_ids(block, np.array([0, 1]))


def test_token_sequences_join_languages_per_document_in_model_order() -> None:
    topics = prepare_topics({"en": np.ones((1, 3)), "de": np.ones((1, 2))})
    en = block_from_csr(sp.csr_matrix(np.array([[0, 2, 1], [0, 0, 0]])), language="en")
    de = block_from_csr(sp.csr_matrix(np.array([[1, 0], [0, 2]])), language="de")
    indptr, terms = bag_token_sequences({"de": de, "en": en}, topics)
    assert indptr.tolist() == [0, 4, 6] and terms.tolist() == [1, 1, 2, 3, 4, 4]
    with pytest.raises(InvalidParameterError, match="do not fit"):
        join_language_sequences({"fr": (np.array([0]), np.array([], dtype=np.int64))}, topics)
    with pytest.raises(InvalidParameterError, match="different numbers of documents"):
        join_language_sequences({"en": (np.array([0, 1]), np.array([0])), "de": (np.array([0]), np.array([]))},
                                topics)
