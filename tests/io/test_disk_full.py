"""A full disk met by every writer: injected at the Nth write (first, middle, last), and once for real on a tmpfs.

Each writer case builds the state before the write (a saved model, a store, a checkpoint, ...), then the
test runs the write under :func:`topicflow.testing.diskfull.disk_full` failing at write N and checks: the
error (a :class:`DiskFullError` naming the output; a raw ``OSError(ENOSPC)`` for ingest/append, whose
modules are being changed elsewhere, see docs/reliability.md "Disk full"), the directory listing
unchanged (no partial file left), what is current unchanged, and a rerun without the fault equal to an
uninterrupted run of the same write. The write counts come from one counting run per writer.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import dask
import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from topicflow.cli import main as cli
from topicflow.errors import DiskFullError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.store import SavedModel, export_npz, load_model, save_model
from topicflow.io.models.stream_state import read_stream_state, write_stream_state
from topicflow.io.models.versions import (
    commit_version,
    list_versions,
    model_lock,
    prune_versions,
)
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.vb.infer import infer_doc_topics
from topicflow.testing.corpora import write_test_store
from topicflow.testing.diskfull import disk_full

N_TERMS = 6
WORDS = ["tax", "fox", "dog", "cat", "sun", "moon", "star", "tree", "river", "sea"]
FINGERPRINT = {"method": "batch", "n_topics": 2}


# ----------------------------------------------------------------------------- what the writers write


def make_model(fill: float) -> SavedModel:
    """A tiny model over the test store's terms (``en00000`` ...), told apart from others by ``fill``."""
    terms = np.array([f"en{i:05d}" for i in range(N_TERMS)], dtype=object)
    vocab = Vocabulary(terms=terms, doc_freq=np.ones(N_TERMS, dtype=np.int64), corpus_freq=np.ones(N_TERMS, dtype=np.int64))
    lam = np.arange(2 * N_TERMS, dtype=np.float64).reshape(2, N_TERMS) / 7.0 + fill
    state = LDAState(topic_word_var={"en": lam}, doc_topic_prior=np.array([0.1, 0.2]),
                     topic_word_prior={"en": 0.01}, topic_names=("a", None))
    return SavedModel(state=state, vocabularies={"en": vocab}, info={"kind": "vb_lda", "method": "batch"})


def model_view(path: Path) -> Any:
    """What a reader of the model sees: its versions (number, kind, current) and the current arrays."""
    if not path.exists():
        return None
    saved = load_model(path)
    return ([(v.version, v.kind, v.is_current) for v in list_versions(path)],
            saved.state.topic_word_var["en"].tolist(), saved.state.doc_topic_prior.tolist(),
            list(saved.vocabularies["en"].terms))


def checkpoint(fill: float, iteration: int) -> Checkpoint:
    return Checkpoint(state=make_model(fill).state, position={"iteration": iteration},
                      trace=[{"elbo": -float(i)} for i in range(iteration)], fingerprint=dict(FINGERPRINT))


def checkpoint_view(path: Path) -> Any:
    found = read_checkpoint(path, FINGERPRINT)
    return None if found is None else (found.position, found.trace, found.state.topic_word_var["en"].tolist())


def stream_runs(fill: float) -> list[tuple[dict[str, np.ndarray], dict[str, Any]]]:
    return [({"counts": np.full((3, 4), fill), "z": np.arange(5) + int(fill)}, {"run": run, "seed": 7})
            for run in range(2)]


def stream_view(path: Path) -> Any:
    if not path.exists():
        return None
    info, runs = read_stream_state(path)
    return (info, [({k: v.tolist() for k, v in arrays.items()}, meta) for arrays, meta in runs])


def npz_view(path: Path) -> Any:
    if not path.exists():
        return None
    with np.load(path) as data:
        return {name: data[name].tolist() for name in data.files}


def doc_topics_view(path: Path) -> Any:
    if not path.exists():
        return None
    return [(ids.tolist(), rows.tolist()) for ids, rows in DocTopics.open(path)]


def store_view(path: Path) -> Any:
    """A store's documents and vocabulary as a reader sees them (not its files' bytes, which hold times)."""
    if not path.exists():
        return None
    corpus = Corpus.open(path)
    vocab = corpus.vocabulary()
    blocks = [(b.doc_ids.tolist(), b.indptr.tolist(), b.term_ids.tolist(), b.counts.tolist())
              for b in corpus.iter_blocks()]
    return list(vocab.terms), vocab.doc_freq.tolist(), corpus.vocab_version, blocks


