"""Conformance suites every model family inherits: statistics, E-step, snapshots and streaming samplers.

Test support only (imports hypothesis and dask; the library never imports this module). It owns the
properties the pipeline relies on for any model family, written once as base test classes, the way
zarr ships ``StoreTests`` for every store to subclass. A family's test module subclasses a suite under a
name starting with ``Test`` and defines the suite's *hooks*; pytest then collects every inherited test:

:class:`MergeableTests`
    Sufficient statistics form a monoid: ``zeros`` is the exact identity, ``merge`` is commutative and
    associative (up to a stated tolerance), the k-way ``merge_all`` a tree node uses has the bits of the
    left fold, the tree reduction gives the same bits in memory and as a Dask graph, and merging the
    statistics of any split of a corpus equals the statistics of the whole.
:class:`EStepTests`
    The fast E-step matches a plain NumPy reference on small blocks and on the edge cases (empty
    document, single-term documents, one topic, one document), does not depend on how documents are
    split into blocks, and does not modify its inputs.
:class:`SnapshotTests`
    A state's snapshot holds only numeric arrays and strict-JSON metadata, and survives npz + JSON
    storage bit for bit.
:class:`SamplerTests`
    A streaming sampler saved after some steps and restored continues exactly as the uninterrupted one,
    and continuing never changes a snapshot already taken. :class:`SplitInvariantSamplerTests` adds that
    observing one block or the same documents in several blocks gives the same state.

Hooks are plain methods of the subclass (never placeholders here): a ``Test*`` subclass that misses one
fails at import with the list of missing hooks. Hooks that receive ``draw`` get hypothesis' draw
function (``data.draw``), so they can use :mod:`topicflow.testing.strategies`. The comparison helpers
:func:`assert_identical` and :func:`assert_close` walk dataclasses, named tuples, mappings, sequences,
arrays and scalars, and name the first field that differs.

Example (the variational LDA family, abridged from ``tests/models/lda/vb/test_conformance.py``)::

    class TestVBStatsMergeable(MergeableTests):
        def make_shape(self, draw):
            return draw(st.integers(1, 4))                       # n_topics shared by all parts
        def make_stats(self, draw, shape):
            return draw(strategies.estep_stats(shape))
        def zeros(self, shape):
            return EStepStats.zeros(shape, ["default"])
        ...
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import io
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

import dask
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow.models.common.blocks import DocBlock, concat_blocks
from topicflow.tasks.reduce import tree_reduce, tree_reduce_now
from topicflow.testing.strategies import (
    cut_documents,
    document_cuts,
    multilingual_blocks,
    n_docs_of,
)

#: hypothesis' draw function as hooks receive it: ``draw(strategy) -> value``.
Draw = Callable[[st.SearchStrategy[Any]], Any]

#: A snapshot: named numeric arrays and JSON-able metadata (``topicflow.io.models.stream_state.RunState``).
Snapshot = tuple[dict[str, np.ndarray], dict[str, Any]]


def suite_settings(max_examples: int) -> settings:
    """Return the hypothesis settings of the suites: no deadline, one test body shared by many classes.

    Parameters
    ----------
    max_examples : int
        Examples per test and family (kept small: every family runs every suite test).

    Returns
    -------
    hypothesis.settings
        ``deadline=None`` (tests never depend on timing) and the ``differing_executors`` health check
        off, since every subclass runs the same inherited test function.
    """
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.differing_executors])


# ----------------------------------------------------------------------------------- comparisons


def _category(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "str"
    return type(value).__qualname__


def _differences(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Positions where two arrays of one dtype and shape differ (bits for floats: sign of zero, NaN)."""
    if actual.dtype.kind == "f":
        same = (actual == expected) & (np.signbit(actual) == np.signbit(expected))
        same |= np.isnan(actual) & np.isnan(expected)
        return np.argwhere(~same)
    if actual.dtype.hasobject:
        flat = np.array([a != b or type(a) is not type(b) for a, b in zip(actual.ravel(), expected.ravel())],
                        dtype=bool)
        return np.argwhere(flat.reshape(actual.shape))
    return np.argwhere(actual != expected)


