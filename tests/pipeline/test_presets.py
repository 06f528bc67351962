"""Paper presets: every entry is valid for its command's API and CLI, and typed options win over it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from topicflow.api.hdp import HDP
from topicflow.api.lda import LDA
from topicflow.api.streaming import StreamingLDA
from topicflow.cli import main
from topicflow.cli.model import fit as fit_command
from topicflow.cli.stream import OPTION_OF
from topicflow.cli.stream import stream as stream_command
from topicflow.errors import InvalidParameterError
from topicflow.pipeline.presets import PRESETS, get_preset, preset_names, with_preset
from topicflow.pipeline.streaming.config import StreamConfig
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


def test_every_preset_is_valid_for_its_api_and_cli() -> None:
    assert PRESETS, "the preset table is empty"
    stream_options = {p.name for p in stream_command.params}
    fit_options = {p.name for p in fit_command.params}
    for (name, command), preset in PRESETS.items():
        assert preset.name == name and preset.source and preset.description
        settings = dict(preset.settings)
        if command == "stream":
            StreamConfig.create(**settings)
            assert StreamingLDA.from_preset(name).config() == StreamConfig.create(**settings)
            missing = {key for key in settings if OPTION_OF.get(key, key) not in stream_options}
        elif settings.get("family") == "hdp":
            hdp = {key: value for key, value in settings.items() if key != "family"}
            HDP(**hdp).config()
            assert HDP.from_preset(name).get_params() == HDP(**hdp).get_params()
            missing = {key for key in settings if key not in fit_options}
        else:
            LDA(**settings)._config()
            if settings.get("method") == "scvb0":
                LDA(**settings)._scvb0_config()
            assert LDA.from_preset(name).get_params() == LDA(**settings).get_params()
            missing = {key for key in settings if key not in fit_options}
        assert not missing, f"preset {name} sets {missing}, which `topicflow {command}` cannot take"


def test_overrides_win_and_unknown_names_are_explained() -> None:
    name = preset_names("stream")[0]
    preset = get_preset(name, "stream")
    merged = with_preset(name, "stream", {"seed": 7})
    assert merged == {**preset.settings, "seed": 7}
    assert with_preset(None, "stream", {"seed": 7}) == {"seed": 7}
    with pytest.raises(InvalidParameterError, match="no preset 'nope' for stream; the presets of stream are"):
        get_preset("nope", "stream")
    if (name, "fit") not in PRESETS:
        with pytest.raises(InvalidParameterError, match="it is a preset of stream"):
            get_preset(name, "fit")


def test_stream_preset_fills_what_the_user_did_not_type(tmp_path: Path, local_cluster: object) -> None:
    truth = draw_planted_corpus(n_docs=90, n_topics=3, n_terms=30, doc_length=20, alpha=0.1, seed=2)
    store = write_test_store(tmp_path / "s.zarr", {"default": truth.counts["default"]}, shard_size=45)
    preset = get_preset("gao2016", "stream")
    args = ["stream", store, "--out", tmp_path / "out", "--preset", "gao2016", "--topics", 3, "--batch-size", 30,
            "--max-iter", 4, "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "out" / "summary.json").read_text())["config"]
    assert (config["n_topics"], config["batch_size"], config["max_iter"]) == (3, 30, 4)  # typed
    for key in ("algorithm", "doc_topic_prior", "topic_word_prior", "patience"):
        assert config[key] == preset.settings[key]  # from the preset

    missing = CliRunner().invoke(main, ["stream", str(store), "--out", str(tmp_path / "o2")])
    assert missing.exit_code == 2 and "Missing option '--topics'" in missing.output
