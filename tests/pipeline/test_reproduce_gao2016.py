"""`topicflow reproduce gao2016` on a tiny generated store: the run, its claims, figures and trace."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.presets import get_preset
from topicflow.pipeline.reproduce import PAPERS, ReproduceRequest, gao2016
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())


@pytest.fixture(scope="module")
def ordered_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    counts = draw_planted_corpus(n_docs=90, n_topics=3, n_terms=40, doc_length=14, alpha=0.2, seed=3).counts["default"]
    root = tmp_path_factory.mktemp("gao")
    rng = np.random.default_rng(0)
    lines = []
    for d in range(counts.shape[0]):
        row = counts[d].toarray().ravel()
        words = [f"w{w:03d}" for w in np.flatnonzero(row) for _ in range(row[w])]
        rng.shuffle(words)
        lines.append(json.dumps({"id": f"d{d}", "text": " ".join(words)}))
    (root / "docs.jsonl").write_text("\n".join(lines) + "\n")
    ingest_corpus([root / "docs.jsonl"], root / "docs.zarr", tokenizer=NO_STOP, shard_size=24, keep_order=True)
    return root / "docs.zarr"


@pytest.mark.slow
def test_reproduce_gao2016_quick_on_a_tiny_store(ordered_store: Path, tmp_path: Path, local_cluster: object) -> None:
    out = tmp_path / "out"
    args = ["reproduce", "gao2016", "--corpus", str(ordered_store), "--out", str(out), "--format", "json",
            "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["paper"] == "gao2016" and payload["settings"]["n_train"] == 72
    assert "first half" in payload["settings"]["held_out"]
    claims = {c["claim"]: c for c in payload["claims"]}
    closeness = claims["With a good decay factor SGS comes close to batch CGS"]
    assert "CGS" in closeness["ours"] and closeness["held"] in (True, False)
    versus_svb = claims["SGS reaches a lower held-out perplexity than SVB at every minibatch size (decay 1)"]
    assert "SVB" in versus_svb["ours"] and versus_svb["held"] in (True, False)
    assert any(c.startswith("Reading: start posterior-document") for c in claims)
    assert any(c.startswith("DSGS") for c in claims)
    for name in payload["figures"]:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    rows = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    figures = {row["figure"] for row in rows}
    assert {"1", "1-2", "1-svb", "3a", "readings", "4"} <= figures
    sgs_rows = [r for r in rows if r["figure"] == "1-2"]
    assert all(np.isfinite(r["perplexity"]) and 1 < r["perplexity"] < 40 for r in sgs_rows)  # V = 40
    assert {r["batch_size"] for r in sgs_rows} == {64, 72}  # sizes above the 72 training documents are one minibatch
    assert (out / "claims.md").read_text().startswith("# Reproduction: gao2016")


def test_gao2016_scores_a_random_half_without_token_order(tmp_path: Path) -> None:
    counts = draw_planted_corpus(n_docs=30, n_topics=2, n_terms=20, doc_length=10, alpha=0.2, seed=1).counts["default"]
    store = write_test_store(tmp_path / "bag.zarr", {"default": counts}, shard_size=10)
    request = ReproduceRequest(corpora=[Corpus.open(store)], out=tmp_path)
    corpus, n_train, held, how = gao2016._split(request, gao2016.SCALES["quick"])
    # 80% is 24 documents; training stops at the last whole shard (SVB streams shards) before it.
    assert (n_train, held.start, held.stop, held.first_half) == (20, 24, 30, False)
    assert "random half" in how
    pairs = gao2016._completion_pairs(held)
    observed = sum(int(o.counts.sum()) for o, _ in pairs)
    scored = sum(int(h.counts.sum()) for _, h in pairs)
    assert observed + scored == int(counts[24:].sum())
    with pytest.raises(InvalidParameterError, match="one --corpus"):
        gao2016._split(ReproduceRequest(corpora=[corpus, corpus], out=tmp_path), gao2016.SCALES["quick"])


def test_first_half_split_observes_each_documents_first_tokens(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    held = gao2016.HeldOut(str(ordered_store), 72, 90, None, len(corpus.vocabulary()), True)
    pairs = gao2016._completion_pairs(held)
    ordered = [layer for _, layer in gao2016._read_range(corpus, 72, 90, ordered=True)]
    observed = np.vstack([o.to_csr().toarray() for o, _ in pairs])
    tokens = [layer.tokens[layer.indptr[d]:layer.indptr[d + 1]] for layer in ordered for d in range(layer.n_docs)]
    for d, doc in enumerate(tokens):
        first = np.bincount(doc[: int(np.floor(0.5 * len(doc) + 0.5))], minlength=observed.shape[1])
        np.testing.assert_array_equal(observed[d], first)


def test_preset_is_the_papers_settings() -> None:
    preset = get_preset("gao2016", "stream")
    settings = gao2016.SCALES["paper"]
    assert preset.settings["n_topics"] == settings.n_topics == 50
    assert preset.settings["doc_topic_prior"] == settings.alpha and preset.settings["topic_word_prior"] == settings.beta
    assert preset.settings["max_iter"] == settings.max_iter == 400 and preset.settings["patience"] == 10
    assert preset.settings["sgs_init"] == "posterior-token" and preset.settings["decay_beta"] is False
    assert "gao2016" in PAPERS


#: The smallest grid that still runs every kind of job inline: CGS, 4 SGS streams (2 with curves), 4
#: readings, Fig. 3a and SVB at 2 sizes (DSGS needs a cluster).
TINY = gao2016.GaoSettings(n_topics=3, max_iter=6, patience=3, batch_sizes=(24, 72), decays=(0.7, 1.0), cgs_sweeps=5,
                           curve_batch=24, max_test_docs=18, dsgs_workers=(), reading_batch=24, svb_max_iter=5)
#: Measured as the job ran, so a row read back keeps its first session's.
TIMING = {"seconds", "tokens_per_second"}
#: Claims whose numbers are wall times.
TIMED_CLAIMS = {"SGS and SVB converge within similar time",
                "SGS with small minibatches takes less time than batch CGS, and time grows with S",
                "SGS on an intermediate minibatch starts from a good point and converges in seconds"}


class Interrupted(BaseException):
    """Stands for Ctrl-C or the end of a session: not an error any code catches."""


def _without_timing(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def _trace(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]


def test_an_interrupted_run_resumes_to_the_uninterrupted_result(ordered_store: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = Corpus.open(ordered_store)
    monkeypatch.setattr(gao2016, "_plot", lambda *args: [])  # the quick test checks the figures; here: half the time

    def run(out: Path, *, resume: bool = False, seed: int = 0) -> gao2016.Reproduction:
        return gao2016.run_gao2016(ReproduceRequest(corpora=[corpus], out=out, seed=seed, resume=resume), TINY)

    whole = run(tmp_path / "whole")
    assert whole.settings["jobs_read_back"] == "0 of 12"
    real_arm, calls = gao2016.sgs_arm, []

    def sgs_arm(*args: object) -> dict[str, object]:
        calls.append(args[3])  # the batch size
        if len(calls) == 3:  # the third SGS stream (S=72, decay 0.7) is where the session ends
            raise Interrupted
        return real_arm(*args)

    monkeypatch.setattr(gao2016, "sgs_arm", sgs_arm)
    out = tmp_path / "out"
    with pytest.raises(Interrupted):
        run(out)
    assert sorted(p.name for p in (out / "jobs").iterdir()) == ["cgs.json", "sgs-S24-decay0.7.json",
                                                                "sgs-S24-decay1.json"]
    calls.clear()
    monkeypatch.setattr(gao2016, "sgs_arm", lambda *args: calls.append(args[3]) or real_arm(*args))
    resumed = run(out, resume=True)
    assert calls == [72, 72, 24, 24, 24, 24]  # the 2 other streams and 4 readings; nothing that finished ran again
    assert resumed.settings["jobs_read_back"].startswith("3 of 12 (resumed")
    assert _without_timing(_trace(out)) == _without_timing(_trace(tmp_path / "whole"))
    assert [c.claim for c in resumed.claims] == [c.claim for c in whole.claims]
    for ours, theirs in zip(resumed.claims, whole.claims, strict=True):
        if ours.claim not in TIMED_CLAIMS:
            assert ours == theirs
    saved = json.loads((out / "jobs" / "cgs.json").read_text())
    cgs = next(row for row in _trace(out) if row["figure"] == "1")
    assert saved["row"]["seconds"] == cgs["seconds"]  # the first session's timing, read back

    calls.clear()
    with pytest.raises(InvalidParameterError, match=r"cgs\.json was run with other settings \(params\.seed: 0 "
                                                    r"saved, 1 now\).*--overwrite"):
        run(out, resume=True, seed=1)
    assert calls == []  # refused before anything ran


#: Arguments each ``_counted`` job ran with (the cluster's workers are threads of this process).
RAN: list[int] = []


def _counted(value: int, fail: bool = False) -> dict[str, object]:
    RAN.append(value)
    if fail:
        raise ValueError(f"job {value} fails")
    return {"value": value, "square": np.int64(value) ** 2}


def test_run_jobs_saves_every_finished_job_and_resumes_the_rest(tmp_path: Path, client: object) -> None:
    def jobs(fail: bool, seed: int = 0) -> list[gao2016.Job]:
        tasks = [gao2016.Job(f"task-{v}", "t", {"seed": seed, "v": v}, _counted, (v, fail and v == 2))
                 for v in range(4)]
        return tasks + [gao2016.Job("driver", "d", {"seed": seed}, _counted, (9,), on_driver=True)]

    RAN.clear()
    with pytest.raises(ValueError, match="job 2 fails"):
        gao2016.run_jobs(jobs(fail=True), tmp_path, client)
    saved = {p.stem for p in (tmp_path / "jobs").iterdir()}
    assert "task-2" not in saved and "driver" not in saved  # on a cluster, whatever finished before the error
    assert saved <= {"task-0", "task-1", "task-3"} and (client is not None or saved == {"task-0", "task-1"})
    RAN.clear()
    rows, read_back = gao2016.run_jobs(jobs(fail=False), tmp_path, client, resume=True)
    assert read_back == len(saved) and sorted(RAN) == sorted({0, 1, 2, 3, 9} - {int(k[5:]) for k in saved})
    assert rows == [{"figure": "t", "value": v, "square": v * v} for v in range(4)] + [
        {"figure": "d", "value": 9, "square": 81}]
    assert all(type(row["square"]) is float for row in rows)  # NumPy numbers as the trace writes them, fresh or not
    RAN.clear()
    with pytest.raises(InvalidParameterError, match=r"task-0\.json was run with other settings \(seed: 0 saved, 1"):
        gao2016.run_jobs(jobs(fail=False, seed=1), tmp_path, client, resume=True)
    rows, read_back = gao2016.run_jobs(jobs(fail=False, seed=1), tmp_path, client)  # no --resume: all run again
    assert read_back == 0 and sorted(RAN) == [0, 1, 2, 3, 9] and len(rows) == 5
    (tmp_path / "jobs" / "driver.json").write_text("{")
    with pytest.raises(InvalidParameterError, match=r"driver\.json is not a saved gao2016 job"):
        gao2016.run_jobs(jobs(fail=False, seed=1), tmp_path, client, resume=True)
