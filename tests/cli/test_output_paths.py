"""One rule for every output path (issue 26.2), checked through the CLI of every command that writes.

For ``ingest --out``, ``fit --model``, ``infer --out``, ``export --out``, ``report --out`` and
``stream --out``: a missing parent directory is created (the module fixture writes every output under
parents that do not exist yet), an output that exists is refused without ``--overwrite``, and a file
where a directory output is expected (or a directory where a file output is expected) is refused; each
refusal is the whole of stderr, one line naming the path, the option and what to do, and nothing is
written. The rules themselves are :func:`topicflow.io.output_paths.prepare_output`.

The same outputs on a real S3-compatible server (moto's standalone server, tests/objstore.py, issue
23.1): ``infer``, ``export``, ``report`` and ``stream`` write to s3:// what they write to local disk
(read back and compared with this module's local outputs); a stream checkpointed on s3:// resumes
there and ends as the uninterrupted local run; the output-path rules hold on s3://; and the commit
point of each output (the doc-topics root ``zarr.json``, the stream state's ``stream.json``, a
checkpoint's ``latest.json``) keeps an interrupted write from being taken for a complete one.
"""
from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from click.testing import CliRunner, Result
from numpy.testing import assert_array_equal

from topicflow.cli import main
from topicflow.io import storage
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.store import load_model
from topicflow.io.models.stream_state import read_stream_state, write_stream_state
from topicflow.io.output_paths import PENDING
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.io.storage import StoragePath
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

#: Each command's output option, what it writes, and whether that is a directory or a file.
OUTPUTS = {
    "ingest": ("ingest --out", "store", "directory"),
    "fit": ("fit --model", "model", "directory"),
    "infer": ("infer --out", "document-topic output", "directory"),
    "export": ("export --out", "export", "file"),
    "report": ("report --out", "report", "file"),
    "stream": ("stream --out", "stream output", "directory"),
}


def run(args: list[object]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def ok(args: list[object]) -> Result:
    result = run(args)
    assert result.exit_code == 0, result.output
    return result


def command_line(command: str, out: Path | str, made: dict[str, Path], address: str) -> list[object]:
    """The command writing its output to ``out`` (on the session's in-process cluster)."""
    store, model = made["store"], made.get("model")
    cluster = ["--scheduler", address]
    return {
        "ingest": ["ingest", made["jsonl"], "--out", out, *cluster],
        "fit": ["fit", store, "--model", out, "--topics", 2, "--max-iter", 2, *cluster],
        "infer": ["infer", model, store, "--out", out, *cluster],
        "export": ["export", model, "--out", out],
        "report": ["report", model, "--out", out],
        "stream": ["stream", store, "--out", out, "--algo", "olda", "--topics", 2, "--init-docs", 10,
                   "--eval-every", 10, *cluster],
    }[command]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, local_cluster: object) -> dict[str, Path]:
    """Every command's output, each written under parent directories that did not exist."""
    base = tmp_path_factory.mktemp("output-paths")
    truth = draw_planted_corpus(n_docs=40, n_topics=2, n_terms=12, doc_length=12, alpha=0.1, seed=3)
    labels = [f"t{k}" for k in np.argmax(truth.doc_topic, axis=1)]
    made = {"store": write_test_store(base / "train.zarr", truth.counts, shard_size=20, labels=labels),
            "jsonl": base / "in.jsonl", "base": base}
    made["jsonl"].write_text("".join(json.dumps({"id": f"d{i}", "text": f"apple pie number {i % 3}"}) + "\n"
                                     for i in range(6)))
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    for command in ("fit", "ingest", "infer", "export", "report", "stream"):  # fit first: the others read its model
        out = base / f"new-{command}" / "sub" / f"{command}.out"
        result = run(command_line(command, out, made, address))
        assert result.exit_code == 0, result.output
        made[command] = out
        if command == "fit":
            made["model"] = out
    return made


