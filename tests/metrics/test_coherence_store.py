"""Coherence against corpus stores built by ``topicflow ingest --keep-order``: equal to gensim's CoherenceModel
on the same topics and the store's own tokenized texts, for any number of shards and workers."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow import LDA, Corpus
from topicflow.cli import main
from topicflow.errors import OrderNotKeptError, VocabularyMismatchError
from topicflow.metrics import coherence
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

THEMES = {
    "sea": ["ocean", "wave", "ship", "sailor", "harbor", "anchor", "tide", "storm", "fish", "boat", "deck", "coast"],
    "farm": ["field", "wheat", "harvest", "tractor", "barn", "cattle", "soil", "plough", "farmer", "seed", "orchard", "fence"],
    "court": ["judge", "lawyer", "trial", "verdict", "court", "jury", "witness", "appeal", "law", "sentence", "evidence", "case"],
}
COMMON = ["time", "people", "year", "day", "way", "thing", "world", "life", "hand", "part", "place", "week"]


def write_corpus(path: Path, n_docs: int = 300, seed: int = 0) -> Path:
    """Documents mixing one or two themes with common words; lengths 3..200 (around both default
    windows), and one-off made-up words that ``--min-df 2`` leaves out of the vocabulary (OOV tokens)."""
    rng = np.random.default_rng(seed)
    names = list(THEMES)
    rows = []
    for d in range(n_docs):
        length = int(rng.choice([rng.integers(3, 12), rng.integers(12, 120), rng.integers(100, 200)]))
        mix = rng.choice(len(names), size=2, replace=False)
        tokens = []
        for _ in range(length):
            u = rng.random()
            if u < 0.03:
                tokens.append(f"zq{d}x{len(tokens)}")  # seen once: out of the vocabulary
            elif u < 0.35:
                tokens.append(str(rng.choice(COMMON)))
            else:
                theme = THEMES[names[mix[0] if rng.random() < 0.8 else mix[1]]]
                tokens.append(theme[min(int(rng.zipf(1.6)) - 1, len(theme) - 1)])
        rows.append({"id": f"doc{d}", "text": " ".join(tokens)})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def ingest(jsonl: Path, out: Path, shard_size: int, address: str, keep_order: bool = True) -> Path:
    args = ["ingest", str(jsonl), "--out", str(out), "--shard-size", str(shard_size), "--min-df", "2",
            "--stop-words", "none", "--scheduler", address] + (["--keep-order"] if keep_order else [])
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, local_cluster: Any) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("coherence-stores")
    jsonl = write_corpus(base / "docs.jsonl")
    address = local_cluster.scheduler_address
    return {"one": ingest(jsonl, base / "one.zarr", 1000, address),
            "many": ingest(jsonl, base / "many.zarr", 37, address),
            "bag": ingest(jsonl, base / "bag.zarr", 100, address, keep_order=False)}


def store_texts(path: Path) -> tuple[list[list[str]], list[str]]:
    """The store's tokenized texts (out-of-vocabulary tokens included) and its vocabulary."""
    corpus = Corpus.open(path)
    vocab = corpus.vocabulary()
    texts = [text for i in range(corpus.n_shards) for text in corpus.read_ordered(i).texts(vocab)]
    return texts, [str(t) for t in vocab.terms]


def gensim_values(topics: list[list[str]], texts: list[list[str]], terms: list[str], measure: str,
                  window: int | None) -> tuple[list[float], float]:
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CoherenceModel(topics=topics, texts=texts, dictionary=Dictionary([terms]), coherence=measure,
                               window_size=window, topn=10, processes=1)
        return [float(v) for v in model.get_coherence_per_topic()], float(model.get_coherence())


TOPICS = [
    THEMES["sea"][:10],
    THEMES["farm"][:6] + THEMES["court"][:4],    # words that rarely share a window
    COMMON[:5] + ["ocean", "judge", "wheat", "fish", "trial"],
    ["anchor", "verdict", "orchard", "deck", "jury"],
]


@pytest.mark.parametrize(("measure", "window"), [("u_mass", None), ("c_uci", None), ("c_npmi", None),
                                                 ("c_v", None), ("c_v", 20)])
def test_store_coherence_equals_gensim_on_the_stores_texts(stores: dict[str, Path], measure: str,
                                                            window: int | None, client: Any) -> None:
    texts, terms = store_texts(stores["one"])
    assert any(len(t) < 110 for t in texts) and any(len(t) > 110 for t in texts)
    assert any(w not in set(terms) for t in texts for w in t)  # OOV tokens sit inside windows
    expected, expected_mean = gensim_values(TOPICS, texts, terms, measure, window)
    for name in ("one", "many"):
        result = coherence(TOPICS, stores[name], measure=measure, window=window, client=client, split_every=3)
        np.testing.assert_allclose(result.per_topic, expected, rtol=1e-6, atol=0)
        assert result.mean == pytest.approx(expected_mean, rel=1e-6)


