"""The report driver: sizes, examples and snippets against brute force, any partitioning, traces, evolution."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from topicflow.api.lda import LDA
from topicflow.api.streaming import StreamingLDA
from topicflow.errors import (
    InvalidParameterError,
    StoreExistsError,
    VocabularyMismatchError,
)
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.io.outputs.report import CoherenceSummary
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
from topicflow.metrics.topic_summary import doc_topic_stats
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.pipeline.evaluation.report import (
    ReportOptions,
    build_report,
    coherence_summary,
    example_documents,
    joined_records,
    topic_cards,
    write_model_report,
)
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.update import update_model
from topicflow.pipeline.vb.infer import fold_in_params
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    base = tmp_path_factory.mktemp("report")
    truth = draw_planted_corpus(n_docs=160, n_topics=3, n_terms=24, doc_length=20, alpha=0.2, seed=11)
    counts = truth.counts["default"]
    store = write_test_store(base / "a.zarr", {"default": counts}, shard_size=40)
    other = write_test_store(base / "b.zarr", {"default": counts}, shard_size=27)
    batch = LDA(3, max_iter=15, seed=1).fit(store)
    batch.save(base / "batch")
    return {"counts": counts, "store": store, "other": other, "model": base / "batch", "base": base}


def brute_force(model_path: Path, counts: sp.csr_matrix, n_top: int) -> tuple[np.ndarray, list[list[int]]]:
    """Sizes and top documents from one fold-in of the whole matrix, sorted in plain NumPy."""
    model = load_model(model_path)
    theta = fold_in_block({"default": block_from_csr(counts)}, model.state.prepared_topics(),
                          model.state.doc_topic_prior, fold_in_params(model))
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    sizes = theta.T @ lengths / lengths.sum()
    top = [sorted(range(theta.shape[0]), key=lambda d: (-theta[d, k], d))[:n_top] for k in range(theta.shape[1])]
    return sizes, top


def test_sizes_examples_and_snippets_match_brute_force(planted: dict, client: object) -> None:
    counts = planted["counts"]
    data = build_report(planted["model"], planted["store"], options=ReportOptions(examples=4, snippet_words=3),
                        client=client)
    sizes, top = brute_force(planted["model"], counts, 4)
    assert data.size_source == "corpus"
    np.testing.assert_allclose([t.size for t in data.topics], sizes, rtol=1e-10)
    terms = Corpus.open(planted["store"]).vocabulary().terms
    dense = counts.toarray()
    for topic in data.topics:
        assert [d.position for d in topic.examples] == top[topic.index]
        assert [d.doc_id for d in topic.examples] == [f"doc-{d}" for d in top[topic.index]]
        for doc in topic.examples:
            row = dense[doc.position]
            expected = sorted(np.flatnonzero(row).tolist(), key=lambda w: (-row[w], w))[:3]
            assert doc.snippet == (("default", " ".join(str(terms[w]) for w in expected)),)
            assert doc.snippet_kind == "most frequent terms"
    facts = dict(data.facts)
    assert facts["topics"] == "3" and "160 documents" in facts["evaluation store"]


def test_the_report_does_not_depend_on_partitions_or_workers(planted: dict, client: object) -> None:
    options = ReportOptions(examples=5, split_every=2)
    first = build_report(planted["model"], planted["store"], options=options, client=None)
    second = build_report(planted["model"], planted["other"], options=options, client=client)
    np.testing.assert_allclose([t.size for t in first.topics], [t.size for t in second.topics], rtol=1e-12)
    assert [t.examples for t in first.topics] == [t.examples for t in second.topics]
    assert [t.words for t in first.topics] == [t.words for t in second.topics]


def test_without_a_corpus_sizes_come_from_the_model_mass(planted: dict) -> None:
    data = build_report(planted["model"])
    model = load_model(planted["model"])
    mass = (model.state.topic_word_var["default"] - 0.01).sum(axis=1)
    assert data.size_source == "model" and all(t.examples == () for t in data.topics)
    np.testing.assert_allclose([t.size for t in data.topics], mass / mass.sum(), rtol=1e-12)
    assert "--corpus" in data.examples_note and "Coherence was not computed" in data.coherence_note
    words = data.topics[0].words[0]
    row = model.state.topic_word()["default"][0]
    assert list(words.terms) == [str(model.vocabularies["default"].terms[w]) for w in np.argsort(-row, kind="stable")[:12]]
    assert data.trace[0].ylabel.startswith("ELBO") and len(data.trace[0].x) == len(model.info.trace)


def test_coherence_is_an_input_shown_per_topic(planted: dict, tmp_path: Path) -> None:
    scores = CoherenceSummary(measure="u_mass", top_n=10, reference="a.zarr", per_topic=(-1.5, -2.0, -0.5),
                              mean=-4.0 / 3)
    data = write_model_report(planted["model"], tmp_path / "r.html", coherence=scores)
    assert [t.coherence for t in data.topics] == [-1.5, -2.0, -0.5]
    page = (tmp_path / "r.html").read_text()
    assert "coherence -1.500 (u_mass)" in page and "-1.333" in page
    with pytest.raises(InvalidParameterError, match="2 values"):
        build_report(planted["model"], coherence=CoherenceSummary("u_mass", 10, "x", (1.0, 2.0), 1.5))
    with pytest.raises(StoreExistsError):
        write_model_report(planted["model"], tmp_path / "r.html")


def test_bad_options_and_a_foreign_store_are_refused(planted: dict, tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="evolution_threshold"):
        ReportOptions(evolution_threshold=1.2)
    with pytest.raises(InvalidParameterError, match="top_words"):
        ReportOptions(top_words=0)
    poly = draw_planted_corpus(n_docs=20, n_topics=2, n_terms=10, doc_length=10, alpha=0.5, seed=1,
                               languages=("en", "de"))
    other = write_test_store(tmp_path / "poly.zarr", poly.counts, shard_size=10)
    with pytest.raises(VocabularyMismatchError, match="none is shared"):
        build_report(planted["model"], other)


def test_traces_of_online_and_streamed_models(planted: dict, tmp_path: Path) -> None:
    online = LDA(3, method="online", batch_size=40, seed=2).fit(planted["store"])
    online.save(tmp_path / "online")
    panels = build_report(tmp_path / "online").trace
    assert [p.ylabel for p in panels][-2:] == ["step size rho", "sum of alpha"]
    assert panels[-1].x == tuple(float(r["docs_seen"]) for r in online.model_.info.trace)
    stream = StreamingLDA("pf", n_topics=3, n_particles=4, init_docs=20, eval_every=40, runs=2).fit(planted["store"])
    stream.save(tmp_path / "pf")
    data = build_report(tmp_path / "pf")
    summary = stream.model_.info.summary
    by_label = {p.ylabel: p for p in data.trace}
    evidence = by_label["log evidence per token"]
    assert evidence.x == tuple(float(r["docs_seen"]) for r in summary)
    assert evidence.y == tuple(r["log_evidence_per_token_mean"] for r in summary)
    assert evidence.std == tuple(r["log_evidence_per_token_std"] for r in summary)
    assert "particle filter" in dict(data.facts)["method"] and "2 runs" in data.trace_note


def write_docs(path: Path, counts: sp.csr_matrix, start: int, stop: int, extra: str | None = None) -> Path:
    lines = []
    for d in range(start, stop):
        row = counts[d].toarray().ravel()
        words = [f"w{w:03d}" for w in np.flatnonzero(row) for _ in range(row[w])] + ([extra] * 4 if extra else [])
        lines.append(json.dumps({"id": f"d{d}", "text": " ".join(words)}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def versioned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An online model with three versions; the third saw a new word."""
    base = tmp_path_factory.mktemp("versions")
    counts = draw_planted_corpus(n_docs=300, n_topics=3, n_terms=30, doc_length=25, alpha=0.2, seed=5).counts["default"]
    store = base / "corpus.zarr"
    ingest_corpus([write_docs(base / "a.jsonl", counts, 0, 150)], store, tokenizer=NO_STOP, shard_size=50)
    LDA(3, method="online", batch_size=50, seed=3).fit(store).save(base / "model")
    append_corpus(store, [write_docs(base / "b.jsonl", counts, 150, 225)])
    update_model(base / "model", store)
    append_corpus(store, [write_docs(base / "c.jsonl", counts, 225, 300, extra="zebra")], promote_min_df=5)
    update_model(base / "model", store)
    return base / "model", store


