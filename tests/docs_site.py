"""One build of the documentation site for the whole test session, shared by test_docs and test_notebooks.

The build is ``make docs``'s command into a temporary directory, with the notebooks' ``parameters`` cells
set to :data:`NOTEBOOK_PARAMETERS` (smaller than the site's own values in docs/conf.py), so that each
notebook runs once in the suite. Both test modules are in the ``docs-site`` xdist group (``make test``
runs with ``--dist loadgroup``), so one worker builds the site once.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from topicflow.testing.faults import HANG_GUARD_SECONDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"
#: The trees a build could write into by mistake (its own output goes to the temporary directory).
WATCHED = (DOCS, NOTEBOOKS, ROOT / "benchmarks", ROOT / "README.md")
#: The xdist group of every test that reads the built site.
GROUP = pytest.mark.xdist_group("docs-site")

#: Per notebook (by stem): the source of its ``parameters`` cell in the test build.
NOTEBOOK_PARAMETERS = {
    "lda_walkthrough": "N_PASSAGES = 300\nN_TOPICS = 5\nITERATIONS = 8\nWORKERS = 1\n",
    "online_and_nightly": (
        "N_PASSAGES = 600\nN_TOPICS = 5\nBATCH_SIZE = 32\nPASSES = 2\nEVAL_EVERY = 3\nDAYS = 7\n"
        "PROMOTE_MIN_DF = 2\nWORKERS = 1\n"
    ),
    "particle_filter": (
        "GROUPS = ['Law', 'Wisdom', 'Gospels']\nPER_GROUP = 60\nPARTICLES = 10\nREJUV = 5\nRESERVOIR = 300\n"
        "RUNS = 2\nINIT_DOCS = 15\nWORKERS = 1\n"
    ),
}


@dataclass(frozen=True)
class Site:
    """The built site and the watched repository files before and after the build."""

    html: Path
    files_before: frozenset[str]
    files_after: frozenset[str]

    def page(self, name: str) -> str:
        path = self.html / f"{name}.html"
        assert path.is_file(), f"{name}.html was not built"
        return path.read_text(encoding="utf-8")


def _files() -> frozenset[str]:
    found = set()
    for top in WATCHED:
        paths = top.rglob("*") if top.is_dir() else [top]
        found |= {str(p.relative_to(ROOT)) for p in paths if "__pycache__" not in p.parts}
    return frozenset(found)


def build_site(out: Path) -> Site:
    """Build the site into ``out`` (``make docs``'s command: -W, -n); fail the test with Sphinx's stderr."""
    before = _files()
    parameters = out / "notebook-parameters.json"
    parameters.write_text(json.dumps(NOTEBOOK_PARAMETERS), encoding="utf-8")
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-n", "-W", "--keep-going", "-q",
               "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    env = {**os.environ, "TOPICFLOW_DOCS_NOTEBOOK_PARAMETERS": str(parameters)}
    # The timeout is a hang guard only (the build takes under a minute).
    result = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=4 * HANG_GUARD_SECONDS)
    if result.returncode != 0:
        pytest.fail(f"the documentation build failed (exit {result.returncode}):\n{result.stderr[-6000:]}")
    return Site(out / "html", before, _files())
