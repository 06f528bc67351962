"""Deprecated spellings of command-line options, kept working with a warning.

topicflow names one concept one way everywhere (``--doc-topic-prior``, ``--topic-word-prior``,
``--max-iter``, ``--max-doc-iter``: see docs/architecture.md). Commands declared with
:class:`RenamedOptionsCommand` still accept the old spellings (``fit --alpha --eta --iterations``,
``stream --alpha --beta --max-iters``, ...): each is rewritten to its new name before click parses
the arguments, and a one-line warning on stderr says what to type instead.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class RenamedOptionsCommand(click.Command):
    """A click command that maps deprecated option names to their new names, with a warning.

    Parameters
    ----------
    *args, **kwargs
        As for :class:`click.Command`, plus ``renamed``: a mapping from each deprecated option
        (``"--eta"``) to its new name (``"--topic-word-prior"``).
    """

    def __init__(self, *args: Any, renamed: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renamed = dict(renamed or {})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Rewrite deprecated option names in ``args``, then parse as click does.

        Parameters
        ----------
        ctx : click.Context
            The command's context.
        args : list of str
            The command-line arguments after the command name.

        Returns
        -------
        list of str
            What click's own parsing leaves over.
        """
        rewritten = []
        for position, arg in enumerate(args):
            if arg == "--":
                rewritten.extend(args[position:])
                break
            name, equals, value = arg.partition("=")
            if name in self.renamed:
                new = self.renamed[name]
                click.echo(f"topicflow: warning: {name} is deprecated; use {new}", err=True)
                arg = new + equals + value
            rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


def renamed_options(renamed: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments of ``click.command`` for a command with deprecated option names.

    Parameters
    ----------
    renamed : mapping of str to str
        Deprecated option name to its new name.

    Returns
    -------
    dict
        ``{"cls": RenamedOptionsCommand, "renamed": renamed}``.
    """
    return {"cls": RenamedOptionsCommand, "renamed": dict(renamed)}
