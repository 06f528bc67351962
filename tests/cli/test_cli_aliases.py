"""Deprecated option spellings still work, print one warning, and mean the same as the new ones."""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.cli._aliases import RenamedOptionsCommand, renamed_options


@click.command(**renamed_options({"--eta": "--topic-word-prior", "--iterations": "--max-iter"}))
@click.option("--topic-word-prior", type=float, default=0.01)
@click.option("--max-iter", type=int, default=5)
@click.argument("rest", nargs=-1)
def probe(topic_word_prior: float, max_iter: int, rest: tuple[str, ...]) -> None:
    click.echo(f"{topic_word_prior} {max_iter} {list(rest)}")


def test_old_names_map_to_new_ones_with_a_warning() -> None:
    result = CliRunner().invoke(probe, ["--eta", "0.5", "--iterations=7"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "0.5 7 []"
    assert "--eta is deprecated; use --topic-word-prior" in result.stderr
    assert "--iterations is deprecated; use --max-iter" in result.stderr


def test_new_names_give_no_warning_and_the_same_values() -> None:
    result = CliRunner().invoke(probe, ["--topic-word-prior", "0.5", "--max-iter", "7"])
    assert result.exit_code == 0 and result.stdout.strip() == "0.5 7 []" and result.stderr == ""


def test_arguments_after_double_dash_are_left_alone() -> None:
    result = CliRunner().invoke(probe, ["--", "--eta"])
    assert result.exit_code == 0 and result.stdout.strip() == "0.01 5 ['--eta']" and result.stderr == ""


@pytest.mark.parametrize(("command", "renamed"), [
    ("fit", {"--alpha": "--doc-topic-prior", "--eta": "--topic-word-prior",
             "--optimize-eta": "--optimize-topic-word-prior", "--iterations": "--max-iter",
             "--doc-iterations": "--max-doc-iter"}),
    ("stream", {"--alpha": "--doc-topic-prior", "--beta": "--topic-word-prior", "--max-iters": "--max-iter"}),
    ("synth", {"--alpha": "--doc-topic-prior", "--eta": "--topic-word-prior"}),
])
def test_commands_keep_their_old_spellings(command: str, renamed: dict[str, str]) -> None:
    """Every renamed option of the real commands maps to an option that exists."""
    cmd = main.commands[command]  # type: ignore[attr-defined]
    assert isinstance(cmd, RenamedOptionsCommand)
    assert cmd.renamed == renamed
    declared = {opt for param in cmd.params for opt in param.opts}
    assert set(renamed.values()) <= declared and not set(renamed) & declared


def test_stream_refuses_an_option_its_algorithm_does_not_take(tmp_path: object) -> None:
    """A typed option of another algorithm is refused by name; its default is not in the way."""
    from pathlib import Path

    from topicflow.testing.corpora import draw_planted_corpus, write_test_store

    truth = draw_planted_corpus(n_docs=20, n_topics=2, n_terms=10, doc_length=5, alpha=0.5, seed=1)
    store = write_test_store(Path(str(tmp_path)) / "s.zarr", truth.counts, shard_size=10)
    result = CliRunner().invoke(main, ["stream", str(store), "--out", str(Path(str(tmp_path)) / "out"),
                                       "--algo", "sgs", "--topics", "2", "--particles", "5"])
    assert result.exit_code == 2, result.output
    assert "n_particles does not apply to algorithm 'sgs'" in result.output
