"""CLI command ``topicflow reproduce``: one seed paper's configuration, its claims beside ours."""
from __future__ import annotations

import json
from pathlib import Path

import click

from topicflow.cli._common import cluster_options, progress_reporter, reports_errors
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.reproduce import PAPERS, get_paper
from topicflow.pipeline.reproduce import reproduce as run_reproduction


def _papers_help() -> str:
    return "; ".join(f"{name}: {paper.citation} (--corpus: {paper.corpora})" for name, paper in sorted(PAPERS.items()))


@click.command()
@click.argument("paper")
@click.option("--corpus", "corpora", multiple=True, required=True, type=click.Path(file_okay=False),
              help="A corpus store to run on; give it twice when the paper needs two kinds (see the list below).")
@click.option("--test", "test_store", default=None, type=click.Path(file_okay=False),
              help="A held-out store (default: the paper's own split of the corpus).")
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="Output directory [default: reproduce-PAPER].")
@click.option("--scale", type=click.Choice(["quick", "paper"]), default="quick", show_default=True,
              help="quick: a small configuration that shows the claim in minutes; paper: the paper's settings.")
@click.option("--seed", default=0, show_default=True, type=int, help="Base seed of every run.")
@click.option("--overwrite", is_flag=True, help="Write into an existing OUT.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run in OUT with the same settings (may2014, gao2016): what finished "
                   "is read back (may2014's arms, gao2016's jobs), an interrupted may2014 arm continues from its "
                   "last checkpoint; saved work of other settings is refused.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@cluster_options
@reports_errors
def reproduce(paper: str, corpora: tuple[str, ...], test_store: str | None, out: Path | None, scale: str, seed: int,
              overwrite: bool, resume: bool, fmt: str, cluster: ClusterConfig) -> None:
    """Run PAPER's configuration; write OUT/claims.md (paper vs ours), the trace and the figures."""
    spec = get_paper(paper)
    out = out or Path(f"reproduce-{paper}")
    if resume and overwrite:
        raise click.UsageError("--resume continues what is in OUT and --overwrite starts OUT again: give one")
    if resume and not spec.resumable:
        raise click.UsageError(f"the {paper} reproduction cannot be resumed; run it again with --overwrite")
    if out.exists() and any(out.iterdir()) and not (overwrite or resume):
        raise click.UsageError(f"{out} exists and is not empty; give --resume to continue the run in it, "
                               "--overwrite to start again, or another --out")
    stores = [Corpus.open(path) for path in corpora]
    test = Corpus.open(test_store) if test_store else None
    click.echo(f"reproducing {spec.name} ({spec.citation}) at scale {scale} on {', '.join(corpora)}", err=True)
    with connect(cluster) as client:
        click.echo(f"dashboard: {client.dashboard_link}", err=True)
        result = run_reproduction(paper, stores, out, scale=scale, seed=seed, client=client,  # type: ignore[arg-type]
                                  test=test, progress=progress_reporter(), resume=resume)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        verdict = {True: "held", False: "DID NOT HOLD", None: "not comparable"}
        for claim in result.claims:
            click.echo(f"[{verdict[claim.held]}] {claim.claim}\n    paper: {claim.paper}\n    ours:  {claim.ours}"
                       + (f"\n    note:  {claim.note}" if claim.note else ""))
    click.echo(f"wrote {out / 'claims.md'} ({result.seconds:.0f} s)", err=True)


reproduce.help = (reproduce.help or "") + "\n\nPapers: " + (_papers_help() or "none registered")

COMMANDS = [reproduce]
