"""Train/test JSON Lines for the issue-19 HDP experiments (Bleier 2016's protocol on stand-in corpora).

Bleier (2016) fits on the Associated Press (TREC-1) set: 2,250 documents, 398k tokens, V = 10,932,
80% of the documents train. AP is not redistributable and not on this machine, so two real stand-ins
are built from text that is:

- ``ap``: an AP-sized set of 2,250 documents from the King James passages bundled with the package
  (``topicflow/data/kjv_passages.jsonl.gz``, 3,667 passages of about 215 words): the first 2,250 in
  the order of a seeded SHA-256 hash of the passage id. The first 1,800 of them (80%) train, the
  other 450 test.
- ``verses``: a larger one in documents, every verse of the KJV dev corpus
  (``~/.cache/topicflow-dev-corpora/bible_kjv.jsonl``, 31k verses, built with
  ``/work/shared/corpora/build-dev-corpora.sh``), split 80/20 by the same kind of hash.
- ``fortunes``: the labeled fortunes dev corpus (6,968 short documents), split 80/20 the same way.

Each file lists its documents in hash order (a shuffled stream). Usage::

    .venv/bin/python benchmarks/hdp_corpora.py --out /tmp/hdp19
    for c in ap verses; do for s in train test; do
      .venv/bin/topicflow ingest /tmp/hdp19/$c-$s.jsonl --out /tmp/hdp19/$c-$s.zarr --shard-size 500; done; done

The test stores are ingested with their own vocabularies; the evaluators map them onto the
training vocabulary (terms the training set never saw are dropped from the scored tokens).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path

from kjv_verses import verse_records

PASSAGES = Path(__file__).resolve().parents[1] / "topicflow" / "data" / "kjv_passages.jsonl.gz"
DEV = Path.home() / ".cache" / "topicflow-dev-corpora"


def hash_key(doc_id: str, seed: int) -> str:
    """The seeded SHA-256 order of a document id."""
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()


def split(records: list[dict[str, str]], seed: int, *, keep: int | None = None,
          train_share: float = 0.8) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The first ``keep`` records in hash order, the first ``train_share`` of them train, the rest test."""
    ordered = sorted(records, key=lambda r: hash_key(r["id"], seed))
    if keep is not None:
        ordered = ordered[:keep]
    cut = round(len(ordered) * train_share)
    return ordered[:cut], ordered[cut:]


def passages() -> list[dict[str, str]]:
    """The bundled KJV passages as id/text/label records."""
    with gzip.open(PASSAGES, "rt", encoding="utf-8") as lines:
        return [{"id": r["id"], "text": r["text"], "label": r["group"]} for r in map(json.loads, lines)]


def fortunes() -> list[dict[str, str]]:
    """The labeled fortunes dev corpus."""
    with (DEV / "labeled_fortunes.jsonl").open(encoding="utf-8") as lines:
        return [{"id": r["id"], "text": r["text"], "label": r["label"]} for r in map(json.loads, lines)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--corpora", nargs="+", default=["ap", "verses", "fortunes"])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.corpora:
        if name == "ap":
            train, test = split(passages(), args.seed, keep=2250)
        elif name == "verses":
            train, test = split(verse_records(DEV / "bible_kjv.jsonl"), args.seed)
        elif name == "fortunes":
            train, test = split(fortunes(), args.seed)
        else:
            raise SystemExit(f"unknown corpus {name!r}")
        for part, rows in (("train", train), ("test", test)):
            with (args.out / f"{name}-{part}.jsonl").open("w", encoding="utf-8") as out:
                out.writelines(json.dumps(r) + "\n" for r in rows)
            print(f"{name}-{part}: {len(rows)} documents")


if __name__ == "__main__":
    main()
