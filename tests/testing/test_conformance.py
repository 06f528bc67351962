"""The conformance machinery itself: comparisons, snapshot checks, hook checking and its docstrings.

The suites are exercised by every family's tests (tests/**/test_conformance.py); this file checks the
helpers they rest on catch what they must, so a family whose suite passes really has the properties.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from tests.test_docstrings import CORE_CHECKS, _public_objects, _violations
from topicflow.testing.conformance import (
    MergeableTests,
    SamplerTests,
    assert_close,
    assert_identical,
    check_snapshot_form,
    store_and_load,
)


@dataclass(frozen=True)
class Pair:
    values: np.ndarray
    total: float
    count: int


def nested(total: float = 1.5, values: Any = None) -> dict[str, Any]:
    values = np.array([[1.0, 2.0]]) if values is None else values
    return {"a": Pair(values, total, 3), "b": [np.arange(3), "x", None], "ids": np.array(["d1", "d2"], dtype=object)}


def test_identical_values_pass_and_the_first_difference_is_named() -> None:
    assert_identical(nested(), nested())
    assert_identical(nested(float("nan")), nested(float("nan")))
    with pytest.raises(AssertionError, match=r"value\['a'\]\.total: 0\.0 != -0\.0"):
        assert_identical(nested(0.0), nested(-0.0))
    with pytest.raises(AssertionError, match=r"value\['a'\]\.values: 1 of 2 entries differ; first at \(0, 1\)"):
        assert_identical(nested(values=np.array([[1.0, 2.0000000000000004]])), nested())
    with pytest.raises(AssertionError, match=r"dtype/shape float32\(1, 2\) != float64\(1, 2\)"):
        assert_identical(nested(values=np.array([[1.0, 2.0]], dtype=np.float32)), nested())
    with pytest.raises(AssertionError, match=r"keys differ: only in actual \['c'\], only in expected \[\]"):
        assert_identical({**nested(), "c": 1}, nested())
    with pytest.raises(AssertionError, match=r"value\['ids'\]"):
        assert_identical({**nested(), "ids": np.array(["d1", "d3"], dtype=object)}, nested())
    with pytest.raises(AssertionError, match=r"\(int\) != 1\.0 \(float\)"):
        assert_identical({"n": 1}, {"n": 1.0})
    assert_identical(nested(0.0), nested(-0.0), ignore=frozenset({"total"}))


def test_close_values_pass_within_tolerance_only() -> None:
    assert_close(nested(1.5 + 1e-13), nested(), rtol=1e-12, atol=0.0)
    with pytest.raises(AssertionError, match="total"):
        assert_close(nested(1.5 + 1e-9), nested(), rtol=1e-12, atol=0.0)
    with pytest.raises(AssertionError, match="values"):
        assert_close(nested(values=np.array([[1.0, 2.1]])), nested(), rtol=1e-3, atol=0.0)
    with pytest.raises(AssertionError, match="count: 4 != 3"):
        assert_close({"a": Pair(np.array([[1.0, 2.0]]), 1.5, 4)}, {"a": nested()["a"]}, rtol=1.0, atol=1.0)


def test_snapshot_form_accepts_numbers_and_json_and_refuses_the_rest() -> None:
    arrays = {"counts": np.arange(6, dtype=np.int32).reshape(2, 3), "weights": np.array([0.25, 0.75])}
    meta = {"kind": "x", "params": {"n_topics": 2, "prior": [0.1, 0.2]}, "seed": 3}
    check_snapshot_form(arrays, meta)
    for bad_arrays, message in (({"ids": np.array(["a"], dtype=object)}, "Python objects"),
                                ({"w": [1.0, 2.0]}, "expected a numpy ndarray"),
                                ({3: np.zeros(1)}, "is not a str")):
        with pytest.raises(AssertionError, match=message):
            check_snapshot_form(bad_arrays, meta)
    for bad_meta, message in (({"shape": (2, 3)}, "changes through JSON"), ({"n": np.int64(2)}, "not strict JSON"),
                              ({"x": float("nan")}, "not strict JSON"), ({1: "a"}, "str keys")):
        with pytest.raises(AssertionError, match=message):
            check_snapshot_form(arrays, bad_meta)
    loaded, loaded_meta = store_and_load(arrays, meta)
    assert_identical((loaded, loaded_meta), (arrays, meta))
    assert not any(np.shares_memory(loaded[name], arrays[name]) for name in arrays)


def test_a_test_class_missing_hooks_fails_at_definition() -> None:
    with pytest.raises(TypeError, match=r"TestForgetful subclasses MergeableTests but does not define the "
                                        r"hook\(s\) make_corpus, stats_of, zeros"):
        class TestForgetful(MergeableTests):
            def make_stats(self, draw: Any, shape: Any) -> Any:
                return 0

    class HalfDone(SamplerTests):  # an intermediate base may leave hooks to its subclasses
        def observe(self, state: Any, step: Any, params: Any) -> Any:
            return state

    with pytest.raises(TypeError, match=r"SamplerTests but does not define the hook\(s\) from_snapshot, "
                                        r"make_stream, to_snapshot"):
        class TestHalfDone(HalfDone):
            pass
    assert HalfDone.__name__ == "HalfDone"


@pytest.mark.parametrize("module_name", ["topicflow.testing.conformance", "topicflow.testing.strategies"])
def test_suites_and_strategies_pass_the_numpydoc_checks(module_name: str) -> None:
    # tests/test_docstrings.py skips topicflow.testing (test support); the suites document the hooks a
    # family implements, so their docstrings (and every public suite method's) are checked here.
    module = importlib.import_module(module_name)
    names = list(_public_objects(module))
    for name in list(names):
        obj = getattr(module, name.rsplit(".", 1)[1])
        if inspect.isclass(obj):
            names += [f"{module_name}.{obj.__qualname__}.{attr}" for attr, value in vars(obj).items()
                      if not attr.startswith("_") and inspect.isfunction(value)]
    problems = _violations(names, CORE_CHECKS)
    assert len(names) > 10 and not problems, "\n".join(problems)
