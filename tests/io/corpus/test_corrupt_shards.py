"""Damaged shards are reported as CorruptShardError naming the store and shard, by every read path."""
from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from topicflow.errors import CorpusFormatError, CorruptShardError
from topicflow.io.corpus.id_index import hash_ids, ids_in_store
from topicflow.io.corpus.layout import csr_problems
from topicflow.io.corpus.reader import Corpus, load_block, load_multiblock, read_manifest
from topicflow.pipeline.shard_reader import ShardReader
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.pipeline.vb.online import OnlineConfig, fit_online
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

RE_INGEST = r"re-ingest the store or restore the shard from a backup"


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    truth = draw_planted_corpus(n_docs=150, n_topics=3, n_terms=30, doc_length=40, alpha=0.3, seed=4)
    return write_test_store(tmp_path / "c.zarr", truth.counts, shard_size=50)


@pytest.fixture()
def bilingual(tmp_path: Path) -> Path:
    truth = draw_planted_corpus(n_docs=100, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=5,
                                languages=("en", "de"))
    return write_test_store(tmp_path / "bi.zarr", truth.counts, shard_size=50)


def chunk_file(store: Path, shard_id: str, array: str) -> Path:
    """The one chunk file of ``array`` in shard ``shard_id`` (arrays of a shard are single-chunk)."""
    files = [p for p in (store / "shards" / shard_id / array / "c").rglob("*") if p.is_file()]
    assert len(files) == 1, files
    return files[0]


