"""topicflow's arms of ``bench_hdp.py``: one collapsed fit on a fresh local Dask cluster, scored by the common evaluator.

System names: ``pcsvb0`` (word by word, Algorithm 1), ``pcsvb0-clump`` (one update per distinct term),
``pcsvb0-mb`` / ``pcsvb0-mb-clump`` (minibatches of ``--batch-size`` documents), ``pcvb0`` (batch),
``scvb0-K`` (word by word, K topics, alpha 0.1, Foulds' one burn-in pass) and ``scvb0-mb-K`` (Foulds'
minibatches). All through :func:`topicflow.pipeline.collapsed.fit_collapsed` with the paper's constants.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

from topicflow.io.corpus.reader import Corpus
from topicflow.models.hdp.params import HDPParams
from topicflow.pipeline.reproduce.bleier2016 import heldout_set


def parse_system(system: str, args: argparse.Namespace) -> tuple[str, HDPParams, int | None]:
    """(method, params, batch size) of a system name."""
    parts = system.split("-")
    method = parts[0]
    batch = args.batch_size if "mb" in parts else None
    params = HDPParams(truncation=args.truncation, seed=args.seed, clumping="clump" in parts)
    if method == "scvb0":
        params = replace(params, truncation=int(parts[-1]), alpha_init=0.1, learn_alpha=False, learn_gamma=False,
                         burn_in=1)
    elif method not in ("pcsvb0", "pcvb0"):
        raise SystemExit(f"unknown system {system!r}")
    return method, params, batch


def fit_system(args: argparse.Namespace, system: str) -> dict[str, Any]:
    """Fit one system (cluster start-up included in ``fit_seconds``) and score it."""
    from distributed import Client, LocalCluster

    from topicflow.pipeline.collapsed import CollapsedConfig, fit_collapsed

    method, params, batch = parse_system(system, args)
    config = CollapsedConfig(method=method, params=params, passes=args.passes, batch_size=batch)  # type: ignore[arg-type]
    started = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        train = Corpus.open(args.train)
        result = fit_collapsed(train, config, client=client)
    fit_seconds = time.perf_counter() - started
    state = result.state
    prior = params.alpha_init if method == "scvb0" else state.doc_topic_prior()
    held = heldout_set(train, Corpus.open(args.test))
    perplexity = held.perplexity(state.topic_word_counts() + state.beta, prior)
    return {"topics_in_use": int(state.topics_in_use()), "truncation": int(state.truncation),
            "topics_note": "topics with >= 0.1% of the expected tokens (SCVB0: of its K)",
            "fit_seconds": fit_seconds, "perplexity": perplexity,
            "alpha": float(state.alpha), "gamma": None if method == "scvb0" else float(state.gamma),
            "settings": {"method": method, "batch_size": batch, "passes": args.passes, "workers": args.workers,
                         "params": params.to_dict()}}
