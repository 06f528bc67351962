"""Mark Johnson's py-cfg (adaptor-grammar Gibbs sampler) as the MCMC anchor of the segmentation experiment.

py-cfg (Johnson, Griffiths & Goldwater 2007; Johnson & Goldwater 2009) is the sampler Zhai (2014, section
8.4) compares against ("MCMC": incremental initialization, table-label resampling). Its sources are NOT in
this repository: this module checks them out of a public git repository at a pinned commit into
``build/pycfg/`` and compiles them there with ``make py-cfg`` (g++; no other dependency).

Source: ``github.com/alecristia/CDSwordSeg`` (GPL-3.0 repository), folder ``algoComp/algos/AG/py-cfg-new``,
which is Johnson's CVS tree of py-cfg, "version of 5th March, 2014" (the chapter used the 2013-02-25
release; the 2014 changes are an underflow retry at initialization, see its Changelog.txt). Pass
``--pycfg-src DIR`` to build from another copy (for instance Johnson's own tarball) instead.

Usage (also run from ``benchmarks/bench_adaptor_grammar.py``)::

    python benchmarks/anchors/pycfg.py build                 # clone + make into build/pycfg/
    python benchmarks/anchors/pycfg.py build --git /path/to/CDSwordSeg.git   # from a local clone

The unigram grammar in py-cfg's format is ``Words --> Word | Word Words; Word --> Chars (adapted); Chars
--> Char | Char Chars; Char --> each letter`` (start symbol ``Words``), the chapter's Table 8.1 unigram.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

REPO_URL = "https://github.com/alecristia/CDSwordSeg.git"
#: The commit the anchor was built and run from (2026-11-26).
COMMIT = "5d61dfccbb7331a8408a9ec40b2437fb4659b0e4"
SUBDIR = "algoComp/algos/AG/py-cfg-new"
ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "pycfg"

#: Johnson & Goldwater (2009) settings as in the CDSwordSeg scripts: Dirichlet prior on rule
#: probabilities (-E), PY a, b sampled from Beta(1, 1) / Gamma(100, 0.01) priors starting at a = 1e-4,
#: b = 1e4, table-label resampling in every iteration (-R -1); incremental initialization (no -D).
DEFAULT_FLAGS = ("-E", "-a", "0.0001", "-b", "10000", "-e", "1", "-f", "1", "-g", "100", "-h", "0.01",
                 "-R", "-1")


def build(*, src: Path | None = None, git: str | None = None, build_dir: Path = BUILD) -> Path:
    """Check out and compile py-cfg (once); return the path of the ``py-cfg`` binary.

    Parameters
    ----------
    src : Path, optional
        A directory holding py-cfg's sources (``py-cfg.cc``, ``Makefile``); copied, then built.
    git : str, optional
        A clone URL or local git directory of CDSwordSeg (default: :data:`REPO_URL`).
    build_dir : Path
    """
    binary = build_dir / "py-cfg"
    if binary.exists():
        return binary
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    if src is not None:
        shutil.copytree(src, build_dir, dirs_exist_ok=True)
    else:
        checkout = build_dir.parent / "CDSwordSeg"
        if not checkout.exists():
            subprocess.run(["git", "clone", "--no-checkout", "--filter=blob:none", git or REPO_URL, str(checkout)],
                           check=True)
        subprocess.run(["git", "-C", str(checkout), "checkout", COMMIT, "--", SUBDIR], check=True)
        shutil.copytree(checkout / SUBDIR, build_dir, dirs_exist_ok=True)
    for stale in ("py-cfg", "py-cfg-mp", "py-cfg-quad", "py-cfg-quad-mp"):
        (build_dir / stale).unlink(missing_ok=True)
    subprocess.run(["make", "py-cfg"], cwd=build_dir, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return binary


def unigram_grammar(alphabet: Sequence[str]) -> str:
    """The unigram adaptor grammar in py-cfg's format (``1 1`` marks a rule of an unadapted parent)."""
    rules = ["1 1 Words --> Word", "1 1 Words --> Word Words", "Word --> Chars",
             "1 1 Chars --> Char", "1 1 Chars --> Char Chars"]
    rules += [f"1 1 Char --> {ch}" for ch in alphabet]
    return "\n".join(rules) + "\n"


def collocation_grammar(alphabet: Sequence[str]) -> str:
    """The collocation adaptor grammar (Table 8.1) in py-cfg's format; Colloc and Word adapted."""
    rules = ["1 1 Sentence --> Colloc", "1 1 Sentence --> Colloc Sentence", "Colloc --> Words",
             "1 1 Words --> Word", "1 1 Words --> Word Words", "Word --> Chars",
             "1 1 Chars --> Char", "1 1 Chars --> Char Chars"]
    rules += [f"1 1 Char --> {ch}" for ch in alphabet]
    return "\n".join(rules) + "\n"