def _compare_arrays(actual: np.ndarray, expected: np.ndarray, path: str,
                    tolerance: tuple[float, float] | None) -> None:
    if not isinstance(actual, np.ndarray) or not isinstance(expected, np.ndarray):
        raise AssertionError(f"{path}: {type(actual).__name__} and {type(expected).__name__}, expected two arrays")
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        raise AssertionError(f"{path}: dtype/shape {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}")
    if tolerance is not None and actual.dtype.kind in "fc":
        rtol, atol = tolerance
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=path)
        return
    if actual.dtype.hasobject or actual.tobytes() != expected.tobytes():
        where = _differences(actual, expected)
        if where.shape[0] == 0 and not actual.dtype.hasobject:
            raise AssertionError(f"{path}: arrays differ in their bits (NaN payloads)")
        if where.shape[0]:
            first = tuple(int(i) for i in where[0])
            raise AssertionError(
                f"{path}: {where.shape[0]} of {actual.size} entries differ; first at {first}: "
                f"{actual[first]!r} != {expected[first]!r}"
            )


def _compare_floats(actual: Any, expected: Any, path: str, tolerance: tuple[float, float] | None) -> None:
    a, b = float(actual), float(expected)
    if math.isnan(a) and math.isnan(b):
        return
    if tolerance is None:
        if np.float64(a).tobytes() != np.float64(b).tobytes():
            raise AssertionError(f"{path}: {a!r} != {b!r} (bit-exact comparison)")
        return
    rtol, atol = tolerance
    if not abs(a - b) <= atol + rtol * abs(b):
        raise AssertionError(f"{path}: {a!r} != {b!r} (rtol={rtol!r}, atol={atol!r})")


def _compare(actual: Any, expected: Any, path: str, tolerance: tuple[float, float] | None,
             ignore: frozenset[str]) -> None:
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        if type(actual) is not type(expected):
            raise AssertionError(f"{path}: {type(actual).__qualname__} != {type(expected).__qualname__}")
        for field in dataclasses.fields(expected):
            if field.name not in ignore:
                _compare(getattr(actual, field.name), getattr(expected, field.name), f"{path}.{field.name}",
                         tolerance, ignore)
    elif isinstance(expected, tuple) and hasattr(expected, "_fields"):  # a named tuple
        if type(actual) is not type(expected):
            raise AssertionError(f"{path}: {type(actual).__qualname__} != {type(expected).__qualname__}")
        for name in expected._fields:
            if name not in ignore:
                _compare(getattr(actual, name), getattr(expected, name), f"{path}.{name}", tolerance, ignore)
    elif isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            raise AssertionError(f"{path}: {type(actual).__qualname__}, expected a mapping")
        if set(actual) != set(expected):
            only_actual = "[" + ", ".join(sorted(map(repr, set(actual) - set(expected)))) + "]"
            only_expected = "[" + ", ".join(sorted(map(repr, set(expected) - set(actual)))) + "]"
            raise AssertionError(f"{path}: keys differ: only in actual {only_actual}, only in expected {only_expected}")
        for key in sorted(expected, key=repr):
            if key not in ignore:
                _compare(actual[key], expected[key], f"{path}[{key!r}]", tolerance, ignore)
    elif isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        _compare_arrays(actual, expected, path, tolerance)
    elif isinstance(expected, (list, tuple)):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            raise AssertionError(f"{path}: {type(actual).__qualname__} of length {len(actual)} != "
                                 f"{type(expected).__qualname__} of length {len(expected)}")
        for i, (a, b) in enumerate(zip(actual, expected)):
            _compare(a, b, f"{path}[{i}]", tolerance, ignore)
    elif _category(actual) != _category(expected):
        raise AssertionError(f"{path}: {actual!r} ({_category(actual)}) != {expected!r} ({_category(expected)})")
    elif _category(expected) == "float":
        _compare_floats(actual, expected, path, tolerance)
    elif not actual == expected:
        raise AssertionError(f"{path}: {actual!r} != {expected!r}")


def assert_identical(actual: Any, expected: Any, *, ignore: frozenset[str] = frozenset(),
                     path: str = "value") -> None:
    """Assert two values are equal bit for bit, field by field.

    Parameters
    ----------
    actual, expected : object
        Dataclasses (compared field by field, of the same class), named tuples, mappings (same keys),
        lists and tuples, ndarrays (same dtype, shape and bytes; object arrays element by element) and
        scalars (floats by their bits, so ``0.0 != -0.0`` and NaN equals NaN; ints exactly).
    ignore : frozenset of str, optional
        Field names and mapping keys to skip at any depth.
    path : str, default "value"
        Name of the value in the error message.

    Raises
    ------
    AssertionError
        Naming the first path that differs, e.g. ``stats.topic_terms['en'].values``.

    Examples
    --------
    >>> assert_identical({"a": np.array([1.0, 2.0])}, {"a": np.array([1.0, 2.0])})
    """
    _compare(actual, expected, path, None, frozenset(ignore))


