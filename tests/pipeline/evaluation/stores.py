"""Stores for the evaluation tests: planted texts ingested in reading order, two shardings, labels."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topicflow.api.lda import LDA
from topicflow.io.models.store import SavedModel
from topicflow.io.sources.base import FieldSpec
from topicflow.pipeline.ingest.ingest import ingest_corpus


@dataclass(frozen=True)
class Stores:
    """The same labeled documents: kept in order with 40 and with 7 documents per shard, and as bags only."""

    ordered: Path
    ordered_small_shards: Path
    plain: Path
    unlabeled: Path
    texts: dict[str, list[str]]
    model: SavedModel


def planted_rows(n_docs: int, seed: int) -> list[dict[str, str]]:
    """LDA documents over terms ``tNNN`` (3 topics, 30 terms), labelled by their largest topic."""
    rng = np.random.default_rng(seed)
    topic_word = rng.dirichlet(np.full(30, 0.1), size=3)
    rows = []
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(3, 0.3))
        topics = rng.choice(3, size=int(rng.integers(4, 26)), p=theta)
        words = [f"t{rng.choice(30, p=topic_word[k]):03d}" for k in topics]
        rows.append({"id": f"d{d:03d}", "text": " ".join(words), "label": f"L{int(np.argmax(theta))}"})
    return rows


def build_stores(base: Path) -> Stores:
    """Write the stores under ``base`` and fit a 3-topic model on the ordered one."""
    rows = planted_rows(150, seed=11)
    source = base / "docs.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    unlabeled = base / "unlabeled.jsonl"
    unlabeled.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows),
                         encoding="utf-8")
    fields = FieldSpec(label_field="label")
    ingest_corpus([source], base / "ordered.zarr", fields=fields, shard_size=40, keep_order=True)
    ingest_corpus([source], base / "ordered7.zarr", fields=fields, shard_size=7, keep_order=True)
    ingest_corpus([source], base / "plain.zarr", fields=fields, shard_size=40)
    ingest_corpus([unlabeled], base / "unlabeled.zarr", shard_size=40)
    model = LDA(3, max_iter=15, seed=2).fit(base / "ordered.zarr").model_
    return Stores(base / "ordered.zarr", base / "ordered7.zarr", base / "plain.zarr", base / "unlabeled.zarr",
                  {r["id"]: r["text"].split() for r in rows}, model)
