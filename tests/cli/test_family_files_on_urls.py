"""Prior trees, G0 files and synthetic stores on URLs (``memory://``; docs/storage.md), by the output-path rule.

``tree build``, ``g0 train`` and ``synth`` read their inputs from and write their outputs to URLs (S3 reached with
only ``--storage-option``); what they
write there reads back equal to the same command's local output. Every one goes through
:func:`topicflow.io.output_paths.prepare_output`: a missing local parent is created, an existing output is
refused without ``--overwrite`` (and replaced with it), a file where the output's parent should be is refused.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import fsspec
import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.tree_lda.test_batch import _store_and_tree
from topicflow.io.corpus.reader import Corpus
from topicflow.io.g0 import read_g0
from topicflow.io.trees import ARRAY_NAMES, read_tree


def run(*args: Any) -> Any:
    from topicflow.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def memory_root() -> Iterator[str]:
    root = f"/tf-{uuid.uuid4().hex[:12]}"
    yield root
    fsspec.filesystem("memory").rm(root, recursive=True)


@pytest.fixture(scope="module")
def store_and_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A bilingual store, its dictionary ``d.tsv`` and the tree built from it (local files)."""
    tmp = tmp_path_factory.mktemp("family")
    return (*_store_and_tree(tmp), tmp)


def test_tree_and_g0_on_urls_equal_their_local_files(memory_root: str, tmp_path: Path,
                                                     store_and_tree: tuple[Path, Path, Path]) -> None:
    store, local_tree, here = store_and_tree
    (tmp_path / "d.tsv").write_bytes((here / "d.tsv").read_bytes())
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{memory_root}/d.tsv", (tmp_path / "d.tsv").read_bytes())
    url = f"memory://{memory_root}/trees/d.tree"
    built = run("tree", "build", f"memory://{memory_root}/d.tsv", "--store", store, "--out", url)
    assert built.exit_code == 0, built.output
    remote, _ = read_tree(url)
    local, _ = read_tree(local_tree)
    for name in ARRAY_NAMES:
        np.testing.assert_array_equal(getattr(remote, name), getattr(local, name), err_msg=name)
    assert run("tree", "info", url).exit_code == 0
    again = run("tree", "build", f"memory://{memory_root}/d.tsv", "--store", store, "--out", url)
    assert again.exit_code != 0 and "exists already" in again.output, again.output
    assert run("tree", "build", tmp_path / "d.tsv", "--store", store, "--out", url, "--overwrite").exit_code == 0
    nested = run("tree", "build", tmp_path / "d.tsv", "--store", store, "--out", tmp_path / "new" / "dir" / "t")
    assert nested.exit_code == 0 and (tmp_path / "new" / "dir" / "t" / "tree.json").is_file(), nested.output
    under_file = run("tree", "build", tmp_path / "d.tsv", "--store", store, "--out", tmp_path / "d.tsv" / "t")
    assert under_file.exit_code != 0 and "is a file, not a directory" in under_file.output, under_file.output

    words = "\n".join(["apple", "banana", "cherry", "grape", "melon", "lemon"]) + "\n"
    fs.pipe(f"{memory_root}/words.txt", words.encode())
    (tmp_path / "words.txt").write_text(words)
    g0_url = f"memory://{memory_root}/g0"
    trained = run("g0", "train", f"memory://{memory_root}/words.txt", "--out", g0_url, "--order", 2)
    assert trained.exit_code == 0, trained.output
    assert run("g0", "train", tmp_path / "words.txt", "--out", tmp_path / "g0", "--order", 2).exit_code == 0
    (remote_g0, _), (local_g0, _) = read_g0(g0_url), read_g0(tmp_path / "g0")
    np.testing.assert_array_equal(remote_g0.counts, local_g0.counts)
    np.testing.assert_array_equal(remote_g0.log_zeta, local_g0.log_zeta)
    refused = run("g0", "train", tmp_path / "words.txt", "--out", g0_url, "--order", 2)
    assert refused.exit_code != 0 and "exists already" in refused.output, refused.output
    assert run("g0", "info", g0_url).exit_code == 0


