"""Throughput and lineage of the streaming samplers' engine (`topicflow.models.lda.streaming.particle_filter`), one thread.

A generated corpus (K topics drawn from Dirichlet(0.05) over V terms, 100 tokens per document) is
streamed after a prefix of ``--prefix`` documents whose topics are set at random (the engine's speed does
not depend on how good the start is). Each configuration observes the rest in blocks of 100 documents,
after a numba warm-up. Reported per configuration: tokens per second, resampling events, the lineage
tree's depth (max and mean over particles) and node count, the entries the store holds, and the bytes of
all its arrays at the end of the stream.

Example::

    python benchmarks/bench_particle_filter.py --docs 2200 --topics 20 --terms 2000

Prints one JSON object (with the exact command), then a readable table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from topicflow.models.lda.streaming import particle_filter as pf
from topicflow.models.common.blocks import block_from_csr
from topicflow.testing.corpora import draw_planted_corpus


def configurations(k: int, v: int) -> dict[str, pf.PFParams]:
    return {
        "o-LDA": pf.PFParams.olda(k, v),
        "incremental Gibbs, r=10, reservoir 10k": pf.PFParams.incremental_gibbs(k, v, rejuvenation_steps=10,
                                                                                 source_size=10_000),
        "PF P=16, r=10, reservoir 10k": pf.PFParams.particle_filter(k, v, n_particles=16, rejuvenation_steps=10,
                                                                    source_size=10_000),
        "PF P=100, r=30, reservoir 10k": pf.PFParams.particle_filter(k, v, n_particles=100, rejuvenation_steps=30,
                                                                     source_size=10_000),
        "PF P=100, r=30, history": pf.PFParams.particle_filter(k, v, n_particles=100, rejuvenation_steps=30,
                                                               rejuvenation_source="history"),
        "PF P=100, no rejuvenation": pf.PFParams.particle_filter(k, v, n_particles=100, rejuvenation_steps=0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=2200)
    parser.add_argument("--prefix", type=int, default=200)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--terms", type=int, default=2000)
    args = parser.parse_args(argv)
    corpus = draw_planted_corpus(n_docs=args.docs, n_topics=args.topics, n_terms=args.terms, doc_length=100,
                                 alpha=0.1, seed=0, block_topics=False)
    counts = corpus.counts["default"]
    prefix = counts[: args.prefix].tocsr()
    token_docs = np.repeat(np.repeat(np.arange(args.prefix), np.diff(prefix.indptr)), prefix.data)
    token_terms = np.repeat(prefix.indices, prefix.data).astype(np.int32)
    token_topics = np.random.default_rng(0).integers(0, args.topics, token_terms.size).astype(np.int32)

    warm = pf.PFParams.particle_filter(args.topics, args.terms, n_particles=4, rejuvenation_steps=2)
    cloud = pf.initial_cloud(warm, token_terms, token_docs, token_topics, next_doc=args.prefix)
    pf.observe(cloud, block_from_csr(counts[args.prefix:args.prefix + 5], first_doc=args.prefix), warm)

    rows: dict[str, dict[str, Any]] = {}
    for name, params in configurations(args.topics, args.terms).items():
        cloud = pf.initial_cloud(params, token_terms, token_docs, token_topics, next_doc=args.prefix)
        n_tokens, resamples, started = 0, 0, time.perf_counter()
        for lo in range(args.prefix, args.docs, 100):
            block = block_from_csr(counts[lo:lo + 100], first_doc=lo)
            cloud, diagnostics = pf.observe(cloud, block, params)
            n_tokens += diagnostics.n_tokens
            resamples += int(diagnostics.resample_positions.size)
        seconds = time.perf_counter() - started
        rows[name] = {"tokens": n_tokens, "seconds": seconds, "tokens_per_s": n_tokens / seconds,
                      "resamples": resamples, "depth_max": diagnostics.depth_max,
                      "depth_mean": diagnostics.depth_mean, "n_nodes": diagnostics.n_nodes,
                      "n_entries": diagnostics.n_entries, "nbytes": diagnostics.nbytes,
                      "log_evidence_per_token": diagnostics.log_evidence / max(diagnostics.n_tokens, 1)}
        print(f"{name}: {rows[name]['tokens_per_s']:,.0f} tokens/s", file=sys.stderr)
    print(json.dumps({"command": "python " + " ".join(["benchmarks/bench_particle_filter.py", *sys.argv[1:]]),
                      "results": rows}))
    print(f"{'configuration':40s} {'tokens/s':>10s} {'resamples':>10s} {'depth max/mean':>15s} {'nodes':>6s} "
          f"{'entries':>8s} {'MB':>6s}")
    for name, r in rows.items():
        print(f"{name:40s} {r['tokens_per_s']:10,.0f} {r['resamples']:10d} {r['depth_max']:6d} / {r['depth_mean']:5.2f} "
              f"{r['n_nodes']:6d} {r['n_entries']:8d} {r['nbytes'] / 1e6:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
