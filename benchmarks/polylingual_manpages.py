"""Build aligned English/German man pages from Debian's archive, for the polylingual matching benchmark.

The Debian Reference gives 444 English/German section pairs (``aligned_en_de_debref.jsonl`` of the
dev corpora). Debian ships a much larger aligned source: the German translations of the Linux
man-pages project (``manpages-de``, ``manpages-de-dev``) beside their English originals
(``manpages``, ``manpages-dev``). A pair is one man page (same section and name in both packages);
pages that only redirect (``.so``) are skipped, and so are pairs whose German side is mostly English
(po4a leaves untranslated paragraphs in English: the share of German among the unambiguous function
words must be at least ``--min-german``) or whose sides have fewer than 20 tokens.

    python benchmarks/polylingual_manpages.py --out ~/.cache/topicflow-dev-corpora/aligned_en_de_manpages.jsonl

Downloads the four packages with ``apt-get download`` into a scratch folder (no root needed for that;
``dpkg-deb`` unpacks them) unless ``--unpacked DIR`` already holds them unpacked as ``DIR/<package>/``.
Output: JSON Lines ``{"id": "manpages:<section>/<name>", "en": ..., "de": ...}`` in page order, and a
summary line on stdout.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("manpages", "manpages-dev", "manpages-de", "manpages-de-dev")
WORD = re.compile(r"[^\W\d_]+")
MIN_TOKENS = 20
DE = set("""der das den dem des und ist sind nicht ein eine einen einem einer eines es sie er wir ihr wird werden
wurde wurden mit für von auf im zu zum zur auch als bei oder wenn sich kann können nur wie aus dass über nach diese
dieser dieses diesem diesen keine kein noch vom durch unter sowie muss müssen soll sollte sollten jedoch dann hier
welche welcher welches ob bis ihre ihren seine seinen beim zwischen ohne alle andere anderen daher""".split())
EN = set("""the and is are of to that this with for not be by from which it as or if can on at when has have were these
their there been should must its into than then only any other such all each but may does do used use using you your
they them""".split())


def german_share(text: str) -> float:
    """Share of German among the German and English function words of ``text`` (0.5 if none)."""
    g = e = 0
    for word in WORD.findall(text.lower()):
        g += word in DE
        e += word in EN
    return g / (g + e) if g + e else 0.5


def man_to_text(source: str) -> str | None:
    """Plain text of a man page in groff ``man`` markup, or None for a ``.so`` redirect."""
    lines = []
    for line in source.splitlines():
        if line.startswith(".so "):
            return None
        if line.startswith(('.\\"', "'\\\"", '\\"')):
            continue
        if line.startswith((".", "'")):
            parts = line.split(None, 1)
            line = parts[1] if len(parts) > 1 and parts[0] not in (".TH", ".ds", ".de", ".nr", ".ie", ".el", ".if",
                                                                     ".ta", ".in", ".ti", ".ll") else ""
            line = line.replace('"', " ")
        line = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", line)      # font changes
        line = re.sub(r"\\\*?\((..)|\\\[[^\]]*\]", " ", line)     # special characters, strings
        line = re.sub(r"\\[-e&|^%~ 0c]", " ", line)              # escaped hyphen, backslash, spacing
        lines.append(line)
    return "\n".join(lines)


def load(root: Path, language_dir: str) -> dict[str, str]:
    """``{"<section>/<name>": text}`` of every page under ``root/usr/share/man/<language_dir>man*``."""
    pages: dict[str, str] = {}
    for path in sorted(glob.glob(str(root / "usr/share/man" / language_dir / "man*" / "*.gz"))):
        section = Path(path).parent.name[3:]
        name = Path(path).name[:-3]
        text = man_to_text(gzip.open(path, "rt", encoding="utf-8", errors="replace").read())
        if text is not None:
            pages[f"{section}/{name}"] = text
    return pages


def unpack(scratch: Path) -> Path:
    """Download and unpack :data:`PACKAGES` into ``scratch``; return the folder of unpacked packages."""
    debs, unpacked = scratch / "debs", scratch / "x"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "-qq", *PACKAGES], cwd=debs, check=True)
    for package in PACKAGES:
        deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
        (unpacked / package).mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked / package)], check=True)
    return unpacked


def build(unpacked: Path, min_german: float) -> tuple[list[dict[str, str]], dict[str, int]]:
    """Aligned pairs from the unpacked packages, and counts of what was dropped and why."""
    english = {**load(unpacked / "manpages", ""), **load(unpacked / "manpages-dev", "")}
    german = {**load(unpacked / "manpages-de", "de"), **load(unpacked / "manpages-de-dev", "de")}
    counts = {"english_pages": len(english), "german_pages": len(german), "short": 0, "untranslated": 0}
    docs = []
    for key in sorted(set(english) & set(german)):
        en, de = english[key], german[key]
        if len(WORD.findall(en)) < MIN_TOKENS or len(WORD.findall(de)) < MIN_TOKENS:
            counts["short"] += 1
        elif german_share(de) < min_german:
            counts["untranslated"] += 1
        else:
            docs.append({"id": f"manpages:{key}", "en": en, "de": de})
    counts["pairs"] = len(docs)
    return docs, counts


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="JSON Lines file to write")
    parser.add_argument("--unpacked", type=Path, help="folder holding the four packages unpacked as DIR/<package>/")
    parser.add_argument("--min-german", type=float, default=0.8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="manpages-") as scratch:
        unpacked = args.unpacked or unpack(Path(scratch))
        docs, counts = build(unpacked, args.min_german)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    os.replace(tmp, args.out)
    print(json.dumps({"out": str(args.out), **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
