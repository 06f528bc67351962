"""``topicflow grammar fit | segment`` and the ``AdaptorGrammar`` estimator on a tiny store."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.pipeline.adaptor_grammar.test_fit import lexicon_texts, write_store
from topicflow import AdaptorGrammar
from topicflow.cli import main
from topicflow.errors import InvalidParameterError, NotFittedError


def test_fit_then_segment(tmp_path: Path) -> None:
    store = write_store(tmp_path, lexicon_texts(30, seed=3))
    model = tmp_path / "model"
    runner = CliRunner()
    result = runner.invoke(main, ["grammar", "fit", str(store), "--model", str(model), "--batch-size", "10",
                                  "--tau", "8", "--kappa", "0.6", "--prune-every", "2", "--truncation", "Word=30",
                                  "--samples", "4", "--partitions", "2", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "3 minibatches, 30 inside calls" in result.output and "TNGs Word" in result.output
    text = tmp_path / "in.txt"
    text.write_text("dogcat\n\nhouse bird\n")
    out = tmp_path / "out.txt"
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[1] == ""
    assert "".join(lines[0].split()) == "dogcat" and "".join(lines[2].split()) == "housebird"
    assert len(lines[2].split()) >= 2  # whitespace is a hard boundary
    text.write_text("dogcat\nzebra\n")
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out)])
    assert result.exit_code != 0 and "line 2" in result.output and "'z'" in result.output
    result = runner.invoke(main, ["grammar", "fit", str(store), "--model", str(model)])
    assert result.exit_code != 0 and "pass --overwrite" in result.output
    result = runner.invoke(main, ["grammar", "fit", str(store), "--model", str(tmp_path / "m2"),
                                  "--truncation", "Word"])
    assert result.exit_code != 0 and "NAME=INTEGER" in result.output


def test_estimator_parameters_and_partial_fit() -> None:
    texts = [t.replace(" ", "") for t in lexicon_texts(20, seed=4)]
    with pytest.raises(NotFittedError, match="call fit"):
        AdaptorGrammar().segment(["dog"])
    with pytest.raises(InvalidParameterError, match="bias"):
        AdaptorGrammar(bias="sometimes").fit(texts)
    model = AdaptorGrammar(batch_size=10, truncation={"Word": 20}, n_samples=3, tau=4.0, prune_every=2, seed=2)
    model.fit(texts[:10]).partial_fit(texts[10:])
    assert model.state_.minibatch == 2 and model.n_inside_calls_ == 20 and len(model.log_likelihood_) == 2
    assert model.top_atoms(3)[0][1] > 0
    words = model.segment(["dogcat"])[0]
    assert "".join(words) == "dogcat"
