"""The notebooks run top to bottom (on small data) and every cell's own assertions hold."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from topicflow.testing.faults import HANG_GUARD_SECONDS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SMALL = {
    "lda_walkthrough.ipynb": "N_PASSAGES = 300\nN_TOPICS = 5\nITERATIONS = 8\nWORKERS = 1\n",
    "online_and_nightly.ipynb": (
        "N_PASSAGES = 600\nN_TOPICS = 5\nBATCH_SIZE = 32\nPASSES = 2\nEVAL_EVERY = 3\nDAYS = 7\n"
        "PROMOTE_MIN_DF = 2\nWORKERS = 1\n"
    ),
    "particle_filter.ipynb": (
        "GROUPS = ['Law', 'Wisdom', 'Gospels']\nPER_GROUP = 60\nPARTICLES = 10\nREJUV = 5\nRESERVOIR = 300\n"
        "RUNS = 2\nINIT_DOCS = 15\nWORKERS = 1\n"
    ),
}
#: Per notebook: text its run must print with the SMALL parameters, and the plots it must draw.
EXPECTED = {
    "lda_walkthrough.ipynb": (
        ("300 kept", "iterations, converged"),
        ["ELBO trace", "topic bars", "book profile"],
    ),
    "online_and_nightly.ipynb": (
        ("405 read, 405 kept", "minibatches, 810 documents", "update after the rollback: version 9 (parent 7)"),
        ["perplexity curve", "perplexity and vocabulary per day"],
    ),
    "particle_filter.ipynb": (
        ("stream: 108 passages", "particle filter: 2 runs", "o-LDA: 2 runs", "resampling events, lineage depth"),
        ["NMI bands", "particle cloud memory"],
    ),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_notebook_executes(name: str, tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    params = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    params[0].source = SMALL[name]
    # The per-cell timeout is a hang guard only: cells take seconds with the SMALL parameters.
    NotebookClient(notebook, timeout=int(HANG_GUARD_SECONDS), kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    snippets, plots = EXPECTED[name]
    assert all(snippet in text for snippet in snippets), [s for s in snippets if s not in text]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= len(plots), f"expected plots: {', '.join(plots)}"


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(SMALL) == sorted(EXPECTED)
