"""The notebooks run top to bottom (on small data) and every cell's own assertions hold."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SMALL = {"lda_walkthrough.ipynb": "N_PASSAGES = 300\nN_TOPICS = 5\nITERATIONS = 8\nWORKERS = 1\n"}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_notebook_executes(name: str, tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    params = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    params[0].source = SMALL[name]
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "300 kept" in text and "iterations, converged" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3, "ELBO trace, topic bars and book profile should all be plotted"


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(SMALL)
