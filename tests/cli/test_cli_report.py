"""`topicflow report` and `topicflow export --format pyldavis` on models of every kind, built through the CLI.

The report's HTML is checked with the standard library's parser: its sections, one topic chart per
topic card, example documents, inline images only, and no reference to any other file or URL.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyLDAvis
import pytest
from click.testing import CliRunner, Result

from topicflow.cli import main
from topicflow.io.models.store import load_model
from topicflow.io.outputs.report import SECTIONS
from topicflow.metrics import coherence
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

#: Every kind of saved model and the command that makes it (beside STORE --model/--out DIR).
MODELS: dict[str, list[object]] = {
    "batch": ["fit", "--topics", 3, "--max-iter", 8],
    "online": ["fit", "--topics", 3, "--method", "online", "--batch-size", 50],
    "hybrid": ["fit", "--topics", 3, "--method", "online", "--estep", "hybrid", "--batch-size", 50],
    "gibbs": ["stream", "--algo", "gibbs", "--topics", 3, "--sweeps", 30, "--eval-every", 10],
    "olda": ["stream", "--algo", "olda", "--topics", 3, "--init-docs", 30, "--init-sweeps", 20, "--eval-every", 60],
    "incgibbs": ["stream", "--algo", "incgibbs", "--topics", 3, "--init-docs", 30, "--init-sweeps", 20, "--rejuv", 5,
                 "--eval-every", 60],
    "pf": ["stream", "--algo", "pf", "--topics", 3, "--particles", 4, "--init-docs", 30, "--init-sweeps", 20,
           "--rejuv", 5, "--runs", 2, "--eval-every", 60],
    "sgs": ["stream", "--algo", "sgs", "--topics", 3, "--batch-size", 60, "--eval-every", 60],
    "dsgs": ["stream", "--algo", "dsgs", "--topics", 3, "--batch-size", 60, "--eval-every", 60],
}


def run(args: list[object]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, local_cluster: object) -> dict[str, Path]:
    """A labelled store, a polylingual one, and a model of every kind made by the CLI."""
    base = tmp_path_factory.mktemp("cli-report")
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    truth = draw_planted_corpus(n_docs=180, n_topics=3, n_terms=30, doc_length=25, alpha=0.1, seed=4)
    labels = [f"t{k}" for k in np.argmax(truth.doc_topic, axis=1)]
    paths = {"store": write_test_store(base / "train.zarr", truth.counts, shard_size=60, labels=labels)}
    poly = draw_planted_corpus(n_docs=90, n_topics=3, n_terms=20, doc_length=20, alpha=0.2, seed=4,
                               languages=("en", "de"))
    paths["poly-store"] = write_test_store(base / "poly.zarr", poly.counts, shard_size=45)
    for kind, command in [*MODELS.items(), ("poly", ["fit", "--topics", 3, "--max-iter", 5])]:
        store = paths["poly-store" if kind == "poly" else "store"]
        place = ["--model", base / kind] if command[0] == "fit" else ["--out", base / f"{kind}-run"]
        result = run([command[0], store, *place, *command[1:], "--scheduler", address])
        assert result.exit_code == 0, result.output
        paths[kind] = base / kind if command[0] == "fit" else base / f"{kind}-run" / "model"
    return paths


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    topic: str | None  #: id of the enclosing topic card
    section: str | None  #: id of the enclosing section
    text: list[str] = field(default_factory=list)


class Page(HTMLParser):
    """Every start tag with its attributes, the topic card and section it is in, and the page's text."""

    VOID = frozenset({"img", "meta", "link", "br", "hr", "input"})

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.stack: list[Element] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        parent_topic = next((e.topic for e in reversed(self.stack) if e.topic), None)
        parent_section = next((e.section for e in reversed(self.stack) if e.section), None)
        element = Element(tag, values,
                          values.get("id") if tag == "article" and "topic" in values.get("class", "") else parent_topic,
                          values.get("id") if tag == "section" else parent_section)
        self.elements.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.stack:
            self.stack[-1].text.append(data)

    def find(self, tag: str, css_class: str | None = None) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (css_class is None or css_class in e.attrs.get("class", "").split())]

    def text_of(self, section: str) -> str:
        return " ".join(" ".join(e.text) for e in self.elements if e.section == section)


