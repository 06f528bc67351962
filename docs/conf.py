"""Sphinx configuration of the topicflow documentation site.

Build it with ``make docs`` (HTML in ``build/docs/html``); tests/test_docs.py builds it into a temporary
directory. Nothing is written inside the repository tree except under ``build/``. See docs/development.md,
"The documentation site".
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import topicflow

project = "topicflow"
author = "the topicflow authors"
copyright = "the topicflow authors"
version = release = topicflow.__version__

def _bind_type_checking_imports(package: str) -> None:
    """Run each ``if TYPE_CHECKING:`` block's imports of ``package``'s modules into those modules."""
    import ast
    import importlib

    root = Path(importlib.import_module(package).__file__).parent
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        blocks = [node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                  and node.test.id == "TYPE_CHECKING"]
        if not blocks:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        for block in blocks:
            for node in block.body:
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    source = importlib.import_module(node.module)
                    for alias in node.names:
                        if alias.name in vars(source) or hasattr(source, alias.name):
                            module.__dict__.setdefault(alias.asname or alias.name, getattr(source, alias.name))


extensions = [
    "myst_nb",  # markdown pages (MyST) and the notebooks in docs/notebooks (a link to ../notebooks)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "topicflow_docs",  # docs/_ext: API pages, CLI reference, notebook parameters, repository links
]

root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
# Every reference must resolve (the build runs with -W): see topicflow_docs.resolve_missing for the links
# to the repository and to internal objects that are allowed without a target.
nitpicky = True
nitpick_ignore_regex = [
    # Third-party objects in signatures and docstrings: linking them would need intersphinx inventories,
    # which are fetched over the network; the build must work offline.
    ("py:.*", r"(numpy|np|numba|scipy|dask|distributed|zarr|pandas|sklearn|click|pyarrow|matplotlib)(\..*)?"),
    # The same for the standard library (no Python inventory offline); builtins resolve without one.
    ("py:.*", r"(os|pathlib|collections\.abc|typing|datetime|concurrent\.futures)\..*"),
]

html_theme = "alabaster"
html_title = f"topicflow {release}"
html_theme_options = {"description": "Out-of-core topic models on Dask", "page_width": "1280px",
                      "sidebar_width": "260px"}
html_static_path = ["_static"]  # custom.css (alabaster includes it)
html_show_sourcelink = False

# --- MyST (markdown pages) -------------------------------------------------------------------------------
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "dollarmath"]

#: Repository files (relative to the repository root) that are pages of the site: a markdown link to one
#: of them goes to that page.
topicflow_repository_pages = {
    "README.md": "index",
    "benchmarks/RESULTS.md": "benchmarks",
}

# --- API reference -------------------------------------------------------------------------------------
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
# Names that modules import only for type checking (`if TYPE_CHECKING:`, to keep their imports light)
# are bound in those modules for the build, so that autodoc can evaluate the annotations that use them.
_bind_type_checking_imports("topicflow")
autodoc_preserve_defaults = True
autosummary_generate = False  # the summary tables only link; topicflow-api writes the sections (no files)
numpydoc_show_class_members = False  # autodoc lists the members itself
numpydoc_xref_param_type = False  # parameter types are prose ("ndarray of shape (n_docs, n_topics)")
numpydoc_validation_checks: set[str] = set()  # tests/test_docstrings.py validates the docstrings

# --- notebooks ------------------------------------------------------------------------------------------
# Executed at build time, cached in <build>/.jupyter_cache (outside the repository tree), each in a
# temporary working directory. An error in a cell fails the build.
nb_execution_mode = "cache"
nb_execution_timeout = 600  # per cell; a hang guard only, cells take seconds with the values below
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True
nb_merge_streams = True
# stderr is left out of the pages: it holds environment noise (tqdm's "IProgress not found" without
# ipywidgets, Dask's logging), not results; an error in a cell still fails the build.
nb_output_stderr = "remove"

#: The values each notebook's ``parameters`` cell gets on the site (the notebooks' own defaults are the
#: full-size runs; tests/test_notebooks.py uses still smaller ones). Chosen so that the three notebooks
#: together run in well under a minute on 2 cores while their plots still tell the story.
topicflow_notebook_parameters = {
    "lda_walkthrough": """
# Parameters (the documentation site runs this notebook with these smaller values).
N_PASSAGES = 1500
N_TOPICS = 10
ITERATIONS = 20
WORKERS = 2
""",
    "online_and_nightly": """
# Parameters (the documentation site runs this notebook with these smaller values).
N_PASSAGES = 1500
N_TOPICS = 10
BATCH_SIZE = 64        # documents per minibatch (S)
PASSES = 2             # online passes over the initial store
EVAL_EVERY = 3         # minibatches between held-out evaluations
DAYS = 7
PROMOTE_MIN_DF = 2     # an unknown word joins the vocabulary once this many appended documents use it
WORKERS = 2
""",
    "particle_filter": """
# Parameters (the documentation site runs this notebook with these smaller values).
GROUPS = ["Law", "Wisdom", "Gospels"]
PER_GROUP = 200        # passages per group (evenly spaced through each group)
PARTICLES = 30
REJUV = 10             # tokens rejuvenated after each resampling
RESERVOIR = 500        # tokens kept for rejuvenation (May et al. 2014)
RUNS = 3
INIT_DOCS = 20
WORKERS = 2
""",
}

# tests/test_docs.py builds the site once with the still smaller values of tests/test_notebooks.py (a JSON
# file named by this variable, one entry per notebook), so that each notebook runs once in the test suite:
# the notebook tests then read the outputs from the built pages.
if os.environ.get("TOPICFLOW_DOCS_NOTEBOOK_PARAMETERS"):
    topicflow_notebook_parameters = json.loads(
        Path(os.environ["TOPICFLOW_DOCS_NOTEBOOK_PARAMETERS"]).read_text(encoding="utf-8"))
