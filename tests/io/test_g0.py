"""G0 files: word lists, save/load round trips, damaged files, and the shipped English G0."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from topicflow.errors import (
    CorpusFormatError,
    FormatVersionError,
    InputError,
    StoreExistsError,
    StoreNotFoundError,
)
from topicflow.io._bundle import npz_bytes
from topicflow.io.g0 import (
    ARRAY_NAMES,
    ARRAYS_FILE,
    HEADER_FILE,
    default_g0,
    default_g0_info,
    read_g0,
    read_g0_info,
    read_word_list,
    train_g0_from_file,
    write_g0,
)
from topicflow.models.infvoc_lda.g0 import CharNgramG0, g0_total_mass, log_g0, train_g0

WORDS = ["cat", "cart", "care", "dog", "dart", "water", "later", "mother", "other", "ab", "abracadabras"]


@pytest.fixture()
def g0() -> CharNgramG0:
    return train_g0(WORDS, min_length=3, max_length=8)


def _npz_bytes(arrays: dict) -> bytes:  # the bundle's writer, with the G0 members
    return npz_bytes(arrays, ARRAY_NAMES)


def test_round_trip_keeps_everything(tmp_path: Path, g0: CharNgramG0) -> None:
    info = write_g0(tmp_path / "g0", g0)
    back, back_info = read_g0(tmp_path / "g0")
    for name in ("counts", "length_counts", "log_zeta", "log_cond"):
        assert_array_equal(getattr(back, name), getattr(g0, name))
    for name in ("charset", "order", "smoothing", "min_length", "max_length", "lowercase", "length_fit",
                 "n_too_short", "n_too_long"):
        assert getattr(back, name) == getattr(g0, name)
    assert back_info.to_dict() == info.to_dict() == read_g0_info(tmp_path / "g0").to_dict()
    probe = ["cat", "zebra", "Mother", "ab"]
    assert_array_equal(log_g0(back, probe), log_g0(g0, probe))
    assert (tmp_path / "g0" / ARRAYS_FILE).read_bytes() == _npz_bytes(
        {"counts": g0.counts, "length_counts": g0.length_counts, "log_zeta": g0.log_zeta})


def test_existing_directory_needs_overwrite(tmp_path: Path, g0: CharNgramG0) -> None:
    write_g0(tmp_path / "g0", g0)
    with pytest.raises(StoreExistsError, match="--overwrite"):
        write_g0(tmp_path / "g0", g0)
    other = train_g0(WORDS, order=2, min_length=3, max_length=8)
    write_g0(tmp_path / "g0", other, overwrite=True)
    assert read_g0(tmp_path / "g0")[0].order == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g0"]  # no temporary leftovers


def _edit_header(path: Path, **changes: object) -> None:
    header = json.loads((path / HEADER_FILE).read_text())
    header.update(changes)
    (path / HEADER_FILE).write_text(json.dumps(header))


def test_damaged_files_are_named_with_a_remedy(tmp_path: Path, g0: CharNgramG0) -> None:
    with pytest.raises(StoreNotFoundError, match="no G0 at .*topicflow g0 train"):
        read_g0(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusFormatError, match="is not a G0 .no g0.json"):
        read_g0(tmp_path / "empty")
    bad = tmp_path / "bad"
    write_g0(bad, g0)
    _edit_header(bad, format_version=99)
    with pytest.raises(FormatVersionError, match="format version 99"):
        read_g0(bad)
    _edit_header(bad, format_version=1, format="something-else")
    with pytest.raises(CorpusFormatError, match="is not a G0 .format 'something-else'"):
        read_g0_info(bad)
    _edit_header(bad, format="topicflow-g0", settings={"order": 3})
    with pytest.raises(CorpusFormatError, match="damaged: g0.json lacks or garbles a field.*--overwrite"):
        read_g0(bad)
    write_g0(bad, g0, overwrite=True)
    counts = g0.counts.copy()
    counts[0, 0] += 1
    (bad / ARRAYS_FILE).write_bytes(_npz_bytes({"counts": counts, "length_counts": g0.length_counts,
                                                "log_zeta": g0.log_zeta}))
    with pytest.raises(CorpusFormatError, match="array counts in arrays.npz does not match its checksum"):
        read_g0(bad)
    (bad / ARRAYS_FILE).write_bytes(b"not a zip")
    with pytest.raises(CorpusFormatError, match="arrays.npz cannot be read"):
        read_g0(bad)
    (bad / ARRAYS_FILE).unlink()
    with pytest.raises(CorpusFormatError, match="arrays.npz is missing"):
        read_g0(bad)
    (bad / HEADER_FILE).write_text("{not json")
    with pytest.raises(CorpusFormatError, match="g0.json is not valid JSON"):
        read_g0_info(bad)


def test_a_consistent_but_invalid_zeta_is_refused(tmp_path: Path, g0: CharNgramG0) -> None:
    path = tmp_path / "g0"
    write_g0(path, g0)
    log_zeta = g0.log_zeta + 0.5  # no longer sums to 1, checksum updated to match
    arrays = {"counts": g0.counts, "length_counts": g0.length_counts, "log_zeta": log_zeta}
    (path / ARRAYS_FILE).write_bytes(_npz_bytes(arrays))
    header = json.loads((path / HEADER_FILE).read_text())
    header["arrays"]["log_zeta"]["sha256"] = "sha256:" + hashlib.sha256(log_zeta.tobytes()).hexdigest()
    (path / HEADER_FILE).write_text(json.dumps(header))
    with pytest.raises(CorpusFormatError, match="log_zeta must"):
        read_g0(path)


def test_word_list_skips_blank_and_comment_lines(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("# a comment\ncat\n\n  dog  \nab\n#x\nwater\n", encoding="utf-8")
    words, coverage = read_word_list(path)
    assert words == ["cat", "dog", "ab", "water"]
    assert (coverage.lines, coverage.skipped_lines, coverage.words_read) == (7, 3, 4)
    g0, coverage = train_g0_from_file(path)
    assert (coverage.kept, coverage.too_short, coverage.too_long) == (3, 1, 0)
    assert g0.n_words == 3


def test_bad_word_lists_name_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist; pass a text file"):
        read_word_list(tmp_path / "nope.txt")
    path = tmp_path / "w.txt"
    path.write_bytes(b"cat\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"line 2: not valid UTF-8") as caught:
        read_word_list(path)
    assert caught.value.line == 2
    path.write_text("cat\nnew york\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: 'new york' holds more than one word"):
        read_word_list(path)
    path.write_text("# only\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no word"):
        train_g0_from_file(path)
    path.write_text("a\nab\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"w.txt.*none of the 2 words has a length in \[3, 20\]"):
        train_g0_from_file(path)


def test_shipped_english_g0_is_proper_and_prefers_english_shapes() -> None:
    g0 = default_g0()
    info = default_g0_info()
    assert default_g0() is g0  # loaded once
    assert (g0.order, g0.smoothing, g0.min_length, g0.max_length, g0.length_fit) == (3, 0.1, 3, 20, "empirical")
    assert g0.charset == "abcdefghijklmnopqrstuvwxyz" and info.coverage.kept == 73129
    assert_allclose(g0_total_mass(g0), 1.0, rtol=1e-12)
    # Common-shaped English words beat at least 95% of random letter strings of the same length.
    rng = np.random.default_rng(20140701)
    letters = np.array(list(g0.charset))
    for word in ["water", "computer", "station", "thinking", "government", "market", "spending"]:
        randoms = ["".join(rng.choice(letters, len(word))) for _ in range(200)]
        mine = log_g0(g0, [word])[0]
        assert np.mean(log_g0(g0, randoms) < mine) >= 0.95, word
    assert math.isinf(log_g0(g0, ["ox"])[0])
