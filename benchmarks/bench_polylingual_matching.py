"""Polylingual LDA cross-language document matching (Mimno et al. 2009) on aligned English/German documents.

Issue 18 item 4: precision@1 of finding a held-out document's translation at K = 50, target 0.9. The
reproduction (``topicflow reproduce zhai2014-mrlda``) measured 0.775 on 89 held-out Debian Reference
pairs. This script reruns that split and arms around it, each one fit of polylingual batch VB followed
by :func:`topicflow.pipeline.evaluation.matching.document_matching` (theta of each held-out side
folded in from that side alone, Jensen-Shannon divergence, both directions):

An arm is ``reproduce`` (the reproduction's configuration before issue 18.4: alpha learned from 50/K,
33 iterations, stores as docs/reproductions.md says) or ``+``-joined changes to it:

``fixed=A``
    alpha fixed and symmetric at A (``fixed=1`` is 50/K at K = 50, the reproduction's default now);
    ``alpha01`` is ``fixed=0.1``; ``symmetric`` learns one symmetric alpha.
``iter=N``, ``k=N``, ``hellinger``
    iterations, topics, the divergence.
``destop``, ``destop=joint``
    ingest with German stop words too: the built-in lists per language (``--stop-words
    en=english,de=german``: English on the English side, Snowball's German list on the German side),
    or with ``joint`` their union on both sides (``--stop-words english+german``). Before the
    built-in German list, this arm added a German list written for this script to the English one,
    on both sides (the rows of benchmarks/RESULTS.md measured before session 18).
``manpages``
    the same Debian Reference training pairs plus the training part of the aligned man pages
    (``benchmarks/polylingual_manpages.py``, 1,083 pairs); the man pages' held-out pairs are scored as
    a second test set. ``manonly`` trains on the man pages alone and tests on theirs.
``selected``
    with ``--select-alpha``: the alpha with the best P@1 on a validation split of the training pairs.

``--folds N`` adds N-fold cross-validation over all Debian Reference pairs for ``--fold-arms``.

Every split is :func:`topicflow.pipeline.reproduce.mrlda.split_store` (seed 0, 20% held out), so the
Debian Reference test set is the reproduction's 89 pairs. Each score comes with a 95% interval
(:func:`topicflow.metrics.matching.matching_intervals`: Wilson for P@1, normal for MRR).

    nice python benchmarks/bench_polylingual_matching.py \
        --debref ~/.cache/topicflow-dev-corpora/aligned_en_de_debref.jsonl \
        --manpages ~/.cache/topicflow-dev-corpora/aligned_en_de_manpages.jsonl \
        --arms reproduce,fixed=1,destop+fixed=1,manpages --folds 5 --fold-arms reproduce,fixed=1

Prints one JSON report (also written to ``--out``) and a table on stderr.
"""
from __future__ import annotations

import argparse
import json
import logging
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.matching import matching_intervals
from topicflow.pipeline.evaluation.matching import document_matching
from topicflow.pipeline.reproduce.mrlda import _fit, split_store
from topicflow.pipeline.vb.batch import VBConfig

HERE = Path(__file__).resolve().parent
TOPICFLOW = [sys.executable, "-m", "topicflow"]


#: ``--stop-words`` of the ``destop`` arms: the built-in lists per language, or their union on both sides.
DESTOP_STOP_WORDS = {"": "en=english,de=german", "joint": "english+german"}


