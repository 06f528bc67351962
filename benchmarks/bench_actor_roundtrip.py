"""What one synchronous call to every worker's actor costs, as online VB makes one per minibatch.

One actor per worker of a local cluster (processes, one thread each), called from the driver in
parallel and waited for, as :class:`topicflow.pipeline.vb.estep_servers.ActorPool` does. The payload is
an array of K x V float64 (lambda, or a minibatch's step of it); the method does nothing with it, so
the time is the round trip and the transfer only. Each shape is timed twice: through the scheduler
(a client's default) and with the client connected to the workers directly (``direct_to_workers``,
as topicflow's own local cluster does).

Example::

    python benchmarks/bench_actor_roundtrip.py --shapes 0x0 20x2500 20x7000 20x10000 100x50000

Prints one JSON object per line, then a table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


class Sink:
    """An actor that receives a payload and answers at once."""

    def run(self, payload: np.ndarray) -> int:
        return int(payload.size)


def main(argv: list[str] | None = None) -> int:
    from distributed import Client, LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["0x0", "20x2500", "20x7000", "20x10000", "100x50000"],
                        help="payloads as KxV")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)
    rows = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        for direct in (False, True):
            with Client(cluster, direct_to_workers=direct) as client:
                workers = sorted(client.scheduler_info()["workers"])
                actors = [client.submit(Sink, actor=True, workers=[w]).result() for w in workers]
                for shape in args.shapes:
                    k, v = (int(x) for x in shape.split("x"))
                    payload = np.ones((k, v))
                    for _ in range(3):
                        [call.result() for call in [a.run(payload) for a in actors]]
                    started = time.perf_counter()
                    for _ in range(args.calls):
                        [call.result() for call in [a.run(payload) for a in actors]]
                    ms = (time.perf_counter() - started) / args.calls * 1e3
                    row = {"K": k, "V": v, "MB": payload.nbytes / 1e6, "workers": len(actors), "direct": direct,
                           "ms_per_round": ms}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                del actors
    print()
    print(f"{'K x V':>12} {'MB':>7} {'ms, via scheduler':>18} {'ms, direct':>11}")
    for shape in args.shapes:
        k, v = (int(x) for x in shape.split("x"))
        pair = {row["direct"]: row for row in rows if (row["K"], row["V"]) == (k, v)}
        print(f"{f'{k} x {v}':>12} {pair[False]['MB']:>7.2f} {pair[False]['ms_per_round']:>18.1f} {pair[True]['ms_per_round']:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