def assert_close(actual: Any, expected: Any, *, rtol: float, atol: float, ignore: frozenset[str] = frozenset(),
                 path: str = "value") -> None:
    """Assert two values are equal up to float tolerance, field by field.

    Structure, dtypes, shapes and integers must match exactly; floats (scalars and float arrays) must
    satisfy ``|actual - expected| <= atol + rtol * |expected|``.

    Parameters
    ----------
    actual, expected : object
        As in :func:`assert_identical`.
    rtol, atol : float
        Relative and absolute tolerance of floats.
    ignore : frozenset of str, optional
        Field names and mapping keys to skip at any depth.
    path : str, default "value"
        Name of the value in the error message.

    Raises
    ------
    AssertionError
        Naming the first path that differs.
    """
    _compare(actual, expected, path, (rtol, atol), frozenset(ignore))


def check_snapshot_form(arrays: Any, meta: Any, *, where: str = "snapshot") -> None:
    """Assert a snapshot holds only numeric ndarrays under str names, and strict-JSON metadata.

    Parameters
    ----------
    arrays : object
        Must be a mapping of str to ndarray without Python objects (saved with ``allow_pickle=False``).
    meta : object
        Must be a mapping of str that survives ``json.dumps(allow_nan=False)`` and ``json.loads``
        unchanged (no tuples, numpy scalars, NaN or objects).
    where : str, default "snapshot"
        Name used in the error message.

    Raises
    ------
    AssertionError
        Naming the offending entry.
    """
    if not isinstance(arrays, Mapping):
        raise AssertionError(f"{where}: arrays are a {type(arrays).__qualname__}, expected a mapping")
    for name, array in arrays.items():
        if not isinstance(name, str):
            raise AssertionError(f"{where}: array name {name!r} is not a str")
        if type(array) is not np.ndarray:
            raise AssertionError(f"{where}: {name!r} is a {type(array).__qualname__}, expected a numpy ndarray")
        if array.dtype.hasobject:
            raise AssertionError(f"{where}: {name!r} holds Python objects ({array.dtype}); snapshots hold numbers")
    if not isinstance(meta, Mapping) or not all(isinstance(key, str) for key in meta):
        raise AssertionError(f"{where}: metadata must be a mapping with str keys, got {meta!r}")
    try:
        text = json.dumps(meta, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise AssertionError(f"{where}: metadata is not strict JSON: {error}") from error
    if json.loads(text) != meta:
        raise AssertionError(f"{where}: metadata changes through JSON (tuples or numpy scalars?): {meta!r}")


def store_and_load(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Snapshot:
    """Send a snapshot through npz and JSON in memory, as :mod:`topicflow.io.models.stream_state` stores it.

    Parameters
    ----------
    arrays : mapping of str to ndarray
    meta : mapping of str to object

    Returns
    -------
    arrays : dict of str to ndarray
        Loaded with ``allow_pickle=False`` (fresh arrays, sharing nothing with the input).
    meta : dict
        ``json.loads(json.dumps(meta))``.
    """
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.ascontiguousarray(a) for name, a in arrays.items()})  # type: ignore[arg-type]
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as data:
        loaded = {name: data[name] for name in data.files}
    return loaded, json.loads(json.dumps(dict(meta), allow_nan=False, sort_keys=True))


# ---------------------------------------------------------------------------------------- suites


class _Suite:
    """Checks that a ``Test*`` subclass defines every hook its suites need."""

    #: Hooks a concrete subclass must define (collected over the MRO).
    _hooks: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("Test"):
            return  # an intermediate base of a family's tests may leave hooks to its subclasses
        required = sorted({hook for klass in cls.__mro__ for hook in vars(klass).get("_hooks", ())})
        missing = [hook for hook in required if not callable(getattr(cls, hook, None))]
        if missing:
            suites = [k.__name__ for k in cls.__mro__ if k.__module__ == __name__ and not k.__name__.startswith("_")]
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} subclasses {', '.join(suites)} but does not define the "
                f"hook(s) {', '.join(missing)}; the suite's docstring (topicflow/testing/conformance.py) lists "
                "what a family must supply"
            )


