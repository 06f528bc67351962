"""Informed priors and the seed-word file format."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.models.lda.priors import SeedTopic, informed_prior, parse_seed_words

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
