"""End-to-end tests of synthesize_corpus / load_truth on the threaded and the distributed scheduler."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from topicflow import Corpus
from topicflow.errors import InvalidParameterError, StoreExistsError, StoreNotFoundError
from topicflow.models.lda.synth import draw_shard
from topicflow.pipeline.synth import load_truth, synthesize_corpus

SMALL: dict[str, Any] = dict(
    n_docs=240, n_topics=4, n_terms=60, doc_length=25.0, doc_topic_prior="0.2,0.4,0.6,0.8", topic_word_prior=0.1, seed=11,
)


def corpus_content(path: Path) -> dict[str, Any]:
    """Every document of a store in order, independent of how it is sharded."""
    corpus = Corpus.open(path)
    content: dict[str, Any] = {}
    for lang in corpus.languages:
        blocks = list(corpus.iter_blocks(lang))
        csr = [b.to_csr() for b in blocks]
        content[lang] = [
            (list(row.indices), list(row.data)) for matrix in csr for row in matrix
        ]
        content["doc_ids"] = [str(d) for b in blocks for d in b.doc_ids]
        content["labels"] = [str(x) for b in blocks for x in (b.labels if b.labels is not None else [])]
    return content


def test_store_and_truth_are_consistent(tmp_path: Path, client: Any) -> None:
    out = tmp_path / "synth.zarr"
    result = synthesize_corpus(out, **SMALL, labels=True, shard_size=64, client=client)
    assert (result.n_docs, result.n_shards, result.languages) == (240, 4, ("default",))
    corpus = Corpus.open(out)
    assert corpus.manifest.tokenizer["kind"] == "synthetic"
    assert corpus.has_labels and len(corpus) == 240
    assert [s.first_doc for s in corpus.shards] == [0, 64, 128, 192]
    assert corpus.verify() == []

    truth = load_truth(out)
    assert truth.params.doc_topic_prior == (0.2, 0.4, 0.6, 0.8)
    assert_allclose(truth.doc_topic_prior, [0.2, 0.4, 0.6, 0.8])
    topic_word = truth.topic_word["default"]
    assert topic_word.shape == (4, 60)
    assert_allclose(topic_word.sum(axis=1), 1.0, atol=1e-12)
    doc_topic = truth.doc_topic()
    assert doc_topic.shape == (240, 4) and doc_topic.chunks[0] == (64, 64, 64, 48)
    theta = doc_topic.compute()
    assert_allclose(theta.sum(axis=1), 1.0, atol=1e-12)
    assert_array_equal(truth.read_doc_topic(64, 128), theta[64:128])

    # The store holds exactly what the pure model draws for these documents.
    expected = draw_shard(truth.params, truth.topic_word, 0, 240)
    assert_array_equal(theta, expected.doc_topic)
    blocks = list(corpus.iter_blocks())
    assert_array_equal(np.concatenate([b.term_ids for b in blocks]), expected.bags["default"][1])
    labels = np.concatenate([b.labels for b in blocks])  # type: ignore[misc]
    assert list(labels) == [f"topic-{k}" for k in theta.argmax(axis=1)]

    # Vocabulary: generation order, aligned with topic_word columns, frequencies from the data.
    vocab = corpus.vocabulary()
    assert vocab.terms[0] == "w00000" and len(vocab) == 60
    counts = sp.vstack([b.to_csr() for b in blocks]).tocsr()
    assert_array_equal(vocab.corpus_freq, np.asarray(counts.sum(axis=0)).ravel())
    assert_array_equal(vocab.doc_freq, np.asarray((counts > 0).sum(axis=0)).ravel())
    assert vocab.corpus_freq.sum() == corpus.n_tokens == result.n_tokens["default"]


def test_same_seed_same_corpus_for_any_shard_size_and_scheduler(tmp_path: Path, client: Any) -> None:
    a = synthesize_corpus(tmp_path / "a.zarr", **SMALL, labels=True, shard_size=50, client=client)
    b = synthesize_corpus(tmp_path / "b.zarr", **SMALL, labels=True, shard_size=70)
    assert (a.n_shards, b.n_shards) == (5, 4)
    assert corpus_content(a.path) == corpus_content(b.path)
    assert_array_equal(load_truth(a.path).read_doc_topic(), load_truth(b.path).read_doc_topic())
    assert_array_equal(load_truth(a.path).topic_word["default"], load_truth(b.path).topic_word["default"])
    other = synthesize_corpus(tmp_path / "c.zarr", **{**SMALL, "seed": 12}, shard_size=50)
    assert corpus_content(other.path)["default"] != corpus_content(a.path)["default"]


def test_same_corpus_on_one_or_three_workers(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    checksums = []
    for n_workers in (1, 3):
        with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False,
                                      dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
            result = synthesize_corpus(tmp_path / f"w{n_workers}.zarr", **SMALL, shard_size=30, client=c)
        checksums.append([s.checksum for s in Corpus.open(result.path).shards])
    assert checksums[0] == checksums[1]


def test_multilingual_documents_share_theta(tmp_path: Path, client: Any) -> None:
    out = tmp_path / "ml.zarr"
    result = synthesize_corpus(out, **SMALL, n_languages=2, shard_size=100, client=client)
    corpus = Corpus.open(out)
    assert corpus.languages == ("l0", "l1") == result.languages
    assert corpus.vocabulary("l1").terms[3] == "l1-w00003"
    truth = load_truth(out)
    assert set(truth.topic_word) == {"l0", "l1"}
    assert not np.allclose(truth.topic_word["l0"], truth.topic_word["l1"])
    l0, l1 = corpus.read_block(1, "l0"), corpus.read_block(1, "l1")
    assert list(l0.doc_ids) == list(l1.doc_ids)
    assert not np.array_equal(l0.doc_lengths(), l1.doc_lengths())
    expected = draw_shard(truth.params, truth.topic_word, 100, 100)
    assert_array_equal(l1.counts, expected.bags["l1"][2])
    assert result.n_tokens["l0"] == corpus.tokens_by_language()["l0"]


def test_existing_store_is_kept_unless_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "s.zarr"
    synthesize_corpus(out, **SMALL, shard_size=100)
    with pytest.raises(StoreExistsError, match="--overwrite"):
        synthesize_corpus(out, **{**SMALL, "n_docs": 10}, shard_size=100)
    assert len(Corpus.open(out)) == 240
    synthesize_corpus(out, **{**SMALL, "n_docs": 10}, shard_size=100, overwrite=True)
    assert len(Corpus.open(out)) == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]


@pytest.mark.parametrize(
    ("change", "match"),
    [({"doc_topic_prior": "1,2"}, "alpha"), ({"n_docs": 0}, "n_docs"), ({"topic_word_prior": 0.0}, "eta"),
     ({"shard_size": 0}, "shard_size")],
)
def test_invalid_parameters_leave_nothing_behind(tmp_path: Path, change: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        synthesize_corpus(tmp_path / "bad.zarr", **{**SMALL, "shard_size": 50, **change})
    assert list(tmp_path.iterdir()) == []


def test_load_truth_of_a_store_without_truth(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="topicflow synth"):
        load_truth(tmp_path)
