"""`topicflow fit --family hdp | --method scvb0` and the commands that read an HDP model, end to end."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-hdp")
    truth = draw_planted_corpus(n_docs=72, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=4)
    train = write_test_store(base / "train.zarr", {"default": truth.counts["default"][:60]}, shard_size=20)
    test = write_test_store(base / "test.zarr", {"default": truth.counts["default"][60:]}, shard_size=12)
    return train, test


def run(args: list[str]) -> object:
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize(("args", "message"), [
    (["--family", "hdp", "--topics", "5"], "--topics given with --family hdp --method pcsvb0, which does not use it"),
    (["--family", "hdp", "--tau0", "3", "--max-iter", "4"],
     "--max-iter, --tau0 given with --family hdp --method pcsvb0, which does not use them"),
    (["--method", "pcvb0", "--batch-size", "4", "--keep-doc-state"],
     "--batch-size, --keep-doc-state given with --family hdp --method pcvb0"),
    (["--method", "pcvb0", "--hyper-step", "5,100"], "--hyper-step: pcsvb0"),
    (["--method", "online", "--topics", "3", "--truncation", "5"],
     "--truncation given with --family lda --method online, which does not use it (where each applies: "
     "--truncation: pcsvb0, pcvb0)"),
    (["--topics", "3", "--clumping"], "--clumping given with --family lda --method batch"),
    (["--method", "scvb0", "--topics", "3", "--clumping", "--alpha-init", "2"],
     "--alpha-init, --clumping given with --family lda --method scvb0"),
    (["--method", "scvb0", "--topics", "3", "--seed-words", "w.txt"], "--seed-words given with --family lda --method scvb0"),
    (["--family", "hdp", "--method", "online"], "--family hdp is fitted by --method pcsvb0 or pcvb0"),
    (["--family", "lda", "--method", "pcvb0"], "--method pcvb0 fits the HDP family: use --family hdp"),
    (["--family", "hdp", "--eval-every", "10"], "--eval-every scores the --test store along the fit; give --test"),
    (["--method", "svb", "--topics", "3", "--passes", "2"], "--passes given with --method svb"),
])
def test_options_of_other_families_and_methods_are_refused(args: list[str], message: str, tmp_path: Path) -> None:
    result = run(["fit", str(tmp_path / "no-store"), "--model", str(tmp_path / "m"), *args])
    assert result.exit_code == 2, result.output  # a usage error, before the store is opened
    assert message in " ".join(result.output.split()), result.output


def test_bad_step_and_missing_topics_are_explained(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    result = run(["fit", str(train), "--model", str(tmp_path / "m"), "--family", "hdp", "--topic-word-step", "10,1"])
    assert result.exit_code == 2 and "'topic_word_step' parameter of HDP" in result.output, result.output
    assert "exceeds 1" in result.output or "s / tau^kappa <= 1" in result.output
    result = run(["fit", str(train), "--model", str(tmp_path / "m"), "--method", "scvb0"])
    assert result.exit_code == 2 and "Missing option '--topics'" in result.output, result.output
    assert not (tmp_path / "m").exists()
