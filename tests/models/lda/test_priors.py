"""Informed priors and the seed-word file format."""
from __future__ import annotations

import math

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.models.lda.priors import (
    LEGACY_OFF_TOPIC,
    LEGACY_SEED_STRENGTH,
    PAPER_BASE,
    PAPER_SEED_STRENGTH,
    SeedTopic,
    informed_prior,
    parse_seed_words,
    seed_words_from_labels,
)

VOCAB = {w: i for i, w in enumerate(["ball", "goal", "bank", "money", "the", "team"])}


def test_informed_prior_layout() -> None:
    seeds = [SeedTopic("sports", ("ball", "goal", "team"), (1.0, 2.0, 1.0)),
             SeedTopic("money", ("bank", "money", "goal", "unknownword"), (1.0, 1.0, 0.5, 1.0))]
    prior, names, unknown = informed_prior(VOCAB, 6, 3, seeds, base=0.1, seed_strength=2.0, off_topic=1e-4)
    expected = np.array([
        [2.0, 4.0, 1e-4, 1e-4, 0.1, 2.0],
        [1e-4, 1.0, 2.0, 2.0, 0.1, 1e-4],
        [1e-4, 1e-4, 1e-4, 1e-4, 0.1, 1e-4],
    ])
    np.testing.assert_array_equal(prior, expected)
    assert names == ["sports", "money", None]
    assert unknown == {"money": ["unknownword"]}


def test_informed_prior_validation() -> None:
    seed = SeedTopic("a", ("ball",), (1.0,))
    with pytest.raises(InvalidParameterError, match="n_topics=1"):
        informed_prior(VOCAB, 6, 1, [seed, SeedTopic("b", ("goal",), (1.0,))], base=0.1)
    with pytest.raises(InvalidParameterError, match="distinct"):
        informed_prior(VOCAB, 6, 3, [seed, seed], base=0.1)
    with pytest.raises(InvalidParameterError, match="base"):
        informed_prior(VOCAB, 6, 3, [seed], base=0.0)
    with pytest.raises(InvalidParameterError, match="outside"):
        informed_prior({"ball": 9}, 6, 3, [seed], base=0.1)
    with pytest.raises(InvalidParameterError, match="more than once"):
        SeedTopic("a", ("x", "x"), (1.0, 1.0))


def test_parse_seed_words() -> None:
    text = "# my seeds\n\nsports: ball goal:2.5  team # trailing comment\nmoney:bank money:0.5\n"
    seeds = parse_seed_words(text, "seeds.txt")
    assert [(s.name, s.words, s.weights) for s in seeds] == [
        ("sports", ("ball", "goal", "team"), (1.0, 2.5, 1.0)),
        ("money", ("bank", "money"), (1.0, 0.5)),
    ]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: x\nno colon here\n", 2, "expected 'topic_name:"),
        ("a: x:-1\n", 1, "weight > 0"),
        ("a: x:abc\n", 1, "weight > 0"),
        ("\n\nempty:   # nothing\n", 3, "lists no words"),
        ("a: x\nb: y\na: z\n", 3, "already defined on line 1"),
        ("a: x y x\n", 1, "repeats"),
        ("two words: x\n", 1, "expected 'topic_name:"),
    ],
)
def test_parse_seed_words_errors_name_source_and_line(text: str, line: int, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message) as info:
        parse_seed_words(text, "seeds.txt")
    assert info.value.line == line and info.value.path == "seeds.txt"
    assert f"'seeds.txt', line {line}" in str(info.value)
    assert isinstance(info.value, ValueError)


def _reference_prior(vocab: dict[str, int], n_terms: int, n_topics: int, seeds: list[SeedTopic], base: float,
                     strength: float, off_topic: float | None) -> np.ndarray:
    """Plain loops over every (topic, term) pair, written from the definition (not from the function)."""
    seeded_anywhere = {w for s in seeds for w in s.words if w in vocab}
    prior = np.empty((n_topics, n_terms))
    for k in range(n_topics):
        own = dict(zip(seeds[k].words, seeds[k].weights)) if k < len(seeds) else {}
        for term, w in vocab.items():
            if term in own:
                prior[k, w] = strength * own[term]
            elif off_topic is not None and term in seeded_anywhere:
                prior[k, w] = off_topic
            else:
                prior[k, w] = base
    return prior


