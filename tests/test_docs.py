"""The documentation site builds with warnings as errors, and its key pages hold what they should.

One build per session (``make docs``'s command, into a temporary directory, by the ``site`` fixture of
tests/conftest.py, which tests/test_notebooks.py shares): it runs the notebooks; the page checks then
only read its HTML. The helpers of the Sphinx extension
(docs/_ext/topicflow_docs.py) that decide what is documented and which references may stay without a
link are checked directly.
"""
from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs_site import DOCS, GROUP, NOTEBOOK_PARAMETERS, ROOT, Site

pytestmark = GROUP


def _text(page: str) -> str:
    """Return the text of an HTML page (tags removed, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _extension() -> ModuleType:
    spec = importlib.util.spec_from_file_location("topicflow_docs", DOCS / "_ext" / "topicflow_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_tests_run_on_one_xdist_worker(request: pytest.FixtureRequest) -> None:
    # Under `make test` (--dist loadgroup) the group suffix must be on the node id, or each xdist worker
    # builds the site itself (pytest 9.2 with pytest-xdist 3.8 silently dropped it: pyproject.toml).
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@docs-site"), request.node.nodeid


@pytest.mark.slow
def test_build_writes_nothing_into_the_repository(site: Site) -> None:
    assert site.files_after == site.files_before, sorted(site.files_after ^ site.files_before)


@pytest.mark.slow
def test_every_markdown_page_and_notebook_is_a_page_linked_from_the_landing_page(site: Site) -> None:
    index = site.page("index")
    pages = [p.stem for p in DOCS.glob("*.md") if p.stem != "index"]
    pages += [f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("*.ipynb")]
    assert "evaluation" in pages and "api" in pages and "notebooks/lda_walkthrough" in pages
    for name in pages:
        site.page(name)
        assert f'href="{name}.html"' in index, f"{name} is not in the landing page's table of contents"
    # The README's introduction is the landing page's text.
    text = _text(index)
    assert "Quick start" in text and "topicflow ingest INPUT... --out STORE" in text


@pytest.mark.slow
def test_benchmark_results_are_a_page(site: Site) -> None:
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    found = re.findall(r"^## (.+)$", results, flags=re.MULTILINE)
    headings = [heading.replace("`", "").split("(")[0].strip() for heading in found]
    page = site.page("benchmarks")
    text = _text(page)
    assert headings and all(heading in text for heading in headings), [h for h in headings if h not in text]
    for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", results):
        assert Path(image).name in page and (site.html / "_images" / Path(image).name).is_file()


@pytest.mark.slow
def test_api_reference_documents_the_estimators_from_their_docstrings(site: Site) -> None:
    import topicflow

    page = site.page("reference/topicflow")
    for name in topicflow.__all__:
        assert name.startswith("_") or f'id="topicflow.{name}"' in page, name
    for name in ("topicflow.LDA.fit", "topicflow.LDA.partial_fit", "topicflow.LDA.transform",
                 "topicflow.LDA.get_params", "topicflow.StreamingLDA.fit", "topicflow.Corpus.open"):
        assert f'id="{name}"' in page, name
    # numpydoc rendered the docstring's sections.
    fit = page[page.index('id="topicflow.LDA.fit"'):page.index('id="topicflow.LDA.partial_fit"')]
    assert "Parameters" in fit and "Returns" in fit and "corpus" in fit


#: Per API page: one object it must document (None while the package has no public functions yet).
API_PAGES = {
    "topicflow.api": "topicflow.api.lda.parse_doc_topic_prior",
    "topicflow.metrics": "topicflow.metrics.clustering.nmi",
    "topicflow.io.corpus": "topicflow.io.corpus.reader.read_manifest",
    "topicflow.io.models": "topicflow.io.models.info.ModelInfo",
    "topicflow.pipeline.evaluation": None,
    "topicflow.errors": "topicflow.errors.TopicflowError",
}


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(API_PAGES))
def test_api_reference_has_every_public_module(site: Site, package: str) -> None:
    page = site.page(f"reference/{package}")
    modules = _extension().public_modules(package)
    assert modules[0] == package
    for module in modules:
        assert f'id="module-{module}"' in page, module
    if API_PAGES[package] is not None:
        assert f'id="{API_PAGES[package]}"' in page


@pytest.mark.slow
def test_cli_reference_has_every_command_with_its_help_text(site: Site) -> None:
    from topicflow.cli import main

    page = site.page("reference/cli")
    assert "Usage: topicflow [OPTIONS] COMMAND [ARGS]..." in page
    assert main.commands and "fit" in main.commands
    for name in main.commands:
        assert f'id="topicflow-{name}"' in page, name
        assert f"Usage: topicflow {name} [OPTIONS]" in page, name
    assert "--topics" in page[page.index('id="topicflow-fit"'):]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "printed"), [
    ("lda_walkthrough", "iterations, converged"),
    ("online_and_nightly", "update after the rollback: version"),
    ("particle_filter", "resampling events, lineage depth"),
])
def test_notebook_pages_show_their_outputs(site: Site, name: str, printed: str) -> None:
    page = site.page(f"notebooks/{name}")
    assert 'class="cell_output' in page and printed in page
    images = re.findall(r'<img [^>]*src="\.\./(_images/[^"]+\.png)"', page)
    assert images and all((site.html / image).is_file() for image in images)
    # The site runs the notebook with the parameters it was given (here the tests' own), and shows them.
    first = NOTEBOOK_PARAMETERS[name].splitlines()[0]
    assert html.escape(first, quote=False) in page or first in _text(page)


@pytest.mark.slow
def test_evaluation_page_is_built(site: Site) -> None:
    page = site.page("evaluation")
    assert "Evaluating topic models" in page
    for section in ("Coherence", "Held-out likelihood", "The HTML report", "pyLDAvis export"):
        assert section in page, section


def test_documented_members_are_those_a_module_defines() -> None:
    ext = _extension()
    from topicflow.metrics import recovery

    members = ext.documented_members(recovery)
    assert {"hellinger", "match_topics", "TopicMatch", "TopicDistance"} <= set(members)
    assert "linear_sum_assignment" not in members and "dataclass" not in members  # imports
    assert ext.member_kind(recovery.TopicDistance) == "data"
    assert ext.member_kind(recovery.TopicMatch) == "class"
    assert ext.member_kind(recovery.hellinger) == "function"
    assert ext.top_level_names()["topicflow.api.lda.LDA"] == "topicflow.LDA"
    # A package's __all__ taken from its modules is listed on the package (documented where defined).
    from topicflow.pipeline import streaming, vb

    exports = ext.package_exports(vb)
    assert ("topicflow.pipeline.vb.OnlineConfig", "topicflow.pipeline.vb.online.OnlineConfig") in exports
    assert {name.rsplit(".", 1)[1] for name, _ in exports} == set(vb.__all__)
    for name, defined in exports:  # each listed under the package, documented where it is defined
        assert defined.startswith("topicflow.pipeline.vb.") and defined.rsplit(".", 1)[1] == name.rsplit(".", 1)[1]
    assert ext.package_exports(streaming) == []  # RUNNERS is a dict, run_stream defined in the package itself


def test_references_without_a_page_must_still_name_real_objects() -> None:
    ext = _extension()
    from topicflow.io.models.info import ModelInfo
    from topicflow.models.lda.vb.estep import estep_block

    assert ext.resolve_object("topicflow.models.lda.vb.estep.estep_block", None, None) is estep_block
    assert ext.resolve_object("estep_block", "topicflow.tasks.estep", None) is estep_block
    # A class documented under its re-exported name refers to names of its own module.
    assert ext.resolve_object("read_manifest", "topicflow", "Corpus") is not None
    assert ext.resolve_object("ModelInfo.extra", "topicflow.io.models.info", None) is not None
    assert ext.resolve_object("ModelInfo", "topicflow.io.models.info", None) is ModelInfo
    assert ext.resolve_object("topicflow.models.lda.vb.estep.no_such_kernel", None, None) is None
    assert ext.resolve_object("no_such_function", "topicflow.tasks.estep", None) is None
    assert ext.resolve_object("numpy.ndarray", None, None) is None  # only topicflow's own names
