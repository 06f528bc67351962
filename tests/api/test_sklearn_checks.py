"""scikit-learn's estimator checks over LDA.

Every check scikit-learn yields for LDA (the API checks, the legacy ones and the transformer ones:
48 with scikit-learn 1.9) applies and passes. That holds because LDA's tags say what its documents
are: ``positive_only`` and ``categorical`` make the checks feed rounded non-negative integers, i.e.
counts (scikit-learn has no tag for count data; ``categorical`` is the one that rounds). Fed the
checks' default data, uniform floats, fit refuses every matrix as not counts (see
test_float_data_is_refused_as_not_counts), which is the behaviour the checks would then call a
failure.

The list of checks comes from ``estimator_checks_generator``, the generator behind
``parametrize_with_checks``, with ``EXPECTED_FAILED_CHECKS`` marked as strict xfails (it is empty:
nothing is expected to fail). One check is not run in this process: ``check_array_api_input``
needs ``SCIPY_ARRAY_API=1`` set before scipy is first imported, which would change scipy for every
other test of the session, so it runs in a subprocess with that setting instead of being skipped.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from sklearn.utils.estimator_checks import estimator_checks_generator

from topicflow import LDA
from topicflow.errors import InputError

#: Small, fast settings: the checks fit dozens of times on 10 to 40 tiny documents.
CHECKED = LDA(n_topics=2, max_iter=3, max_doc_iter=20)
#: Checks expected to fail, with the reason (run as strict xfails): none.
EXPECTED_FAILED_CHECKS: dict[str, str] = {}
#: Checks run in a subprocess below rather than in this process, with the reason.
RUN_IN_SUBPROCESS = {
    "check_array_api_input": "needs SCIPY_ARRAY_API=1 before scipy is imported (it would change scipy for the "
                             "whole test session)",
}


def check_name(check: Callable[..., Any]) -> str:
    """Name of a check, also when it is a ``functools.partial`` of one."""
    return check.func.__name__ if isinstance(check, partial) else check.__name__


def check_id(value: Any) -> str:
    if callable(value) and not isinstance(value, LDA):
        keywords = value.keywords if isinstance(value, partial) else {}
        return check_name(value) + "".join(f"({k}={v})" for k, v in keywords.items())
    return type(value).__name__


def _checks() -> list[Any]:
    generated = estimator_checks_generator(CHECKED, legacy=True, expected_failed_checks=EXPECTED_FAILED_CHECKS,
                                           mark="xfail", xfail_strict=True)
    out = []
    with warnings.catch_warnings():
        # On purpose: topicflow does not depend on scikit-learn at run time, so LDA cannot inherit
        # sklearn.base.BaseEstimator; TopicModelEstimator implements what the checks look for.
        warnings.filterwarnings("ignore", message="Estimator LDA does not inherit from `sklearn.base.BaseEstimator`")
        for item in generated:
            check = item.values[1] if hasattr(item, "values") else item[1]
            if check_name(check) not in RUN_IN_SUBPROCESS:
                out.append(item)
    return out


CHECKS = _checks()


@pytest.mark.parametrize(("estimator", "check"), CHECKS, ids=check_id)
def test_scikit_learn_check(estimator: LDA, check: Callable[[LDA], None]) -> None:
    check(estimator)


def test_the_checks_are_all_there() -> None:
    names = {check_name(item.values[1] if hasattr(item, "values") else item[1]) for item in CHECKS}
    for expected in ("check_estimator_cloneable", "check_no_attributes_set_in_init", "check_fit_score_takes_y",
                     "check_n_features_in_after_fitting", "check_transformer_general", "check_estimators_nan_inf",
                     "check_estimator_sparse_matrix", "check_fit_idempotent", "check_estimators_pickle"):
        assert expected in names
    assert len(CHECKS) >= 45
    assert set(EXPECTED_FAILED_CHECKS) <= names


SUBPROCESS_CHECK = """
from sklearn.utils.estimator_checks import estimator_checks_generator
from topicflow import LDA
ran = 0
for estimator, check in estimator_checks_generator(LDA(n_topics=2, max_iter=3, max_doc_iter=20), legacy=True):
    if getattr(check, "func", check).__name__ in {names!r}:
        check(estimator)
        ran += 1
print("ran", ran)
"""


def test_array_api_check_in_a_subprocess() -> None:
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    code = SUBPROCESS_CHECK.format(names=set(RUN_IN_SUBPROCESS))
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "1"  # the check ran (it raises SkipTest without SCIPY_ARRAY_API)


def test_float_data_is_refused_as_not_counts() -> None:
    X = np.random.default_rng(0).uniform(size=(10, 3))
    with pytest.raises(InputError, match="counts must be non-negative integers"):
        LDA(n_topics=2).fit(X)