def test_evolution_follows_topics_through_versions(versioned: tuple[Path, Path]) -> None:
    model, _ = versioned
    data = build_report(model, options=ReportOptions(evolution_threshold=0.5))
    evolution = data.evolution
    assert evolution is not None and evolution.versions == (1, 2, 3)
    assert [v.kind for v in data.versions] == ["fit", "update", "update"] and data.versions[-1].is_current
    assert len(evolution.lineages) == 3  # small updates: every topic continues
    last = load_model(model).state.topic_word()["default"]
    for lineage in evolution.lineages:
        assert [c.status for c in lineage] == ["first", "continued", "continued"]  # type: ignore[union-attr]
        assert all(0.0 <= c.distance <= 0.5 for c in lineage[1:])  # type: ignore[union-attr, operator]
    assert sorted(lineage[-1].topic for lineage in evolution.lineages) == [0, 1, 2]  # type: ignore[union-attr]
    assert last.shape[1] == 31  # "zebra" was promoted into the vocabulary of version 3
    # The trace joins the three versions' minibatches, each later version's start marked.
    rho = data.trace[-2]
    assert rho.x == tuple(sorted(rho.x)) and [label for _, label in rho.marks] == ["v2", "v3"]
    assert "versions 1 to 3" in data.trace_note
    # A threshold of 0 makes every matched pair a vanished and a new topic; --max-versions limits the table.
    strict = build_report(model, options=ReportOptions(evolution_threshold=0.0, max_versions=2)).evolution
    assert strict is not None and strict.versions == (2, 3) and len(strict.lineages) == 6
    assert {c.status for lin in strict.lineages for c in lin if c is not None} == {"first", "new"}
    new = [c for lin in strict.lineages for c in lin if c is not None and c.status == "new"]
    assert all(c.nearest is not None and 0.0 < c.nearest[1] <= 1.0 for c in new)
    single = build_report(Path(str(model)).parent / "model", options=ReportOptions(max_versions=None))
    assert single.evolution is not None and len(single.evolution.versions) == 3


