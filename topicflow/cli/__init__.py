"""The ``topicflow`` command line. Each command family lives in its own ``cli_*`` module."""
from __future__ import annotations

import click

from topicflow._version import __version__
from topicflow.cli._common import setup_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="topicflow")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for Dask's own).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def main(verbose: int, quiet: bool) -> None:
    """Out-of-core topic models on Dask: ingest corpora, fit, update and evaluate models."""
    setup_logging(-1 if quiet else verbose)


def _register() -> None:
    from topicflow.cli import coherence as cli_coherence
    from topicflow.cli import corpus as cli_corpus
    from topicflow.cli import g0 as cli_g0
    from topicflow.cli import model as cli_model
    from topicflow.cli import report as cli_report
    from topicflow.cli import reproduce as cli_reproduce
    from topicflow.cli import stream as cli_stream
    from topicflow.cli import synth as cli_synth
    from topicflow.cli import tree as cli_tree
    from topicflow.cli import update as cli_update
    from topicflow.cli import versions as cli_versions

    for module in (cli_coherence, cli_corpus, cli_model, cli_report, cli_reproduce, cli_stream, cli_synth, cli_update,
                   cli_versions, cli_tree, cli_g0):
        for command in module.COMMANDS:
            main.add_command(command)


_register()

if __name__ == "__main__":
    main()
