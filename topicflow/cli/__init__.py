"""The ``topicflow`` command line. Each command family lives in its own ``cli_*`` module.

Commands are loaded when they run: :data:`COMMAND_MODULES` names the module and function of each,
so ``topicflow fit`` imports ``topicflow.cli.model`` (and what it uses) and nothing of the other
families, and ``topicflow --help`` imports none of them (no Dask, numba or zarr): it reads each
command's one-line help from its module's source.
"""
from __future__ import annotations

import ast
import atexit
import functools
import gc
import importlib
import importlib.util
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any, cast

import click

from topicflow._numba_cache import skip_numba_extensions
from topicflow._version import __version__
from topicflow.cli._common import setup_logging

#: Every command: name -> (module under ``topicflow.cli``, the click command's function name).
#: A new command goes here and in its module's ``COMMANDS`` (tests/cli/test_lazy_cli.py checks both).
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "append": ("corpus", "append"),
    "coherence": ("coherence", "coherence"),
    "evaluate": ("model", "evaluate"),
    "export": ("model", "export"),
    "fit": ("model", "fit"),
    "g0": ("g0", "g0"),
    "grammar": ("grammar", "grammar"),
    "infer": ("model", "infer"),
    "info": ("corpus", "info"),
    "ingest": ("corpus", "ingest"),
    "report": ("report", "report"),
    "reproduce": ("reproduce", "reproduce"),
    "rollback": ("versions", "rollback_command"),
    "stream": ("stream", "stream"),
    "synth": ("synth", "synth"),
    "topics": ("model", "topics"),
    "tree": ("tree", "tree"),
    "update": ("update", "update"),
    "versions": ("versions", "versions"),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name: those of :data:`COMMAND_MODULES` are imported on first access.

    Names, membership and iteration never import anything; reading a command imports its module.
    """

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMAND_MODULES:
                raise KeyError(name)
            module, attribute = COMMAND_MODULES[name]
            self._loaded[name] = getattr(importlib.import_module(f"topicflow.cli.{module}"), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in COMMAND_MODULES

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*self._loaded, *COMMAND_MODULES}))

    def __len__(self) -> int:
        return len({*self._loaded, *COMMAND_MODULES})

    def is_loaded(self, name: str) -> bool:
        """Whether command ``name`` has been imported (or added directly)."""
        return name in self._loaded


class LazyDefault:
    """An option default that is a constant of another module, imported when the default is needed.

    ``@click.option("--concepts", default=LazyDefault("topicflow.pipeline.tree_lda.readout",
    "DEFAULT_CONCEPTS"), show_default=True)`` keeps the constant in one place without importing its
    module (and what that module imports) when a command module is loaded: click calls the default
    when the option is not given, and ``--help`` shows ``str()`` of it, the constant's value.

    Parameters
    ----------
    module : str
        The module that defines the constant.
    name : str
        The constant's name in ``module``.
    """

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self) -> Any:
        """The constant's value (imports ``module``)."""
        return getattr(importlib.import_module(self.module), self.name)

    def __str__(self) -> str:
        return str(self())

    def __repr__(self) -> str:
        return f"LazyDefault({self.module!r}, {self.name!r})"


class LazyGroup(click.Group):
    """A click group whose commands (:class:`LazyCommands`) are imported when first looked up."""

    #: Whether the group runs as the program (set by :meth:`main`).
    as_program: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands()

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        """Run the command line; as the program, with the garbage collector set for a short-lived process.

        Called without ``args`` in standalone mode (the console script, ``python -m topicflow``), the
        group is the program: the process ends when the command does. Then the collector pauses while
        click imports the command's module and :attr:`as_program` is set, so the group's callback
        freezes what the imports left (full passes no longer scan it) and resumes the collector; and
        :func:`freeze_heap_at_exit` spares the interpreter's shutdown its full passes (issue 22.3).
        Called with ``args`` (tests, ``CliRunner``, a driver in a longer-lived process), none of this
        happens.
        """
        if args is None and standalone_mode:
            freeze_heap_at_exit()
            self.as_program = True
            gc.disable()  # until the command's modules are imported (the callback freezes and re-enables)
        return super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                            standalone_mode=standalone_mode, windows_expand_args=windows_expand_args, **extra)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, read from each module's source for the commands not imported yet."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        lazy = cast(LazyCommands, self.commands)
        rows = [(name, (self.commands[name] if lazy.is_loaded(name) or name not in COMMAND_MODULES
                        else click.Command(name, help=command_help(name))).get_short_help_str(limit))
                for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def freeze_heap_at_exit() -> None:
    """Move every object to the garbage collector's permanent generation when the interpreter exits.

    Registered with :mod:`atexit` when the command line runs as the program. The interpreter's
    shutdown runs full garbage collections while it tears the modules down; with numba's compiler,
    Dask, distributed and zarr loaded (about 150,000 tracked objects) they took 0.9 to 1.0 s of every
    command at load average 10 on the 2-core machine, against 0.1 s with the heap frozen. Frozen
    objects are still freed when their reference count drops to zero (files closed, buffers flushed);
    only reference cycles alive at exit are left to the operating system, as ``os._exit`` would leave
    everything. Every ``atexit`` handler still runs (logging's flush among them), and a command's
    outputs are written and closed before it returns (atomic writes with fsync), so nothing a command
    writes depends on the collection.
    """
    atexit.register(gc.freeze)


def command_help(name: str) -> str:
    """The help text (docstring) of command ``name``, read from its module's source without importing it.

    Parameters
    ----------
    name : str
        A key of :data:`COMMAND_MODULES`.

    Returns
    -------
    str
        The cleaned docstring of the command's function ("" when it has none).
    """
    module, attribute = COMMAND_MODULES[name]
    return _docstrings(module).get(attribute, "")


@functools.lru_cache(maxsize=None)
def _docstrings(module: str) -> dict[str, str]:
    """Docstrings of the top-level functions of ``topicflow.cli.<module>``, by function name."""
    spec = importlib.util.find_spec(f"topicflow.cli.{module}")
    if spec is None or spec.origin is None:
        return {}
    with open(spec.origin, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    return {node.name: ast.get_docstring(node) or "" for node in tree.body if isinstance(node, ast.FunctionDef)}


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="topicflow")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for Dask's own).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@click.option("--debug", is_flag=True, envvar="TOPICFLOW_DEBUG",
              help="On an error, show its traceback and the workers' full logs (docs/reliability.md). "
              "Also TOPICFLOW_DEBUG=1.")
def main(verbose: int, quiet: bool, debug: bool) -> None:
    """Out-of-core topic models on Dask: ingest corpora, fit, update and evaluate models."""
    setup_logging(-1 if quiet else verbose, debug=debug)
    # click has imported the command's module (and numba with it) before this runs: the command's
    # first kernel call then skips numba's loading of other packages' extensions (start-up, issue 22.3).
    skip_numba_extensions()
    if cast(LazyGroup, click.get_current_context().command).as_program:
        # click has imported the command's module (with the collector paused: imports leave next to no
        # garbage): its objects live as long as the process, so the collector's full passes need not
        # scan them (~150,000 tracked objects; three full passes before a fit's first iteration took
        # 0.15-0.24 s at load 6). The program only: a frozen object is never collected, which a
        # long-lived caller's heap should not get.
        gc.freeze()
        gc.enable()


if __name__ == "__main__":
    main()
