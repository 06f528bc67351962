"""`topicflow versions | rollback` through click's CliRunner (no cluster needed)."""
from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner, Result

from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.io.models.versions import commit_version, model_lock
from topicflow.models.lda.state import LDAState
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.cli.versions import COMMANDS


@click.group()
def cli() -> None:
    """The version commands alone, so these tests do not depend on other command families."""


for _command in COMMANDS:
    cli.add_command(_command)


def make_model(fill: float) -> SavedModel:
    state = LDAState({"default": np.full((2, 2), fill)}, np.full(2, 0.5), {"default": 0.01})
    vocab = Vocabulary.from_counts({"tax": 1, "fox": 1}, {"tax": 2, "fox": 1})
    return SavedModel(state, {"default": vocab}, {"method": "batch", "corpus": {"n_docs": 100, "path": "s.zarr"}})


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model"
    save_model(path, make_model(1.0))
    for fill, n_docs in ((2.0, 1200), (3.0, 950)):
        with model_lock(path, action="update"):
            commit_version(path, make_model(fill), kind="update", summary={"n_docs": n_docs, "store": "s.zarr"})
    return path


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_commands_are_registered() -> None:
    assert [c.name for c in COMMANDS] == ["versions", "rollback"]
    from topicflow.cli import main

    assert {"versions", "rollback"} <= set(main.commands)


def test_versions_lists_with_current_marked(model: Path) -> None:
    result = run("versions", model)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"model {model}"
    assert lines[1].split() == ["version", "created", "(UTC)", "kind", "summary"]
    assert lines[2].split()[:1] == ["1"] and "fit" in lines[2] and "n_docs=100" in lines[2]
    assert "update" in lines[3] and "n_docs=1,200 store=s.zarr" in lines[3]
    assert lines[4].startswith("*") and lines[4].endswith("(current)") and "n_docs=950" in lines[4]
    payload = json.loads(run("versions", model, "--format", "json").output)
    assert payload["current"] == 3 and payload["removed"] == []
    assert [(v["version"], v["kind"], v["is_current"]) for v in payload["versions"]] == [
        (1, "fit", False), (2, "update", False), (3, "update", True)]
    assert payload["versions"][1]["summary"] == {"n_docs": 1200, "store": "s.zarr"}


def test_rollback_then_prune_with_keep(model: Path) -> None:
    result = run("rollback", model, 2)
    assert result.exit_code == 0 and "current version is now 2 (was 3)" in result.output
    assert load_model(model).version == 2
    assert "version 2 is already current" in run("rollback", model, 2).output
    result = run("versions", model, "--keep", "1", "--format", "json")
    payload = json.loads(result.output)
    assert payload["removed"] == [1] and [v["version"] for v in payload["versions"]] == [2, 3]
    text = run("versions", model, "--keep", "1").output
    assert "removed versions" not in text and "*       2" in text


def test_errors_exit_2_with_a_message(model: Path, tmp_path: Path) -> None:
    result = run("rollback", model, 7)
    assert result.exit_code == 2
    assert "error: model" in result.output
    assert "has no version 7; it has versions [1, 2, 3] (current 3)" in result.output
    result = run("versions", tmp_path / "nothing")
    assert result.exit_code == 2 and "no topicflow model at" in result.output and "topicflow fit" in result.output
    result = run("versions", model, "--keep", "0")
    assert result.exit_code == 2 and "--keep" in result.output