def test_snippets_are_the_first_words_when_the_store_keeps_order(tmp_path: Path, client: object) -> None:
    texts = [("a", "apple pear apple fig plum kiwi"), ("b", "river lake river sea ocean pond"),
             ("c", "apple fig pear apple apple"), ("d", "lake sea river river ocean"),
             ("e", "plum apple kiwi pear"), ("f", "ocean river pond lake lake")] * 5
    texts[4] = ("e", "plum zebra apple kiwi pear")  # "zebra" is in one document: pruned, out of vocabulary
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": f"{i}-{name}", "text": text}) + "\n"
                              for i, (name, text) in enumerate(texts)))
    store = tmp_path / "ordered.zarr"
    ingest_corpus([source], store, tokenizer=NO_STOP, shard_size=7, keep_order=True, prune=PruneConfig(min_df=2))
    LDA(2, max_iter=20, seed=0).fit(store).save(tmp_path / "model")
    data = build_report(tmp_path / "model", store, options=ReportOptions(examples=3, snippet_words=4), client=client)
    by_id = {f"{i}-{name}": text for i, (name, text) in enumerate(texts)}
    for topic in data.topics:
        for doc in topic.examples:
            assert doc.snippet_kind == "first words"
            assert doc.snippet == (("default", " ".join(by_id[doc.doc_id].split()[:4])),)
    assert "first words in reading order" in dict(data.notes)["Example documents"]
    assert "zebra" not in Corpus.open(store).vocabulary().terms.tolist()
    # Out-of-vocabulary tokens are shown as they were read: document 4's snippet keeps "zebra".
    corpus = Corpus.open(store)
    theta = np.tile([0.0, 1.0], (30, 1))
    theta[4] = [1.0, 0.0]
    stats = doc_topic_stats(theta, np.ones(30), np.array(list(corpus.doc_ids()), dtype=object), 0, 1)
    chosen = example_documents(stats, corpus, n_words=3, client=client)[0]
    assert [(d.doc_id, d.snippet) for d in chosen] == [("4-e", (("default", "plum zebra apple"),))]


def test_coherence_summary_is_the_metrics_coherence(planted: dict, client: object) -> None:
    from topicflow.metrics import coherence

    summary = coherence_summary(planted["model"], planted["store"], measure="u_mass", top_n=5, client=client)
    expected = coherence(planted["model"], planted["store"], measure="u_mass", top_n=5)
    assert summary.per_topic == tuple(expected.per_topic) and summary.mean == expected.mean
    assert (summary.measure, summary.top_n, summary.window) == ("u_mass", 5, None)
    assert summary.describe().startswith("u_mass, top 5 words, reference")


def test_cards_drawn_on_the_cluster_equal_the_ones_drawn_here(planted: dict, client: object) -> None:
    data = build_report(planted["model"])
    here = topic_cards(data)
    assert topic_cards(data, client=client) == here
    assert len(here) == 3 and all(card.count('class="topic-chart"') == 1 for card in here)


def test_joined_traces_keep_each_position_once() -> None:
    online = [(1, [{"docs_seen": 50}, {"docs_seen": 100}]), (2, [{"docs_seen": 150}, {"docs_seen": 200}])]
    records, marks = joined_records(online, "docs_seen")
    assert [r["docs_seen"] for r in records] == [50, 100, 150, 200] and marks == ((150.0, "v2"),)
    cumulative = [(1, [{"docs_seen": 50}, {"docs_seen": 100}]),  # an SGS update repeats the earlier summary
                  (2, [{"docs_seen": 50}, {"docs_seen": 100}, {"docs_seen": 150}]), (3, [{"docs_seen": 150}])]
    records, marks = joined_records(cumulative, "docs_seen")
    assert [r["docs_seen"] for r in records] == [50, 100, 150] and marks == ((150.0, "v2"),)
