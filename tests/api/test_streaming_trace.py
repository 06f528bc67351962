"""StreamingLDA's trace_max_bytes, trace_keep and summary_points: the options of ``topicflow stream``."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from topicflow.api.streaming import StreamingLDA
from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

#: The same stream for the estimator and the command: olda, 2 runs, an evaluation every 40 documents.
#: An unlabeled store, so the command draws no NMI plot (the part of its output the estimator lacks).
SETTINGS: dict[str, Any] = dict(init_docs=30, eval_every=40, runs=2, seed=3, init_select="perplexity")
CLI_SETTINGS = ["--algo", "olda", "--topics", 3, "--init-docs", 30, "--eval-every", 40, "--runs", 2, "--seed", 3,
                "--init-select", "perplexity"]
#: A trace that rotates at every save, keeping one rotated segment, and a summary of the last 2 points.
BOUNDS = dict(trace_max_bytes=1, trace_keep=1, summary_points=2)
CLI_BOUNDS = ["--trace-max-bytes", 1, "--trace-keep", 1, "--summary-points", 2]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    planted = draw_planted_corpus(n_docs=150, n_topics=3, n_terms=30, doc_length=20, alpha=0.1, seed=2)
    return write_test_store(tmp_path_factory.mktemp("trace") / "s.zarr", planted.counts, shard_size=50)


def on_disk(out: Path) -> dict[str, Any]:
    """What a stream directory keeps of its history: segment names, their records, trace.jsonl, summary."""
    def records(text: str) -> list[dict[str, Any]]:  # without the wall-clock field
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in text.splitlines()]

    segments = sorted(out.glob("trace-*.jsonl.gz"))
    summary = json.loads((out / "summary.json").read_text())
    return {"segments": {p.name: records(gzip.decompress(p.read_bytes()).decode()) for p in segments},
            "trace": records((out / "trace.jsonl").read_text()),
            "summary_points": [row["point"] for row in summary["summary"]],
            "kept": summary["summary_points"], "config": summary["config"]}


def test_estimator_rotates_the_trace_as_the_cli_does(store: Path, tmp_path: Path, local_cluster: Any) -> None:
    # Two saves (a first stream of 80 documents, then its continuation): the second rotates the trace.
    model = StreamingLDA("olda", n_topics=3, max_docs=80, **BOUNDS, **SETTINGS).fit(store, out=tmp_path / "api")
    model.settings["max_docs"] = None
    model.partial_fit(store)
    cli = tmp_path / "cli"
    common = ["stream", store, "--out", cli, *CLI_SETTINGS, *CLI_BOUNDS,
              "--scheduler", local_cluster.scheduler_address]
    for extra in (["--max-docs", 80], ["--resume"]):
        result = CliRunner().invoke(main, [str(a) for a in [*common, *extra]], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    api, by_cli = on_disk(tmp_path / "api"), on_disk(cli)
    assert api == by_cli
    # The first save's records were rotated into the one segment kept; the trace holds the second's.
    assert list(api["segments"]) == ["trace-000001.jsonl.gz"]
    assert max(r["point"] for r in api["segments"]["trace-000001.jsonl.gz"]) < min(r["point"] for r in api["trace"])
    assert api["trace"] and api["kept"] == 2 and len(api["summary_points"]) == 2
    assert [row["point"] for row in model.summary_] == api["summary_points"]


def test_defaults_are_the_cli_defaults_and_bad_values_are_refused(store: Path) -> None:
    from topicflow.cli.stream import stream

    options = {p.name: p.default for p in stream.params}
    model = StreamingLDA("olda")
    assert (model.trace_max_bytes, model.trace_keep, model.summary_points) == (
        options["trace_max_bytes"], options["trace_keep"], options["summary_points"])
    assert {"trace_max_bytes", "trace_keep", "summary_points"} <= set(model.get_params())
    assert model.set_params(trace_keep=0).trace_rotation().keep == 0
    for name, bad in (("trace_max_bytes", 0), ("trace_keep", -1), ("summary_points", 0), ("trace_keep", 1.5)):
        with pytest.raises(InvalidParameterError, match=name):
            StreamingLDA("olda", n_topics=3, **{name: bad}).fit(store)
