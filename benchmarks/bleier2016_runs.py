"""``topicflow reproduce bleier2016`` at the paper's settings with some arms left out (for a large corpus on a busy machine).

``--scale paper`` runs PCSVB0, SCVB0 at K = 50, 100, 200, PCVB0 and three readings of the open choices.
On the 24,882-verse corpus the readings did not fit the time we had, so this script runs the same code
with a named variant of the paper scale (the constants, passes and protocol unchanged)::

    nice .venv/bin/python benchmarks/bleier2016_runs.py --corpus /tmp/hdp19/verses-train.zarr \
        --test /tmp/hdp19/verses-test.zarr --out /tmp/hdp19/paper-verses --no-readings

Writes the same outputs as ``topicflow reproduce`` (claims.md, claims.json, trace.jsonl, the figure);
the scale is recorded as ``paper`` plus what was left out.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.reproduce import bleier2016, reproduce


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--test", default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-readings", action="store_true", help="Leave out the readings of the open choices.")
    parser.add_argument("--no-pcvb0", action="store_true", help="Leave out the batch PCVB0 arm.")
    parser.add_argument("--passes", type=int, default=None, help="Fewer passes than the paper's 30.")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    settings = replace(bleier2016.SCALES["paper"], readings=not args.no_readings, pcvb0=not args.no_pcvb0)
    if args.passes is not None:
        settings = replace(settings, passes=args.passes)
    left_out = [name for name, gone in (("readings", args.no_readings), ("PCVB0", args.no_pcvb0)) if gone]
    scale = "paper" + (f" without {' and '.join(left_out)}" if left_out else "") + (
        f", {args.passes} passes" if args.passes is not None else "")
    bleier2016.SCALES[scale] = settings  # type: ignore[index]
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        result = reproduce("bleier2016", [Corpus.open(args.corpus)], args.out, scale=scale,  # type: ignore[arg-type]
                           client=client, test=Corpus.open(args.test) if args.test else None)
    for claim in result.claims:
        print(f"[{claim.held}] {claim.claim}\n    ours: {claim.ours}")


if __name__ == "__main__":
    main()
