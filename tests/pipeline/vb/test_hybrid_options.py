"""The hybrid E-step's start (``hybrid_init``) and alpha statistics (``hybrid_alpha_stats``) from the CLI,
the API and the drivers, and the ``zhai2014-hybrid`` preset (issue 18)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.api.lda import LDA
from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.pipeline.presets import get_preset
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, np.ndarray]:
    """One corpus of 120 documents written twice, in shards of 40 and of 25 documents."""
    base = tmp_path_factory.mktemp("hybrid-options")
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=30, doc_length=30, alpha=0.1, seed=4)
    counts = truth.counts["default"]
    return (write_test_store(base / "a.zarr", {"default": counts}, shard_size=40),
            write_test_store(base / "b.zarr", {"default": counts}, shard_size=25), counts)


def _settings(model: Path) -> dict[str, object]:
    return dict(load_model(model).info.settings or {})


def test_cli_options_and_preset_reach_the_model_and_match_the_api(
    planted: tuple[Path, Path, np.ndarray], tmp_path: Path, local_cluster: object
) -> None:
    store = planted[0]
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    model = tmp_path / "cli"
    args = ["fit", store, "--model", model, "--preset", "zhai2014-hybrid", "--topics", 3, "--batch-size", 30,
            "--hybrid-alpha-stats", "samples", "--scheduler", address]
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    settings = _settings(model)
    preset = get_preset("zhai2014-hybrid", "fit").settings
    assert (settings["n_topics"], settings["hybrid_alpha_stats"]) == (3, "samples")  # typed
    for key in ("estep", "burn_in", "samples", "hybrid_init"):
        assert settings[key] == preset[key]  # from the preset
    assert settings["doc_topic_prior"] == preset["doc_topic_prior"]

    from distributed import Client

    api = LDA.from_preset("zhai2014-hybrid", n_topics=3, batch_size=30, hybrid_alpha_stats="samples")
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        api.fit(str(store), client=client)
    loaded = LDA.load(model)
    np.testing.assert_array_equal(loaded.components_, api.components_)
    assert (loaded.hybrid_init, loaded.hybrid_alpha_stats) == ("random", "samples")
    assert loaded.get_params() == {**api.get_params(), "split_every": loaded.split_every}


def test_bad_choices_are_refused_with_the_allowed_values() -> None:
    with pytest.raises(InvalidParameterError, match="hybrid_init"):
        LDA(estep="hybrid", hybrid_init="uniform")._config()
    with pytest.raises(InvalidParameterError, match="hybrid_alpha_stats"):
        VBConfig(n_topics=2, estep="hybrid", hybrid_alpha_stats="last")  # type: ignore[arg-type]
    result = CliRunner().invoke(main, ["fit", "x.zarr", "--model", "m", "--topics", "2", "--hybrid-init", "zero"])
    assert result.exit_code == 2 and "'progressive', 'random'" in result.output


@pytest.mark.parametrize("init", ["progressive", "random"])
def test_batch_fit_does_not_depend_on_the_shards(planted: tuple[Path, Path, np.ndarray], init: str) -> None:
    """Draws are keyed by (seed, iteration, global document): 40- and 25-document shards give one model."""
    config = VBConfig(n_topics=3, estep="hybrid", hybrid_init=init, hybrid_alpha_stats="samples",  # type: ignore[arg-type]
                      max_iter=4, tol=0.0, seed=3)
    a = fit_batch_vb(Corpus.open(planted[0]), config).state
    b = fit_batch_vb(Corpus.open(planted[1]), config).state
    # The same draws; only the order of the float sums of the statistics follows the merge tree's shape.
    np.testing.assert_allclose(a.topic_word_var["default"], b.topic_word_var["default"], rtol=1e-12)
    np.testing.assert_allclose(a.doc_topic_prior, b.doc_topic_prior, rtol=1e-9)


def test_sampled_alpha_statistics_learn_a_smaller_alpha(planted: tuple[Path, Path, np.ndarray]) -> None:
    """psi(alpha + mean counts) >= mean psi(alpha + counts) (Jensen): the "mean" statistics overstate
    E[log theta] of the topics a document uses rarely, so their alpha optimum is larger."""
    alphas = {}
    for stats in ("mean", "samples"):
        config = VBConfig(n_topics=3, estep="hybrid", hybrid_alpha_stats=stats, max_iter=6, tol=0.0,  # type: ignore[arg-type]
                          doc_topic_prior_mode="auto", seed=1)
        alphas[stats] = fit_batch_vb(Corpus.open(planted[0]), config).state.doc_topic_prior.sum()
    assert alphas["samples"] < alphas["mean"]
