"""What a reproduction reports: each claim of the paper beside our number, and whether it held.

A :class:`Reproduction` is written as ``OUT/claims.json`` (for programs) and ``OUT/claims.md`` (a
table for people), next to the trace and the figures the paper's module wrote.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from topicflow.io._atomic import atomic_write_bytes


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, checked.

    Parameters
    ----------
    claim : str
        What the paper says, in words ("SGS reaches a lower perplexity than SVB at every minibatch size").
    paper : str
        The paper's printed number or ordering, with where it is printed ("Fig. 1a: 1,050 vs 1,180").
    ours : str
        Our number or ordering under the same protocol.
    held : bool or None
        Whether the claim held here; None when it cannot be compared (``note`` says why).
    note : str
        Why ours differs, or what was not comparable.
    """

    claim: str
    paper: str
    ours: str
    held: bool | None
    note: str = ""


@dataclass
class Reproduction:
    """The outcome of ``topicflow reproduce PAPER``.

    Parameters
    ----------
    paper : str
        The registered name (``"gao2016"``).
    citation : str
        The paper.
    corpora : list of str
        The stores it ran on.
    scale : str
        ``"quick"`` or ``"paper"``.
    claims : list of Claim
        Each claim beside ours.
    figures : list of str
        Paths of the figures written, relative to the output directory.
    trace : str or None
        Path of the trace (JSON lines), relative to the output directory.
    settings : dict
        The configuration that ran.
    seconds : float
        Wall time of the run.
    """

    paper: str
    citation: str
    corpora: list[str]
    scale: str
    claims: list[Claim] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    trace: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready data.

        Returns
        -------
        dict
        """
        return asdict(self)

    @property
    def held(self) -> bool:
        """True when every comparable claim held.

        Returns
        -------
        bool
        """
        return all(claim.held is not False for claim in self.claims)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_markdown(result: Reproduction) -> str:
    """Render the claims as a Markdown table with the settings and figures.

    Parameters
    ----------
    result : Reproduction
        A finished reproduction.

    Returns
    -------
    str
    """
    verdict = {True: "held", False: "did not hold", None: "not comparable"}
    lines = [f"# Reproduction: {result.paper}", "", f"{result.citation}", "",
             f"Corpora: {', '.join(result.corpora)}; scale: {result.scale}; {result.seconds:.0f} s.", "",
             "| claim | paper | ours | verdict | note |", "|---|---|---|---|---|"]
    for claim in result.claims:
        lines.append(f"| {_cell(claim.claim)} | {_cell(claim.paper)} | {_cell(claim.ours)} | "
                     f"{verdict[claim.held]} | {_cell(claim.note)} |")
    if result.figures:
        lines += ["", "Figures:", ""] + [f"![{name}]({name})" for name in result.figures]
    if result.trace:
        lines += ["", f"Trace: `{result.trace}`"]
    lines += ["", "Settings:", "", "```json", json.dumps(result.settings, indent=2, sort_keys=True, default=str),
              "```", ""]
    return "\n".join(lines)


def write_reproduction(result: Reproduction, out: Path) -> tuple[Path, Path]:
    """Write ``claims.json`` and ``claims.md`` into ``out``.

    Parameters
    ----------
    result : Reproduction
        A finished reproduction.
    out : Path
        The output directory (exists).

    Returns
    -------
    tuple of Path
        The JSON and the Markdown file.
    """
    json_path, md_path = out / "claims.json", out / "claims.md"
    text = json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str) + "\n"
    atomic_write_bytes(json_path, text.encode("utf-8"))
    atomic_write_bytes(md_path, claims_markdown(result).encode("utf-8"))
    return json_path, md_path
