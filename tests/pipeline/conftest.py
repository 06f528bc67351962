"""Fixtures of the fault-matrix tests (test_fault_matrix_faults.py and test_fault_matrix_cluster.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import dask
import pytest

from topicflow.api.lda import LDA
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.testing.corpora import draw_planted_corpus, write_planted_jsonl

#: Every word counts (the planted vocabulary has no stop words to drop).
NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store of 100 documents, an online model of it (version 1), then 100 appended documents."""
    tmp = tmp_path_factory.mktemp("matrix")
    counts = draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=7).counts["default"]
    store = tmp / "c.zarr"
    ingest_corpus([write_planted_jsonl(tmp / "a.jsonl", counts, 0, 100)], store, tokenizer=NO_STOP, shard_size=50)
    LDA(3, method="online", batch_size=25, seed=3).fit(store).save(tmp / "model")
    append_corpus(store, [write_planted_jsonl(tmp / "b.jsonl", counts, 100, 200)])
    return store, tmp / "model"


@pytest.fixture
def doomed_cluster() -> Iterator[Any]:
    """An in-process cluster whose scheduler listens on TCP (as a remote one does), and a short
    reconnect window for the clients made meanwhile."""
    from distributed import LocalCluster

    with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                               dashboard_address=":0")
        try:
            yield cluster
        finally:
            cluster.close()
