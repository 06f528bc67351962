"""Three-label subsets of a labeled corpus, in the manner of Canini et al. (2009)'s diff3 / rel3 / sim3.

Canini, Shi and Griffiths (2009) evaluate streaming LDA samplers on three-label subsets of 20 Newsgroups:
three dissimilar groups (diff3), three related ones (rel3) and three very similar ones (sim3), each split
60/40 into training and test documents. This script builds analogues from a JSON Lines corpus with a
label field (``/tmp/devcorpora/labeled_fortunes.jsonl``: fortune-cookie categories), choosing the
triples from the data:

1. Every document is tokenized exactly as ``topicflow ingest`` does by default (lowercase, ``\\b\\w+\\b``,
   at least 2 characters, English stop words); documents left without tokens are dropped, as ingest does.
2. Each label's unigram distribution is estimated from the same number of tokens (the token count of
   the smallest label), taken from its documents in seeded-hash order. Maximum-likelihood unigram
   distributions of unequal sample sizes are not comparable: a small label looks far from every other
   one only because its sparse estimate misses most words.
3. Jensen-Shannon divergence (base 2, in [0, 1]) between every pair of labels.
4. diff3 is the triple with the largest minimum pairwise divergence, sim3 the triple with the smallest
   maximum pairwise divergence (ties broken by label names). rel3 is declared, not searched: labels that
   share a subject, checked to lie strictly between the two (max of sim3 < min of rel3 and
   max of rel3 < min of diff3); the check and each label's nearest neighbours go into subsets.json.

Each label's documents are split 60/40 by a seeded SHA-256 hash of the document id (the first 60% in
hash order train, the rest test), so the split is stratified by label and independent of file order.
Files list documents in hash order, which interleaves the three labels as a stream would.

Usage::

    .venv/bin/python benchmarks/labeled_subsets.py --source /tmp/devcorpora/labeled_fortunes.jsonl \\
        --out /tmp/labeled3
    .venv/bin/topicflow ingest /tmp/labeled3/diff3/train.jsonl --out /tmp/labeled3/diff3/train.zarr \\
        --label-field label
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from topicflow.io._atomic import atomic_write_bytes, atomic_write_json
from topicflow.io.tokenizer import TokenizerConfig, make_tokenizer

#: Declared related triple: three labels about computing (general computer humour, Linux, Perl).
REL3_LABELS = ("computers", "linux", "perl")
TRAIN_FRACTION = 0.6


@dataclass(frozen=True, slots=True)
class Document:
    """One labeled record, its tokens and its position in the seeded hash order."""

    doc_id: str
    label: str
    record: dict[str, Any]
    tokens: tuple[str, ...]
    order_key: str


def order_key(doc_id: str, seed: int) -> str:
    """Seeded SHA-256 of the id: the document's place in the split and in the output files."""
    return hashlib.sha256(f"{seed}:{doc_id}".encode("utf-8")).hexdigest()