def test_missing_parent_directories_are_created(made: dict[str, Path]) -> None:
    assert (made["ingest"] / "manifest.json").is_file()
    assert load_model(made["fit"]).version == 1
    assert sum(len(ids) for ids, _ in DocTopics.open(made["infer"])) == 40
    with np.load(made["export"], allow_pickle=False) as arrays:
        assert arrays["topic_word"].shape == (2, 12)
    assert made["report"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (made["stream"] / "state" / "stream.json").is_file() and (made["stream"] / "summary.json").is_file()
    leftovers = [p.name for p in made["base"].rglob("*") if ".tmp-" in p.name]
    assert leftovers == []


@pytest.mark.parametrize("command", sorted(OUTPUTS))
def test_an_existing_output_is_refused_without_overwrite(command: str, made: dict[str, Path],
                                                         local_cluster: object) -> None:
    out = made[command]
    option, what, _ = OUTPUTS[command]
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) if out.is_dir() else out.read_bytes()
    result = run(command_line(command, out, made, local_cluster.scheduler_address))  # type: ignore[attr-defined]
    assert result.exit_code == 2
    assert result.stderr == (f"topicflow: error: {what} {str(out)!r} ({option}) exists already; choose another "
                             "path or pass --overwrite to replace it.\n")
    after = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) if out.is_dir() else out.read_bytes()
    assert after == before


@pytest.mark.parametrize("command", sorted(OUTPUTS))
def test_a_file_for_a_directory_and_a_directory_for_a_file_are_refused(
    command: str, made: dict[str, Path], tmp_path: Path, local_cluster: object,
) -> None:
    option, what, kind = OUTPUTS[command]
    if kind == "directory":
        out = tmp_path / "a-file"
        out.write_text("not a directory")
        expected = (f"{what} {str(out)!r} ({option}) is a file, but a {what} is a directory; remove the file or "
                    "choose another path.")
    else:
        out = tmp_path / "a-directory"
        out.mkdir()
        expected = (f"{what} {str(out)!r} ({option}) is a directory, but {'an' if what[0] == 'e' else 'a'} {what} "
                    "is a file; give the path of a file (it may be inside that directory) or choose another path.")
    result = run(command_line(command, out, made, local_cluster.scheduler_address)  # type: ignore[attr-defined]
                 + ["--overwrite"])  # refused even with --overwrite
    assert result.exit_code == 2
    assert result.stderr == f"topicflow: error: {expected}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_export_into_a_missing_directory_and_under_a_file(made: dict[str, Path], tmp_path: Path) -> None:
    """The case of issue 26: `export MODEL --out no/such/dir/m.npz` ended in a raw FileNotFoundError."""
    out = tmp_path / "no" / "such" / "dir" / "m.npz"
    assert run(["export", made["model"], "--out", out]).exit_code == 0
    with np.load(out) as created, np.load(made["export"]) as first:
        np.testing.assert_array_equal(created["topic_word"], first["topic_word"])
    again = run(["export", made["model"], "--out", out, "--overwrite"])
    assert again.exit_code == 0 and again.stderr.endswith(f"wrote {out}\n")
    under_a_file = out / "m.npz"
    result = run(["export", made["model"], "--out", under_a_file])
    assert result.exit_code == 2
    assert result.stderr == (f"topicflow: error: export {str(under_a_file)!r} (export --out) cannot be created: "
                             f"{str(out)!r} is a file, not a directory; choose a path whose parents are directories "
                             "(or remove that file).\n")


def test_overwrite_replaces_only_an_output_of_the_same_kind(made: dict[str, Path], tmp_path: Path,
                                                            local_cluster: object) -> None:
    other = tmp_path / "photos"
    other.mkdir()
    (other / "holiday.jpg").write_bytes(b"\xff\xd8")
    args = command_line("fit", other, made, local_cluster.scheduler_address)  # type: ignore[attr-defined]
    result = run([*args, "--overwrite"])
    assert result.exit_code == 2
    assert result.stderr == (f"topicflow: error: model {str(other)!r} (fit --model) is a directory that holds no "
                             "model (none of versions.json, model.json); --overwrite replaces only a model: choose "
                             "another path, or empty it first.\n")
    assert [p.name for p in other.iterdir()] == ["holiday.jpg"]


def test_fit_refuses_an_existing_doc_topics_output_before_fitting(made: dict[str, Path], tmp_path: Path,
                                                                  local_cluster: object) -> None:
    args = command_line("fit", tmp_path / "m", made, local_cluster.scheduler_address)  # type: ignore[attr-defined]
    result = run([*args, "--doc-topics", made["infer"]])
    assert result.exit_code == 2
    assert result.stderr == (f"topicflow: error: document-topic output {str(made['infer'])!r} (fit --doc-topics) "
                             "exists already; choose another path or pass --overwrite to replace it.\n")
    assert not (tmp_path / "m").exists()


# ----------------------------------------------------------------------------- on object storage


