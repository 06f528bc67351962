"""The notebooks run top to bottom (on small data) and every cell's own assertions hold.

Each notebook runs once in the suite: inside the documentation build of tests/docs_site.py (with the
small values of its ``NOTEBOOK_PARAMETERS``), whose -W build fails on an error in any cell. These tests
read what each notebook printed and drew from its built page.
"""
from __future__ import annotations

import html
import re

import nbformat
import pytest

from tests.docs_site import GROUP, NOTEBOOK_PARAMETERS, NOTEBOOKS, Site

pytestmark = GROUP

#: Per notebook: text its run must print with the test parameters, and the plots it must draw.
EXPECTED = {
    "lda_walkthrough": (
        ("300 kept", "iterations, converged"),
        ["ELBO trace", "topic bars", "book profile"],
    ),
    "online_and_nightly": (
        ("405 read, 405 kept", "minibatches, 810 documents", "update after the rollback: version 9 (parent 7)"),
        ["perplexity curve", "perplexity and vocabulary per day"],
    ),
    "particle_filter": (
        ("stream: 108 passages", "particle filter: 2 runs", "o-LDA: 2 runs", "resampling events, lineage depth"),
        ["NMI bands", "particle cloud memory"],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_executes(site: Site, name: str) -> None:
    page = site.page(f"notebooks/{name}")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    snippets, plots = EXPECTED[name]
    assert all(snippet in text for snippet in snippets), [s for s in snippets if s not in text]
    assert "Traceback" not in text and 'class="output traceback' not in page
    images = re.findall(r'<img [^>]*src="\.\./(_images/[^"]+\.png)"', page)
    assert len(images) >= len(plots), f"expected plots: {', '.join(plots)}"
    assert all((site.html / image).is_file() for image in images)


def test_every_notebook_is_tested() -> None:
    stems = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    assert stems == sorted(NOTEBOOK_PARAMETERS) == sorted(EXPECTED)
    for path in NOTEBOOKS.glob("*.ipynb"):
        cells = [c for c in nbformat.read(path, as_version=4).cells
                 if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(cells) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
