"""`topicflow reproduce canini2009 --scale quick` end to end on a tiny generated labeled stream."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from topicflow.api.streaming import StreamingLDA
from topicflow.cli import main
from topicflow.pipeline.reproduce.canini2009 import stream_configs
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


def test_reproduce_canini2009_quick_writes_trace_figures_and_claims(tmp_path: Path, local_cluster: object) -> None:
    planted = draw_planted_corpus(n_docs=110, n_topics=3, n_terms=20, doc_length=12, alpha=0.1, seed=2)
    labels = [f"l{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    counts = planted.counts["default"]
    train = write_test_store(tmp_path / "train.zarr", {"default": counts[:90]}, shard_size=45, labels=labels[:90])
    test = write_test_store(tmp_path / "test.zarr", {"default": counts[90:]}, shard_size=45, labels=labels[90:])
    out = tmp_path / "out"
    args = ["reproduce", "canini2009", "--corpus", train, "--test", test, "--out", out, "--scale", "quick",
            "--format", "json", "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    claims = {c["claim"]: c for c in payload["claims"]}
    assert len(claims) == 8
    assert all(c["held"] in (True, False) for c in claims.values())
    assert any("Table 1" in c["paper"] for c in claims.values())
    assert payload["figures"] == ["fig2-training.png", "fig3-heldout.png"]
    for name in payload["figures"]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert {r["algorithm"] for r in records} == {"olda", "incgibbs", "pf", "gibbs"}
    online = [r for r in records if r["algorithm"] != "gibbs"]
    assert all(r["nmi_train_best"] is not None and "nmi_in" in r and "nmi_out_next" in r for r in online)
    multiples = payload["settings"]["runtime_multiples"]
    assert multiples["olda"] == 1.0 and multiples["incgibbs"] > 0
    assert "| claim | paper | ours | verdict | note |" in (out / "claims.md").read_text()


def test_reproduction_settings_are_the_presets() -> None:
    configs = stream_configs(n_docs=1000, n_topics=3, scale="paper", seed=0)
    pf, incgibbs, olda = configs["pf"].particles, configs["incgibbs"].particles, configs["olda"].particles
    assert (pf.n_particles, pf.ess_threshold, pf.rejuvenation_steps, pf.resampling) == (100, 0.2, 30, "residual")
    assert (incgibbs.independent_samples, incgibbs.rejuvenation_steps) == (100, 4)
    assert olda.independent_samples == 100 and pf.init_docs == 100
    assert {c.particles.rejuvenation_source for c in (configs["pf"], configs["incgibbs"], configs["olda"])} == {"history"}
    assert configs["pf"].doc_topic_prior == configs["pf"].topic_word_prior == 0.1
    model = StreamingLDA.from_preset("canini2009-incgibbs", independent_samples=7)
    assert model.get_params()["independent_samples"] == 7 and model.get_params()["rejuvenation_steps"] == 4


def test_stream_command_takes_the_preset_and_the_new_options(tmp_path: Path, local_cluster: object) -> None:
    planted = draw_planted_corpus(n_docs=70, n_topics=3, n_terms=20, doc_length=12, alpha=0.1, seed=4)
    labels = [f"l{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    counts = planted.counts["default"]
    train = write_test_store(tmp_path / "train.zarr", {"default": counts[:50]}, shard_size=25, labels=labels[:50])
    test = write_test_store(tmp_path / "test.zarr", {"default": counts[50:]}, shard_size=25, labels=labels[50:])
    args = ["stream", train, "--out", tmp_path / "run", "--preset", "canini2009-incgibbs", "--samples", 3,
            "--init-docs", 10, "--init-sweeps", 10, "--eval-every", 20, "--test", test, "--format", "json",
            "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    settings = json.loads((tmp_path / "run" / "summary.json").read_text())["config"]
    assert (settings["independent_samples"], settings["rejuvenation_steps"], settings["heldout_mode"]) == (3, 4, "next_docs")
    records = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert all(0.0 <= r["nmi_out_next"] <= 1.0 and 0 <= r["best_sample"] < 3 for r in records)