def write_docs(path: Path, start: int, stop: int, extra: str = "") -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(start, stop):
            text = " ".join(WORDS[(i * j + i) % len(WORDS)] for j in range(6)) + extra
            handle.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")
    return path


# ----------------------------------------------------------------------------- the writers


@dataclass(frozen=True)
class Writer:
    """One writer: ``setup(base)`` makes the state before it, ``write(base)`` writes, ``view(base)`` reads back.

    ``target`` is the output (relative to ``base/out``) the message must name.
    """

    setup: Callable[[Path], None]
    write: Callable[[Path], None]
    view: Callable[[Path], Any]
    target: str


def _commit(base: Path) -> None:
    with model_lock(base / "out" / "m", action="update"):
        commit_version(base / "out" / "m", make_model(2.0), kind="update", summary={"n_docs": 3})


def _three_versions(base: Path) -> None:
    save_model(base / "out" / "m", make_model(1.0))
    _commit(base)
    with model_lock(base / "out" / "m", action="update"):
        commit_version(base / "out" / "m", make_model(3.0), kind="update", summary={"n_docs": 4})


def _corpus(base: Path) -> None:
    counts = sp.csr_matrix(np.arange(8 * N_TERMS).reshape(8, N_TERMS) % 3)
    write_test_store(base / "corpus.zarr", {"en": counts}, shard_size=3)


def _infer(base: Path) -> None:
    infer_doc_topics(make_model(1.0), Corpus.open(base / "corpus.zarr"), base / "out" / "dt.zarr")


def _inputs(base: Path) -> None:
    write_docs(base / "a.jsonl", 0, 12)
    write_docs(base / "b.jsonl", 12, 20, extra=" zebra")


def _ingest(base: Path) -> None:
    # One task at a time: with threads, a task already running when another fails may still write its
    # token file after the clean-up (garbage the next append removes; docs/reliability.md, "Disk full").
    with dask.config.set(scheduler="sync"):
        ingest_corpus([base / "a.jsonl"], base / "out" / "s.zarr", shard_size=5)


def _append(base: Path) -> None:
    with dask.config.set(scheduler="sync"):  # as in _ingest
        append_corpus(base / "out" / "s.zarr", [base / "b.jsonl"])


def _with_store(base: Path) -> None:
    _inputs(base)
    _ingest(base)


def _nothing(base: Path) -> None:
    return None


WRITERS: dict[str, Writer] = {
    "fit-save": Writer(_nothing, lambda b: save_model(b / "out" / "m", make_model(1.0)),
                       lambda b: model_view(b / "out" / "m"), "m"),
    "fit-save-overwrite": Writer(lambda b: save_model(b / "out" / "m", make_model(1.0)),
                                 lambda b: save_model(b / "out" / "m", make_model(5.0), overwrite=True),
                                 lambda b: model_view(b / "out" / "m"), "m"),
    "update-commit": Writer(lambda b: save_model(b / "out" / "m", make_model(1.0)), _commit,
                            lambda b: model_view(b / "out" / "m"), "m"),
    "versions-prune": Writer(_three_versions, lambda b: prune_versions(b / "out" / "m", keep=1),
                             lambda b: model_view(b / "out" / "m"), "m"),
    "checkpoint": Writer(lambda b: write_checkpoint(b / "out" / "ckpt", checkpoint(1.0, 2), make_model(1.0).vocabularies),
                         lambda b: write_checkpoint(b / "out" / "ckpt", checkpoint(2.0, 4), make_model(1.0).vocabularies),
                         lambda b: checkpoint_view(b / "out" / "ckpt"), "ckpt"),
    "stream-state": Writer(lambda b: write_stream_state(b / "out" / "state", {"position": 1}, stream_runs(1.0)),
                           lambda b: write_stream_state(b / "out" / "state", {"position": 2}, stream_runs(2.0)),
                           lambda b: stream_view(b / "out" / "state"), "state"),
    "infer": Writer(_corpus, _infer, lambda b: doc_topics_view(b / "out" / "dt.zarr"), "dt.zarr"),
    "export": Writer(_nothing, lambda b: export_npz(b / "out" / "m.npz", make_model(1.0)),
                     lambda b: npz_view(b / "out" / "m.npz"), "m.npz"),
    "ingest": Writer(_inputs, _ingest, lambda b: store_view(b / "out" / "s.zarr"), "s.zarr"),
    "append": Writer(_with_store, _append,
                     lambda b: store_view(b / "out" / "s.zarr"), "s.zarr"),
}

