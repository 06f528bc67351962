"""Pure vocabulary-growth helpers: prefix check, state and vocabulary growth, candidate promotion."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vocab_growth import check_vocabulary_prefix, grow_state, grow_vocabulary, promote_candidates
from topicflow.models.common.vocabulary import Vocabulary


def make_state(eta_en: float | np.ndarray = 0.1) -> LDAState:
    rng = np.random.default_rng(0)
    return LDAState(
        topic_word_var={"en": rng.uniform(1, 2, (3, 4)), "de": rng.uniform(1, 2, (3, 2))},
        doc_topic_prior=np.full(3, 0.5),
        topic_word_prior={"en": eta_en, "de": 0.05},
        topic_names=("tax", None, None),
    )


# ----------------------------------------------------------------------------- grow_state


def test_grow_state_scalar_prior_new_columns_equal_eta() -> None:
    state = make_state()
    grown = grow_state(state, {"en": 6, "de": 2}, base_prior=0.3)
    lam = grown.topic_word_var["en"]
    assert lam.shape == (3, 6) and lam.dtype == np.float64
    assert_array_equal(lam[:, :4], state.topic_word_var["en"])
    assert_array_equal(lam[:, 4:], np.full((3, 2), 0.1))  # lambda = eta for unseen terms, not base_prior
    assert grown.topic_word_prior["en"] == 0.1 and np.ndim(grown.topic_word_prior["en"]) == 0
    # Unchanged language: same array, same prior; the input state is not modified.
    assert grown.topic_word_var["de"] is state.topic_word_var["de"]
    assert state.topic_word_var["en"].shape == (3, 4)
    assert grown.topic_names == state.topic_names
    assert_array_equal(grown.doc_topic_prior, state.doc_topic_prior)


def test_grow_state_matrix_prior_gets_base_prior_columns() -> None:
    eta = np.arange(12, dtype=np.float64).reshape(3, 4) / 10 + 0.01  # informed: seeded words get more
    state = make_state(eta)
    grown = grow_state(state, {"en": 7}, base_prior=0.02)
    prior = grown.topic_word_prior["en"]
    assert isinstance(prior, np.ndarray) and prior.shape == (3, 7)
    assert_array_equal(prior[:, :4], eta)
    assert_array_equal(prior[:, 4:], np.full((3, 3), 0.02))
    assert_array_equal(grown.topic_word_var["en"][:, 4:], np.full((3, 3), 0.02))
    assert grown.topic_word_var["de"].shape == (3, 2)
    assert state.topic_word_prior["en"].shape == (3, 4)  # type: ignore[union-attr]


def test_grow_state_without_new_terms_is_a_no_op() -> None:
    state = make_state()
    grown = grow_state(state, {"en": 4}, base_prior=0.1)
    assert grown.topic_word_var["en"] is state.topic_word_var["en"]
    assert grow_state(state, {}, base_prior=0.1).topic_word_var == state.topic_word_var


@pytest.mark.parametrize(("sizes", "base", "message"), [
    ({"fr": 5}, 0.1, r"cannot grow language 'fr': the model has languages \['en', 'de'\]"),
    ({"en": 3}, 0.1, r"from 4 to 3 terms: vocabularies only grow"),
    ({"en": 5}, 0.0, r"base_prior must be a positive finite number, got 0.0"),
    ({"en": 5}, float("nan"), r"base_prior must be a positive finite number"),
])
def test_grow_state_rejects_bad_arguments(sizes: dict[str, int], base: float, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        grow_state(make_state(), sizes, base_prior=base)


# ----------------------------------------------------------------------------- prefix check


def test_prefix_check_counts_new_terms() -> None:
    kwargs = dict(language="en", model_path="m", store_path="s.zarr")
    assert check_vocabulary_prefix(["tax", "fox"], ["tax", "fox", "zebra", "yak"], **kwargs) == 2
    assert check_vocabulary_prefix(np.array(["tax"], dtype=object), np.array(["tax"], dtype=object), **kwargs) == 0
    assert check_vocabulary_prefix([], ["tax"], **kwargs) == 1


def test_prefix_check_names_first_differing_position_and_terms() -> None:
    with pytest.raises(VocabularyMismatchError) as info:
        check_vocabulary_prefix(["tax", "fox", "dog"], ["tax", "dog", "fox", "zebra"], language="en",
                                model_path="m", store_path="s.zarr")
    message = str(info.value)
    assert "language 'en' of model 'm' and store 's.zarr'" in message
    assert "term id 1 is 'fox' in the model but 'dog' in the store" in message
    assert "re-ingested" in message and "topicflow fit" in message and "topicflow infer" in message
    assert info.value.path == "s.zarr"


def test_prefix_check_model_with_terms_the_store_lacks() -> None:
    with pytest.raises(VocabularyMismatchError, match=r"model has 3 terms but the store only 2; from term id 2 "
                                                      r"\('dog'\) on.*topicflow infer"):
        check_vocabulary_prefix(["tax", "fox", "dog"], ["tax", "fox"], language="default",
                                model_path="m", store_path="s")


# ----------------------------------------------------------------------------- vocabularies


def test_grow_vocabulary_keeps_model_copy_and_adds_store_tail() -> None:
    model = Vocabulary(np.array(["tax", "fox"], dtype=object), np.array([5, 4]), np.array([9, 8]))
    store = Vocabulary(np.array(["tax", "fox", "zebra"], dtype=object), np.array([6, 4, 2]), np.array([10, 8, 3]))
    grown = grow_vocabulary(model, store)
    assert grown.terms.tolist() == ["tax", "fox", "zebra"]
    assert grown.doc_freq.tolist() == [5, 4, 2] and grown.corpus_freq.tolist() == [9, 8, 3]
    assert grown.doc_freq.dtype == np.int64 and grown.index["zebra"] == 2
    with pytest.raises(InvalidParameterError, match="only grow"):
        grow_vocabulary(store, model)


def test_promote_candidates_splits_on_doc_freq_in_canonical_order() -> None:
    vocab = Vocabulary.from_counts({"tax": 3, "fox": 2}, {"tax": 5, "fox": 2})
    candidates = Vocabulary.from_counts({"zebra": 2, "yak": 3, "quagga": 1, "emu": 2},
                                        {"zebra": 4, "yak": 3, "quagga": 7, "emu": 4})
    grown, rest = promote_candidates(vocab, candidates, 2)
    # Candidates keep their canonical order: corpus freq desc, doc freq desc, term.
    assert grown.terms.tolist() == ["tax", "fox", "emu", "zebra", "yak"]
    assert grown.doc_freq.tolist() == [3, 2, 2, 2, 3] and grown.corpus_freq.tolist() == [5, 2, 4, 4, 3]
    assert rest.terms.tolist() == ["quagga"] and rest.doc_freq.tolist() == [1] and rest.corpus_freq.tolist() == [7]
    none, everything = promote_candidates(vocab, candidates, 10)
    assert none.terms.tolist() == ["tax", "fox"] and len(everything) == 4
    empty_grown, empty_rest = promote_candidates(vocab, Vocabulary.empty(), 1)
    assert len(empty_grown) == 2 and len(empty_rest) == 0
    with pytest.raises(InvalidParameterError, match="promote_min_df must be a positive integer"):
        promote_candidates(vocab, candidates, 0)
