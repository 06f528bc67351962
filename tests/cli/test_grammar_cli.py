"""``topicflow grammar fit | segment``, ``update``/``versions`` on a grammar model, and the ``AdaptorGrammar`` estimator."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.pipeline.adaptor_grammar.test_fit import lexicon_texts, write_store
from topicflow import AdaptorGrammar
from topicflow.cli import main
from topicflow.errors import InvalidParameterError, NotFittedError
from topicflow.io.models.store import load_model
from topicflow.pipeline.ingest.append import append_corpus

CLUSTER = ["--local-cluster", "threads", "--workers", "1", "--threads-per-worker", "2"]


def test_fit_update_versions_segment(tmp_path: Path) -> None:
    texts = lexicon_texts(40, seed=3)
    store = write_store(tmp_path, texts[:20])
    model = tmp_path / "model"
    runner = CliRunner()
    fit = ["grammar", "fit", str(store), "--model", str(model), "--batch-size", "10", "--tau", "8", "--kappa", "0.6",
           "--prune-every", "2", "--truncation", "Word=30", "--samples", "3", "--partitions", "2", "--seed", "1",
           "--corpus-size", "40", *CLUSTER]
    result = runner.invoke(main, fit)
    assert result.exit_code == 0, result.output
    assert "(version 1): seed pass + 2 minibatches, 40 inside calls" in result.output and "TNGs Word" in result.output
    assert load_model(model).info.settings["init"] == "seed" == AdaptorGrammar.load(model).init  # the default
    result = runner.invoke(main, fit)
    assert result.exit_code != 0 and "--overwrite" in result.output
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(texts[20:])))
    append_corpus(store, [more])
    result = runner.invoke(main, ["update", str(model), str(store), "--kappa", "0.5", *CLUSTER])
    assert result.exit_code != 0 and "adaptor grammar" in result.output and "--kappa" in result.output
    result = runner.invoke(main, ["update", str(model), str(store), *CLUSTER])
    assert result.exit_code == 0, result.output
    assert "version 2" in result.output and "20 documents, 2 minibatches" in result.output
    saved = load_model(model)
    assert saved.version == 2 and saved.info.extra["adaptor_grammar"]["minibatch"] == 4  # an update never seeds
    result = runner.invoke(main, ["versions", str(model)])
    assert result.exit_code == 0 and "update" in result.output, result.output
    text = tmp_path / "in.txt"
    text.write_text("dogcat\n\nhousebird\n")
    out = tmp_path / "out.txt"
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and "".join(lines[0].split()) == "dogcat" and "".join(lines[1].split()) == "housebird"
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out)])
    assert result.exit_code != 0 and "--overwrite" in result.output
    text.write_text("dogcat\nzebra\n")
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out), "--overwrite",
                                  "--version", "1"])
    assert result.exit_code != 0 and "sentence 2" in result.output and "'z'" in result.output
    # A nightly update whose documents bring a new character grows the grammar's terminals.
    zed = tmp_path / "zed.jsonl"
    zed.write_text(json.dumps({"id": "z", "text": "zebra dog"}) + "\n")
    append_corpus(store, [zed])
    result = runner.invoke(main, ["update", str(model), str(store), *CLUSTER])
    assert result.exit_code == 0 and "version 3" in result.output, result.output
    assert "z" in load_model(model).info.extra["adaptor_grammar"]["terminals"]
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert [line.replace(" ", "") for line in out.read_text().splitlines()] == ["dogcat", "zebra"]
    text.write_text("dog cat\n")
    result = runner.invoke(main, ["grammar", "segment", str(model), str(text), "--out", str(out), "--overwrite"])
    assert result.exit_code != 0 and "line 1" in result.output and "whitespace" in result.output
    result = runner.invoke(main, ["grammar", "fit", str(store), "--model", str(tmp_path / "m2"),
                                  "--truncation", "Word"])
    assert result.exit_code != 0 and "NAME=INTEGER" in result.output
    result = runner.invoke(main, ["grammar", "fit", str(store), "--model", str(tmp_path / "m2"), "--init", "never"])
    assert result.exit_code != 0 and "'never' is not one of 'seed', 'empty'" in result.output
    empty = [*fit[:4], str(tmp_path / "m2"), *fit[5:], "--init", "empty"]
    result = runner.invoke(main, empty)
    assert result.exit_code == 0, result.output
    assert "(version 1): 5 minibatches, 41 inside calls" in result.output  # 41 sentences, no seed pass
    assert load_model(tmp_path / "m2").info.settings["init"] == "empty" == AdaptorGrammar.load(tmp_path / "m2").init


def test_estimator_parameters_partial_fit_and_save(tmp_path: Path) -> None:
    texts = [t.replace(" ", "") for t in lexicon_texts(20, seed=4)]
    with pytest.raises(NotFittedError, match="call fit"):
        AdaptorGrammar().segment(["dog"])
    with pytest.raises(InvalidParameterError, match="bias"):
        AdaptorGrammar(bias="sometimes").fit(texts)
    with pytest.raises(InvalidParameterError, match="init"):
        AdaptorGrammar(init="sometimes").fit(texts)
    model = AdaptorGrammar(batch_size=10, truncation={"Word": 20}, n_samples=3, tau=4.0, prune_every=2, seed=2,
                           alphabet="xyz")
    model.fit(texts[:10])
    assert model.n_inside_calls_ == 20 and model.seed_log_likelihood_ < 0  # the seed pass parses the 10 once more
    model.partial_fit(texts[10:])  # a continuation is not seeded
    assert model.state_.minibatch == 2 and model.n_inside_calls_ == 30 and len(model.log_likelihood_) == 2
    assert {"x", "y", "z"} <= set(model.state_.grammar.terminals)
    assert model.top_atoms(3)[0][1] > 0
    words = model.segment(["dogcat"])[0]
    assert "".join(words) == "dogcat"
    model.save(tmp_path / "m")
    again = AdaptorGrammar.load(tmp_path / "m")
    assert again.get_params() == model.get_params() and [r["minibatch"] for r in again.trace_] == [1, 2]
    assert again.segment(["dogcat"]) == model.segment(["dogcat"])
