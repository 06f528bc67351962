"""Read-outs of tree models from the command line: topics with concept paths, export, report, coherence,
evaluate and infer on a tiny bilingual store with a dictionary tree."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.testing import assert_allclose, assert_array_equal

from tests.pipeline.tree_lda.test_batch import _store_and_tree
from topicflow.api.tree_lda import TreeLDA
from topicflow.cli import main
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import export_npz, load_model
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.models.lda.state import LDAState
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.pipeline.tree_lda import saved_tree, saved_tree_state


def run(args: list[str]) -> object:
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("tree-readouts")
    store, tree = _store_and_tree(tmp)
    paths = {"store": store, "tree": tree}
    for inference in ("vb", "hybrid", "gibbs"):
        settings = {"max_iter": 30} if inference == "gibbs" else {"max_iter": 6, "tol": 0.0}
        TreeLDA(2, prior_tree=tree, inference=inference, normalization="node_language", seed=1,
                **settings).fit(store).save(tmp / inference)
        paths[inference] = tmp / inference
    return paths


@pytest.mark.parametrize("inference", ["vb", "hybrid", "gibbs"])
def test_topics_json_shows_each_words_paths_adding_up_to_its_probability(fitted: dict[str, Path],
                                                                        inference: str) -> None:
    result = run(["topics", str(fitted[inference]), "--top", "9", "--format", "json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    assert listing["family"] == "tree_lda" and listing["tree"]["n_concepts"] == 5
    assert listing["tree"]["inference"] == inference and listing["tree"]["normalization"] == "node_language"
    assert listing["tree"]["source"] == str(fitted["tree"]) and listing["tree"]["words_multi_path"] == 2
    model = load_model(fitted[inference])
    topic_word = model.state.topic_word()
    seen_two_paths = False
    for entry in listing["topics"]:
        k = entry["topic"]
        for lang in ("en", "de"):
            assert len(entry[lang]) == 9
            for term in entry[lang]:
                word = model.vocabularies[lang].id_of(term["term"])
                assert_allclose(term["p"], topic_word[lang][k, word], rtol=1e-12)
                assert_allclose(sum(p["p"] for p in term["paths"]), term["p"], rtol=1e-10)
                for path in term["paths"]:
                    # node_language: the product of the edge means along the path is its probability
                    assert_allclose(np.prod(path["edge_means"]), path["p"], rtol=1e-10)
                    assert path["concept"] == (path["nodes"][-1] if path["nodes"] else None)
                if term["term"] in ("home", "haus"):  # each on two paths (home|haus, home|heim / house|haus)
                    assert len(term["paths"]) == 2 and all(p["concept"] for p in term["paths"])
                    seen_two_paths = True
                if term["term"] == "garden":  # in no dictionary pair: straight from the root
                    assert term["paths"][0]["concept"] is None and len(term["paths"][0]["edge_means"]) == 1
        concepts = entry["concepts"]
        assert len(concepts) == 5 and {c["name"] for c in concepts} >= {"en:dog|de:hund", "en:cat|de:katze"}
        scores = [np.mean(list(c["mass"].values())) for c in concepts]
        assert scores == sorted(scores, reverse=True)
        dog = next(c for c in concepts if c["name"] == "en:dog|de:hund")
        assert [w["term"] for w in dog["words"]["en"]] == ["dog"] and [w["term"] for w in dog["words"]["de"]] == ["hund"]
        # A pair concept holds one word per language, so its mass there is that word's path probability.
        assert_allclose(dog["mass"]["de"], topic_word["de"][k, model.vocabularies["de"].id_of("hund")], rtol=1e-10)
        assert_allclose(dog["edge_mean"]["en"], dog["mass"]["en"], rtol=1e-10)
    assert seen_two_paths


def test_topics_text_names_the_tree_and_the_paths(fitted: dict[str, Path]) -> None:
    result = run(["topics", str(fitted["vb"]), "--top", "9", "--concepts", "2"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("tree model: ") and "5 concepts" in out and "batch variational Bayes" in out
    assert "via dog|hund" in out and "via home|" in out and "top concepts (mass per language)" in out
    homes = [line for line in out.splitlines() if line.replace("[en]", "").split()[0] == "home"]
    assert len(homes) == 2  # one line per topic
    for home in homes:  # both senses: named with their probabilities, or the second counted when below 5 %
        assert ("home|haus" in home and "home|heim" in home) or home.endswith("(+1 other path)"), home
    garden = next(line for line in out.splitlines() if line.replace("[en]", "").split()[0] == "garden")
    assert "via" not in garden
    plain = run(["topics", str(fitted["vb"]), "--top", "3", "--no-paths"])
    assert plain.exit_code == 0 and "via" not in plain.output and "[de]" in plain.output
    as_json = json.loads(run(["topics", str(fitted["vb"]), "--no-paths", "--format", "json"]).output)
    assert "paths" not in as_json["topics"][0]["en"][0]


def test_paths_of_a_model_without_a_tree_are_refused(fitted: dict[str, Path], tmp_path: Path) -> None:
    model = load_model(fitted["vb"])
    lda = replace(model, info=ModelInfo(family="lda"), sampler_state={})
    from topicflow.io.models.store import save_model

    save_model(tmp_path / "lda", lda)
    result = CliRunner().invoke(main, ["topics", str(tmp_path / "lda"), "--paths"])
    assert result.exit_code == 2 and "tree model" in result.output, result.output
    assert run(["topics", str(tmp_path / "lda")]).exit_code == 0


def test_export_holds_the_topics_per_language_and_the_tree(fitted: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "tree.npz"
    result = run(["export", str(fitted["vb"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    model = load_model(fitted["vb"])
    state, layout = saved_tree_state(model)
    tree = saved_tree(model)
    with np.load(out, allow_pickle=False) as npz:
        for lang in ("en", "de"):
            assert_array_equal(npz[f"topic_word_{lang}"], model.state.topic_word()[lang])
            assert list(npz[f"vocab_{lang}"]) == list(model.vocabularies[lang].terms)
            # the path probabilities summed into their words give the topics back
            lang_paths = npz["path_language"] == list(npz["tree_languages"]).index(lang)
            words = np.zeros_like(npz[f"topic_word_{lang}"])
            np.add.at(words.T, npz["path_term"][lang_paths], npz["path_prob"][:, lang_paths].T)
            assert_allclose(words, npz[f"topic_word_{lang}"], rtol=1e-10)
            assert_allclose(npz[f"node_mass_{lang}"][:, 0], 1.0)
            assert npz[f"edge_mean_{lang}"].shape == state.edge_var.shape
        assert_array_equal(npz["edge_var"], state.edge_var)
        for name in ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges", "path_language",
                     "path_term"):
            assert_array_equal(npz[name], getattr(tree, name))
        assert tuple(npz["node_names"]) == tree.node_names and tuple(npz["tree_languages"]) == tree.languages
        assert_array_equal(npz["alpha"], model.state.doc_topic_prior)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_flat_tree_export_equals_polylingual_lda_export(fitted: dict[str, Path], tmp_path: Path) -> None:
    corpus = Corpus.open(fitted["store"])
    sizes = [len(corpus.vocabulary(lang)) for lang in corpus.languages]
    flat = flat_tree(corpus.languages, sizes, beta=0.01)
    TreeLDA(2, prior_tree=flat, max_iter=2, tol=0.0, seed=4).fit(fitted["store"]).save(tmp_path / "flat")
    assert run(["export", str(tmp_path / "flat"), "--out", str(tmp_path / "flat.npz")]).exit_code == 0
    model = load_model(tmp_path / "flat")
    edge_var = saved_tree_state(model)[0].edge_var
    split = np.cumsum([0, *sizes])
    lam = {lang: edge_var[:, split[i]:split[i + 1]] for i, lang in enumerate(corpus.languages)}
    lda = replace(model, state=LDAState(lam, model.state.doc_topic_prior, {lang: 0.01 for lang in lam}),
                  info=ModelInfo(family="lda"), sampler_state={})
    export_npz(tmp_path / "lda.npz", lda)
    with np.load(tmp_path / "flat.npz", allow_pickle=False) as tree_npz, \
            np.load(tmp_path / "lda.npz", allow_pickle=False) as lda_npz:
        assert set(lda_npz.files) < set(tree_npz.files)
        for name in lda_npz.files:
            if name.startswith("topic_word"):
                assert_allclose(tree_npz[name], lda_npz[name], rtol=1e-12)
            else:
                assert_array_equal(tree_npz[name], lda_npz[name])
        assert_array_equal(tree_npz["edge_var"], edge_var)
        assert tuple(tree_npz["node_names"]) == ("ROOT",)


def test_report_names_the_tree_and_charts_concepts(fitted: dict[str, Path], tmp_path: Path,
                                                   local_cluster: object) -> None:
    out = tmp_path / "r.html"
    result = run(["report", str(fitted["hybrid"]), "--out", str(out), "--corpus", str(fitted["store"]),
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "batch variational Bayes, hybrid (Gibbs within VB) E-step" in page
    assert "ptLDA (polylingual tree LDA), normalization node_language" in page
    assert f"{fitted['tree']}: 5 concepts, 20 paths, 2 words on more than one path" in page
    assert "Prior tree" in page and "concepts panel" in page and "u_mass" in page
    assert page.count('class="topic-chart"') == 2
    no_corpus = run(["report", str(fitted["gibbs"]), "--out", str(tmp_path / "r2.html")])
    page = (tmp_path / "r2.html").read_text(encoding="utf-8")
    assert no_corpus.exit_code == 0 and "prior tree" in page
    assert "<th>method</th><td>collapsed Gibbs sampling</td>" in page and "gibbs variational" not in page


@pytest.mark.parametrize("language", ["en", "de"])
def test_coherence_per_language(fitted: dict[str, Path], local_cluster: object, language: str) -> None:
    result = run(["coherence", str(fitted["vb"]), "--reference", str(fitted["store"]), "--measure", "u_mass",
                  "--top-n", "4", "--language", language, "--format", "json",
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    model = load_model(fitted["vb"])
    tops = [[model.vocabularies[language].term_of(int(w)) for w in np.argsort(-row, kind="stable")[:4]]
            for row in model.state.topic_word()[language]]
    assert scores["language"] == language and [t["words"] for t in scores["topics"]] == tops
    # u_mass of top words that co-occur in the tiny corpus: finite and at most 0 (log of a ratio <= 1 + eps)
    assert all(np.isfinite(v) and v < 1.0 for v in scores["per_topic"])


def test_evaluate_and_infer(fitted: dict[str, Path], tmp_path: Path, local_cluster: object) -> None:
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    corpus = Corpus.open(fitted["store"])
    result = run(["evaluate", str(fitted["vb"]), str(fitted["store"]), "--format", "json", "--scheduler", address])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    vocab = sum(len(corpus.vocabulary(lang)) for lang in corpus.languages)
    # both languages are scored: about half of all tokens are held out
    assert 0.3 * corpus.n_tokens < scores["n_tokens"] < 0.7 * corpus.n_tokens
    assert 1.0 < scores["perplexity"] < vocab and scores["n_docs"] == len(corpus)
    result = run(["infer", str(fitted["vb"]), str(fitted["store"]), "--out", str(tmp_path / "theta.zarr"),
                  "--scheduler", address])
    assert result.exit_code == 0, result.output
    theta = DocTopics.open(tmp_path / "theta.zarr").to_dask_array().compute()
    assert theta.shape == (len(corpus), 2)
    assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)
    assert_allclose(theta, np.asarray(TreeLDA.load(fitted["vb"]).transform(fitted["store"])), atol=1e-6)


def test_a_monolingual_tree_model_reads_without_language_labels(tmp_path: Path) -> None:
    from topicflow.io.sources.base import FieldSpec
    from topicflow.io.tokenizer import TokenizerConfig
    from topicflow.io.trees import build_and_write_tree
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    texts = ["house home cat dog", "cat dog mouse", "house home garden", "system network computer", "dog garden"]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": texts[i % 5] + " " + texts[(i * 3) % 5]}) + "\n"
                           for i in range(30)), encoding="utf-8")
    ingest_corpus([src], tmp_path / "s.zarr", fields=FieldSpec(), tokenizer=TokenizerConfig(), shard_size=8)
    (tmp_path / "syn.tsv").write_text("house\thome\ncat\tdog\n", encoding="utf-8")
    build_and_write_tree(tmp_path / "syn.tsv", tmp_path / "s.zarr", tmp_path / "t.tree", languages=["default"] * 2)
    TreeLDA(2, prior_tree=tmp_path / "t.tree", max_iter=5, tol=0.0, seed=2).fit(tmp_path / "s.zarr").save(tmp_path / "m")
    out = run(["topics", str(tmp_path / "m"), "--top", "9", "--concepts", "2"]).output
    assert "[default]" not in out and "top concepts (mass)" in out and "via home|house" in out
    assert "(home 0." in out or "(house 0." in out  # a synonym concept's words with their edge means
    assert run(["export", str(tmp_path / "m"), "--out", str(tmp_path / "m.npz")]).exit_code == 0
    model = load_model(tmp_path / "m")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        assert_array_equal(npz["topic_word"], model.state.topic_word()["default"])
        assert npz["edge_mean"].shape == npz["edge_var"].shape and npz["node_mass"].shape == (2, 3)
        assert tuple(npz["tree_languages"]) == ("default",)
