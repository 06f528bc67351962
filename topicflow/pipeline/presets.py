"""Named presets: the published settings of a seed paper, for ``fit`` or ``stream``.

A preset is a set of keyword settings under the Python API's names (the keywords of
:class:`topicflow.api.lda.LDA` for command ``"fit"``, of
:meth:`topicflow.pipeline.streaming.config.StreamConfig.create` for ``"stream"``). It fills the
settings the caller did not give: ``topicflow stream --preset may2014 --rejuv 0`` is the paper's
configuration with rejuvenation switched off, and ``StreamingLDA.from_preset("may2014",
rejuvenation_steps=0)`` the same in Python. Each entry says where its numbers come from; every place
where a preset departs from the printed paper is listed in the algorithm's docs page.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from topicflow.errors import InvalidParameterError

PresetCommand = Literal["fit", "stream"]


@dataclass(frozen=True)
class Preset:
    """One paper's settings for one command.

    Parameters
    ----------
    name : str
        The name given to ``--preset`` and ``from_preset``.
    command : {"fit", "stream"}
        The command (and estimator) the settings are for.
    settings : mapping
        Keyword settings under the Python API's names.
    source : str
        Where the numbers come from: the paper and its section or table.
    description : str
        One line for ``--help`` and the docs.
    """

    name: str
    command: PresetCommand
    settings: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    description: str = ""


def _entries(*presets: Preset) -> dict[tuple[str, str], Preset]:
    table: dict[tuple[str, str], Preset] = {}
    for preset in presets:
        key = (preset.name, preset.command)
        if key in table:
            raise ValueError(f"preset {preset.name!r} for {preset.command!r} is defined twice")
        table[key] = preset
    return table


#: Every preset, keyed by (name, command). Each paper adds its entries here.
PRESETS: dict[tuple[str, str], Preset] = _entries(
    Preset(
        name="gao2016", command="stream",
        settings=dict(algorithm="sgs", n_topics=50, doc_topic_prior=0.1, topic_word_prior=0.03, max_iter=400,
                      patience=10, decay=1.0, sgs_init="posterior-token", decay_beta=False),
        source="Gao, Chen & Zhu 2016, section 3.2 (setups) and 3.1 (progressive initialization)",
        description="Streaming Gibbs sampling as in Gao et al.'s experiments: K=50, alpha 0.1, beta 0.03, "
                    "at most 400 sweeps per minibatch, stop after 10 sweeps without a better training perplexity, "
                    "each minibatch started by sampling from the posterior token by token, decay 1 (Fig. 1; "
                    "their Fig. 2 varies it); the minibatch size is yours (--batch-size: they vary it from 50 up).",
    ),
    Preset(
        name="zhai2014-mrlda", command="fit",
        settings=dict(method="batch", n_topics=50, doc_topic_prior="auto", doc_topic_prior_init=1.0,
                      topic_word_prior=0.01, seed_strength=10.0, seed_off_topic=None, max_iter=40, tol=0.0),
        source="Zhai 2014 (dissertation), chapter 3 (Mr. LDA): section 3.3.1 informed prior eta = 10 for a "
               "seed word in its topic, 0.01 otherwise; section 3.4.3 K = 50, alpha started at 50/K (= 1) and "
               "updated by Newton-Raphson after every iteration, 40 iterations",
        description="Batch VB as Mr. LDA's experiments: K=50, asymmetric alpha learned from 50/K, eta 0.01, "
                    "informed prior 10 / 0.01 with --seed-words, 40 iterations.",
    ),
    Preset(
        name="zhai2014-hybrid", command="fit",
        settings=dict(estep="hybrid", burn_in=5, samples=10, hybrid_init="random", method="online",
                      batch_size=155, tau0=64.0, kappa=0.6, n_topics=50, doc_topic_prior=0.02),
        source="Zhai 2014 (dissertation), section 4.2 (z randomly initialised) and section 7.5 (online hybrid "
               "LDA: 10 samples after 5 burn-in sweeps, alpha = 1/K; Table 7.1: K = 50, S = 155, tau0 = 64, "
               "kappa = 0.6)",
        description="Online LDA with the hybrid Gibbs-within-VB E-step as Zhai's dissertation runs it: random "
                    "start of z, 5 burn-in and 10 kept sweeps, K=50, fixed alpha 1/K=0.02, S=155, tau0 64, "
                    "kappa 0.6.",
    ),
    Preset(
        name="may2014", command="stream",
        settings=dict(algorithm="pf", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.1, n_particles=100,
                      ess_threshold=0.2, resampling="multinomial", rejuvenation_steps=30,
                      rejuvenation_source="reservoir", reservoir_size=1000, init_docs=0.1, init_sweeps=200,
                      init_start="random", init_shared=True, init_trials=100, runs=30),
        source="May, Clemmer & Van Durme 2014, section 5 and footnote 3 (the Fig. 1 experiments)",
        description="The particle filter as May et al. ran it: T=3, alpha=beta=0.1, P=100, resample when "
                    "ESS < 20 of 100 (multinomial), 30 tokens rejuvenated from a 1000-token reservoir, one initial model "
                    "for all 30 runs (best of 100 Gibbs initializations, 200 sweeps from a random start "
                    "on the first 10% of the stream).",
    ),
    # Bleier, PCSVB0 (issue 19): the HDP by Algorithm 1 word by word with sec. 4's constants (for
    # `topicflow fit --family hdp` and `topicflow.HDP`), and its SCVB0 baseline (an LDA preset; K is not
    # printed in the paper: 100 here, the middle of the 50/100/200 that `topicflow reproduce bleier2016` runs).
    Preset(
        name="bleier2016", command="fit",
        settings=dict(family="hdp", method="pcsvb0", truncation=200, topic_word_prior=0.01, passes=30,
                      topic_word_step=(10.0, 1000.0), doc_step=(1.0, 10.0), hyper_step=(5.0, 100.0),
                      step_power=0.9, burn_in=0),
        source="Bleier, Practical collapsed stochastic variational inference for the HDP, sec. 4 (rho_t = "
               "s/(tau+t)^0.9 with (s, tau) = (10, 1000) for n_kw, (1, 10) for n_dk, (5, 100) for the sticks and "
               "hyperparameters; beta = 0.01; T = 200) and Fig. 1 (30 iterations); Algorithm 1 (word by word, "
               "no burn-in)",
        description="PCSVB0 as Bleier ran it: the HDP word by word, T=200, beta 0.01, step sizes (10, 1000), "
                    "(1, 10), (5, 100) with power 0.9, 30 passes; alpha and gamma learned from 1.",
    ),
    Preset(
        name="bleier2016-scvb0", command="fit",
        settings=dict(method="scvb0", n_topics=100, doc_topic_prior=0.1, topic_word_prior=0.01, passes=30,
                      batch_size=None, topic_word_step=(10.0, 1000.0), doc_step=(1.0, 10.0)),
        source="Bleier sec. 4 (SCVB0 with alpha = 0.1, beta = 0.01, the same step sizes; K not printed); "
               "Foulds, Boyles, DuBois, Smyth & Welling 2013 (the algorithm)",
        description="SCVB0, Bleier's baseline: LDA word by word, K=100, alpha 0.1, beta 0.01, step sizes "
                    "(10, 1000) and (1, 10) with power 0.9, 30 passes, Foulds' one burn-in pass per document "
                    "(as `topicflow reproduce bleier2016` runs it).",
    ),
    # Canini, Shi & Griffiths 2009, sec. 5.2 (diff-3 / rel-3 / sim-3 settings). The initialization prefix is
    # "the first 10% of the documents": set init_docs to 10% of your stream (`topicflow reproduce canini2009`
    # does); the paper prints no sweep count for it, so init_sweeps keeps its default.
    Preset(
        name="canini2009", command="stream",
        settings=dict(algorithm="pf", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.1, n_particles=100,
                      ess_threshold=0.2, resampling="residual", rejuvenation_steps=30,
                      rejuvenation_source="history", independent_samples=100, heldout_mode="next_docs"),
        source="Canini, Shi & Griffiths 2009, sec. 3.4 (residual resampling) and 5.2 (P=100, ESS 20, |R(i)|=30 "
               "uniform over 1..i, alpha=beta=0.1, K=3 for diff-3/rel-3/sim-3, 100 independent samples)",
        description="Canini et al.'s particle filter: P=100, resample when ESS < 20, residual resampling, 30 "
                    "history tokens rejuvenated per particle after each resampling, K=3, alpha=beta=0.1; test "
                    "documents scored as the next documents.",
    ),
    Preset(
        name="canini2009-incgibbs", command="stream",
        settings=dict(algorithm="incgibbs", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.1,
                      rejuvenation_steps=4, rejuvenation_source="history", independent_samples=100,
                      heldout_mode="next_docs"),
        source="Canini, Shi & Griffiths 2009, sec. 5.2 (|R(i)|=4 uniform over 1..i, best of 100 samples)",
        description="Canini et al.'s incremental Gibbs sampler: 4 history tokens redrawn after every token, "
                    "the best of 100 independent samples, K=3, alpha=beta=0.1.",
    ),
    Preset(
        name="canini2009-olda", command="stream",
        settings=dict(algorithm="olda", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.1,
                      rejuvenation_source="history", independent_samples=100, heldout_mode="next_docs"),
        source="Canini, Shi & Griffiths 2009, sec. 3.2 and 5.2 (best of 100 samples)",
        description="o-LDA as Canini et al. ran it: the best of 100 independent samples, K=3, alpha=beta=0.1.",
    ),
)


#: Tree-LDA presets (``topicflow fit --prior-tree TREE --preset NAME``, ``TreeLDA.from_preset``): keyword
#: settings of :class:`topicflow.api.tree_lda.TreeLDA` plus ``family="tree_lda"``. They are kept apart
#: from :data:`PRESETS`, whose entries are LDA, HDP and streaming settings, because they need a prior tree
#: and are checked against TreeLDA (tests/api/test_tree_lda.py); the lookups below see both tables.
TREE_PRESETS: dict[tuple[str, str], Preset] = _entries(
    Preset(
        name="zhai2014-ptlda", command="fit",
        settings=dict(family="tree_lda", n_topics=10, alpha=0.01, inference="hybrid", burn_in=5, samples=5,
                      normalization="node"),
        source="Zhai 2014 (dissertation), chapter 5: sec. 5.2.3 (hybrid E-step with B = 5 burn-in and M = 5 kept "
               "sweeps, Mimno et al. 2012's settings; z randomly initialised as in sec. 4.2), sec. 5.3 (K = 10 "
               "topics and alpha = 0.01, as Eidelman et al. 2012), eq. 5.1 (one Dirichlet per internal node)",
        description="ptLDA as chapter 5 runs it: K=10, fixed alpha 0.01, hybrid inference (Gibbs within VB, 5 "
                    "burn-in and 5 kept sweeps from a random start), the chapter's per-node normalization; give "
                    "--inference vb or gibbs for the chapter's other two schemes.",
    ),
)


#: Infinite-vocabulary LDA presets (``topicflow fit --family infvoc --preset NAME``, ``InfVocLDA.from_preset``):
#: keyword settings of :class:`topicflow.api.infvoc.InfVocLDA` plus ``family="infvoc"``, kept apart from
#: :data:`PRESETS` for the same reason as :data:`TREE_PRESETS` (they are checked against InfVocLDA in
#: tests/api/test_infvoc.py). alpha^theta is left unset: the estimator's default is 1/K (sec. 7.5), so it
#: follows an overridden K.
INFVOC_PRESETS: dict[tuple[str, str], Preset] = _entries(
    Preset(
        name="zhai2014-infvoc", command="fit",
        settings=dict(family="infvoc", n_topics=50, alpha_beta=3000.0, truncation=40000, reorder_every=10,
                      batch_size=155, tau0=64.0, kappa=0.6, burn_in=5, samples=5),
        source="Zhai 2014 (dissertation), chapter 7: Table 7.1 (20 Newsgroups, K = 50, S = 155, alpha^beta = 3k, "
               "T = 40k, U = 10, tau0 = 64, kappa = 0.6), sec. 7.5 (alpha^theta = 1/K; hybrid E-step with 10 "
               "samples after 5 burn-in, read as B = 5 discarded and M = 5 kept sweeps: spec pitfall P7)",
        description="infvoc as chapter 7's 20 Newsgroups classification runs it: K=50, S=155, alpha^beta 3000, "
                    "T=40000, U=10, tau0 64, kappa 0.6, alpha^theta 1/K, 5 burn-in and 5 kept sweeps; one pass in "
                    "store order (ingest the documents sorted by date).",
    ),
    Preset(
        name="zhai2014-infvoc-denews", command="fit",
        settings=dict(family="infvoc", n_topics=10, alpha_beta=2000.0, truncation=4000, reorder_every=20,
                      batch_size=245, tau0=64.0, kappa=0.6, burn_in=5, samples=5),
        source="Zhai 2014 (dissertation), chapter 7: Fig. 7.6(a) (de-news, K = 10, S = 245, tau0 = 64, kappa = "
               "0.6) with the top of footnote 4's grid (alpha^beta in {1k, 2k}: 2k; T in {3k, 4k}: 4k; U in "
               "{10, 20}: 20, since sec. 7.5 finds that a larger U helps); the grid point chosen for the figure is "
               "not printed",
        description="infvoc on de-news-sized corpora as Fig. 7.6(a): K=10, S=245, alpha^beta 2000, T=4000, "
                    "U=20, tau0 64, kappa 0.6, alpha^theta 1/K, 5 burn-in and 5 kept sweeps.",
    ),
)


def _all_presets() -> dict[tuple[str, str], Preset]:
    return {**PRESETS, **TREE_PRESETS, **INFVOC_PRESETS}


def is_infvoc_preset(name: str | None) -> bool:
    """Whether ``name`` is an infinite-vocabulary LDA preset of ``fit`` (:data:`INFVOC_PRESETS`).

    Parameters
    ----------
    name : str or None

    Returns
    -------
    bool
    """
    return (name, "fit") in INFVOC_PRESETS


def is_tree_preset(name: str | None) -> bool:
    """Whether ``name`` is a tree-LDA preset of ``fit`` (:data:`TREE_PRESETS`).

    Parameters
    ----------
    name : str or None

    Returns
    -------
    bool
    """
    return (name, "fit") in TREE_PRESETS


def preset_names(command: PresetCommand) -> tuple[str, ...]:
    """The names of the presets of one command, sorted.

    Parameters
    ----------
    command : {"fit", "stream"}
        The command.

    Returns
    -------
    tuple of str
    """
    return tuple(sorted(name for name, kind in _all_presets() if kind == command))


def get_preset(name: str, command: PresetCommand) -> Preset:
    """The preset ``name`` of ``command``.

    Parameters
    ----------
    name : str
        A preset name.
    command : {"fit", "stream"}
        The command it is used with.

    Returns
    -------
    Preset

    Raises
    ------
    InvalidParameterError
        No such preset for this command (the message lists the ones there are).
    """
    table = _all_presets()
    try:
        return table[(name, command)]
    except KeyError:
        others = sorted(kind for preset_name, kind in table if preset_name == name)
        where = f" (it is a preset of {', '.join(others)})" if others else ""
        raise InvalidParameterError(
            f"no preset {name!r} for {command}{where}; the presets of {command} are: "
            f"{', '.join(preset_names(command)) or 'none'}") from None


def with_preset(name: str | None, command: PresetCommand, given: Mapping[str, Any]) -> dict[str, Any]:
    """The preset's settings overridden by the ones the caller gave.

    Parameters
    ----------
    name : str or None
        A preset name; None returns ``given`` unchanged.
    command : {"fit", "stream"}
        The command.
    given : mapping
        Settings the caller chose explicitly (they win over the preset's).

    Returns
    -------
    dict
        The merged settings.

    Examples
    --------
    >>> with_preset("gao2016", "stream", {"decay": 0.5})["decay"]
    0.5
    """
    if name is None:
        return dict(given)
    return {**get_preset(name, command).settings, **given}
