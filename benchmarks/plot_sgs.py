"""Plots of ``bench_sgs.py`` reports: held-out perplexity against minibatch size, one panel per corpus.

Each input is the saved standard output of one ``bench_sgs.py`` run; its report is the JSON line with
``"benchmark": "sgs"``. Every panel draws SGS for each decay factor and online VB against S (log
scale, mean over the run's seeds), with batch collapsed Gibbs as a horizontal line.

Example::

    python benchmarks/plot_sgs.py real.out synth400k.out --out benchmarks/plots/sgs-minibatch.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def read_report(path: Path) -> dict[str, Any]:
    for line in reversed(path.read_text().splitlines()):
        if line.startswith("{") and '"benchmark": "sgs"' in line:
            return json.loads(line)
    raise SystemExit(f"{path}: no bench_sgs.py report (a JSON line with \"benchmark\": \"sgs\") in this file")


def mean_by(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    sizes = sorted({r["batch_size"] for r in rows})
    return sizes, [float(np.mean([r[key] for r in rows if r["batch_size"] == s])) for s in sizes]


def draw(reports: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(5.2 * len(reports), 4.2), squeeze=False)
    for ax, report in zip(axes[0], reports):
        rows = [r for r in report["rows"] if r.get("label") is None]
        sgs = [r for r in rows if r["system"] == "sgs"]
        for decay in sorted({r["decay"] for r in sgs}, reverse=True):
            sizes, values = mean_by([r for r in sgs if r["decay"] == decay], "perplexity")
            ax.plot(sizes, values, marker="o", label=f"SGS, decay {decay:g}")
        ovb = [r for r in rows if r["system"] == "online-vb"]
        if ovb:
            sizes, values = mean_by(ovb, "perplexity")
            ax.plot(sizes, values, marker="s", linestyle="--", color="black", label="online VB")
        cgs = [r for r in rows if r["system"] == "batch-cgs"]
        if cgs:
            ax.axhline(float(np.mean([r["perplexity"] for r in cgs])), color="grey", linestyle=":",
                       label=f"batch CGS, {cgs[0]['sweeps']} sweeps")
        info = report["corpus"]
        ax.set_xscale("log", base=2)
        ax.set_xlabel("minibatch size S (documents)")
        ax.set_ylabel("held-out perplexity (document completion)")
        kind = "real corpus" if info["kind"].startswith("jsonl") else "generated corpus"
        ax.set_title(f"{kind}: {info['n_docs']:,} docs, K={report['settings']['topics']}, "
                     f"{len(report['settings']['seeds'])} seed(s)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="saved output of bench_sgs.py runs")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/plots/sgs-minibatch.png"))
    args = parser.parse_args(argv)
    draw([read_report(path) for path in args.reports], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
