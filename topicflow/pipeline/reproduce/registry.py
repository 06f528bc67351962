"""The papers ``topicflow reproduce`` knows, and what each one's run receives.

Each paper is one module of this package that builds its configuration from the paper's printed
settings, runs it on the cluster, and returns a :class:`~topicflow.pipeline.reproduce.claims.Reproduction`;
it registers itself with :func:`register` when imported (the package ``__init__`` imports them all).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.reproduce.claims import Reproduction

Scale = Literal["quick", "paper"]


@dataclass
class ReproduceRequest:
    """What a paper's run gets from ``topicflow reproduce``.

    Parameters
    ----------
    corpora : list of Corpus
        The stores given with ``--corpus`` (a paper module picks the kind it needs and refuses clearly
        when one is missing).
    out : Path
        The output directory (exists; the module writes its trace and figures here).
    scale : {"quick", "paper"}
        ``quick``: a small configuration that shows the claim in minutes; ``paper``: the paper's settings.
    seed : int
        Base seed of every run.
    client : distributed.Client or None
        Where the work runs.
    test : Corpus or None
        A held-out store, when the user gave ``--test``; otherwise the module splits its own.
    progress : ProgressReporter
        Where long loops report.
    resume : bool
        Continue an interrupted run in ``out`` (only papers registered as ``resumable``): what
        finished is read back, what was interrupted continues from its last checkpoint.
    """

    corpora: list[Corpus]
    out: Path
    scale: Scale = "quick"
    seed: int = 0
    client: Any = None
    test: Corpus | None = None
    progress: ProgressReporter = field(default_factory=lambda: NO_PROGRESS)
    resume: bool = False


@dataclass(frozen=True)
class Paper:
    """One reproducible paper.

    Parameters
    ----------
    name : str
        The name given to ``topicflow reproduce`` (``"may2014"``).
    citation : str
        The paper.
    corpora : str
        What ``--corpus`` must be (for ``--help`` and errors).
    run : callable
        ``run(request) -> Reproduction``.
    resumable : bool
        ``run`` honours ``request.resume`` (a run of hours at the paper's scale can be continued).
    """

    name: str
    citation: str
    corpora: str
    run: Callable[[ReproduceRequest], Reproduction]
    resumable: bool = False


#: Every registered paper by name.
PAPERS: dict[str, Paper] = {}


def register(paper: Paper) -> Paper:
    """Add a paper to :data:`PAPERS`.

    Parameters
    ----------
    paper : Paper
        The paper; its name must be new.

    Returns
    -------
    Paper
        The same paper (so a module can keep it).
    """
    if paper.name in PAPERS:
        raise ValueError(f"paper {paper.name!r} is registered twice")
    PAPERS[paper.name] = paper
    return paper


def get_paper(name: str) -> Paper:
    """The registered paper ``name``.

    Parameters
    ----------
    name : str
        A paper name.

    Returns
    -------
    Paper

    Raises
    ------
    InvalidParameterError
        No such paper (the message lists the ones there are).
    """
    try:
        return PAPERS[name]
    except KeyError:
        raise InvalidParameterError(
            f"no reproduction named {name!r}; known: {', '.join(sorted(PAPERS)) or 'none'}") from None
