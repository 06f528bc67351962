"""`topicflow reproduce`: the registry, the claims table it writes, and its errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.pipeline.reproduce import (
    PAPERS,
    Claim,
    Paper,
    ReproduceRequest,
    Reproduction,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


def _count_docs(request: ReproduceRequest) -> Reproduction:
    counted = [len(corpus) for corpus in request.corpora]
    trace = request.out / "trace.jsonl"
    trace.write_text("".join(json.dumps({"corpus": i, "docs": n}) + "\n" for i, n in enumerate(counted)))
    return Reproduction(
        paper="toy", citation="A toy paper", corpora=[str(c.path) for c in request.corpora], scale=request.scale,
        claims=[Claim("the corpus has 60 documents", "60", str(counted[0]), counted[0] == 60),
                Claim("an ordering we cannot test here", "A > B", "n/a", None, note="no B")],
        trace=trace.name, settings={"seed": request.seed})


@pytest.fixture
def toy_paper() -> Iterator[str]:
    PAPERS["toy"] = Paper(name="toy", citation="A toy paper", corpora="any store", run=_count_docs)
    yield "toy"
    del PAPERS["toy"]


def test_reproduce_writes_the_claims_table(toy_paper: str, tmp_path: Path, local_cluster: object) -> None:
    truth = draw_planted_corpus(n_docs=60, n_topics=2, n_terms=20, doc_length=10, alpha=0.1, seed=1)
    store = write_test_store(tmp_path / "s.zarr", {"default": truth.counts["default"]}, shard_size=30)
    out = tmp_path / "out"
    args = ["reproduce", toy_paper, "--corpus", store, "--out", out, "--seed", 5, "--format", "json",
            "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [c["held"] for c in payload["claims"]] == [True, None]
    assert payload["settings"] == {"seed": 5} and payload["scale"] == "quick"
    assert json.loads((out / "claims.json").read_text())["claims"] == payload["claims"]
    table = (out / "claims.md").read_text()
    assert "| the corpus has 60 documents | 60 | 60 | held |  |" in table
    assert "| an ordering we cannot test here | A > B | n/a | not comparable | no B |" in table

    again = CliRunner().invoke(main, [str(a) for a in args])
    assert again.exit_code == 2 and "exists and is not empty" in again.output


def test_unknown_paper_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["reproduce", "nope", "--corpus", str(tmp_path)])
    assert result.exit_code == 2 and "no reproduction named 'nope'" in result.output