class MergeableTests(_Suite):
    """Suite for mergeable sufficient statistics (a commutative monoid under ``merge``).

    Subclass it as ``Test<Family>Mergeable`` and define the hooks below. Tests: ``zeros`` is the exact
    identity on both sides; ``merge`` is commutative (bit-exact unless ``commutative_exact`` is False)
    and associative within ``merge_rtol``/``merge_atol`` (float addition is not associative);
    ``merge_all`` has the bits of the left fold of ``merge`` (the k-way merge a reduction node uses, on
    which bit-identical models across executors rest); the tree reduction of
    :mod:`topicflow.tasks.reduce` gives the same bits evaluated in memory and as a Dask graph, and is
    within tolerance of the left fold; merging never modifies its inputs; merging the statistics of
    any split of a corpus equals the statistics of the whole within ``split_rtol``/``split_atol``.

    Attributes
    ----------
    merge_rtol, merge_atol : float
        Tolerance of associativity and of the tree against the left fold.
    split_rtol, split_atol : float
        Tolerance of the merged split against the whole corpus.
    commutative_exact : bool
        Whether ``merge(a, b)`` has the bits of ``merge(b, a)`` (True for sums: ``a + b == b + a``).
    split_ignore : frozenset of str
        Fields that legitimately differ between the split and the whole (e.g. a cost diagnostic).

    Methods
    -------
    make_shape(draw)
        Optional. What every statistic of one example shares (e.g. ``n_topics``, languages, a model to
        run the E-step with); default None.
    make_stats(draw, shape)
        Required. One random statistic of that shape; values should be finite and free of ``-0.0``
        (see :mod:`topicflow.testing.strategies`).
    zeros(shape)
        Required. The identity of ``merge`` for that shape.
    make_corpus(draw, shape)
        Required. A small corpus: a DocBlock or a mapping of language to DocBlock.
    stats_of(shape, corpus)
        Required. The family's statistics of a corpus (e.g. its E-step with a fixed model).
    merge(left, right)
        Optional; default ``left.merge(right)``.
    merge_all(parts)
        Optional; default ``type(parts[0]).merge_all(parts)``.
    """

    _hooks: ClassVar[tuple[str, ...]] = ("make_stats", "zeros", "make_corpus", "stats_of")
    merge_rtol: ClassVar[float] = 1e-12
    merge_atol: ClassVar[float] = 1e-9
    split_rtol: ClassVar[float] = 1e-10
    split_atol: ClassVar[float] = 1e-9
    commutative_exact: ClassVar[bool] = True
    split_ignore: ClassVar[frozenset[str]] = frozenset()

    make_stats: Callable[[Draw, Any], Any]
    zeros: Callable[[Any], Any]
    make_corpus: Callable[[Draw, Any], Any]
    stats_of: Callable[[Any, Any], Any]

    def make_shape(self, draw: Draw) -> Any:
        """Return what all statistics of one example share; by default nothing (None).

        Parameters
        ----------
        draw : callable
            Hypothesis' draw function.

        Returns
        -------
        object
            Passed to :meth:`make_stats`, ``zeros``, ``make_corpus`` and ``stats_of``.
        """
        return None

    def merge(self, left: Any, right: Any) -> Any:
        """Merge two statistics (default ``left.merge(right)``).

        Parameters
        ----------
        left, right : object
            Statistics of one shape.

        Returns
        -------
        object
            Their sum.
        """
        return left.merge(right)

    def merge_all(self, parts: Sequence[Any]) -> Any:
        """Merge statistics in order in one pass (default ``type(parts[0]).merge_all(parts)``).

        Parameters
        ----------
        parts : sequence
            At least one statistic.

        Returns
        -------
        object
            The bits of ``functools.reduce(merge, parts)``.
        """
        return type(parts[0]).merge_all(parts)

    def _draw_parts(self, draw: Draw, min_size: int, max_size: int) -> tuple[Any, list[Any]]:
        shape = self.make_shape(draw)
        n_parts = draw(st.integers(min_size, max_size))
        return shape, [self.make_stats(draw, shape) for _ in range(n_parts)]

    @suite_settings(40)
    @given(data=st.data())
    def test_zeros_is_the_identity(self, data: st.DataObject) -> None:
        """Check that ``zeros(shape)`` merged on either side of a statistic gives it back bit for bit."""
        shape, (stats,) = self._draw_parts(data.draw, 1, 1)
        zero = self.zeros(shape)
        assert_identical(self.merge(zero, stats), stats, path="merge(zeros, a)")
        assert_identical(self.merge(stats, zero), stats, path="merge(a, zeros)")
        assert_identical(self.merge(zero, zero), zero, path="merge(zeros, zeros)")
        assert_identical(self.merge_all([zero, stats, zero]), stats, path="merge_all([zeros, a, zeros])")

    @suite_settings(40)
    @given(data=st.data())
    def test_merge_is_commutative(self, data: st.DataObject) -> None:
        """Check that ``merge(a, b)`` equals ``merge(b, a)`` (bit for bit when ``commutative_exact``)."""
        _, (a, b) = self._draw_parts(data.draw, 2, 2)
        if self.commutative_exact:
            assert_identical(self.merge(a, b), self.merge(b, a), path="merge(a, b)")
        else:
            assert_close(self.merge(a, b), self.merge(b, a), rtol=self.merge_rtol, atol=self.merge_atol,
                         path="merge(a, b)")

    @suite_settings(40)
    @given(data=st.data())
    def test_merge_is_associative(self, data: st.DataObject) -> None:
        """Check that ``merge(merge(a, b), c)`` equals ``merge(a, merge(b, c))`` within the merge tolerance."""
        _, (a, b, c) = self._draw_parts(data.draw, 3, 3)
        assert_close(self.merge(self.merge(a, b), c), self.merge(a, self.merge(b, c)),
                     rtol=self.merge_rtol, atol=self.merge_atol, path="merge(merge(a, b), c)")

    @suite_settings(40)
    @given(data=st.data())
    def test_merge_all_has_the_bits_of_the_left_fold(self, data: st.DataObject) -> None:
        """Check that the k-way merge of a reduction node has the bits of merging the parts left to right."""
        _, parts = self._draw_parts(data.draw, 1, 9)
        assert_identical(self.merge_all(parts), functools.reduce(self.merge, parts),
                         path=f"merge_all({len(parts)} parts)")

    @suite_settings(30)
    @given(data=st.data(), split_every=st.integers(2, 5))
    def test_tree_reduction_is_fixed_by_the_part_count(self, data: st.DataObject, split_every: int) -> None:
        """Check that the tree reduction has the same bits as a Dask graph and in memory, near the left fold."""
        _, parts = self._draw_parts(data.draw, 1, 12)

        def combine(*children: Any) -> Any:
            return self.merge_all(children)

        in_memory = tree_reduce_now(parts, combine, split_every=split_every)
        delayed = [dask.delayed(part, name=f"part-{i}", traverse=False) for i, part in enumerate(parts)]
        graph = tree_reduce(delayed, combine, split_every=split_every, name="merge-conformance")
        assert_identical(dask.compute(graph, scheduler="sync")[0], in_memory,
                         path=f"tree of fan-in {split_every} as a Dask graph")
        assert_close(in_memory, functools.reduce(self.merge, parts), rtol=self.merge_rtol, atol=self.merge_atol,
                     path=f"tree of fan-in {split_every}")

    @suite_settings(25)
    @given(data=st.data())
    def test_merging_does_not_modify_the_inputs(self, data: st.DataObject) -> None:
        """Check that neither ``merge`` nor ``merge_all`` changes the statistics they are given."""
        shape, parts = self._draw_parts(data.draw, 2, 5)
        zero = self.zeros(shape)
        before = copy.deepcopy((parts, zero))
        self.merge(parts[0], parts[1])
        self.merge(zero, parts[0])
        self.merge_all(parts)
        assert_identical((parts, zero), before, path="inputs after merging")

    @suite_settings(30)
    @given(data=st.data())
    def test_any_split_of_a_corpus_merges_to_the_whole(self, data: st.DataObject) -> None:
        """Check that the merged statistics of the pieces of any split equal the whole corpus'."""
        shape = self.make_shape(data.draw)
        corpus = self.make_corpus(data.draw, shape)
        cuts = data.draw(document_cuts(n_docs_of(corpus)))
        pieces = [self.stats_of(shape, piece) for piece in cut_documents(corpus, cuts)]
        assert_close(self.merge_all(pieces), self.stats_of(shape, corpus), rtol=self.split_rtol,
                     atol=self.split_atol, ignore=self.split_ignore, path=f"merged pieces (cuts {cuts})")