def test_infer_export_report_on_s3_equal_their_local_outputs(made: dict[str, Path], s3_bucket: str,
                                                              s3_server: Any, local_cluster: object) -> None:
    store, model = made["store"], made["model"]
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    url = f"s3://{s3_bucket}/out"
    ok(["infer", model, store, "--out", f"{url}/dt.zarr", "--scheduler", address])
    remote, on_disk = DocTopics.open(f"{url}/dt.zarr"), DocTopics.open(made["infer"])
    assert remote.parts == on_disk.parts and remote.topic_names == on_disk.topic_names
    for (remote_ids, remote_theta), (local_ids, local_theta) in zip(remote, on_disk):
        assert list(remote_ids) == list(local_ids)
        assert_array_equal(remote_theta, local_theta)
    assert_array_equal(remote.to_dask_array().compute(), on_disk.to_dask_array().compute())
    fs = s3_server.filesystem()
    assert not fs.exists(f"{s3_bucket}/out/dt.zarr/{PENDING}")

    ok(["export", model, "--out", f"{url}/m.npz"])
    with np.load(io.BytesIO(fs.cat_file(f"{s3_bucket}/out/m.npz"))) as a, np.load(made["export"]) as b:
        assert sorted(a.files) == sorted(b.files)
        for name in b.files:
            assert_array_equal(a[name], b[name])

    ok(["report", model, "--out", f"{url}/r.html"])

    def page(text: str) -> str:
        return re.sub(r"generated [^<]*? by", "generated by", text)  # the one line that holds the time

    assert page(fs.cat_file(f"{s3_bucket}/out/r.html").decode()) == page(made["report"].read_text())

    again = run(["infer", model, store, "--out", f"{url}/dt.zarr", "--scheduler", address])
    assert again.exit_code == 2
    assert again.stderr == (f"topicflow: error: document-topic output '{url}/dt.zarr' (infer --out) exists already; "
                            "choose another path or pass --overwrite to replace it.\n")
    into_a_file = run(["infer", model, store, "--out", f"{url}/m.npz", "--scheduler", address])
    assert into_a_file.exit_code == 2
    assert into_a_file.stderr == (f"topicflow: error: document-topic output '{url}/m.npz' (infer --out) is a file, "
                                  "but a document-topic output is a directory; remove the file or choose another "
                                  "path.\n")
    onto_a_prefix = run(["export", model, "--out", f"{url}/dt.zarr", "--overwrite"])
    assert onto_a_prefix.exit_code == 2
    assert onto_a_prefix.stderr == (f"topicflow: error: export '{url}/dt.zarr' (export --out) is a directory, but an "
                                    "export is a file; give the path of a file (it may be inside that directory) or "
                                    "choose another path.\n")


def test_unfinished_doc_topics_on_s3_are_replaced_and_foreign_objects_refused(
    made: dict[str, Path], s3_bucket: str, s3_server: Any, local_cluster: object,
) -> None:
    store, model = made["store"], made["model"]
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    fs = s3_server.filesystem()
    # What a killed `infer` leaves: PENDING and some parts, no root zarr.json (so no reader opens it).
    fs.pipe({f"{s3_bucket}/dt.zarr/{PENDING}": b"x", f"{s3_bucket}/dt.zarr/parts/000000/zarr.json": b"{}"})
    with pytest.raises(FileNotFoundError, match="no document-topic output"):
        DocTopics.open(f"s3://{s3_bucket}/dt.zarr")
    ok(["infer", model, store, "--out", f"s3://{s3_bucket}/dt.zarr", "--scheduler", address])
    assert len(list(DocTopics.open(f"s3://{s3_bucket}/dt.zarr"))) == 2

    fs.pipe(f"{s3_bucket}/mine/notes.txt", b"keep me")
    result = run(["infer", model, store, "--out", f"s3://{s3_bucket}/mine", "--overwrite", "--scheduler", address])
    assert result.exit_code == 2
    assert result.stderr == (f"topicflow: error: document-topic output 's3://{s3_bucket}/mine' (infer --out) is a "
                             "directory that holds no document-topic output (none of zarr.json); --overwrite replaces "
                             "only a document-topic output: choose another path, or empty it first.\n")
    assert fs.find(f"{s3_bucket}/mine") == [f"{s3_bucket}/mine/notes.txt"]


def trace_without_times(text: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in text.splitlines()]


