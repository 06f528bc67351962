"""CLI command for nightly incremental updates of a saved model: ``topicflow update``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from topicflow._typing import OutputFormat, choices
from topicflow.cli._common import (
    LOCATION,
    cluster_options,
    progress_reporter,
    reports_errors,
    storage_options_option,
)
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.vb.online import EXECUTORS

#: Methods continued by the collapsed drivers (topicflow.pipeline.collapsed), with their own schedule.
COLLAPSED_METHODS = ("pcsvb0", "pcvb0", "scvb0")


@click.command()
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.argument("store", type=LOCATION)
@click.option("--batch-size", default=None, type=click.IntRange(min=1), help="Documents per minibatch (default: the model's).")
@click.option("--tau0", default=None, type=float, help="Online: delay of the step sizes (default: the model's).")
@click.option("--kappa", default=None, type=float, help="Online: forgetting rate (default: the model's).")
@click.option("--passes", default=None, type=click.IntRange(min=1), help="Passes over the new documents (default 1).")
@click.option("--shuffle-window", default=None, type=click.IntRange(min=0), help="Shuffle within windows of this many documents.")
@click.option("--executor", type=click.Choice(list(EXECUTORS)), default=None,
              help="Where minibatch E-steps run (default: the model's); the result is the same. Tree LDA models "
                   "always run them as tasks.")
@click.option("--keep", default=None, type=click.IntRange(min=1), help="Afterwards keep only the newest N versions.")
@click.option("--format", "fmt", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@cluster_options
@storage_options_option
@reports_errors
def update(model_path: Path | str, store: Path | str, batch_size: int | None, tau0: float | None, kappa: float | None,
           passes: int | None, shuffle_window: int | None, executor: str | None, keep: int | None, fmt: str, cluster: ClusterConfig) -> None:
    """Continue MODEL with the shards of STORE it has not seen, and save the result as a new version.

    The vocabulary grows with terms that `topicflow append --promote-min-df` added to STORE. An HDP
    (pcsvb0) or SCVB0 model continues its own step-size schedules; a pcvb0 model (batch) is refitted instead. A
    tree LDA model (batch, online or Gibbs) continues by online tree VB with its own prior tree; new terms hang
    from the tree's root until the tree is rebuilt and the model refitted. The model is locked meanwhile; a
    crashed update leaves the previous version current, and running the same command again redoes it. Exit status 0 also when there is nothing new.
    MODEL and STORE may be URLs (s3://...): the lock is then a lease object, MODEL/.lease.json (docs/storage.md).
    """
    from dataclasses import replace

    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.store import load_model, refuse_remote_lock
    from topicflow.pipeline.update import update_model
    from topicflow.pipeline.vb.online import OnlineConfig

    refuse_remote_lock(model_path, action="update")  # before any work: gs://, az:// have no lease yet
    model = load_model(model_path)  # a Path or a URL string
    # Models whose minibatch size and step sizes are part of the saved schedule: only --passes and --keep apply.
    if model.info.family == "adaptor_grammar":
        schedule = "is an adaptor grammar, whose minibatch size and step sizes (tau, kappa)"
    elif model.info.method in COLLAPSED_METHODS:
        schedule = f"was fitted by {model.info.method}, whose minibatch size, shuffle and step sizes"
    else:
        schedule = None
    if schedule is not None:
        given = {"--batch-size": batch_size, "--tau0": tau0, "--kappa": kappa, "--shuffle-window": shuffle_window,
                 "--executor": executor}
        typed = [name for name, value in given.items() if value is not None]
        if typed:
            raise click.UsageError(
                f"{', '.join(typed)} given, but {model_path} {schedule} are part of its schedule and continue as "
                "saved; only --passes and --keep apply (drop them)")
    if model.info.method == "svb" and (tau0 is not None or kappa is not None):
        raise click.UsageError(f"--tau0/--kappa given, but {model_path} was fitted by streaming VB (svb), which has no "
                               "step sizes: its update adds the new documents' statistics to its posterior; drop them")
    stored = (model.info.online or {}).get("config")
    online = OnlineConfig.from_dict(stored) if stored else OnlineConfig()
    changes: dict[str, Any] = {"batch_size": batch_size, "tau0": tau0, "kappa": kappa, "passes": passes,
                               "shuffle_window": shuffle_window, "executor": executor}
    online = replace(online, total_docs=None, **{k: v for k, v in changes.items() if v is not None})
    if model.info.method in COLLAPSED_METHODS or model.info.family == "adaptor_grammar":
        online = OnlineConfig(passes=passes or 1)  # the continuer takes only the passes
    elif model.info.method == "svb":
        from topicflow.pipeline.vb.svb import SVBConfig

        SVBConfig.from_online(online)  # refuses --passes > 1 before a cluster starts
    corpus = Corpus.open(store)
    with connect(cluster) as client:
        result = update_model(model_path, corpus, online=online, client=client, keep=keep, progress=progress_reporter())
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    if result.version is None:
        click.echo(f"{model_path} has already seen every shard of {store}; nothing to do.", err=True)
    else:
        grown = ", ".join(f"{lang} +{n}" for lang, n in result.new_terms.items() if n) or "none"
        click.echo(
            f"version {result.version}: {len(result.new_shards)} new shards, {result.new_docs} documents, "
            f"{result.minibatches} minibatches in {result.seconds:.1f} s; new terms: {grown}",
            err=True,
        )
        if model.info.family == "tree_lda" and any(result.new_terms.values()):
            from topicflow.pipeline.tree_lda.nightly import NEW_TERMS_NOTE

            click.echo(f"note: {NEW_TERMS_NOTE}", err=True)
    if result.pruned:
        click.echo(f"pruned versions {', '.join(map(str, result.pruned))}", err=True)


COMMANDS = [update]
