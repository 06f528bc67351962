"""KJV verses labeled by division: a long labeled stream for the May et al. (2014) reproduction.

May, Clemmer and Van Durme (2014) stream the 60% training split of three 20 Newsgroups groups. Their
reservoir (1000 tokens) is only a small share of the history when the stream is long, so this script
builds a stream of tens of thousands of short documents from the dev corpus ``bible_kjv.jsonl``
(1,189 chapters, one verse per line): every verse is a document, labeled by its division (the
chapter's ``group``: Law, History, Wisdom, Major Prophets, Minor Prophets, Gospels, Acts, Pauline
Epistles, General Epistles, Revelation). Each division's verses are split 60/40 by a seeded SHA-256
hash of the verse id, and each file lists its verses in hash order, which shuffles the stream (the
paper shuffles the documents) and interleaves the labels.

Usage::

    .venv/bin/python benchmarks/kjv_verses.py --source ~/.cache/topicflow-dev-corpora/bible_kjv.jsonl --out /tmp/kjv
    .venv/bin/topicflow ingest /tmp/kjv/train.jsonl --out /tmp/kjv/train.zarr --label-field label --min-df 2
    .venv/bin/topicflow ingest /tmp/kjv/test.jsonl --out /tmp/kjv/test.zarr --label-field label
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def verse_records(source: Path) -> list[dict[str, str]]:
    """One record per verse: id ``Book.chapter:verse``, text, label = the chapter's division."""
    records = []
    with source.open(encoding="utf-8") as lines:
        for line in lines:
            chapter = json.loads(line)
            for number, verse in enumerate(chapter["text"].split("\n"), start=1):
                if verse.strip():
                    records.append({"id": f"{chapter['id']}:{number}", "text": verse.strip(),
                                    "label": chapter["group"]})
    return records


def hash_order(doc_id: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()


def split(records: list[dict[str, str]], seed: int, train_share: float) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Per label, the first ``train_share`` of its verses in hash order train, the rest test; both in hash order."""
    by_label: dict[str, list[dict[str, str]]] = {}
    for record in records:
        by_label.setdefault(record["label"], []).append(record)
    train, test = [], []
    for label in sorted(by_label):
        ordered = sorted(by_label[label], key=lambda r: hash_order(r["id"], seed))
        cut = round(len(ordered) * train_share)
        train += ordered[:cut]
        test += ordered[cut:]
    def key(record: dict[str, str]) -> str:
        return hash_order(record["id"], seed + 1)

    return sorted(train, key=key), sorted(test, key=key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-share", type=float, default=0.6)
    args = parser.parse_args()
    train, test = split(verse_records(args.source), args.seed, args.train_share)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        with (args.out / f"{name}.jsonl").open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(r) + "\n" for r in rows)
        print(f"{name}: {len(rows)} verses")


if __name__ == "__main__":
    main()