def ingest(jsonl: Path, out: Path, *, prune: bool, stop_words: str | None = None) -> Corpus:
    """``topicflow ingest`` an aligned en/de JSONL file (pruned as the reproduction docs say, or not at all)."""
    args = [*TOPICFLOW, "ingest", str(jsonl), "--out", str(out), "--overwrite", "--lang-field", "en=en",
            "--lang-field", "de=de", "--shard-size", "100"]
    if stop_words is not None:
        args += ["--stop-words", stop_words]
    if prune:
        args += ["--min-df", "2", "--max-df-fraction", "0.5"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return Corpus.open(out)


def ids_of(corpus: Corpus) -> set[str]:
    """The document ids of a store."""
    return set(corpus.doc_ids())


def subset(jsonl: Path, keep: set[str], out: Path) -> Path:
    """Write the records of ``jsonl`` whose id is in ``keep`` to ``out``."""
    with open(jsonl, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for line in src:
            if json.loads(line)["id"] in keep:
                dst.write(line)
    return out


def score(model: Any, test: Corpus, client: Any, divergence: str) -> dict[str, Any]:
    """Match ``test`` in both directions; P@1, MRR and their 95% intervals per direction."""
    out = {}
    for query, candidate in (("en", "de"), ("de", "en")):
        scores = document_matching(model, test, query_language=query, candidate_language=candidate,
                                   divergence=divergence, client=client)  # type: ignore[arg-type]
        ranks = np.asarray(scores.ranks)
        iv = matching_intervals(ranks)
        out[f"{query}->{candidate}"] = {
            **scores.to_dict(), "p_at_1_95": list(iv.precision_at_1), "mrr_95": list(iv.mean_reciprocal_rank),
            "within_5": float(np.mean(ranks <= 5)), "ranks": ranks.tolist()}
    return out


def parse_arm(arm: str, args: argparse.Namespace) -> dict[str, Any]:
    """Settings of one arm: ``reproduce`` and ``+``-joined changes to it (``fixed=0.1``, ``symmetric``,
    ``iter=100``, ``k=100``, ``manpages``, ``manonly``, ``destop``, ``destop=joint``, ``hellinger``)."""
    opts: dict[str, Any] = {"alpha_mode": "auto", "alpha": 50.0 / args.topics, "iterations": args.iterations,
                            "topics": args.topics, "manpages": False, "manonly": False, "destop": None,
                            "divergence": args.divergence}
    for part in arm.split("+"):
        key, _, value = part.partition("=")
        if key in ("reproduce", ""):
            continue
        if key == "alpha01":
            opts.update(alpha_mode="fixed", alpha=0.1)
        elif key == "fixed":
            opts.update(alpha_mode="fixed", alpha=float(value))
        elif key == "symmetric":
            opts.update(alpha_mode="symmetric")
        elif key == "iter":
            opts["iterations"] = int(value)
        elif key == "k":
            opts["topics"] = int(value)
            if opts["alpha_mode"] == "auto":
                opts["alpha"] = 50.0 / int(value)
        elif key == "manpages":
            opts["manpages"] = True
        elif key == "manonly":
            opts["manonly"] = True
        elif key == "destop" and value in DESTOP_STOP_WORDS:
            opts["destop"] = DESTOP_STOP_WORDS[value]
        elif key == "hellinger":
            opts["divergence"] = "hellinger"
        else:
            raise SystemExit(f"unknown arm part {part!r} in {arm!r}")
    return opts


def cross_validate(args: argparse.Namespace, work: Path, client: Any) -> list[dict[str, Any]]:
    """``--folds`` folds of the Debian Reference pairs: per arm, the ranks of every pair, pooled."""
    records = [json.loads(line) for line in open(args.debref, encoding="utf-8")]
    order = np.random.default_rng(args.seed).permutation(len(records))
    pooled: dict[str, dict[str, list[int]]] = {}
    for fold in range(args.folds):
        held = set(order[fold::args.folds].tolist())
        paths = {}
        for name, rows in (("train", [r for i, r in enumerate(records) if i not in held]),
                           ("test", [r for i, r in enumerate(records) if i in held])):
            paths[name] = work / f"fold{fold}-{name}.jsonl"
            paths[name].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        stores: dict[str | None, tuple[Corpus, Corpus]] = {}
        for arm in args.fold_arms.split(","):
            opts = parse_arm(arm, args)
            if opts["destop"] not in stores:
                stop = opts["destop"]
                tag = f"-destop{len(stores)}" if stop else ""
                stores[opts["destop"]] = (
                    ingest(paths["train"], work / f"fold{fold}{tag}-train.zarr", prune=True, stop_words=stop),
                    ingest(paths["test"], work / f"fold{fold}{tag}-test.zarr", prune=False, stop_words=stop))
            train, test = stores[opts["destop"]]
            config = VBConfig(n_topics=opts["topics"], doc_topic_prior_mode=opts["alpha_mode"],
                              doc_topic_prior=opts["alpha"], topic_word_prior=0.01, max_iter=opts["iterations"],
                              tol=0.0, max_doc_iter=100, seed=args.seed)
            model, _ = _fit(train, config, client)
            for direction, scored in score(model, test, client, opts["divergence"]).items():
                pooled.setdefault(arm, {}).setdefault(direction, []).extend(scored["ranks"])
                print(f"fold {fold} {arm}: {direction} P@1 {scored['precision_at_1']:.3f} on {scored['n_pairs']}",
                      file=sys.stderr)
    out = []
    for arm, directions in pooled.items():
        for direction, ranks in directions.items():
            r = np.asarray(ranks)
            iv = matching_intervals(r)
            out.append({"arm": arm, "direction": direction, "n_queries": int(r.size), "folds": args.folds,
                        "precision_at_1": float(np.mean(r == 1)), "p_at_1_95": list(iv.precision_at_1),
                        "mean_reciprocal_rank": float(np.mean(1.0 / r)), "mrr_95": list(iv.mean_reciprocal_rank)})
            print(f"CV {arm:10s} {direction} n={r.size} P@1 {out[-1]['precision_at_1']:.3f} "
                  f"[{iv.precision_at_1[0]:.3f}, {iv.precision_at_1[1]:.3f}] MRR {out[-1]['mean_reciprocal_rank']:.3f} "
                  f"[{iv.mean_reciprocal_rank[0]:.3f}, {iv.mean_reciprocal_rank[1]:.3f}]", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--debref", type=Path)
    parser.add_argument("--manpages", type=Path)
    parser.add_argument("--arms", default="reproduce,fixed=1")
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=33)
    parser.add_argument("--divergence", default="jensen-shannon")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--select-alpha", default="",
                        help="comma-separated alphas (or 'auto'): choose alpha by P@1 on a validation split of the "
                             "training pairs (seed + 1, 20%%); arms named 'selected' then use the choice")
    parser.add_argument("--folds", type=int, default=0,
                        help="also run K-fold cross-validation on the Debian Reference (every pair held out once; "
                             "ranks pooled over the folds, each query ranked among its own fold's candidates)")
    parser.add_argument("--fold-arms", default="reproduce,fixed=1,fixed=0.5")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.debref is None:
        parser.error("--debref is required")
    arms = args.arms.split(",")

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-poly-"))
    work.mkdir(parents=True, exist_ok=True)
    debref = ingest(args.debref, work / "debref.zarr", prune=True)
    deb_train, deb_test = split_store(debref, work / "debref-train.zarr", work / "debref-test.zarr",
                                      test_fraction=0.2, seed=args.seed)
    test_sets = {"debref": deb_test}
    man_train_ids: set[str] = set()
    if args.manpages is not None:
        man = ingest(args.manpages, work / "man.zarr", prune=True)
        man_train, man_test = split_store(man, work / "man-train.zarr", work / "man-test.zarr",
                                          test_fraction=0.2, seed=args.seed)
        man_train_ids = ids_of(man_train)
        test_sets["manpages"] = man_test
    results = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        selection: list[dict[str, Any]] = []
        if args.select_alpha:
            sub_train, validation = split_store(deb_train, work / "val-train.zarr", work / "val.zarr",
                                                test_fraction=0.2, seed=args.seed + 1)
            for value in args.select_alpha.split(","):
                mode, alpha = ("auto", 50.0 / args.topics) if value == "auto" else ("fixed", float(value))
                config = VBConfig(n_topics=args.topics, doc_topic_prior_mode=mode,  # type: ignore[arg-type]
                                  doc_topic_prior=alpha, topic_word_prior=0.01, max_iter=args.iterations, tol=0.0,
                                  max_doc_iter=100, seed=args.seed)
                model, _ = _fit(sub_train, config, client)
                val = score(model, validation, client, args.divergence)
                mean_p1 = float(np.mean([d["precision_at_1"] for d in val.values()]))
                selection.append({"alpha": value, "validation_pairs": len(validation), "train_pairs": len(sub_train),
                                  "validation_p_at_1": mean_p1,
                                  "validation_mrr": float(np.mean([d["mean_reciprocal_rank"] for d in val.values()]))})
                print(f"select alpha={value}: validation P@1 {mean_p1:.3f} on {len(validation)} pairs", file=sys.stderr)
            best = max(selection, key=lambda r: (r["validation_p_at_1"], r["validation_mrr"]))
            arms = [a.replace("selected", "reproduce" if best["alpha"] == "auto" else f"fixed={best['alpha']}")
                    for a in arms]
        for arm in arms:
            opts = parse_arm(arm, args)
            if opts["manpages"]:
                if args.manpages is None:
                    parser.error(f"arm {arm!r} needs --manpages")
                both = work / "train-both.jsonl"
                with open(both, "w", encoding="utf-8") as dst:
                    for src, keep in ((args.debref, ids_of(deb_train)), (args.manpages, man_train_ids)):
                        dst.write(subset(src, keep, work / "part.jsonl").read_text(encoding="utf-8"))
                train = ingest(both, work / "train-both.zarr", prune=True)
            elif opts["manonly"]:
                if args.manpages is None:
                    parser.error(f"arm {arm!r} needs --manpages")
                train = man_train
            elif opts["destop"]:
                destop = ingest(args.debref, work / "debref-destop.zarr", prune=True, stop_words=opts["destop"])
                train, test_sets["debref-destop"] = split_store(
                    destop, work / "destop-train.zarr", work / "destop-test.zarr", test_fraction=0.2, seed=args.seed)
            else:
                train = deb_train
            alpha_mode, alpha = opts["alpha_mode"], opts["alpha"]
            config = VBConfig(n_topics=opts["topics"], doc_topic_prior_mode=alpha_mode,  # type: ignore[arg-type]
                              doc_topic_prior=alpha, topic_word_prior=0.01, max_iter=opts["iterations"], tol=0.0,
                              max_doc_iter=100, seed=args.seed)
            started = time.perf_counter()
            model, fit = _fit(train, config, client)
            seconds = time.perf_counter() - started
            record = {"arm": arm, **opts, "train_pairs": len(train),
                      "iterations": len(fit.trace), "train_seconds": round(seconds, 1),
                      "alpha_sum": float(np.sum(model.state.doc_topic_prior)), "tests": {}}
            for name, test in test_sets.items():
                wanted = {"manpages": opts["manpages"] or opts["manonly"],
                          "debref": not opts["destop"] and not opts["manonly"],
                          "debref-destop": bool(opts["destop"])}
                if not wanted[name]:
                    continue
                record["tests"][name] = score(model, test, client, opts["divergence"])
            results.append(record)
            for name, dirs in record["tests"].items():
                for direction, s in dirs.items():
                    print(f"{arm:12s} {name:9s} {direction} n={s['n_pairs']:4d} P@1 {s['precision_at_1']:.3f} "
                          f"[{s['p_at_1_95'][0]:.3f}, {s['p_at_1_95'][1]:.3f}] MRR {s['mean_reciprocal_rank']:.3f} "
                          f"[{s['mrr_95'][0]:.3f}, {s['mrr_95'][1]:.3f}]  ({seconds:.0f} s fit)", file=sys.stderr)
        folds = cross_validate(args, work, client) if args.folds else []
    report = {"command": "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]),
              "topics": args.topics, "iterations": args.iterations, "divergence": args.divergence,
              "seed": args.seed, "alpha_selection": selection, "arms": results, "cross_validation": folds}
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
