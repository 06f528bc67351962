"""Segmentation corpora from text: hard boundaries, gold words, the seeded 70/30 split, clear errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from topicflow.errors import EmptyInputError, InputError, InvalidParameterError
from topicflow.io.sources.segmentation import (
    read_segmentation_corpus,
    read_segmented_lines,
    read_unsegmented_lines,
    text_phrases,
    write_unsegmented_lines,
)


def test_phrases_split_at_punctuation_and_keep_words() -> None:
    text = "And God said, Let there be light: and there was light.\nThe LORD's burnt-offering (v. 2) - 'twas 40 days"
    assert text_phrases(text) == [
        ("and", "god", "said"), ("let", "there", "be", "light"), ("and", "there", "was", "light"),
        ("the", "lords", "burntoffering"), ("v",), ("twas", "days"),
    ]


def test_jsonl_and_plain_text_corpus(tmp_path: Path) -> None:
    jsonl = tmp_path / "verses.jsonl"
    jsonl.write_text(json.dumps({"id": "g1", "text": "In the beginning; God."}) + "\n\n"
                     + json.dumps({"id": "g2", "body": "x", "text": "Amen!"}) + "\n")
    plain = tmp_path / "more.txt"
    plain.write_text("Jesus wept.\n\n")
    corpus = read_segmentation_corpus([jsonl, plain])
    assert corpus.sentences == ("inthebeginning", "god", "amen", "jesuswept")
    assert corpus.gold[0] == ("in", "the", "beginning")
    assert all("".join(g) == s for g, s in zip(corpus.gold, corpus.sentences))
    assert corpus.origins[1] == f"line 1 of {str(jsonl)!r} #2"
    assert corpus.origins[2].startswith(f"line 3 of {str(jsonl)!r}")
    assert corpus.origins[3] == f"line 1 of {str(plain)!r} #1"
    assert read_segmentation_corpus(jsonl, max_chars=4).sentences == ("god", "amen")
    assert corpus.n_chars == 14 + 3 + 4 + 9 and corpus.alphabet[0] == "a"


def test_bad_input_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "broken"\n')
    with pytest.raises(InputError, match="line 2 of") as info:
        read_segmentation_corpus(bad)
    assert info.value.line == 2 and info.value.path == str(bad)
    with pytest.raises(InputError, match="does not exist"):
        read_segmentation_corpus(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("... 123 !!\n")
    with pytest.raises(EmptyInputError):
        read_segmentation_corpus(empty)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(InputError, match="line 2 of .*UTF-8"):
        read_segmentation_corpus(latin)


def test_split_is_seeded_exact_and_disjoint(tmp_path: Path) -> None:
    plain = tmp_path / "words.txt"
    plain.write_text("".join(f"w{'a' * (i % 7 + 1)}{'b' * (i % 5)} c\n" for i in range(50)))
    corpus = read_segmentation_corpus(plain)
    train, test = corpus.split(seed=3)
    assert (len(train), len(test)) == (35, 15)
    assert sorted(train.origins + test.origins) == sorted(corpus.origins)
    again = corpus.split(seed=3)
    assert again[1].origins == test.origins
    assert corpus.split(seed=4)[1].origins != test.origins
    assert list(test.origins) == [o for o in corpus.origins if o in set(test.origins)]  # corpus order kept
    with pytest.raises(InvalidParameterError):
        corpus.split(test_fraction=1.0)


def test_unsegmented_lines_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "input.txt"
    write_unsegmented_lines(path, ["inthebeginning", "Amen"])
    assert read_unsegmented_lines(path) == ["inthebeginning", "amen"]
    assert read_unsegmented_lines(path, lowercase=False)[1] == "Amen"
    spaced = tmp_path / "spaced.txt"
    spaced.write_text("abc\n\nin the\n")
    with pytest.raises(InputError, match="line 3 of .*whitespace") as info:
        read_unsegmented_lines(spaced)
    assert info.value.line == 3
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    with pytest.raises(EmptyInputError):
        read_unsegmented_lines(blank)


def test_gold_segmented_lines_keep_every_symbol_as_written(tmp_path: Path) -> None:
    # Brent's phonemic transcription (br-phono): upper case, digits and punctuation are phonemes.
    path = tmp_path / "truth.dat"
    path.write_text("yu want tu si D6 bUk\n\nlUk D*z 6 b7 wIT hIz h&t\nWAts DIs\n", encoding="utf-8")
    corpus = read_segmented_lines(path)
    assert corpus.sentences == ("yuwanttusiD6bUk", "lUkD*z6b7wIThIzh&t", "WAtsDIs")
    assert corpus.gold[1] == ("lUk", "D*z", "6", "b7", "wIT", "hIz", "h&t")
    assert corpus.origins[1].startswith("line 3 of")
    assert read_segmented_lines(path, max_chars=10).sentences == ("WAtsDIs",)
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(InputError, match="line 2"):
        read_segmented_lines(path)
    path.write_text("\n \n")
    with pytest.raises(EmptyInputError, match="no utterance"):
        read_segmented_lines(path)
