"""Topic coherence math and counting: the papers' brute force, gensim's CoherenceModel, and bad input."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.reference import coherence_numpy as ref
from topicflow.errors import InvalidParameterError
from topicflow.metrics import CoherenceResult, coherence
from topicflow.metrics.confirmation import (
    EPSILON,
    MEASURES,
    c_v,
    one_one,
    one_pre,
    u_mass,
)
from topicflow.metrics.cooccurrence import (
    CooccurrenceCounts,
    PairIndex,
    RelevantWords,
    count_documents,
    count_windows,
)
from topicflow.metrics.topic_coherence import texts_block
from topicflow.models.common.blocks import OrderedBlock

VOCAB = [f"w{i:02d}" for i in range(30)]


def random_texts(seed: int, n_texts: int = 120, max_len: int = 40) -> list[list[str]]:
    """Zipf-distributed tokens (many repeats inside a window), lengths from 0 up, a few one-token texts."""
    rng = np.random.default_rng(seed)
    texts = [[VOCAB[i % len(VOCAB)] for i in rng.zipf(1.4, size=int(rng.integers(0, max_len)))]
             for _ in range(n_texts)]
    return texts + [[], ["w01"], ["w02", "w02"]]


def random_topics(seed: int, n_topics: int = 4, size: int = 7) -> list[list[str]]:
    rng = np.random.default_rng(seed + 1000)
    return [list(rng.choice(VOCAB[:20], size=size, replace=False)) for _ in range(n_topics)]


def gensim_per_topic(topics: list[list[str]], texts: list[list[str]], measure: str, window: int | None,
                     dictionary_texts: list[list[str]] | None = None) -> list[float]:
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    dictionary = Dictionary(dictionary_texts if dictionary_texts is not None else texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary, coherence=measure,
                               window_size=window, topn=max(len(t) for t in topics), processes=1)
        return [float(v) for v in model.get_coherence_per_topic()]


def assert_close(actual: list[float] | tuple[float, ...], expected: list[float], rtol: float = 1e-9) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=0)


# ----------------------------------------------------------------------------- the papers' definitions


@pytest.mark.parametrize("sets", ["gensim", "exact"])
@pytest.mark.parametrize(("measure", "window"), [("u_mass", None), ("c_uci", 10), ("c_npmi", 10), ("c_v", 110),
                                                 ("c_v", 4), ("c_uci", 1), ("c_npmi", 3)])
def test_matches_the_brute_force_reference(measure: str, window: int | None, sets: str) -> None:
    texts, topics = random_texts(1), random_topics(1)
    kwargs = {} if measure == "u_mass" else {"windows": sets}
    result = coherence(topics, texts, measure=measure, window=window, **kwargs)
    expected = ref.coherence(topics, texts, measure, window, sets=sets)
    assert_close(result.per_topic, expected)
    assert result.mean == pytest.approx(float(np.mean(expected)), rel=1e-12)
    assert result.topics == tuple(tuple(t) for t in topics)


def test_gensim_window_sets_differ_from_the_exact_ones_only_when_a_word_repeats() -> None:
    texts = [["a", "b", "a", "c", "d"]]
    block, terms = texts_block(texts)
    relevant = RelevantWords.in_vocabulary(["a", "b", "c", "d"], terms)
    pairs = PairIndex.from_topics([np.arange(4)], 4)
    gensim = count_windows(block, relevant, pairs, window=3)
    exact = count_windows(block, relevant, pairs, window=3, exact=True)
    # windows: [a b a] [b a c] [a c d]; gensim drops "a" when the first "a" leaves, though one is left
    assert gensim.occurrences.tolist() == [1, 2, 2, 1] and exact.occurrences.tolist() == [3, 2, 2, 1]
    assert gensim.n_units == exact.n_units == 3
    distinct = [["a", "b", "c", "d", "e"]]
    block, terms = texts_block(distinct)
    relevant = RelevantWords.in_vocabulary(["a", "b", "c", "d"], terms)
    assert np.array_equal(count_windows(block, relevant, pairs, window=2).pair_counts,
                          count_windows(block, relevant, pairs, window=2, exact=True).pair_counts)


def test_window_count_follows_gensim_num_docs() -> None:
    texts = [[], ["a"], ["a", "b", "c"], ["a", "b", "c", "d", "e", "f"]]
    block, terms = texts_block(texts)
    relevant = RelevantWords.in_vocabulary(["a", "b"], terms)
    pairs = PairIndex.from_topics([np.arange(2)], 2)
    counts = count_windows(block, relevant, pairs, window=3)
    # empty text: one (empty) window; shorter or equal: one; longer: n - w + 1
    assert counts.n_units == 1 + 1 + 1 + 4
    assert counts.occurrences.tolist() == [3, 3] and counts.pair_counts.tolist() == [2]


def test_segmentations_are_gensims() -> None:
    from gensim.topic_coherence import segmentation

    topic = np.array([10, 11, 12, 13])
    pre = [(topic[i], topic[j]) for i, j in zip(*one_pre(4))]
    assert pre == [tuple(p) for p in segmentation.s_one_pre([topic])[0]]
    one = [(topic[i], topic[j]) for i, j in zip(*one_one(4))]
    assert one == [tuple(p) for p in segmentation.s_one_one([topic])[0]]


def test_measure_table_matches_gensim() -> None:
    from gensim.models.coherencemodel import SLIDING_WINDOW_SIZES
    from gensim.topic_coherence.direct_confirmation_measure import (
        EPSILON as GENSIM_EPSILON,
    )

    assert EPSILON == GENSIM_EPSILON
    for name, measure in MEASURES.items():
        assert measure.default_window == SLIDING_WINDOW_SIZES[name]


def test_never_cooccurring_words_get_the_epsilon_values() -> None:
    counts = np.array([[4, 0], [0, 2]])
    n = 10
    assert u_mass(counts, n) == pytest.approx(math.log(EPSILON / 0.4))
    npmi = math.log(EPSILON / (0.4 * 0.2)) / -math.log(EPSILON)
    assert MEASURES["c_npmi"].confirm(counts, n) == pytest.approx(npmi)
    assert MEASURES["c_uci"].confirm(counts, n) == pytest.approx(math.log(EPSILON / (0.4 * 0.2)))
    assert math.isnan(u_mass(np.array([[3]]), n))  # one word: no segment, numpy.mean([]) as in gensim
    assert c_v(np.array([[3]]), n) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- gensim's CoherenceModel


@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize(("measure", "window"), [("u_mass", None), ("c_uci", None), ("c_npmi", None), ("c_v", None),
                                                 ("c_v", 7), ("c_uci", 2)])
def test_equals_gensim_coherence_model(measure: str, window: int | None, seed: int) -> None:
    texts, topics = random_texts(seed), random_topics(seed)
    topics.append(["w00", "w29", "w28"])  # rare words: pairs that never share a window
    result = coherence(topics, texts, measure=measure, window=window)
    assert_close(result.per_topic, gensim_per_topic(topics, texts, measure, window), rtol=1e-10)


@pytest.mark.parametrize("measure", ["c_uci", "c_npmi", "c_v"])
def test_out_of_vocabulary_tokens_take_window_places_as_in_gensim(measure: str) -> None:
    texts = random_texts(4)
    vocabulary = VOCAB[:12]  # the reference vocabulary: other tokens are out-of-vocabulary codes
    topics = [["w00", "w03", "w05", "w07"], ["w01", "w02", "w11", "w09"]]
    block, terms = texts_block(texts, vocabulary)
    assert (block.tokens < 0).any()
    relevant = RelevantWords.in_vocabulary(sorted({w for t in topics for w in t}), terms)
    number = {w: r for r, w in enumerate(relevant.words)}
    ids = [np.array([number[w] for w in t]) for t in topics]
    pairs = PairIndex.from_topics(ids, len(relevant.words))
    window = 5
    counts = count_windows(block, relevant, pairs, window=window)
    ours = [MEASURES[measure].confirm(counts.topic_matrix(t, pairs), counts.n_units) for t in ids]
    expected = gensim_per_topic(topics, texts, measure, window, dictionary_texts=[vocabulary])
    assert_close(ours, expected, rtol=1e-10)


def test_topic_words_missing_from_the_reference_are_dropped_as_gensim_does() -> None:
    texts, topics = random_texts(5), random_topics(5)
    topics[0] = topics[0][:3] + ["unseen"] + topics[0][3:]
    result = coherence(topics, texts, measure="c_npmi")
    assert result.missing[0] == ("unseen",) and "unseen" not in result.topics[0]
    assert all(m == () for m in result.missing[1:])
    assert_close(result.per_topic, gensim_per_topic(topics, texts, "c_npmi", None), rtol=1e-10)


def test_top_n_truncates_topics() -> None:
    texts, topics = random_texts(6), random_topics(6, size=9)
    result = coherence(topics, texts, measure="u_mass", top_n=4)
    assert result.topics == tuple(tuple(t[:4]) for t in topics)
    assert_close(result.per_topic, ref.coherence([t[:4] for t in topics], texts, "u_mass"))


# ----------------------------------------------------------------------------- counts: a monoid over blocks


@given(cut=st.integers(min_value=0, max_value=123), window=st.integers(min_value=1, max_value=12),
       exact=st.booleans())
def test_counts_do_not_depend_on_how_texts_are_split(cut: int, window: int, exact: bool) -> None:
    texts, topics = random_texts(7), random_topics(7)
    words = sorted({w for t in topics for w in t})
    number = {w: r for r, w in enumerate(words)}
    pairs = PairIndex.from_topics([np.array([number[w] for w in t]) for t in topics], len(words))

    def count(part: list[list[str]]) -> tuple[CooccurrenceCounts, CooccurrenceCounts]:
        block, terms = texts_block(part, VOCAB)
        relevant = RelevantWords.in_vocabulary(words, terms)
        return (count_windows(block, relevant, pairs, window=window, exact=exact),
                count_documents(block, relevant, pairs))

    whole = count(texts)
    halves = [count(texts[:cut]), count(texts[cut:])]
    for k in range(2):
        merged = halves[0][k].merge(halves[1][k])
        assert np.array_equal(merged.occurrences, whole[k].occurrences)
        assert np.array_equal(merged.pair_counts, whole[k].pair_counts)
        assert merged.n_units == whole[k].n_units
    zero = CooccurrenceCounts.zeros(len(words), pairs.n_pairs)
    assert np.array_equal(zero.merge(whole[0]).pair_counts, whole[0].pair_counts)


def test_document_counts_of_a_bag_of_words_block_equal_numpy() -> None:
    from tests.reference.corpora import random_block

    block = random_block(60, 25, seed=3)
    dense = block.to_csr().toarray() > 0
    words = [f"t{i}" for i in (3, 7, 8, 20)]
    relevant = RelevantWords(tuple(words), np.array([3, 7, 8, 20]))
    pairs = PairIndex.from_topics([np.array([0, 1, 2]), np.array([2, 3])], 4)
    counts = count_documents(block, relevant, pairs)
    assert counts.occurrences.tolist() == dense[:, [3, 7, 8, 20]].sum(axis=0).tolist()
    expected = [(dense[:, [3, 7, 8, 20][i]] & dense[:, [3, 7, 8, 20][j]]).sum() for i, j in [(0, 1), (0, 2), (1, 2), (2, 3)]]
    assert counts.pair_counts.tolist() == expected and counts.n_units == 60


def test_pair_index_lists_the_pairs_sharing_a_topic() -> None:
    pairs = PairIndex.from_topics([np.array([3, 0, 1]), np.array([1, 2])], 4)
    rows = np.repeat(np.arange(4), np.diff(pairs.indptr))
    assert list(zip(rows.tolist(), pairs.partners.tolist())) == [(0, 1), (0, 3), (1, 2), (1, 3)]
    assert pairs.slots(np.array([3, 2]), np.array([1, 1])).tolist() == [3, 2]
    with pytest.raises(InvalidParameterError, match="shares no topic"):
        pairs.slots(np.array([0]), np.array([2]))


def test_ordered_block_out_of_vocabulary_strings_count_as_their_word() -> None:
    # a word promoted to the vocabulary after a shard was written is an OOV string in that shard
    block = OrderedBlock(indptr=np.array([0, 3]), tokens=np.array([0, -1, 1], dtype=np.int32),
                         oov_terms=np.array(["b"], dtype=object), doc_ids=np.array(["d"], dtype=object),
                         first_doc=0, n_terms=2)
    relevant = RelevantWords.in_vocabulary(["a", "b"], ["a", "x", "b"])
    pairs = PairIndex.from_topics([np.arange(2)], 2)
    counts = count_windows(block, relevant, pairs, window=2)
    # windows [a b] [b x]: "b" (an OOV string) is in both
    assert counts.occurrences.tolist() == [1, 2] and counts.pair_counts.tolist() == [1]


# ----------------------------------------------------------------------------- results and errors


def test_result_to_dict_is_json_without_nan() -> None:
    import json

    result = coherence([["w01", "w02"], ["w03"]], random_texts(8), measure="c_npmi")
    assert isinstance(result, CoherenceResult) and math.isnan(result.per_topic[1])
    payload = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert payload["measure"] == "c_npmi" and payload["top_n"] == 10 and payload["window"] == 10
    assert payload["per_topic"][1] is None and payload["mean"] is None
    assert payload["topics"][0]["words"] == ["w01", "w02"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"measure": "c_w2v"}, "unknown coherence measure 'c_w2v'"),
    ({"measure": "u_mass", "window": 5}, "u_mass counts documents"),
    ({"measure": "c_v", "window": 0}, "positive number of tokens"),
    ({"top_n": 0}, "top_n must be a positive integer"),
    ({"windows": "paper"}, "windows must be one of"),
])
def test_bad_settings_are_refused_clearly(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        coherence([["w01", "w02"]], random_texts(9), **kwargs)  # type: ignore[arg-type]


def test_bad_topics_are_refused_clearly() -> None:
    texts = random_texts(10)
    with pytest.raises(InvalidParameterError, match="lists a word twice"):
        coherence([["w01", "w02", "w01"]], texts)
    with pytest.raises(InvalidParameterError, match="none of the top words of topic 1"):
        coherence([["w01", "w02"], ["nope", "never"]], texts)
    with pytest.raises(InvalidParameterError, match="cannot use a int as the model"):
        coherence(3, texts)
    with pytest.raises(InvalidParameterError, match="cannot use a float as the reference"):
        coherence([["w01", "w02"]], 2.5)