class EStepTests(_Suite):
    """Suite for a family's E-step: agreement with a plain NumPy reference, split invariance, pure inputs.

    Subclass it as ``Test<Family>EStep``. Blocks are drawn by the suite
    (:func:`topicflow.testing.strategies.multilingual_blocks` over :attr:`languages`, at most
    ``max_docs`` documents of at most ``max_terms`` terms); the family turns them into a model and runs
    both implementations. Tests: agreement with the reference on random blocks and on the edge cases
    (a block with an empty document, single-term documents, one topic, one document); the merged
    statistics of any split of a block equal the whole block's and the per-document outputs of the
    pieces concatenate to the whole block's (bit for bit when ``doc_outputs_exact``); the E-step
    leaves its blocks and model unchanged.

    Attributes
    ----------
    languages : tuple of str
        Languages of the drawn blocks (several for a polylingual E-step).
    max_topics, max_docs, max_terms : int
        Sizes of the drawn examples (small: the reference is slow).
    reference_rtol, reference_atol : float
        Tolerance against the reference (it sums in another order).
    reference_ignore : frozenset of str
        Fields of the statistics the reference does not compute (e.g. a sweep counter).
    split_rtol, split_atol : float
        Tolerance of the merged pieces against the whole block.
    doc_outputs_exact : bool
        Whether per-document outputs are bit-identical however the documents are split (True when each
        document's result depends only on the document, its global position and the model).

    Methods
    -------
    make_model(draw, n_topics, n_terms)
        Required. Everything the E-step needs besides the documents (topics, priors, parameters) for
        ``n_topics`` topics and ``n_terms[lang]`` terms per language.
    estep(model, blocks)
        Required. The fast E-step on a mapping of language to DocBlock: ``(stats, doc_outputs)``,
        mergeable statistics and an ndarray with one row per document (e.g. gamma).
    reference(model, blocks)
        Required. The same pair from the plain NumPy reference (``tests/reference/``), converted to
        the form of :meth:`estep`'s (statistics compared with :func:`assert_close`).
    merge_all(parts)
        Optional; default ``type(parts[0]).merge_all(parts)``.
    """

    _hooks: ClassVar[tuple[str, ...]] = ("make_model", "estep", "reference")
    languages: ClassVar[tuple[str, ...]] = ("default",)
    max_topics: ClassVar[int] = 4
    max_docs: ClassVar[int] = 6
    max_terms: ClassVar[int] = 10
    reference_rtol: ClassVar[float] = 1e-8
    reference_atol: ClassVar[float] = 1e-10
    reference_ignore: ClassVar[frozenset[str]] = frozenset()
    split_rtol: ClassVar[float] = 1e-10
    split_atol: ClassVar[float] = 1e-9
    doc_outputs_exact: ClassVar[bool] = True

    make_model: Callable[[Draw, int, Mapping[str, int]], Any]
    estep: Callable[[Any, Mapping[str, DocBlock]], tuple[Any, np.ndarray]]
    reference: Callable[[Any, Mapping[str, DocBlock]], tuple[Any, np.ndarray]]

    def merge_all(self, parts: Sequence[Any]) -> Any:
        """Merge E-step statistics in order (default ``type(parts[0]).merge_all(parts)``).

        Parameters
        ----------
        parts : sequence
            At least one statistic.

        Returns
        -------
        object
            The merged statistics.
        """
        return type(parts[0]).merge_all(parts)

    def _draw_case(self, draw: Draw, *, n_docs: Any = None, n_topics: int | None = None,
                   empty_docs: bool | None = None, max_terms_per_doc: int | None = None,
                   ) -> tuple[Any, dict[str, DocBlock]]:
        topics = n_topics if n_topics is not None else draw(st.integers(1, self.max_topics))
        n_terms = {lang: draw(st.integers(1, self.max_terms)) for lang in self.languages}
        blocks = draw(multilingual_blocks(
            self.languages, st.integers(1, self.max_docs) if n_docs is None else n_docs, n_terms,
            empty_docs=empty_docs, max_terms_per_doc=max_terms_per_doc,
        ))
        return self.make_model(draw, topics, n_terms), blocks

    def _assert_matches_reference(self, model: Any, blocks: Mapping[str, DocBlock]) -> None:
        stats, doc_outputs = self.estep(model, blocks)
        ref_stats, ref_doc_outputs = self.reference(model, blocks)
        assert_close(stats, ref_stats, rtol=self.reference_rtol, atol=self.reference_atol,
                     ignore=self.reference_ignore, path="stats")
        assert_close(doc_outputs, ref_doc_outputs, rtol=self.reference_rtol, atol=self.reference_atol,
                     path="doc outputs")

    @suite_settings(25)
    @given(data=st.data())
    def test_matches_the_reference(self, data: st.DataObject) -> None:
        """Check that the fast E-step matches the reference on random blocks."""
        self._assert_matches_reference(*self._draw_case(data.draw))

    @suite_settings(10)
    @given(data=st.data())
    def test_empty_documents_match_the_reference(self, data: st.DataObject) -> None:
        """Check a block with an empty document (in every language) against the reference."""
        self._assert_matches_reference(*self._draw_case(data.draw, empty_docs=True))

    @suite_settings(10)
    @given(data=st.data())
    def test_single_term_documents_match_the_reference(self, data: st.DataObject) -> None:
        """Check documents of one distinct term each against the reference."""
        self._assert_matches_reference(*self._draw_case(data.draw, empty_docs=False, max_terms_per_doc=1))

    @suite_settings(10)
    @given(data=st.data())
    def test_one_topic_matches_the_reference(self, data: st.DataObject) -> None:
        """Check one topic against the reference."""
        self._assert_matches_reference(*self._draw_case(data.draw, n_topics=1))

    @suite_settings(10)
    @given(data=st.data())
    def test_one_document_matches_the_reference(self, data: st.DataObject) -> None:
        """Check a block of one document against the reference."""
        self._assert_matches_reference(*self._draw_case(data.draw, n_docs=1))

    @suite_settings(25)
    @given(data=st.data())
    def test_result_does_not_depend_on_how_documents_are_split_into_blocks(self, data: st.DataObject) -> None:
        """Check that pieces of a block give the whole block's merged statistics and per-document outputs."""
        model, blocks = self._draw_case(data.draw, n_docs=st.integers(0, self.max_docs))
        cuts = data.draw(document_cuts(n_docs_of(blocks)))
        stats, doc_outputs = self.estep(model, blocks)
        pieces = [self.estep(model, piece) for piece in cut_documents(blocks, cuts)]
        assert_close(self.merge_all([piece[0] for piece in pieces]), stats, rtol=self.split_rtol,
                     atol=self.split_atol, path=f"merged stats of the pieces (cuts {cuts})")
        joined = np.concatenate([piece[1] for piece in pieces], axis=0)
        if self.doc_outputs_exact:
            assert_identical(joined, doc_outputs, path=f"doc outputs of the pieces (cuts {cuts})")
        else:
            assert_close(joined, doc_outputs, rtol=self.split_rtol, atol=self.split_atol,
                         path=f"doc outputs of the pieces (cuts {cuts})")

    @suite_settings(10)
    @given(data=st.data())
    def test_inputs_are_not_modified(self, data: st.DataObject) -> None:
        """Check that the E-step leaves its model and blocks unchanged."""
        model, blocks = self._draw_case(data.draw, n_docs=st.integers(0, self.max_docs))
        before = copy.deepcopy((model, blocks))
        self.estep(model, blocks)
        assert_identical((model, blocks), before, path="(model, blocks) after the E-step")


