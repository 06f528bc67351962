"""``topicflow versions | rollback``: list, prune and roll back the versions of a saved model.

This module only parses options and prints; the work is done by :mod:`topicflow.io.models.versions`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from topicflow._typing import OutputFormat, choices
from topicflow.cli._common import LOCATION, reports_errors, storage_options_option
from topicflow.io.models.store import refuse_remote_lock
from topicflow.io.models.versions import (
    VersionInfo,
    list_versions,
    prune_versions,
    rollback,
)


def _format_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _format_summary(summary: dict[str, Any]) -> str:
    return " ".join(f"{key}={_format_value(value)}" for key, value in summary.items()) or "-"


def _format_versions(model: Path | str, infos: list[VersionInfo], removed: list[int]) -> list[str]:
    lines = [f"model {model}"]
    if removed:
        lines.append(f"removed versions {', '.join(str(v) for v in removed)}")
    lines.append(f"  {'version':>7}  {'created (UTC)':<19}  {'kind':<6}  summary")
    for info in infos:
        marker = "*" if info.is_current else " "
        created = info.created[:19].replace("T", " ")
        suffix = "  (current)" if info.is_current else ""
        lines.append(f"{marker} {info.version:>7}  {created:<19}  {info.kind:<6}  "
                     f"{_format_summary(info.summary)}{suffix}")
    return lines


@click.command()
@click.argument("model", type=LOCATION)
@click.option("--keep", type=click.IntRange(min=1), default=None, metavar="N",
              help="First remove the oldest versions beyond the newest N (never the current one).")
@click.option("--format", "output_format", type=click.Choice(choices(OutputFormat)), default="text",
              show_default=True, help="Human-readable text or JSON.")
@storage_options_option
@reports_errors
def versions(model: Path | str, keep: int | None, output_format: str) -> None:
    """List the versions of MODEL, oldest first, the current one marked with *.

    Each nightly `topicflow update` adds a version; `topicflow rollback MODEL N` makes an older
    one current again. MODEL may be a URL (s3://...); --keep there takes the model's lease
    (docs/storage.md).
    """
    if keep is not None:
        refuse_remote_lock(model, action="prune")  # before reading anything: gs://, az:// have no lease
    removed = prune_versions(model, keep) if keep is not None else []
    infos = list_versions(model)
    if output_format == "json":
        current = next(info.version for info in infos if info.is_current)
        payload = {"model": str(model), "current": current, "removed": removed,
                   "versions": [info.to_dict() for info in infos]}
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for line in _format_versions(model, infos, removed):
            click.echo(line)


@click.command("rollback")
@click.argument("model", type=LOCATION)
@click.argument("version", type=click.IntRange(min=1))
@storage_options_option
@reports_errors
def rollback_command(model: Path | str, version: int) -> None:
    """Make VERSION the current version of MODEL (later versions are kept; see `topicflow versions`)."""
    refuse_remote_lock(model, action="rollback")  # before reading anything: gs://, az:// have no lease
    before = next(info.version for info in list_versions(model) if info.is_current)
    rollback(model, version)
    if before == version:
        click.echo(f"model {model}: version {version} is already current")
    else:
        click.echo(f"model {model}: current version is now {version} (was {before})")


COMMANDS = [versions, rollback_command]