def check_self_contained(page: Page) -> None:
    """No script, no URL but data: images and in-page anchors."""
    assert page.find("script") == [] and page.find("iframe") == []
    for element in page.elements:
        for name, value in element.attrs.items():
            assert "http://" not in value and "https://" not in value, (element.tag, name, value[:80])
            if name in ("src", "href"):
                assert value.startswith(("data:", "#")), (element.tag, name, value[:80])
    for image in page.find("img"):
        header, data = image.attrs["src"].split(",", 1)
        assert header == "data:image/png;base64"
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", [*MODELS, "poly"])
def test_report_of_every_kind_of_model(kind: str, built: dict[str, Path], tmp_path: Path,
                                       local_cluster: object) -> None:
    store = built["poly-store" if kind == "poly" else "store"]
    out = tmp_path / "report.html"
    result = run(["report", built[kind], "--corpus", store, "--out", out, "--examples", 3,
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    assert "wrote report of 3 topics" in result.output
    page = Page(out.read_text(encoding="utf-8"))
    check_self_contained(page)
    assert [e.attrs["id"] for e in page.find("section")] == list(SECTIONS)
    cards = page.find("article", "topic")
    assert [c.attrs["id"] for c in cards] == ["topic-0", "topic-1", "topic-2"]
    charts = page.find("img", "topic-chart")
    assert sorted(c.topic for c in charts) == ["topic-0", "topic-1", "topic-2"]  # exactly one per card
    examples = [e for e in page.find("li") if e.topic is not None]
    assert len(examples) == 9
    assert len(page.find("img", "trace-chart")) == 1  # every kind records a trace
    assert page.find("img", "overview-chart") and "share of corpus tokens" in page.text_of("overview")
    model = load_model(built[kind])
    for lang in model.state.languages:  # every language's most probable term is in the topics table
        best = model.vocabularies[lang].terms[np.argmax(model.state.topic_word()[lang][0])]
        assert str(best) in page.text_of("overview")
    assert "single version" in page.text_of("evolution")
    # Coherence is u_mass against --corpus by default: the page shows topicflow.metrics.coherence's values.
    expected = coherence(built[kind], store, measure="u_mass")
    shown = [" ".join(e.text) for e in page.find("span", "badge") if " ".join(e.text).startswith("coherence")]
    assert shown == [f"coherence {v:.3f} (u_mass)" for v in expected.per_topic]


def test_report_without_corpus_and_refusals(built: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = run(["report", built["batch"], "--out", out, "--top-words", 4])
    assert result.exit_code == 0, result.output
    page = Page(out.read_text(encoding="utf-8"))
    check_self_contained(page)
    assert "share of model's topic-word mass" in page.text_of("overview")
    assert page.find("li") == [] and "--corpus" in page.text_of("topics")
    assert run(["report", built["batch"], "--out", out]).exit_code == 2  # exists
    assert run(["report", built["batch"], "--out", out, "--overwrite"]).exit_code == 0
    missing = run(["report", tmp_path / "nothing", "--out", tmp_path / "x.html"])
    assert missing.exit_code == 2 and "no topicflow model" in missing.output
    bad = run(["report", built["batch"], "--out", tmp_path / "y.html", "--evolution-threshold", 2])
    assert bad.exit_code == 2 and "0.0<=x<=1.0" in bad.output
    alone = run(["report", built["batch"], "--out", tmp_path / "y.html", "--coherence", "u_mass"])
    assert alone.exit_code == 2 and "--coherence needs --corpus" in alone.output
    window = run(["report", built["batch"], "--corpus", built["store"], "--out", tmp_path / "y.html",
                  "--coherence", "c_v"])
    assert window.exit_code == 2 and "--keep-order" in window.output and "--coherence u_mass" in window.output
    assert not (tmp_path / "y.html").exists()


def test_export_pyldavis_through_the_cli(built: dict[str, Path], tmp_path: Path, local_cluster: object) -> None:
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    out = tmp_path / "vis.json"
    result = run(["export", built["sgs"], "--format", "pyldavis", "--corpus", built["store"], "--out", out,
                  "--scheduler", address])
    assert result.exit_code == 0, result.output
    with open(out, encoding="utf-8") as handle:
        data = json.load(handle)
    assert np.asarray(data["doc_topic_dists"]).shape == (180, 3) and sum(data["term_frequency"]) == sum(data["doc_lengths"])
    prepared = pyLDAvis.prepare(**data, sort_topics=False, n_jobs=1)  # n_jobs: pyLDAvis's own worker processes
    assert list(prepared.topic_order) == [1, 2, 3]
    assert run(["export", built["batch"], "--out", tmp_path / "m.npz"]).exit_code == 0  # npz stays the default
    with np.load(tmp_path / "m.npz") as arrays:
        assert arrays["topic_word"].shape == (3, 30)
    no_corpus = run(["export", built["batch"], "--format", "pyldavis", "--out", tmp_path / "v.json"])
    assert no_corpus.exit_code == 2 and "needs --corpus" in no_corpus.output
    npz_corpus = run(["export", built["batch"], "--corpus", built["store"], "--out", tmp_path / "n.npz"])
    assert npz_corpus.exit_code == 2 and "belong to --format pyldavis" in npz_corpus.output
    poly = run(["export", built["poly"], "--format", "pyldavis", "--corpus", built["poly-store"], "--out",
                tmp_path / "p.json", "--scheduler", address])
    assert poly.exit_code == 2 and "name the language" in poly.output
    poly = run(["export", built["poly"], "--format", "pyldavis", "--corpus", built["poly-store"], "--out",
                tmp_path / "p.json", "--language", "de", "--scheduler", address])
    assert poly.exit_code == 0, poly.output