def test_stream_checkpointed_on_s3_and_resumed_equals_the_uninterrupted_local_run(
    made: dict[str, Path], s3_bucket: str, s3_server: Any, local_cluster: object,
) -> None:
    url = f"s3://{s3_bucket}/olda"
    common = [*command_line("stream", url, made, local_cluster.scheduler_address),  # type: ignore[attr-defined]
              "--checkpoint-every", 1]
    first = ok([*common, "--max-docs", 20])
    assert first.stdout.splitlines()[-1].split()[1] == "20"
    resumed = ok([*common, "--resume"])
    assert resumed.stdout.splitlines()[-1].split()[1] == "40"
    fs = s3_server.filesystem()
    assert trace_without_times(fs.cat_file(f"{s3_bucket}/olda/trace.jsonl").decode()) == trace_without_times(
        (made["stream"] / "trace.jsonl").read_text())
    remote_info, remote_runs = read_stream_state(StoragePath(f"{url}/state"))
    local_info, local_runs = read_stream_state(made["stream"] / "state")
    assert remote_info["n_runs"] == local_info["n_runs"] == 1
    assert sorted(remote_runs[0][0]) == sorted(local_runs[0][0])
    for name, array in local_runs[0][0].items():
        assert_array_equal(remote_runs[0][0][name], array)
    remote_model, local_model = load_model(StoragePath(f"{url}/model")), load_model(made["stream"] / "model")  # type: ignore[arg-type]
    assert_array_equal(remote_model.state.topic_word_var["default"], local_model.state.topic_word_var["default"])
    # Each save put its runs under a new prefix and deleted the older ones after committing stream.json.
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{s3_bucket}/olda/state", refresh=True))[1:] == ["stream.json"]


@pytest.fixture
def memory_root() -> Iterator[str]:
    """A fresh root on fsspec's in-process filesystem (the commit logic is that of s3://, without its requests)."""
    import fsspec

    root = f"/tf-{uuid.uuid4().hex[:12]}"
    yield root
    fsspec.filesystem("memory").rm(root, recursive=True)


def test_stream_state_on_object_storage_survives_an_interrupted_save(memory_root: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec

    state = StoragePath(f"memory://{memory_root}/out/state")
    first = [({"counts": np.arange(6, dtype=np.int64).reshape(2, 3)}, {"kind": "olda", "position": 10})]
    write_stream_state(state, {"records": [1]}, first)

    def fail_at_commit(url: str) -> None:
        if url.endswith("/stream.json"):
            raise OSError("the process was killed here")

    monkeypatch.setattr(storage, "before_write", fail_at_commit)
    with pytest.raises(OSError, match="killed"):
        write_stream_state(state, {"records": [1, 2]}, [({"counts": np.zeros((2, 3), np.int64)}, {"position": 20})])
    monkeypatch.setattr(storage, "before_write", None)
    info, runs = read_stream_state(state)
    assert info["records"] == [1] and runs[0][1]["position"] == 10
    assert_array_equal(runs[0][0]["counts"], first[0][0]["counts"])
    assert len(fsspec.filesystem("memory").ls(f"{memory_root}/out/state")) == 2  # stream.json and the runs it names


def test_fit_checkpoint_on_object_storage_round_trips_and_survives_an_interrupted_write(
    made: dict[str, Path], memory_root: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On s3:// a checkpointed fit is run by tests/pipeline/test_models_on_s3.py."""
    saved = load_model(made["model"])
    path = StoragePath(f"memory://{memory_root}/m.checkpoint")
    fingerprint = {"method": "batch", "settings": {"n_topics": 2}}
    write_checkpoint(path, Checkpoint(saved.state, {"iteration": 1}, [{"elbo": -1.0}], fingerprint),
                     saved.vocabularies)

    def fail_at_latest(url: str) -> None:
        if url.endswith("/latest.json"):
            raise OSError("the process was killed here")

    monkeypatch.setattr(storage, "before_write", fail_at_latest)
    with pytest.raises(OSError, match="killed"):
        write_checkpoint(path, Checkpoint(saved.state, {"iteration": 2}, [{}, {}], fingerprint), saved.vocabularies)
    monkeypatch.setattr(storage, "before_write", None)
    found = read_checkpoint(path, fingerprint)
    assert found is not None and found.position == {"iteration": 1} and found.trace == [{"elbo": -1.0}]
    assert_array_equal(found.state.topic_word_var["default"], saved.state.topic_word_var["default"])
    write_checkpoint(path, Checkpoint(saved.state, {"iteration": 2}, [{}, {}], fingerprint), saved.vocabularies)
    assert read_checkpoint(path, fingerprint).position == {"iteration": 2}  # type: ignore[union-attr]
    assert read_checkpoint(Path(f"memory://{memory_root}/m.checkpoint"), fingerprint) is not None  # a collapsed URL