class _StateSuite(_Suite):
    """Hooks shared by the snapshot and sampler suites."""

    _hooks: ClassVar[tuple[str, ...]] = ("to_snapshot", "from_snapshot")
    to_snapshot: Callable[[Any], Snapshot]
    from_snapshot: Callable[[dict[str, np.ndarray], dict[str, Any]], Any]

    def assert_same_state(self, actual: Any, expected: Any) -> None:
        """Assert two states are the same (default :func:`assert_identical`).

        Override when a state holds storage that is not state (e.g. spare capacity past a fill
        counter); comparing the two states' snapshots is then the natural test.

        Parameters
        ----------
        actual, expected : object
            States of the family.
        """
        assert_identical(actual, expected, path="state")


class SnapshotTests(_StateSuite):
    """Suite for a state's snapshot form: numeric arrays plus JSON metadata, round trip bit-exact.

    Subclass it as ``Test<Family>Snapshot``. Tests: the snapshot is a mapping of str to numeric
    ndarrays and strict-JSON metadata (:func:`check_snapshot_form`); stored through npz and JSON
    (:func:`store_and_load`) and restored it is the same state (:meth:`assert_same_state`), whose own
    snapshot has the same bits and metadata; taking a snapshot twice gives the same snapshot.

    Methods
    -------
    make_state(draw)
        Required. A random state worth saving (e.g. after a few steps of the sampler).
    to_snapshot(state)
        Required. ``(arrays, meta)``.
    from_snapshot(arrays, meta)
        Required. The state back.
    assert_same_state(actual, expected)
        Optional; default :func:`assert_identical`.
    """

    _hooks: ClassVar[tuple[str, ...]] = ("make_state",)
    make_state: Callable[[Draw], Any]

    @suite_settings(25)
    @given(data=st.data())
    def test_snapshot_holds_only_arrays_and_json_metadata(self, data: st.DataObject) -> None:
        """Check that a snapshot is numeric ndarrays under str names plus strict-JSON metadata."""
        arrays, meta = self.to_snapshot(self.make_state(data.draw))
        check_snapshot_form(arrays, meta)

    @suite_settings(25)
    @given(data=st.data())
    def test_round_trip_is_bit_exact(self, data: st.DataObject) -> None:
        """Check snapshot, npz + JSON, restore: the same state, whose snapshot has the same bits."""
        state = self.make_state(data.draw)
        arrays, meta = self.to_snapshot(state)
        assert_identical(self.to_snapshot(state), (arrays, meta), path="a second snapshot of the state")
        restored = self.from_snapshot(*store_and_load(arrays, meta))
        self.assert_same_state(restored, state)
        assert_identical(self.to_snapshot(restored), (arrays, meta), path="snapshot of the restored state")


