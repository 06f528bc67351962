"""``topicflow g0 train | info | score`` end to end on a tiny word list."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from topicflow.cli import main
from topicflow.io.g0 import read_g0
from topicflow.models.infvoc_lda.g0 import log_g0

WORDS = "# a test list\ncat\ncart\ncare\n\ndog\ndart\nwater\nlater\nab\nabracadabraabracadabra\n"


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture()
def words(tmp_path: Path) -> Path:
    path = tmp_path / "words.txt"
    path.write_text(WORDS, encoding="utf-8")
    return path


def test_train_prints_coverage_then_info_and_score(words: Path, tmp_path: Path) -> None:
    out = tmp_path / "g0"
    result = run("g0", "train", words, "--out", out, "--order", 2, "--max-length", 12)
    assert result.exit_code == 0, result.output
    assert "words read    9: kept 7, dropped 1 shorter than 3 and 1 longer than 12" in result.output
    assert "charset       10 characters: acdeglortw  (+1 unknown-character bin)" in result.output
    assert "order=2 smoothing=0.1 lengths 3..12" in result.output and "zeta (largest) l=4:" in result.output
    g0, _ = read_g0(out)
    assert g0.order == 2 and g0.max_length == 12

    info = run("g0", "info", out)
    assert info.exit_code == 0 and info.output.splitlines()[1:7] == result.output.splitlines()[1:7]
    payload = json.loads(run("g0", "info", out, "--format", "json").output)
    assert payload["coverage"]["kept"] == 7 and payload["n_chars"] == 10 and math.isclose(sum(payload["zeta"]), 1)

    scored = run("g0", "score", out, "cart", "xyzzy", "ab")
    assert scored.exit_code == 0, scored.output
    rows = scored.output.splitlines()
    assert rows[0].split() == ["word", "length", "log", "G0", "log10", "G0"]
    cart = float(rows[1].split()[2])
    assert math.isclose(cart, log_g0(g0, ["cart"])[0], abs_tol=5e-4) and rows[3].split()[2] == "-inf"
    as_json = json.loads(run("g0", "score", out, "cart", "ab", "--format", "json").output)
    assert as_json[0]["word"] == "cart" and as_json[1]["log_g0"] is None


def test_train_refuses_to_overwrite_and_reports_bad_input(words: Path, tmp_path: Path) -> None:
    out = tmp_path / "g0"
    assert run("g0", "train", words, "--out", out).exit_code == 0
    again = run("g0", "train", words, "--out", out)
    assert again.exit_code == 2 and "--overwrite" in again.output
    assert run("g0", "train", words, "--out", out, "--overwrite", "--length-fit", "least_squares").exit_code == 0
    assert read_g0(out)[0].length_fit == "least_squares"
    missing = run("g0", "train", tmp_path / "none.txt", "--out", tmp_path / "x")
    assert missing.exit_code == 2 and "does not exist" in missing.output
    bounds = run("g0", "train", words, "--out", tmp_path / "y", "--min-length", 5, "--max-length", 4)
    assert bounds.exit_code == 2 and "--max-length" in bounds.output
    nothing = run("g0", "info", tmp_path / "nothing")
    assert nothing.exit_code == 2 and "no G0 at" in nothing.output