def test_fitted_model_topics_equal_gensim_for_every_measure(stores: dict[str, Path], tmp_path: Path,
                                                             local_cluster: Any) -> None:
    model = LDA(3, max_iter=5, seed=0).fit(str(stores["many"]))
    texts, terms = store_texts(stores["many"])
    for measure in ("u_mass", "c_uci", "c_npmi", "c_v"):
        result = coherence(model, stores["many"], measure=measure)
        assert len(result.per_topic) == 3 and all(len(t) == 10 for t in result.topics)
        expected, _ = gensim_values([list(t) for t in result.topics], texts, terms, measure, None)
        np.testing.assert_allclose(result.per_topic, expected, rtol=1e-6, atol=0)
    model.save(tmp_path / "model")
    cli = CliRunner().invoke(main, ["coherence", str(tmp_path / "model"), "--reference", str(stores["many"]),
                                    "--format", "json", "--scheduler", local_cluster.scheduler_address],
                             catch_exceptions=False)
    assert cli.exit_code == 0, cli.output
    payload = json.loads(cli.output)
    assert payload["measure"] == "c_v" and payload["window"] == 110 and payload["top_n"] == 10
    np.testing.assert_allclose(payload["per_topic"], result.per_topic, rtol=1e-12)
    assert payload["mean"] == pytest.approx(result.mean, rel=1e-12)


def test_exact_windows_differ_from_gensims_only_through_repeated_words(stores: dict[str, Path]) -> None:
    from tests.reference import coherence_numpy as ref

    texts, _ = store_texts(stores["many"])
    exact = coherence(TOPICS, stores["many"], measure="c_npmi", windows="exact")
    np.testing.assert_allclose(exact.per_topic, ref.coherence(TOPICS, texts, "c_npmi", sets="exact"), rtol=1e-9)
    assert exact.windows == "exact" and exact.per_topic != coherence(TOPICS, stores["many"], measure="c_npmi").per_topic


def test_window_measures_on_a_store_without_order_say_why(stores: dict[str, Path]) -> None:
    with pytest.raises(OrderNotKeptError, match="--keep-order") as caught:
        coherence(TOPICS, stores["bag"], measure="c_v")
    assert "u_mass" in str(caught.value) and str(stores["bag"]) in str(caught.value)
    by_bag = coherence(TOPICS, stores["bag"], measure="u_mass")
    np.testing.assert_allclose(by_bag.per_topic, coherence(TOPICS, stores["one"], measure="u_mass").per_topic,
                               rtol=1e-12)


def test_reference_with_another_vocabulary_is_matched_by_word(stores: dict[str, Path], tmp_path: Path) -> None:
    """A reference store whose term ids differ from the topics' source: words are matched by strings."""
    _, terms = store_texts(stores["one"])
    reversed_terms = terms[::-1]
    corpus = Corpus.open(stores["one"])
    matrix = corpus.read_block(0).to_csr()[:, ::-1]
    other = write_test_store(tmp_path / "rev.zarr", {"default": matrix}, shard_size=50,
                             terms={"default": reversed_terms})
    np.testing.assert_allclose(coherence(TOPICS, other, measure="u_mass").per_topic,
                               coherence(TOPICS, stores["one"], measure="u_mass").per_topic, rtol=1e-12)


def test_multilingual_model_is_scored_per_language(tmp_path: Path) -> None:
    truth = draw_planted_corpus(n_docs=120, n_topics=2, n_terms=20, doc_length=25, alpha=0.3, seed=3,
                                languages=("en", "de"))
    store = write_test_store(tmp_path / "ml.zarr", truth.counts, shard_size=40)
    model = LDA(2, max_iter=3, seed=0).fit(str(store))
    first = coherence(model, store, measure="u_mass")
    german = coherence(model, store, measure="u_mass", language="de")
    assert first.language == "en" and german.language == "de"
    assert all(w.startswith("en") for t in first.topics for w in t)
    assert all(w.startswith("de") for t in german.topics for w in t)
    with pytest.raises(Exception, match="no 'fr'"):
        coherence(model, store, measure="u_mass", language="fr")
    with pytest.raises(VocabularyMismatchError, match="name one with --language"):
        coherence([["en00001", "en00002"]], store, measure="u_mass")