def flip_bytes(path: Path, start: int = 12, stop: int = 40) -> None:
    data = bytearray(path.read_bytes())
    for i in range(start, min(stop, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def rewrite_array(store: Path, shard_id: str, array: str, values: np.ndarray) -> None:
    """Replace an array's values with a well-encoded chunk: only the content is wrong, not the encoding."""
    zarr.open_array(str(store / "shards" / shard_id / array), mode="r+")[:] = values


def read_shard(store: Path, index: int) -> object:
    corpus = Corpus.open(store)
    return load_block(str(store), corpus.shards[index], "default", len(corpus.vocabulary()))


# ----------------------------------------------------------------------------- decode failures


def test_flipped_bytes_in_a_chunk_are_reported_by_load_block_and_verify(store: Path) -> None:
    flip_bytes(chunk_file(store, "000001", "default/counts"))
    with pytest.raises(CorruptShardError, match=rf"shard 000001 of '.*c\.zarr' is corrupt: .*default/counts.*{RE_INGEST}") as info:
        read_shard(store, 1)
    assert info.value.shard == "000001" and info.value.path == str(store)
    assert isinstance(info.value, CorpusFormatError) and isinstance(info.value, ValueError)
    assert read_shard(store, 0).n_docs == 50  # the other shards still read  # type: ignore[attr-defined]
    with pytest.raises(CorruptShardError, match=r"shard 000001 .* is corrupt") as verified:
        Corpus.open(store).verify()
    assert verified.value.shard == "000001"
    assert Corpus.open(store).verify(raise_errors=False) == ["000001"]


def test_truncated_chunk_is_reported(store: Path) -> None:
    truncate(chunk_file(store, "000002", "default/term_ids"))
    with pytest.raises(CorruptShardError, match=r"shard 000002 .*default/term_ids' cannot be decoded"):
        read_shard(store, 2)
    with pytest.raises(CorruptShardError, match="shard 000002"):
        Corpus.open(store).read_multiblock(2)


def test_damaged_doc_ids_are_reported_by_every_reader_of_them(store: Path) -> None:
    flip_bytes(chunk_file(store, "000001", "doc_ids"))
    with pytest.raises(CorruptShardError, match=r"shard 000001 .*doc_ids' cannot be decoded"):
        list(Corpus.open(store).doc_ids())
    manifest = read_manifest(store)
    # An append looks its ids up in the shards the id index does not cover (all of them here).
    with pytest.raises(CorruptShardError, match="shard 000001") as info:
        ids_in_store(store, manifest, np.sort(hash_ids(["doc-60"])))
    assert info.value.shard == "000001"


def test_missing_array_and_missing_shard_are_reported(store: Path) -> None:
    shutil.rmtree(store / "shards" / "000000" / "default" / "counts")
    with pytest.raises(CorruptShardError, match=r"shard 000000 .*default/counts' is missing"):
        read_shard(store, 0)
    shutil.rmtree(store / "shards" / "000002")
    assert Corpus.open(store).verify(raise_errors=False) == ["000000", "000002"]
    with pytest.raises(CorruptShardError, match=r"2 shards of .* are corrupt \(shard 000000: .*; shard 000002: .*\)"):
        Corpus.open(store).verify()


def test_damaged_array_metadata_is_reported(store: Path) -> None:
    (store / "shards" / "000001" / "default" / "indptr" / "zarr.json").write_text("{not json")
    with pytest.raises(CorruptShardError, match=r"shard 000001 .*default/indptr' cannot be decoded \(JSONDecodeError"):
        read_shard(store, 1)


# ----------------------------------------------------------------------------- arrays that decode but are wrong


def test_deleted_chunk_reads_as_zeros_and_is_caught(store: Path) -> None:
    # zarr reads a missing chunk as its fill value (0) without complaint; validation must notice.
    chunk_file(store, "000001", "default/term_ids").unlink()
    with pytest.raises(CorruptShardError, match="shard 000001 .* checksum"):
        read_shard(store, 1)


def test_counts_that_disagree_with_the_manifest_are_caught(store: Path) -> None:
    counts = np.asarray(zarr.open_array(str(store / "shards/000001/default/counts"), mode="r")[:])
    rewrite_array(store, "000001", "default/counts", counts + 1)
    with pytest.raises(CorruptShardError, match=r"language 'default': its counts add up to \d+ tokens but the "
                                                r"manifest says \d+"):
        read_shard(store, 1)
    counts[3] = 0
    rewrite_array(store, "000001", "default/counts", counts)
    with pytest.raises(CorruptShardError, match=r"counts must be positive \(found 0\)"):
        read_shard(store, 1)


def test_term_ids_beyond_the_vocabulary_are_caught(store: Path) -> None:
    shard = Corpus.open(store).shards[0]
    with pytest.raises(CorruptShardError, match=r"term ids outside \[0, 5\)"):
        load_block(str(store), shard, "default", 5)


def test_swapped_term_ids_are_caught_only_by_the_checksum(store: Path) -> None:
    term_ids = np.asarray(zarr.open_array(str(store / "shards/000001/default/term_ids"), mode="r")[:])
    rewrite_array(store, "000001", "default/term_ids", term_ids[::-1].copy())  # valid ids, same counts
    with pytest.raises(CorruptShardError, match=r"do not match the manifest's checksum \(expected sha256:"):
        read_shard(store, 1)
    assert Corpus.open(store).verify(raise_errors=False) == ["000001"]


def test_document_count_that_disagrees_with_the_manifest_is_caught(store: Path) -> None:
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["shards"][1]["n_docs"] = 49
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptShardError, match=r"doc_ids holds \(50,\) entries but the manifest says 49 documents"):
        read_shard(store, 1)


def test_multilingual_reads_check_every_language_read(bilingual: Path) -> None:
    corpus = Corpus.open(bilingual)
    term_ids = np.asarray(zarr.open_array(str(bilingual / "shards/000001/de/term_ids"), mode="r")[:])
    rewrite_array(bilingual, "000001", "de/term_ids", term_ids[::-1].copy())
    # Reading both languages covers the whole checksum, so the swap is found.
    with pytest.raises(CorruptShardError, match="shard 000001 .* checksum"):
        load_multiblock(str(bilingual), corpus.shards[1], corpus.vocab_sizes())
    assert corpus.verify(raise_errors=False) == ["000001"]
    flip_bytes(chunk_file(bilingual, "000001", "de/counts"))
    with pytest.raises(CorruptShardError, match=r"shard 000001 .*de/counts' cannot be decoded"):
        corpus.read_block(1, "de")


def test_sound_store_reads_unchanged(store: Path) -> None:
    corpus = Corpus.open(store)
    assert corpus.verify() == [] and corpus.verify(raise_errors=False) == []
    block = corpus.read_block(2)
    counts = np.asarray(zarr.open_array(str(store / "shards/000002/default/counts"), mode="r")[:])
    np.testing.assert_array_equal(block.counts, counts)
    assert block.n_docs == 50 and block.n_tokens == corpus.shards[2].n_tokens["default"]


def test_csr_problems_lists_each_problem() -> None:
    indptr, term_ids, counts = np.array([0, 2, 1]), np.array([0, 9]), np.array([1, 0, 2])
    problems = csr_problems((indptr, term_ids, counts), 2, 5)
    assert problems == ["indptr is not nondecreasing up to the number of entries (2)",
                        "term_ids and counts differ in length (2 and 3)",
                        "term ids outside [0, 5) (from 0 to 9)",
                        "counts must be positive (found 0)"]
    assert csr_problems((np.array([0.0, 1.0]), term_ids, counts), 1, 5) == [
        "indptr has shape (2,) and dtype float64, expected a 1-d integer array"]
    assert csr_problems((np.array([0, 2]), np.array([1, 3]), np.array([1, 1])), 1, 5) == []


# ----------------------------------------------------------------------------- drivers and Dask


def test_error_survives_pickling_with_its_fields() -> None:
    # Errors raised in a Dask worker process reach the client pickled.
    error = CorruptShardError("shard 000001 of 's' is corrupt: x", path="s", shard="000001")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is CorruptShardError and str(copy) == str(error)
    assert (copy.path, copy.shard) == ("s", "000001")


def test_batch_fit_reports_the_corrupt_shard(store: Path, client: object) -> None:
    flip_bytes(chunk_file(store, "000001", "default/counts"))
    with pytest.raises(CorruptShardError, match=rf"shard 000001 of .* is corrupt: .*{RE_INGEST}") as info:
        fit_batch_vb(Corpus.open(store), VBConfig(n_topics=3, max_iter=2, seed=0), client=client)
    assert info.value.shard == "000001"


@pytest.mark.parametrize("executor", ["servers", "threads", "tasks"])
def test_online_fit_reports_the_corrupt_shard_on_every_executor(store: Path, local_cluster: object,
                                                                 executor: str) -> None:
    from distributed import Client

    truncate(chunk_file(store, "000002", "default/counts"))
    online = OnlineConfig(batch_size=40, passes=1, executor=executor)
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        with pytest.raises(CorruptShardError, match="shard 000002 .* is corrupt") as info:
            fit_online(Corpus.open(store), VBConfig(n_topics=3, seed=0), online, client=client)
    assert info.value.shard == "000002"


def test_shard_reader_reports_the_corrupt_shard_when_its_rows_are_needed(store: Path) -> None:
    corpus = Corpus.open(store)
    flip_bytes(chunk_file(store, "000001", "default/counts"))
    reader = ShardReader(str(store), corpus.shards, corpus.vocab_sizes())
    reader.prefetch([1])
    reader.close()  # the background read has failed by now
    with pytest.raises(CorruptShardError, match="shard 000001"):
        reader.rows(1, 0, 5)
    assert reader.rows(0, 0, 5)["default"].n_docs == 5


# ----------------------------------------------------------------------------- checksum once per file version


def test_checksum_is_recomputed_only_when_the_files_change(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard read again with unchanged files skips its checksum; a changed file is checked again."""
    from topicflow.io.corpus import reader

    calls: list[str] = []
    original = reader._checksum_problem

    def counting(arrays: object, shard: object) -> object:
        calls.append(shard.shard_id)  # type: ignore[attr-defined]
        return original(arrays, shard)  # type: ignore[arg-type]

    monkeypatch.setattr(reader, "_checksum_problem", counting)
    monkeypatch.setattr(reader, "_VERIFIED", set())
    read_shard(store, 1)
    read_shard(store, 1)
    assert calls == ["000001"]
    values = zarr.open_array(str(store / "shards" / "000001" / "default" / "counts"), mode="r")[:]
    rewrite_array(store, "000001", "default/counts", values[::-1].copy())  # same size, other bytes
    with pytest.raises(CorruptShardError, match="000001"):
        read_shard(store, 1)
    assert calls == ["000001", "000001"]