@pytest.mark.parametrize("off_topic", [None, 1e-3, 0.5])
@pytest.mark.parametrize("strength", [10.0, 1.0, 2.5])
def test_informed_prior_matches_numpy_reference(strength: float, off_topic: float | None) -> None:
    seeds = [SeedTopic("sports", ("ball", "goal", "team"), (1.0, 2.0, 1.0)),
             SeedTopic("money", ("bank", "money", "goal", "nope"), (1.0, 1.0, 0.5, 1.0))]
    prior, _, _ = informed_prior(VOCAB, 6, 4, seeds, base=0.01, seed_strength=strength, off_topic=off_topic)
    np.testing.assert_array_equal(prior, _reference_prior(VOCAB, 6, 4, seeds, 0.01, strength, off_topic))


def test_default_informed_prior_is_mr_ldas_10_and_001() -> None:
    """Zhai (2014), section 3.3.1: eta = 10 for a word of category k in topic k, 0.01 otherwise."""
    seeds = [SeedTopic("anger", ("ball", "goal"), (1.0, 1.0)), SeedTopic("anxiety", ("bank",), (1.0,))]
    prior, names, _ = informed_prior(VOCAB, 6, 5, seeds, base=PAPER_BASE)
    assert PAPER_SEED_STRENGTH == 10.0 and PAPER_BASE == 0.01
    assert set(np.unique(prior).tolist()) == {0.01, 10.0}
    in_category = np.zeros((5, 6), dtype=bool)
    in_category[0, [VOCAB["ball"], VOCAB["goal"]]] = True
    in_category[1, VOCAB["bank"]] = True
    np.testing.assert_array_equal(prior == 10.0, in_category)
    # no push-out: a seed word keeps 0.01 in every other topic, seeded or free
    assert prior[1:, VOCAB["ball"]].tolist() == [0.01] * 4
    assert names == ["anger", "anxiety", None, None, None]


def test_push_out_is_an_explicit_option() -> None:
    seeds = [SeedTopic("sports", ("ball",), (1.0,))]
    pushed, _, _ = informed_prior(VOCAB, 6, 3, seeds, base=0.01, seed_strength=LEGACY_SEED_STRENGTH,
                                  off_topic=LEGACY_OFF_TOPIC)
    assert pushed[:, VOCAB["ball"]].tolist() == [1.0, 1e-3, 1e-3]
    assert pushed[:, VOCAB["goal"]].tolist() == [0.01] * 3
    with pytest.raises(InvalidParameterError, match="off_topic"):
        informed_prior(VOCAB, 6, 3, seeds, base=0.01, off_topic=0.0)


def _brute_force_seeds(df: np.ndarray, docs: list[int], per_label: int, min_df: int) -> list[list[int]]:
    n = sum(docs)
    total = df.sum(axis=0)
    chosen: list[list[int]] = []
    keyness = {}
    for l in range(df.shape[0]):
        for w in range(df.shape[1]):
            if df[l, w] > 0:
                keyness[l, w] = df[l, w] * math.log((df[l, w] / docs[l]) / (total[w] / n))
    for l in range(df.shape[0]):
        mine = []
        for w in range(df.shape[1]):
            scores = [keyness.get((m, w), -math.inf) for m in range(df.shape[0])]
            if df[l, w] >= min_df and scores.index(max(scores)) == l and keyness.get((l, w), -1) > 0:
                mine.append(w)
        mine.sort(key=lambda w: (-keyness[l, w], w))
        chosen.append(mine[:per_label])
    return chosen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seed_words_from_labels_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    docs = [int(x) for x in rng.integers(5, 30, size=4)]
    df = np.stack([rng.binomial(d, rng.beta(0.3, 2.0, size=25)) for d in docs])
    terms = [f"w{i}" for i in range(25)]
    seeds = seed_words_from_labels(df, docs, ["a b", "c", "d", "e"], terms, per_label=3, min_label_df=2)
    expected = _brute_force_seeds(df, docs, 3, 2)
    got = {s.name: [int(w[1:]) for w in s.words] for s in seeds}
    assert got == {name: ids for name, ids in zip(["a_b", "c", "d", "e"], expected) if ids}
    assert all(set(s.weights) == {1.0} for s in seeds)
