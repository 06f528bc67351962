"""Build topicflow/data/kjv_passages.jsonl.gz, the demo corpus, from the King James Bible.

Input: ``bible_kjv.jsonl`` made by ``bash /work/shared/corpora/build-dev-corpora.sh OUT_DIR`` (one
chapter per line, fields id ``Genesis.1``, text with one verse per line, label = book, group =
division; built from Debian's ``bible-kjv-text``). Each chapter of ``n`` verses is split into
``ceil(n / 10)`` passages of consecutive verses whose sizes differ by at most one (so 5-10 verses,
fewer only for chapters shorter than 5 verses).

Output: one JSON object a line, fields ``id`` (``Genesis 1:1-10``), ``text`` (the verses joined by
spaces), ``label`` (book) and ``group`` (division), in Bible order. The gzip stream is written with
``mtime=0`` and no file name, so the same input always gives the same bytes.

usage: python scripts/build_demo_corpus.py BIBLE_KJV_JSONL [OUT_GZ]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

MAX_VERSES = 10
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "topicflow" / "data" / "kjv_passages.jsonl.gz"


def split_verses(n_verses: int, max_verses: int = MAX_VERSES) -> list[tuple[int, int]]:
    """Balanced 1-based inclusive verse ranges covering ``1..n_verses``.

    >>> split_verses(23)
    [(1, 8), (9, 15), (16, 23)]
    """
    n_parts = max(1, math.ceil(n_verses / max_verses))
    bounds = [round(i * n_verses / n_parts) for i in range(n_parts + 1)]
    return [(bounds[i] + 1, bounds[i + 1]) for i in range(n_parts)]


def passages(chapter: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The passages of one chapter record."""
    verses = [v.strip() for v in chapter["text"].split("\n") if v.strip()]
    number = chapter["id"].rsplit(".", 1)[1]
    for first, last in split_verses(len(verses)):
        yield {
            "id": f"{chapter['label']} {number}:{first}-{last}",
            "text": " ".join(verses[first - 1 : last]),
            "label": chapter["label"],
            "group": chapter["group"],
        }


def build(chapters: Iterable[dict[str, Any]]) -> bytes:
    """The gzip-compressed JSON Lines bytes of every passage of ``chapters``."""
    lines = [
        json.dumps(p, ensure_ascii=False, sort_keys=True)
        for chapter in chapters
        for p in passages(chapter)
    ]
    raw = ("\n".join(lines) + "\n").encode("utf-8")
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as handle:
        handle.write(raw)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bible_jsonl", type=Path)
    parser.add_argument("out", type=Path, nargs="?", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with open(args.bible_jsonl, encoding="utf-8") as handle:
        chapters = [json.loads(line) for line in handle if line.strip()]
    data = build(chapters)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(args.out)
    n_docs = gzip.decompress(data).count(b"\n")
    digest = hashlib.sha256(data).hexdigest()[:16]
    sys.stderr.write(f"{args.out}: {n_docs} passages from {len(chapters)} chapters, "
                     f"{len(data)} bytes, sha256 {digest}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
