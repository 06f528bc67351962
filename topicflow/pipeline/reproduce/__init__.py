"""``topicflow reproduce PAPER``: run a seed paper's configuration and set its claims beside ours.

Each paper lives in one module of this package and registers itself in
:data:`~topicflow.pipeline.reproduce.registry.PAPERS` when imported; this ``__init__`` imports them all
(one line per paper) and offers :func:`reproduce`, which runs one and writes its claims table.
"""
from __future__ import annotations

import time
from pathlib import Path

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

# One import per paper (each registers itself).
from topicflow.pipeline.reproduce import bleier2016 as _bleier2016  # noqa: F401,E402  (Bleier: PCSVB0, Fig. 1)
from topicflow.pipeline.reproduce import canini2009 as _canini2009  # noqa: F401,E402  (Canini, Shi & Griffiths 2009)
from topicflow.pipeline.reproduce import gao2016 as _gao2016  # noqa: F401,E402
from topicflow.pipeline.reproduce import may2014 as _may2014  # noqa: F401,E402  (May, Clemmer & Van Durme 2014)
from topicflow.pipeline.reproduce import mrlda as _mrlda  # noqa: F401,E402  (zhai2014-mrlda)
from topicflow.pipeline.reproduce.claims import Claim, Reproduction, write_reproduction
from topicflow.pipeline.reproduce.registry import (
    PAPERS,
    Paper,
    ReproduceRequest,
    Scale,
    get_paper,
    register,
)

__all__ = ["PAPERS", "Claim", "Paper", "ReproduceRequest", "Reproduction", "Scale", "get_paper", "register",
           "reproduce"]


def reproduce(name: str, corpora: list[Corpus], out: Path, *, scale: Scale = "quick", seed: int = 0,
              client: object = None, test: Corpus | None = None,
              progress: ProgressReporter = NO_PROGRESS, resume: bool = False) -> Reproduction:
    """Run the reproduction of paper ``name`` and write ``OUT/claims.json`` and ``OUT/claims.md``.

    Parameters
    ----------
    name : str
        A registered paper (``topicflow reproduce --help`` lists them).
    corpora : list of Corpus
        The stores to run on (what each paper needs is in its ``corpora`` description).
    out : Path
        Output directory; created if missing.
    scale : {"quick", "paper"}
        A small run that shows the claim, or the paper's settings.
    seed : int
        Base seed.
    client : distributed.Client, optional
        Where the work runs.
    test : Corpus, optional
        A held-out store; by default the paper module holds out its own documents.
    progress : ProgressReporter
        Progress of long loops.
    resume : bool
        Continue an interrupted run of the same settings in ``out`` (papers registered as
        ``resumable``, such as may2014, whose paper scale runs for hours).

    Returns
    -------
    Reproduction
        The claims beside ours, the figures and the trace written.

    Raises
    ------
    InvalidParameterError
        ``resume`` for a paper whose reproduction cannot resume, or bad input (the paper module's).
    """
    paper = get_paper(name)
    if resume and not paper.resumable:
        raise InvalidParameterError(f"the {name} reproduction cannot be resumed; run it again with --overwrite "
                                    f"(resumable: {', '.join(sorted(p for p, v in PAPERS.items() if v.resumable))})")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = paper.run(ReproduceRequest(corpora=list(corpora), out=out, scale=scale, seed=seed, client=client,
                                        test=test, progress=progress, resume=resume))
    result.seconds = time.perf_counter() - started
    write_reproduction(result, out)
    return result