def read_documents(source: Path, seed: int, label_field: str, id_field: str, text_field: str) -> list[Document]:
    """Records of ``source`` with their tokens (default ingest tokenizer), in hash order.

    Records left without tokens are dropped here, as ``topicflow ingest`` drops them, so the counts in
    subsets.json match the stores.
    """
    tokenize = make_tokenizer(TokenizerConfig())
    docs = []
    with open(source, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            missing = [f for f in (label_field, id_field, text_field) if f not in record]
            if missing:
                raise SystemExit(f"{source}:{line_no}: record lacks field(s) {missing!r}")
            doc_id = str(record[id_field])
            docs.append(Document(doc_id, str(record[label_field]), record,
                                 tuple(tokenize(str(record[text_field]))), order_key(doc_id, seed)))
    return sorted((d for d in docs if d.tokens), key=lambda d: d.order_key)


def label_distributions(docs: Sequence[Document]) -> tuple[list[str], np.ndarray, int]:
    """Labels (sorted), their unigram distributions from equal token budgets, and that budget."""
    by_label: dict[str, list[Document]] = {}
    for doc in docs:
        by_label.setdefault(doc.label, []).append(doc)
    labels = sorted(by_label)
    budget = min(sum(len(d.tokens) for d in by_label[label]) for label in labels)
    counts = [Counter(_first_tokens(by_label[label], budget)) for label in labels]
    vocab = {term: i for i, term in enumerate(sorted(set().union(*counts)))}
    dists = np.zeros((len(labels), len(vocab)))
    for row, counter in enumerate(counts):
        for term, count in counter.items():
            dists[row, vocab[term]] = count
    return labels, dists / dists.sum(axis=1, keepdims=True), budget


def _first_tokens(docs: Sequence[Document], budget: int) -> list[str]:
    """The first ``budget`` tokens of ``docs`` read in order (the last document may be cut)."""
    tokens: list[str] = []
    for doc in docs:
        tokens.extend(doc.tokens[: budget - len(tokens)])
        if len(tokens) >= budget:
            break
    return tokens


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits: ``(KL(p || m) + KL(q || m)) / 2`` with ``m = (p + q) / 2``."""
    m = (p + q) / 2.0
    total = 0.0
    for dist in (p, q):
        nz = dist > 0
        total += 0.5 * float(np.sum(dist[nz] * np.log2(dist[nz] / m[nz])))
    return total


def divergence_matrix(dists: np.ndarray) -> np.ndarray:
    n = dists.shape[0]
    out = np.zeros((n, n))
    for i, j in itertools.combinations(range(n), 2):
        out[i, j] = out[j, i] = js_divergence(dists[i], dists[j])
    return out


def pairwise(triple: Sequence[int], jsd: np.ndarray) -> list[float]:
    return [float(jsd[a, b]) for a, b in itertools.combinations(triple, 2)]


def choose_triples(labels: list[str], jsd: np.ndarray) -> dict[str, tuple[str, ...]]:
    """diff3 (max of min divergence), sim3 (min of max divergence) and the declared rel3."""
    triples = list(itertools.combinations(range(len(labels)), 3))
    diff3 = min(triples, key=lambda t: (-min(pairwise(t, jsd)), t))
    sim3 = min(triples, key=lambda t: (max(pairwise(t, jsd)), t))
    missing = [label for label in REL3_LABELS if label not in labels]
    if missing:
        raise SystemExit(f"rel3 labels {missing!r} are not in the source; labels are {labels!r}")
    return {"diff3": tuple(labels[i] for i in diff3), "rel3": REL3_LABELS, "sim3": tuple(labels[i] for i in sim3)}


def split_label(docs: Sequence[Document]) -> tuple[list[Document], list[Document]]:
    """First 60% (rounded) of one label's documents in hash order train, the rest test."""
    n_train = int(math.floor(TRAIN_FRACTION * len(docs) + 0.5))
    return list(docs[:n_train]), list(docs[n_train:])


def write_jsonl(path: Path, docs: Sequence[Document]) -> None:
    lines = "".join(json.dumps(doc.record, ensure_ascii=False) + "\n" for doc in docs)
    atomic_write_bytes(path, lines.encode("utf-8"))


def write_subset(out: Path, name: str, chosen: Sequence[str], docs: Sequence[Document]) -> dict[str, Any]:
    """Write ``out/name/{train,test}.jsonl``; return their per-label document and token counts."""
    train: list[Document] = []
    test: list[Document] = []
    for label in chosen:
        part_train, part_test = split_label([d for d in docs if d.label == label])
        train += part_train
        test += part_test
    (out / name).mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {}
    for part, part_docs in (("train", train), ("test", test)):
        part_docs = sorted(part_docs, key=lambda d: d.order_key)
        write_jsonl(out / name / f"{part}.jsonl", part_docs)
        stats[part] = {label: {"docs": sum(d.label == label for d in part_docs),
                               "tokens": sum(len(d.tokens) for d in part_docs if d.label == label)}
                       for label in chosen}
        stats[part]["total"] = {"docs": len(part_docs), "tokens": sum(len(d.tokens) for d in part_docs)}
    return stats


def summarize(labels: list[str], jsd: np.ndarray, chosen: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """Pairwise divergences of each chosen triple, its rank among all triples, and the rel3 check."""
    triples = list(itertools.combinations(range(len(labels)), 3))
    by_min = sorted((-min(pairwise(t, jsd)), t) for t in triples)
    by_max = sorted((max(pairwise(t, jsd)), t) for t in triples)
    out: dict[str, Any] = {}
    for name, names in chosen.items():
        idx = tuple(sorted(labels.index(label) for label in names))
        pairs = {f"{labels[a]}|{labels[b]}": round(float(jsd[a, b]), 4) for a, b in itertools.combinations(idx, 2)}
        out[name] = {"labels": list(names), "jsd_pairs": pairs,
                     "jsd_min": round(min(pairs.values()), 4), "jsd_max": round(max(pairs.values()), 4),
                     "rank_by_min_desc": [t for _, t in by_min].index(idx) + 1,
                     "rank_by_max_asc": [t for _, t in by_max].index(idx) + 1}
    out["rel3_between"] = bool(out["sim3"]["jsd_max"] < out["rel3"]["jsd_min"]
                               and out["rel3"]["jsd_max"] < out["diff3"]["jsd_min"])
    return out


def nearest_neighbors(labels: list[str], jsd: np.ndarray, k: int = 3) -> dict[str, list[list[Any]]]:
    masked = jsd + np.diag(np.full(len(labels), np.inf))
    return {label: [[labels[j], round(float(masked[i, j]), 4)] for j in np.argsort(masked[i], kind="stable")[:k]]
            for i, label in enumerate(labels)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="JSON Lines with id, text and label fields")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--seed", type=int, default=0, help="seed of the id hash (split and order)")
    parser.add_argument("--label-field", default="label")
    parser.add_argument("--id-field", default="id")
    parser.add_argument("--text-field", default="text")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    docs = read_documents(args.source, args.seed, args.label_field, args.id_field, args.text_field)
    labels, dists, budget = label_distributions(docs)
    jsd = divergence_matrix(dists)
    chosen = choose_triples(labels, jsd)
    args.out.mkdir(parents=True, exist_ok=True)
    subsets = summarize(labels, jsd, chosen)
    for name, names in chosen.items():
        subsets[name]["counts"] = write_subset(args.out, name, names, docs)
    report = {
        "source": str(args.source),
        "source_sha256": hashlib.sha256(args.source.read_bytes()).hexdigest(),
        "seed": args.seed, "train_fraction": TRAIN_FRACTION,
        "tokenizer": {k: v for k, v in TokenizerConfig().to_dict().items() if k != "stop_words"},
        "divergence": "Jensen-Shannon, base 2, unigram MLE from the first "
                      f"{budget} tokens of each label in hash order",
        "token_budget_per_label": budget,
        "n_triples": math.comb(len(labels), 3),
        "subsets": subsets,
        "nearest_neighbors": nearest_neighbors(labels, jsd),
        "labels": labels,
        "jsd_matrix": np.round(jsd, 4).tolist(),
    }
    atomic_write_json(args.out / "subsets.json", report)
    print(json.dumps({name: {k: subsets[name][k] for k in ("labels", "jsd_min", "jsd_max")} for name in chosen}
                     | {"rel3_between": subsets["rel3_between"]}, indent=1))
    print(f"{'subset':7} {'labels':36} {'jsd min':>8} {'jsd max':>8} {'train docs':>10} {'test docs':>9}")
    for name in chosen:
        entry = subsets[name]
        print(f"{name:7} {', '.join(entry['labels']):36} {entry['jsd_min']:8.4f} {entry['jsd_max']:8.4f} "
              f"{entry['counts']['train']['total']['docs']:10d} {entry['counts']['test']['total']['docs']:9d}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