@dataclass(frozen=True)
class SamplerStream:
    """A stream for :class:`SamplerTests`: how to start the sampler and what it observes.

    Attributes
    ----------
    start : callable
        ``start()`` builds a fresh initial state (called once per run, since ``observe`` may update a
        state in place).
    steps : sequence
        What each ``observe`` call receives, in order (DocBlocks of consecutive documents for a
        streaming sampler, sweep counts for a batch chain); at least one.
    params : object, optional
        Settings passed to every ``observe`` call.
    """

    start: Callable[[], Any]
    steps: Sequence[Any]
    params: Any = None


class SamplerTests(_StateSuite):
    """Suite for a streaming sampler's checkpoints: a restored sampler continues exactly.

    Subclass it as ``Test<Family>Sampler`` (or :class:`SplitInvariantSamplerTests`). Tests: for any
    cut of the stream, observing the first steps, saving through npz + JSON, restoring and observing
    the rest gives the state of the uninterrupted run (observe(A), snapshot, restore, observe(B) ==
    observe(A then B)); a snapshot taken in memory is not changed by continuing the state it was taken
    from (so an actor may keep sampling while its snapshot is written).

    Methods
    -------
    make_stream(draw)
        Required. A :class:`SamplerStream`.
    observe(state, step, params)
        Required. The state after one step (it may update ``state`` in place).
    to_snapshot(state), from_snapshot(arrays, meta)
        Required, as in :class:`SnapshotTests`.
    assert_same_state(actual, expected)
        Optional; default :func:`assert_identical`.
    """

    _hooks: ClassVar[tuple[str, ...]] = ("make_stream", "observe")
    make_stream: Callable[[Draw], SamplerStream]
    observe: Callable[[Any, Any, Any], Any]

    def _observe_all(self, state: Any, steps: Sequence[Any], params: Any) -> Any:
        for step in steps:
            state = self.observe(state, step, params)
        return state

    @suite_settings(20)
    @given(data=st.data())
    def test_restored_sampler_continues_as_the_uninterrupted_one(self, data: st.DataObject) -> None:
        """Check that observe(A), snapshot, store, restore, observe(B) equals observe(A then B)."""
        stream = self.make_stream(data.draw)
        cut = data.draw(st.integers(0, len(stream.steps)), label="cut")
        straight = self._observe_all(stream.start(), stream.steps, stream.params)
        first = self._observe_all(stream.start(), stream.steps[:cut], stream.params)
        restored = self.from_snapshot(*store_and_load(*self.to_snapshot(first)))
        self.assert_same_state(self._observe_all(restored, stream.steps[cut:], stream.params), straight)

    @suite_settings(15)
    @given(data=st.data())
    def test_snapshot_is_not_changed_by_continuing(self, data: st.DataObject) -> None:
        """Check that continuing a state leaves a snapshot taken from it (kept in memory) unchanged."""
        stream = self.make_stream(data.draw)
        cut = data.draw(st.integers(0, len(stream.steps) - 1), label="cut")
        state = self._observe_all(stream.start(), stream.steps[:cut], stream.params)
        snapshot = self.to_snapshot(state)
        kept = copy.deepcopy(snapshot)
        self._observe_all(state, stream.steps[cut:], stream.params)
        assert_identical(snapshot, kept, path="snapshot after the state it was taken from went on")


class SplitInvariantSamplerTests(SamplerTests):
    """:class:`SamplerTests` for samplers whose state does not depend on how the stream is cut into blocks.

    Adds: observing the steps' documents as one block gives the state of observing them step by step
    (true of token-by-token samplers such as the particle filter; not of minibatch samplers).

    Methods
    -------
    join_steps(steps)
        Optional; default :func:`topicflow.models.common.blocks.concat_blocks` of the steps.
    """

    def join_steps(self, steps: Sequence[Any]) -> Any:
        """Join consecutive steps into one (default: concatenate the DocBlocks).

        Parameters
        ----------
        steps : sequence of DocBlock
            Consecutive blocks of one language.

        Returns
        -------
        DocBlock
            Their documents in one block.
        """
        return concat_blocks(list(steps))

    @suite_settings(20)
    @given(data=st.data())
    def test_one_block_or_many_give_the_same_state(self, data: st.DataObject) -> None:
        """Check that one block of the steps' documents gives the state of observing them step by step."""
        stream = self.make_stream(data.draw)
        pieces = self._observe_all(stream.start(), stream.steps, stream.params)
        whole = self.observe(stream.start(), self.join_steps(stream.steps), stream.params)
        self.assert_same_state(whole, pieces)
