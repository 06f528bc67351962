"""Fixtures: small stores with (and without) the ordered-token layer for the infvoc driver's tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.infvoc_lda.stores import topic_texts, write_store


@pytest.fixture(scope="session")
def ordered_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """96 documents in 4 shards of 24, ordered layer kept."""
    return write_store(tmp_path_factory.mktemp("infvoc"), topic_texts(96, seed=1), shard_size=24)


@pytest.fixture(scope="session")
def plain_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same kind of store without the ordered layer."""
    return write_store(tmp_path_factory.mktemp("infvoc_plain"), topic_texts(12, seed=2), shard_size=6,
                       keep_order=False, name="p")
