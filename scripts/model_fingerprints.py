"""Fingerprints of the models every method fits on small corpora, through the CLI.

Run before and after a change that must not alter what models compute (a refactor), then compare:

    python scripts/model_fingerprints.py --out before.json
    ... change ...
    python scripts/model_fingerprints.py --out after.json
    diff before.json after.json

Each fingerprint is the SHA-256 of every numeric array under a model directory (zarr arrays and
npz members, read back as NumPy arrays: names, dtypes, shapes and bytes), so timestamps and
paths in JSON do not count. The corpora are the bundled demo corpus (the first 2,000 passages)
and a generated two-language corpus with labels.

The commands use the option spellings that every version since the layout change accepts (the old
ones, which newer versions keep as deprecated aliases), so one script compares old and new code.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ["--workers", "2", "--threads-per-worker", "1"]


def topicflow(*args: str) -> None:
    command = [str(Path(sys.executable).with_name("topicflow")), *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{done.stderr[-3000:]}")


def array_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("zarr.json")):
        node = zarr.open(path.parent, mode="r")
        if isinstance(node, zarr.Array):
            data = np.asarray(node[...])
            if data.dtype == object or data.dtype.kind in "USO" or str(data.dtype).startswith("String"):
                data = np.array([str(x) for x in data.ravel()], dtype="U")
            digest.update(str(path.parent.relative_to(directory)).encode())
            digest.update(f"{data.dtype.str}{data.shape}".encode())
            digest.update(np.ascontiguousarray(data).tobytes())
    for path in sorted(directory.rglob("*.npz")):
        with np.load(path, allow_pickle=False) as npz:
            for name in sorted(npz.files):
                data = npz[name]
                digest.update(f"{path.relative_to(directory)}:{name}{data.dtype.str}{data.shape}".encode())
                digest.update(np.ascontiguousarray(data).tobytes())
    return digest.hexdigest()


def demo_jsonl(work: Path, n_docs: int) -> Path:
    source = ROOT / "topicflow" / "data" / "kjv_passages.jsonl.gz"
    out = work / "kjv.jsonl"
    with gzip.open(source, "rt", encoding="utf-8") as handle, open(out, "w", encoding="utf-8") as sink:
        for number, line in enumerate(handle):
            if number == n_docs:
                break
            sink.write(line)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    prints: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        kjv, synth = work / "kjv.zarr", work / "synth.zarr"
        topicflow("ingest", str(demo_jsonl(work, 2000)), "--out", str(kjv), "--shard-size", "250",
                  "--stop-words", "english", *CLUSTER)
        topicflow("synth", "--out", str(synth), "--docs", "1200", "--topics", "6", "--vocab", "300",
                  "--doc-length", "60", "--languages", "2", "--labels", "--shard-size", "200", *CLUSTER)
        synth1 = work / "synth1.zarr"
        topicflow("synth", "--out", str(synth1), "--docs", "1500", "--topics", "5", "--vocab", "200",
                  "--doc-length", "50", "--labels", "--shard-size", "300", "--seed", "3", *CLUSTER)
        prints["store:kjv"] = array_digest(kjv)
        prints["store:synth"] = array_digest(synth)
        fits = {
            "batch-kjv": [str(kjv), "--topics", "10", "--iterations", "8"],
            "batch-synth-eta": [str(synth), "--topics", "6", "--iterations", "6", "--alpha", "symmetric",
                                "--optimize-eta"],
            "batch-warm": [str(kjv), "--topics", "8", "--iterations", "14", "--warm-start"],
            "online-threads": [str(kjv), "--topics", "10", "--method", "online", "--batch-size", "128",
                               "--executor", "threads", "--passes", "2", "--shuffle-window", "300"],
            "online-servers": [str(kjv), "--topics", "10", "--method", "online", "--batch-size", "128",
                               "--executor", "servers"],
            "online-tasks": [str(synth), "--topics", "6", "--method", "online", "--batch-size", "100",
                             "--executor", "tasks"],
            "hybrid-batch": [str(kjv), "--topics", "12", "--iterations", "5", "--estep", "hybrid"],
            "hybrid-online": [str(synth), "--topics", "6", "--method", "online", "--estep", "hybrid",
                              "--batch-size", "200"],
        }
        for name, fit_args in fits.items():
            model = work / f"model-{name}"
            topicflow("fit", *fit_args, "--model", str(model), "--seed", "7", *CLUSTER)
            prints[f"fit:{name}"] = array_digest(model)
        streams = {
            "gibbs": ["--algo", "gibbs", "--topics", "5", "--sweeps", "30", "--eval-every", "10"],
            "gibbs-opt": ["--algo", "gibbs", "--topics", "5", "--sweeps", "70", "--optimize-every", "10",
                          "--eval-every", "35"],
            "olda": ["--algo", "olda", "--topics", "5", "--init-docs", "50", "--eval-every", "500"],
            "incgibbs": ["--algo", "incgibbs", "--topics", "5", "--init-docs", "50", "--rejuv", "4",
                         "--max-docs", "400", "--eval-every", "200"],
            "pf": ["--algo", "pf", "--topics", "5", "--particles", "8", "--init-docs", "50",
                   "--max-docs", "300", "--eval-every", "150", "--runs", "2"],
            "sgs": ["--algo", "sgs", "--topics", "5", "--batch-size", "150", "--decay", "0.9",
                    "--max-iters", "20", "--eval-every", "300"],
            "dsgs-sync": ["--algo", "dsgs", "--topics", "5", "--batch-size", "150", "--max-iters", "20",
                          "--staleness", "0", "--eval-every", "300"],
        }
        for name, stream_args in streams.items():
            out = work / f"stream-{name}"
            topicflow("stream", str(synth1), "--out", str(out), *stream_args, "--seed", "5", *CLUSTER)
            prints[f"stream:{name}"] = array_digest(out)
        # nightly update of an online model and of an SGS model over appended documents
        grown = work / "synth1-grown.zarr"
        topicflow("synth", "--out", str(grown), "--docs", "1800", "--topics", "5", "--vocab", "200",
                  "--doc-length", "50", "--labels", "--shard-size", "300", "--seed", "3", *CLUSTER)
        online = work / "model-online-update"
        topicflow("fit", str(synth1), "--model", str(online), "--topics", "5", "--method", "online",
                  "--batch-size", "100", "--seed", "2", *CLUSTER)
        topicflow("update", str(online), str(grown), *CLUSTER)
        prints["update:online"] = array_digest(online)
        topicflow("update", str(work / "stream-sgs" / "model"), str(grown), *CLUSTER)
        prints["update:sgs"] = array_digest(work / "stream-sgs" / "model")
        doc_topics = work / "doc-topics.zarr"
        topicflow("infer", str(work / "model-batch-kjv"), str(kjv), "--out", str(doc_topics), *CLUSTER)
        prints["infer:batch-kjv"] = array_digest(doc_topics)
    args.out.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(prints, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