def test_synth_writes_a_store_to_a_url(memory_root: str, tmp_path: Path) -> None:
    options = ["--docs", 12, "--topics", 2, "--vocab", 20, "--doc-length", 8, "--seed", 1, "--local-cluster",
               "threads"]
    url = f"memory://{memory_root}/syn.zarr"
    made = run("synth", "--out", url, *options)
    assert made.exit_code == 0, made.output
    assert run("synth", "--out", tmp_path / "syn.zarr", *options).exit_code == 0
    remote, local = Corpus.open(url), Corpus.open(tmp_path / "syn.zarr")
    assert len(remote) == len(local) == 12 and remote.n_tokens == local.n_tokens
    refused = run("synth", "--out", url, *options)
    assert refused.exit_code != 0 and "exists already" in refused.output, refused.output


def _storage_options(s3_server: Any) -> list[str]:
    return [f"--storage-option={key}={value}" for key, value in
            (("endpoint_url", s3_server.endpoint), ("key", s3_server.storage_options["key"]),
             ("secret", s3_server.storage_options["secret"]),
             ("client_kwargs.region_name", s3_server.storage_options["client_kwargs"]["region_name"]))]


def test_infvoc_document_vectors_are_written_to_a_url(memory_root: str) -> None:
    """``fit --family infvoc --doc-topics URL``: the writer of the online pass's vectors opens the URL's zarr group."""
    from topicflow.io.models.infvoc import DocTopicWriter, read_doc_topics

    url = f"memory://{memory_root}/dt.zarr"
    writer = DocTopicWriter(url, 4, 2)
    writer.write(0, np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([5, 6]), 0)
    writer.write(2, np.array([[5.0, 6.0], [7.0, 8.0]]), np.array([7, 8]), 1)
    again = DocTopicWriter(url, 4, 2)  # a resumed fit reopens the group and keeps its rows
    again.write(3, np.array([[9.0, 9.0]]), np.array([8]), 1)
    found = read_doc_topics(url)
    np.testing.assert_array_equal(found["doc_topic"], [[1, 2], [3, 4], [5, 6], [9, 9]])
    assert found["doc"].tolist() == [5, 6, 7, 8] and found["minibatch"].tolist() == [0, 0, 1, 1]


def test_tree_g0_grammar_take_storage_options_for_s3(s3_server: Any, tmp_path: Path,
                                                      store_and_tree: tuple[Path, Path, Path]) -> None:
    """``tree``, ``g0`` and ``grammar`` reach S3 with only ``--storage-option`` (no config, no environment);
    a grammar file on a URL is refused, naming the option."""
    import dask.config

    bucket, options = s3_server.new_bucket(), _storage_options(s3_server)
    store, local_tree, here = store_and_tree
    (tmp_path / "words.txt").write_text("apple\nbanana\ncherry\n")
    with dask.config.set({"topicflow.storage-options": {}}):  # the commands set it; this scope undoes that
        tree = f"s3://{bucket}/d.tree"
        assert run("tree", "build", here / "d.tsv", "--store", store, "--out", tree, *options).exit_code == 0
        dask.config.set({"topicflow.storage-options": {}})  # each command below brings its own options
        shown = run("tree", "info", tree, "--format", "json", *options)
        assert shown.exit_code == 0 and '"n_paths"' in shown.output, shown.output
        remote, local = read_tree(tree)[0], read_tree(local_tree)[0]
        for name in ARRAY_NAMES:
            np.testing.assert_array_equal(getattr(remote, name), getattr(local, name), err_msg=name)
        assert run("g0", "train", tmp_path / "words.txt", "--out", tmp_path / "g0", "--order", 2).exit_code == 0
        g0 = f"s3://{bucket}/g0"  # written to s3 by the test: tree build above already wrote there
        s3_server.filesystem().put(str(tmp_path / "g0"), f"{bucket}/g0", recursive=True)
        dask.config.set({"topicflow.storage-options": {}})
        scored = run("g0", "score", g0, "apple", *options)
        assert scored.exit_code == 0 and "apple" in scored.output, scored.output
        assert run("g0", "info", g0, *options).exit_code == 0
        refused = run("grammar", "fit", store, "--grammar", f"s3://{bucket}/g.grammar", "--model", tmp_path / "ag",
                      *options)
        assert refused.exit_code == 2 and "grammar fit --grammar" in refused.output, refused.output
