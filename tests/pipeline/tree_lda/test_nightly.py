"""``topicflow update`` of tree LDA models: unseen shards by online tree VB, grown vocabulary, crash, CLI."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.io.models.versions import list_versions
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.trees import build_and_write_tree, read_tree
from topicflow.models.tree_lda.build import build_tree_from_pairs
from topicflow.models.tree_lda.tree import flat_tree, root_leaf_beta
from topicflow.models.tree_lda.vb import tree_vb_layout
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.tree_lda import (
    TreeVBConfig,
    fit_batch_tree_vb,
    fit_online_tree,
    online_tree_model,
    saved_tree,
    saved_tree_state,
    tree_model,
)
from topicflow.pipeline.tree_lda.nightly import grown_tree_state
from topicflow.pipeline.update import update_model
from topicflow.pipeline.vb import OnlineConfig
from topicflow.testing.faults import OnItem

FIELDS = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
EN = ["house home cat dog", "cat dog mouse", "house home garden", "system network computer", "dog garden"]
DE = ["haus heim katze hund", "katze hund maus", "haus heim garten", "system netz rechner", "hund garten"]
ROOT_BETA = 0.02


class Interrupted(Exception):
    pass


def _rows(path: Path, start: int, stop: int, new_words: bool = False) -> Path:
    rows = []
    for i in range(start, stop):
        en, de = EN[i % 5] + " " + EN[(i * 3) % 5], DE[i % 5]
        if new_words and i % 2 == 0:
            en, de = en + " zebra zebra", de + " zebrafisch"
        rows.append({"id": f"d{i}", "en": en, "de": de})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    """40 documents in 5 shards, a dictionary tree (root beta 0.02); 16 more documents wait in new.jsonl."""
    ingest_corpus([_rows(tmp_path / "base.jsonl", 0, 40)], tmp_path / "s.zarr", fields=FIELDS,
                  tokenizer=TokenizerConfig(), shard_size=8)
    dictionary = tmp_path / "d.tsv"
    dictionary.write_text("en\tde\nhouse\thaus\nhome\theim\nhome\thaus\ncat\tkatze\ndog\thund\n", encoding="utf-8")
    build_and_write_tree(dictionary, tmp_path / "s.zarr", tmp_path / "d.tree", root_beta=ROOT_BETA)
    _rows(tmp_path / "new.jsonl", 40, 56, new_words=True)
    return tmp_path / "s.zarr", tmp_path / "d.tree"


CONFIG = TreeVBConfig(n_topics=2, max_iter=3, tol=0.0, seed=3)
ONLINE = OnlineConfig(batch_size=6, tau0=2.0, kappa=0.6, pieces=2, min_piece_docs=1, eval_every=0)


def _batch_model(store: Path, tree_path: Path, model_path: Path, config: TreeVBConfig = CONFIG,
                 method: str = "batch") -> None:
    tree, _ = read_tree(tree_path)
    corpus = Corpus.open(store)
    result = fit_batch_tree_vb(corpus, tree, config)
    save_model(model_path, tree_model(corpus, result, config, tree_source=str(tree_path), method=method))


def _online_model(store: Path, tree_path: Path, model_path: Path) -> None:
    tree, _ = read_tree(tree_path)
    corpus = Corpus.open(store)
    result = fit_online_tree(corpus, tree, CONFIG, ONLINE)
    save_model(model_path, online_tree_model(corpus, result, CONFIG, ONLINE, tree_source=str(tree_path)))


def test_tree_grows_with_new_terms_as_root_leaves() -> None:
    pairs = [(("en", "cat"), ("de", "katze")), (("en", "dog"), ("de", "katze"))]
    tree, _ = build_tree_from_pairs(pairs, ["en", "de"], {"en": ["cat", "dog", "sun"], "de": ["katze", "mond"]},
                                    root_beta=0.03, concept_beta=5.0)
    assert root_leaf_beta(tree) == pytest.approx(0.03)
    grown = tree.with_new_terms([5, 3], root_leaf_beta(tree))
    assert grown.n_terms == (5, 3) and grown.n_edges == tree.n_edges + 3
    np.testing.assert_array_equal(grown.edge_prior[:tree.n_edges], tree.edge_prior)
    np.testing.assert_allclose(grown.edge_prior[tree.n_edges:], 0.03)
    for lang, old in (("en", 3), ("de", 2)):
        for term in range(old):  # old words keep their paths, edge for edge
            before = [tuple(tree.path_edges[tree.path_indptr[p]:tree.path_indptr[p + 1]])
                      for p in tree.word_paths(lang, term)]
            after = [tuple(grown.path_edges[grown.path_indptr[p]:grown.path_indptr[p + 1]])
                     for p in grown.word_paths(lang, term)]
            assert before == after
    for lang, term in (("en", 3), ("en", 4), ("de", 2)):
        (path,) = grown.word_paths(lang, term)
        (edge,) = grown.path_edges[grown.path_indptr[path]:grown.path_indptr[path + 1]]
        assert grown.edge_parent[edge] == 0 and grown.edge_child[edge] == -1
    assert tree.with_new_terms([3, 2], 0.03) is tree
    with pytest.raises(InvalidParameterError, match="only grow"):
        tree.with_new_terms([2, 2], 0.03)
    # A flat tree grown is the flat tree of the grown vocabularies.
    flat = flat_tree(["en", "de"], [2, 1], beta=0.5).with_new_terms([3, 2], 0.5)
    expected = flat_tree(["en", "de"], [3, 2], beta=0.5)
    assert tree_vb_layout(flat, "node_language").n_groups == tree_vb_layout(expected, "node_language").n_groups
    np.testing.assert_array_equal(np.sort(flat.edge_prior), np.sort(expected.edge_prior))


def test_update_of_a_batch_model_with_grown_vocabulary(store: tuple[Path, Path], tmp_path: Path) -> None:
    store_path, tree_path = store
    model_path = tmp_path / "m"
    _batch_model(store_path, tree_path, model_path)
    before = load_model(model_path)
    append_corpus(store_path, [tmp_path / "new.jsonl"], fields=FIELDS, promote_min_df=3)
    corpus = Corpus.open(store_path)
    result = update_model(model_path, store_path, online=ONLINE)
    assert result.version == 2 and result.new_docs == 16 and result.new_terms == {"en": 1, "de": 1}
    after = load_model(model_path)
    assert after.info.method == "online" and after.info.kind == "tree_lda"
    assert [s["id"] for s in after.info.corpus["shards"]] == [s.shard_id for s in corpus.shards]
    # Exactly online tree VB from the batch model over the new shards, its schedule placed after the corpus.
    tree, state, _ = grown_tree_state(before, corpus)
    new = list(range(5, corpus.n_shards))
    expected = fit_online_tree(corpus, tree, CONFIG, ONLINE, state=state, t=math.ceil(40 / 6), docs_seen=40,
                               shards=new)
    got, _ = saved_tree_state(after)
    np.testing.assert_array_equal(got.edge_var, expected.state.edge_var)
    assert after.info.online["t"] == math.ceil(40 / 6) + math.ceil(16 / 6)
    grown = saved_tree(after)
    assert grown.n_terms == (len(corpus.vocabulary("en")), len(corpus.vocabulary("de")))
    zebra = grown.word_paths("en", corpus.vocabulary("en").id_of("zebra"))
    (edge,) = grown.path_edges[grown.path_indptr[zebra[0]]:grown.path_indptr[zebra[0] + 1]]
    assert grown.edge_prior[edge] == pytest.approx(ROOT_BETA) and grown.edge_parent[edge] == 0
    assert got.edge_var[:, edge].max() > 10 * ROOT_BETA  # the new word collected statistics
    assert list_versions(model_path)[-1].summary["continued_from"] == "batch"
    # Nothing new: no version.
    again = update_model(model_path, store_path)
    assert again.version is None and again.new_docs == 0 and again.new_terms == {"en": 0, "de": 0}


def test_update_of_an_online_model_continues_its_schedule(store: tuple[Path, Path], tmp_path: Path) -> None:
    store_path, tree_path = store
    model_path = tmp_path / "m"
    _online_model(store_path, tree_path, model_path)
    before = load_model(model_path)
    assert before.info.online["t"] == math.ceil(40 / 6)
    append_corpus(store_path, [tmp_path / "new.jsonl"], fields=FIELDS)
    corpus = Corpus.open(store_path)
    assert update_model(model_path, store_path).version == 2  # the model's own online settings
    after = load_model(model_path)
    state, _ = saved_tree_state(before)
    expected = fit_online_tree(corpus, saved_tree(before), CONFIG, ONLINE, state=state, t=before.info.online["t"],
                               docs_seen=40, shards=list(range(5, corpus.n_shards)))
    np.testing.assert_array_equal(saved_tree_state(after)[0].edge_var, expected.state.edge_var)
    assert after.info.online == {"config": ONLINE.to_dict(), "t": 7 + 3, "docs_seen": 56}


def test_a_gibbs_model_continues_with_the_hybrid_estep(store: tuple[Path, Path], tmp_path: Path) -> None:
    from topicflow.pipeline.tree_lda.gibbs import fit_gibbs_tree

    store_path, tree_path = store
    model_path = tmp_path / "m"
    tree, _ = read_tree(tree_path)
    corpus = Corpus.open(store_path)
    config = TreeVBConfig(n_topics=2, estep="gibbs", doc_topic_prior_mode="fixed", max_iter=5, seed=3)  # type: ignore[arg-type]
    fitted = fit_gibbs_tree(corpus, tree, config)
    save_model(model_path, tree_model(corpus, fitted, config, tree_source=str(tree_path), method="gibbs"))
    before = load_model(model_path)
    append_corpus(store_path, [tmp_path / "new.jsonl"], fields=FIELDS)
    update_model(model_path, store_path, online=ONLINE)
    summary = list_versions(model_path)[-1].summary
    assert summary["continued_from"] == "gibbs" and summary["estep"] == "hybrid"
    after = load_model(model_path)
    assert after.info.settings["estep"] == "hybrid" and after.info.method == "online"
    # From the sampler's lambda (counts + beta) and its fixed alpha, by the hybrid online step.
    state, _ = saved_tree_state(before)
    hybrid = TreeVBConfig.from_dict({**before.info.settings, "estep": "hybrid"})
    expected = fit_online_tree(Corpus.open(store_path), tree, hybrid, ONLINE, state=state, t=math.ceil(40 / 6),
                               docs_seen=40, shards=[5, 6])
    np.testing.assert_array_equal(saved_tree_state(after)[0].edge_var, expected.state.edge_var)
    np.testing.assert_array_equal(after.state.doc_topic_prior, state.doc_topic_prior)


def test_models_saved_by_the_estimator_update(store: tuple[Path, Path], tmp_path: Path) -> None:
    from topicflow.api.tree_lda import TreeLDA

    store_path, tree_path = store
    TreeLDA(2, prior_tree=tree_path, max_iter=3, seed=1).fit(store_path).save(tmp_path / "batch")
    TreeLDA(2, prior_tree=tree_path, method="online", batch_size=6, seed=1).fit(store_path).save(tmp_path / "online")
    append_corpus(store_path, [tmp_path / "new.jsonl"], fields=FIELDS, promote_min_df=3)
    for method in ("batch", "online"):
        before = load_model(tmp_path / method)
        result = update_model(tmp_path / method, store_path)
        assert result.version == 2 and result.new_terms == {"en": 1, "de": 1}
        after = load_model(tmp_path / method)
        t0 = before.info.online["t"] if method == "online" else math.ceil(40 / 256)
        assert after.info.online["t"] == t0 + math.ceil(16 / after.info.online["config"]["batch_size"])
        assert TreeLDA.load(tmp_path / method).edge_var_.shape[1] == saved_tree(after).n_edges


def test_crash_mid_update_leaves_the_previous_version_current(store: tuple[Path, Path], tmp_path: Path) -> None:
    store_path, tree_path = store
    model_path = tmp_path / "m"
    _online_model(store_path, tree_path, model_path)
    append_corpus(store_path, [tmp_path / "new.jsonl"], fields=FIELDS, promote_min_df=3)

    def crash() -> None:
        raise Interrupted  # before the second new minibatch: the first one's update is done

    with pytest.raises(Interrupted):
        update_model(model_path, store_path, progress=OnItem("online", 1, crash))
    assert [v.version for v in list_versions(model_path)] == [1]
    model = load_model(model_path)
    corpus = Corpus.open(store_path)
    assert model.info.online["t"] == 7
    assert saved_tree(model).n_terms == (len(corpus.vocabulary("en")) - 1, len(corpus.vocabulary("de")) - 1)
    assert update_model(model_path, store_path).version == 2
    assert load_model(model_path).info.online["t"] == 10


def test_cli_update_of_a_tree_model(store: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    store_path, tree_path = store
    model_path = tmp_path / "m"
    _batch_model(store_path, tree_path, model_path)
    runner = CliRunner()
    cluster = ["--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    nothing = runner.invoke(main, ["update", str(model_path), str(store_path), *cluster])
    assert nothing.exit_code == 0 and "nothing to do" in nothing.output, nothing.output
    appended = runner.invoke(main, ["append", str(store_path), str(tmp_path / "new.jsonl"), "--lang-field", "en=en",
                                    "--lang-field", "de=de", "--promote-min-df", "3", *cluster])
    assert appended.exit_code == 0, appended.output
    result = runner.invoke(main, ["update", str(model_path), str(store_path), "--batch-size", "6", "--tau0", "2",
                                  "--kappa", "0.6", "--executor", "threads", "--keep", "5", *cluster])
    assert result.exit_code == 0, result.output
    assert "version 2: 2 new shards, 16 documents" in result.output and "en +1, de +1" in result.output
    assert "new terms hang directly from the root of the prior tree" in result.output
    model = load_model(model_path)
    assert model.info.online["config"]["batch_size"] == 6 and model.info.online["config"]["executor"] == "tasks"
    topics = runner.invoke(main, ["topics", str(model_path), "--top", "3"])
    assert topics.exit_code == 0 and "[en]" in topics.output, topics.output
    again = runner.invoke(main, ["update", str(model_path), str(store_path), "--format", "json", *cluster])
    assert again.exit_code == 0 and json.loads(again.output)["version"] is None
