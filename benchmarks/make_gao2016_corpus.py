"""Bible verses, shuffled once: the dev corpus of ``topicflow reproduce gao2016``.

Gao et al. (2016) stream tens of thousands of documents (NIPS 1,740; NYT 300k) in minibatches of 50
to 100k documents and hold out a random 20%. The dev corpora closest to that are the King James
Bible's 31,102 verses (about 25 tokens each): many more documents than the 1,189 chapters, so
minibatch sizes from 64 to the whole training set fit. Verses are shuffled once (seed 0) so that
the store's last 20% (what gao2016 holds out) is a random sample and the stream does not walk the
books in canonical order (a drifting stream, which the paper's decay experiments do not assume).

    python benchmarks/make_gao2016_corpus.py ~/.cache/topicflow-dev-corpora/bible_kjv.jsonl /tmp/verses.jsonl
    topicflow ingest /tmp/verses.jsonl --out /tmp/verses.zarr --keep-order
    topicflow reproduce gao2016 --corpus /tmp/verses.zarr --scale quick
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", type=Path, help="bible_kjv.jsonl (one chapter per line, verses on lines)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    verses = []
    for line in args.chapters.read_text(encoding="utf-8").splitlines():
        chapter = json.loads(line)
        for number, text in enumerate(t for t in chapter["text"].split("\n") if t.strip()):
            verses.append({"id": f"{chapter['id']}:{number + 1}", "text": text, "label": chapter.get("label")})
    random.Random(args.seed).shuffle(verses)
    args.out.write_text("".join(json.dumps(v) + "\n" for v in verses), encoding="utf-8")
    print(f"{len(verses)} verses -> {args.out}")


if __name__ == "__main__":
    main()