POSITIONS = ("first", "middle", "last")


def listing(base: Path) -> list[str]:
    """Every path under ``base/out`` (the lock file, created on first use and never deleted, aside)."""
    out = base / "out"
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name != ".lock")


def prepared(root: Path, name: str) -> Path:
    (root / "out").mkdir(parents=True)
    WRITERS[name].setup(root)
    return root


@pytest.fixture(scope="module")
def sync_scheduler() -> Any:
    with dask.config.set(scheduler="sync"):
        yield


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, sync_scheduler: Any) -> dict[str, tuple[int, Any]]:
    """Per writer: how many writes it makes under ``out/``, and what it leaves when nothing fails."""
    results = {}
    for name, writer in WRITERS.items():
        base = prepared(tmp_path_factory.mktemp(name), name)
        with disk_full(base / "out") as counter:
            writer.write(base)
        results[name] = (counter.writes, writer.view(base))
    return results


def write_number(position: str, writes: int) -> int:
    return {"first": 1, "middle": max(1, writes // 2), "last": writes}[position]


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("name", list(WRITERS))
def test_disk_full_at_nth_write(name: str, position: str, tmp_path: Path,
                                uninterrupted: dict[str, tuple[int, Any]]) -> None:
    writer = WRITERS[name]
    writes, expected = uninterrupted[name]
    assert writes >= 1
    base = prepared(tmp_path, name)
    before, view_before = listing(base), writer.view(base)
    with pytest.raises(OSError) as raised, disk_full(base / "out", at=write_number(position, writes)) as counter:
        writer.write(base)
    assert counter.failed, "the injected fault was never reached"
    error = raised.value
    assert error.errno == errno.ENOSPC
    target = str(base / "out" / writer.target)
    assert isinstance(error, DiskFullError)
    assert error.path == target
    assert error.failed == counter.failed[0]
    message = str(error)
    assert f"{target!r} could not be written: no space left on device" in message
    assert f"Free space on the filesystem holding {target!r}, then rerun;" in message
    assert "was left as it was" in message or "nothing was" in message or "no checkpoint" in message \
        or "no state" in message
    assert listing(base) == before, "the failed write left files behind or removed some"
    assert writer.view(base) == view_before, "what is current changed"
    writer.write(base)  # space freed: the rerun succeeds
    assert writer.view(base) == expected


def test_current_version_is_named(tmp_path: Path, sync_scheduler: Any) -> None:
    """update's commit and prune say which version is still current; EDQUOT reads as a quota."""
    base = prepared(tmp_path, "versions-prune")
    with pytest.raises(DiskFullError, match=r"nothing was removed: version 3 is still current"), \
            disk_full(base / "out", at=1):
        prune_versions(base / "out" / "m", keep=1)
    with pytest.raises(DiskFullError, match=r"the disk quota is exhausted.*nothing was changed: "
                       r"version 3 is still current\.$"), disk_full(base / "out", at=2, error_number=errno.EDQUOT):
        with model_lock(base / "out" / "m", action="update"):
            commit_version(base / "out" / "m", make_model(9.0), kind="update", summary={})
    assert [v.version for v in list_versions(base / "out" / "m")] == [1, 2, 3]


def test_cli_shows_one_line(tmp_path: Path) -> None:
    """``topicflow export`` on a full disk: one ``topicflow: error:`` line naming --out, exit 2, no file."""
    save_model(tmp_path / "m", make_model(1.0))
    (tmp_path / "out").mkdir()
    with disk_full(tmp_path / "out", at=1):
        result = CliRunner().invoke(cli, ["export", str(tmp_path / "m"), "--out", str(tmp_path / "out" / "m.npz")])
    assert result.exit_code == 2
    out = str(tmp_path / "out" / "m.npz")
    assert result.stderr.splitlines() == [
        f"topicflow: error: export {out!r} could not be written: no space left on device (writing "
        f"{result.stderr.split('(writing ')[1].split(')')[0]}). Free space on the filesystem holding {out!r}, "
        f"then rerun; nothing was written at {out!r}."]
    assert os.listdir(tmp_path / "out") == []


# ----------------------------------------------------------------------------- a real full filesystem

def _can_mount_tmpfs(where: Path) -> str | None:
    """None if this process may mount a tmpfs in a new user+mount namespace; else why not."""
    if shutil.which("unshare") is None:
        return "the unshare command is missing"
    probe = subprocess.run(["unshare", "-m", "--map-root-user", "sh", "-c",
                            f"mount -t tmpfs -o size=1m tmpfs {where}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot mount a tmpfs here (unshare -m --map-root-user mount -t tmpfs: {probe.stderr.strip()!r})"
    return None


SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import numpy as np
    from topicflow.errors import DiskFullError
    from topicflow.io.models.store import SavedModel, load_model, save_model
    from topicflow.io.models.versions import commit_version, list_versions, model_lock
    from topicflow.models.common.vocabulary import Vocabulary
    from topicflow.models.lda.state import LDAState

    root = Path(sys.argv[1])
    def model(fill, n_terms):
        terms = np.array([f"t{i:06d}" for i in range(n_terms)], dtype=object)
        vocab = Vocabulary(terms=terms, doc_freq=np.ones(n_terms, dtype=np.int64),
                           corpus_freq=np.ones(n_terms, dtype=np.int64))
        rng = np.random.default_rng(int(fill))
        state = LDAState(topic_word_var={"en": rng.random((8, n_terms)) + fill}, doc_topic_prior=np.full(8, 0.1),
                         topic_word_prior={"en": 0.01}, topic_names=(None,) * 8)
        return SavedModel(state=state, vocabularies={"en": vocab}, info={"kind": "vb_lda", "method": "batch"})
    def listing():
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != ".lock")
    save_model(root / "m", model(1.0, 50))
    filler = root / "filler"
    with open(filler, "wb", buffering=0) as handle:   # fill the filesystem to the last byte
        try:
            while True:
                handle.write(b"\\0" * 4096)
        except OSError:
            pass
    before = listing()
    report = {}
    try:
        with model_lock(root / "m", action="update"):
            commit_version(root / "m", model(2.0, 6000), kind="update", summary={})
        report["error"] = None
    except DiskFullError as exc:
        report["error"] = str(exc)
        report["path"] = exc.path
    report["unchanged_listing"] = listing() == before
    report["versions"] = [(v.version, v.is_current) for v in list_versions(root / "m")]
    report["current_equal"] = bool(np.array_equal(load_model(root / "m").state.topic_word_var["en"],
                                                  model(1.0, 50).state.topic_word_var["en"]))
    filler.unlink()
    with model_lock(root / "m", action="update"):
        commit_version(root / "m", model(2.0, 6000), kind="update", summary={})
    report["rerun_equal"] = bool(np.array_equal(load_model(root / "m").state.topic_word_var["en"],
                                                model(2.0, 6000).state.topic_word_var["en"]))
    report["versions_after"] = [(v.version, v.is_current) for v in list_versions(root / "m")]
    print(json.dumps(report))
""")


def test_real_full_tmpfs(tmp_path: Path) -> None:
    """update's commit on a real 1 MiB tmpfs that fills up: ENOSPC from the kernel, not from the injection."""
    mount = tmp_path / "small"
    mount.mkdir()
    reason = _can_mount_tmpfs(mount)
    if reason is not None:
        pytest.skip(reason)
    (tmp_path / "run.py").write_text(SCRIPT)
    command = f"mount -t tmpfs -o size=1m tmpfs {mount} && exec {sys.executable} {tmp_path / 'run.py'} {mount}"
    done = subprocess.run(["unshare", "-m", "--map-root-user", "sh", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    target = str(mount / "m")
    assert report["error"] is not None and report["path"] == target
    assert report["error"].startswith(f"model {target!r} could not be written: no space left on device")
    assert report["error"].endswith("nothing was changed: version 1 is still current.")
    assert report["unchanged_listing"] and report["current_equal"]
    assert report["versions"] == [[1, True]]
    assert report["rerun_equal"] and report["versions_after"] == [[1, False], [2, True]]