def parse_tree(text: str) -> list[object]:
    """A bracketed tree ``(A (B x) y)`` as nested lists ``['A', ['B', 'x'], 'y']``."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    stack: list[list[object]] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            node = stack.pop()
            stack[-1].append(node)
        else:
            stack[-1].append(token)
    return stack[0][0] if stack[0] else []  # type: ignore[return-value]


def tree_words(text: str, label: str = "Word", decode: dict[str, str] | None = None) -> list[str]:
    """The yields of the ``label`` nodes of one py-cfg tree (``Word#3`` counts as ``Word``), in order.

    ``decode`` maps the terminal tokens given to py-cfg back to the symbols they stand for.
    """
    words: list[str] = []

    def leaves(node: object) -> str:
        if isinstance(node, str):
            return node if decode is None else decode[node]
        return "".join(leaves(child) for child in node[1:])  # type: ignore[index]

    def visit(node: object) -> None:
        if isinstance(node, str):
            return
        name = str(node[0]).split("#")[0]  # type: ignore[index]
        if name == label:
            words.append(leaves(node))
        else:
            for child in node[1:]:  # type: ignore[index]
                visit(child)

    visit(parse_tree(text))
    return words


def read_blocks(path: Path, label: str = "Word", decode: dict[str, str] | None = None) -> list[list[list[str]]]:
    """Every block of trees py-cfg piped to ``cat`` (blocks end with a blank line), as word lists."""
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in path.read_text().splitlines():
        if line.strip():
            current.append(tree_words(line, label, decode))
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


@dataclass(frozen=True)
class PycfgRun:
    """What one py-cfg run left: sampled training and test segmentations per evaluation, and the trace.

    Attributes
    ----------
    train_blocks, test_blocks : list of (list of (list of str))
        One block per evaluation (iterations 0, x, 2x, ...): one segmentation per sentence.
    trace : list of dict
        Per iteration: ``iteration``, ``seconds`` (py-cfg's CPU time), ``neg_log_p_corpus``, ``tables``.
    wall_seconds : float
    """

    train_blocks: list[list[list[str]]]
    test_blocks: list[list[list[str]]]
    trace: list[dict[str, float]]
    wall_seconds: float


def run(binary: Path, train: Sequence[str], test: Sequence[str], alphabet: Sequence[str], *, workdir: Path,
        iterations: int, eval_every: int, seed: int, grammar: str = "unigram",
        flags: Sequence[str] = DEFAULT_FLAGS, nice: int = 10) -> PycfgRun:
    """Run py-cfg on unsegmented sentences; return its sampled segmentations every ``eval_every`` iterations.

    Each iteration resamples every training sentence's tree once (one inside pass per sentence, then a
    Metropolis-Hastings accept/reject); the test sentences are parsed (one sample each, not trained
    on) at every evaluation.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    # Symbols py-cfg's bracketed trees cannot carry (Brent's phonemes include "(" and ")") go in as tokens
    # t0, t1, ... and come back decoded; letters go in as themselves (the KJV runs).
    encode = {ch: f"t{i}" for i, ch in enumerate(alphabet)} if any(ch in "()" for ch in alphabet) else None
    decode = None if encode is None else {token: ch for ch, token in encode.items()}

    def symbols(sentence: str) -> str:
        return " ".join(sentence if encode is None else (encode[ch] for ch in sentence))

    (workdir / "train.yld").write_text("".join(symbols(s) + "\n" for s in train))
    (workdir / "test.yld").write_text("".join(symbols(s) + "\n" for s in test))
    tokens = list(alphabet) if encode is None else [encode[ch] for ch in alphabet]
    text = unigram_grammar(tokens) if grammar == "unigram" else collocation_grammar(tokens)
    (workdir / "grammar.lt").write_text(text)
    for name in ("train.prs", "test.prs", "trace.txt"):
        (workdir / name).unlink(missing_ok=True)
    command = ["nice", "-n", str(nice), str(binary), "-n", str(iterations), "-r", str(seed), *flags,
               "-x", str(eval_every), "-F", "trace.txt", "-X", "cat > train.prs",
               "-u", "test.yld", "-U", "cat > test.prs", "grammar.lt"]
    started = time.perf_counter()
    with open(workdir / "train.yld", "rb") as stdin:
        subprocess.run(command, cwd=workdir, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
    wall = time.perf_counter() - started
    trace = []
    for line in (workdir / "trace.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cols = line.split("\t")
        trace.append({"iteration": float(cols[0]), "seconds": float(cols[2]),
                      "neg_log_p_corpus": float(cols[4]), "tables": float(cols[6])})
    return PycfgRun(read_blocks(workdir / "train.prs", decode=decode), read_blocks(workdir / "test.prs", decode=decode),
                    trace, wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--pycfg-src", type=Path, default=None, help="a directory of py-cfg sources")
    parser.add_argument("--git", default=os.environ.get("PYCFG_GIT"), help=f"clone from here (default {REPO_URL})")
    args = parser.parse_args(argv)
    print(build(src=args.pycfg_src, git=args.git))
    return 0


if __name__ == "__main__":
    sys.exit(main())
