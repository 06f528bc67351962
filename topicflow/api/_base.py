"""The base every estimator shares: scikit-learn's conventions without importing scikit-learn.

This module owns what makes a topicflow estimator behave like a scikit-learn one: parameters read
from the ``__init__`` signature (:meth:`~TopicModelEstimator.get_params`,
:meth:`~TopicModelEstimator.set_params`, so ``sklearn.base.clone`` works), the ``repr`` of the
parameters that differ from their defaults, one declarative table of parameter constraints per class
checked once at ``fit``, the not-fitted check, ``fit_transform`` and the tags scikit-learn's
estimator checks read. It must not train, read data or connect to a cluster.

scikit-learn is imported only inside :meth:`~TopicModelEstimator.__sklearn_tags__`, which only
scikit-learn calls.
"""
from __future__ import annotations

import inspect
import math
import sys
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable, ClassVar, Literal, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, NotFittedError

Closed = Literal["left", "right", "both", "neither"]


# ----------------------------------------------------------------------------- constraints


@dataclass(frozen=True, slots=True)
class Interval:
    """Numbers of one kind in a range: ``Interval(Integral, 1, None, closed="left")`` is [1, inf).

    Attributes
    ----------
    kind : type
        ``numbers.Integral`` (ints, not bools) or ``numbers.Real`` (finite ints or floats, not bools).
    left, right : float or None
        Bounds; None is unbounded on that side.
    closed : {"left", "right", "both", "neither"}
        Which bounds belong to the range.
    """

    kind: type
    left: float | None
    right: float | None
    closed: Closed

    def is_satisfied_by(self, value: Any) -> bool:
        """Return whether ``value`` is a number of this kind inside the range.

        Parameters
        ----------
        value : Any

        Returns
        -------
        bool
        """
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, self.kind):
            return False
        number: Any = value  # an Integral or Real, compared exactly (no float rounding of large ints)
        if not isinstance(number, Integral) and not math.isfinite(number):
            return False
        if self.left is not None:
            if number < self.left or (number == self.left and self.closed not in ("left", "both")):
                return False
        if self.right is not None:
            if number > self.right or (number == self.right and self.closed not in ("right", "both")):
                return False
        return True

    def __str__(self) -> str:
        name = "an int" if self.kind is Integral else "a float"
        low = "-inf" if self.left is None else _bound(self.left)
        high = "inf" if self.right is None else _bound(self.right)
        opening = "[" if self.closed in ("left", "both") and self.left is not None else "("
        closing = "]" if self.closed in ("right", "both") and self.right is not None else ")"
        return f"{name} in the range {opening}{low}, {high}{closing}"


def _bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True, slots=True)
class Options:
    """One of a fixed set of values (strings, as the CLI spells them).

    Attributes
    ----------
    values : tuple
    """

    values: tuple[Any, ...]

    def is_satisfied_by(self, value: Any) -> bool:
        """Return whether ``value`` is one of :attr:`values`.

        Parameters
        ----------
        value : Any

        Returns
        -------
        bool
        """
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True, slots=True)
class Boolean:
    """``True`` or ``False`` (a Python or NumPy bool)."""

    def is_satisfied_by(self, value: Any) -> bool:
        """Return whether ``value`` is a bool.

        Parameters
        ----------
        value : Any

        Returns
        -------
        bool
        """
        return isinstance(value, (bool, np.bool_))

    def __str__(self) -> str:
        return "a bool"


@dataclass(frozen=True, slots=True)
class SequenceOf:
    """A list or tuple whose items are all instances of ``item``.

    Attributes
    ----------
    item : type
    """

    item: type

    def is_satisfied_by(self, value: Any) -> bool:
        """Return whether ``value`` is a list or tuple of :attr:`item` instances.

        Parameters
        ----------
        value : Any

        Returns
        -------
        bool
        """
        return isinstance(value, (list, tuple)) and all(isinstance(v, self.item) for v in value)

    def __str__(self) -> str:
        return f"a list or tuple of {self.item.__name__}"


@dataclass(frozen=True, slots=True)
class Parsed:
    """The values a parse function accepts (for a parameter whose parser also converts it).

    Attributes
    ----------
    parse : callable
        Raises :class:`~topicflow.errors.InvalidParameterError` for a value it does not accept.
    description : str
        The accepted values, for messages.
    """

    parse: Callable[[Any], Any]
    description: str

    def is_satisfied_by(self, value: Any) -> bool:
        """Return whether :attr:`parse` accepts ``value``.

        Parameters
        ----------
        value : Any

        Returns
        -------
        bool
        """
        try:
            self.parse(value)
        except InvalidParameterError:
            return False
        return True

    def __str__(self) -> str:
        return self.description


#: One allowed form of a parameter: a constraint object, or None (the value None is allowed).
Constraint = Interval | Options | Boolean | SequenceOf | Parsed | None


def check_parameter(owner: str, name: str, value: Any, constraints: Sequence[Constraint]) -> None:
    """Raise unless ``value`` satisfies one of ``constraints``.

    Parameters
    ----------
    owner : str
        Class name, for the message.
    name : str
        Parameter name.
    value : Any
    constraints : sequence of constraint or None
        The allowed forms; None in it allows the value None.

    Raises
    ------
    InvalidParameterError
        Naming the parameter, every allowed form and the value given.
    """
    for constraint in constraints:
        if constraint is None:
            if value is None:
                return
        elif constraint.is_satisfied_by(value):
            return
    allowed = [str(c) if c is not None else "None" for c in constraints]
    listed = allowed[0] if len(allowed) == 1 else ", ".join(allowed[:-1]) + " or " + allowed[-1]
    raise InvalidParameterError(
        f"the {name!r} parameter of {owner} must be {listed}; got {value!r} ({type(value).__name__})."
    )


# ----------------------------------------------------------------------------- the base


class TopicModelEstimator:
    """Base of topicflow's estimators, with scikit-learn's parameter and fitting conventions.

    Subclasses list their parameters as keyword arguments of ``__init__`` and store each one
    unchanged under its own name (nothing else happens in ``__init__``); a ``**settings`` catch-all
    is expanded by :meth:`get_params`. ``fit`` calls :meth:`_validate_params` once, which checks
    :attr:`_parameter_constraints`; fitted attributes end in ``_``.

    Examples
    --------
    >>> from topicflow import LDA
    >>> model = LDA(n_topics=5)
    >>> model.set_params(max_iter=20).get_params()["max_iter"]
    20
    >>> model
    LDA(n_topics=5, max_iter=20)
    """

    #: Allowed forms of each parameter (see :func:`check_parameter`), checked at ``fit``.
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {}
    #: What to do when a method needs a fitted model and there is none.
    _fit_hint: ClassVar[str] = "call fit(X) first"

    # ------------------------------------------------------------------ parameters

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """Names of the explicit ``__init__`` parameters, in signature order."""
        names = []
        for parameter in inspect.signature(cls.__init__).parameters.values():
            if parameter.name == "self" or parameter.kind == parameter.VAR_KEYWORD:
                continue
            if parameter.kind == parameter.VAR_POSITIONAL:
                raise TypeError(f"{cls.__name__}.__init__ must not take *args; name every parameter.")
            names.append(parameter.name)
        return names

    @classmethod
    def _settings_name(cls) -> str | None:
        """Name of the ``**settings`` catch-all of ``__init__`` (stored as a dict attribute), or None."""
        for parameter in inspect.signature(cls.__init__).parameters.values():
            if parameter.kind == parameter.VAR_KEYWORD:
                return parameter.name
        return None

    def _extra_param_names(self) -> frozenset[str] | None:
        """Names a ``**settings`` catch-all accepts (None: any); subclasses narrow it."""
        return None

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the estimator's parameters.

        Parameters
        ----------
        deep : bool, default True
            Also return the parameters of parameters that are estimators, as ``name__param``.

        Returns
        -------
        dict of str to Any
            Every ``__init__`` parameter and its current value (the entries of a ``**settings``
            catch-all as parameters of their own).
        """
        params = {name: getattr(self, name) for name in self._get_param_names()}
        settings = self._settings_name()
        if settings is not None:
            params.update(getattr(self, settings))
        if deep:
            for name, value in list(params.items()):
                if hasattr(value, "get_params") and not isinstance(value, type):
                    params.update({f"{name}__{k}": v for k, v in value.get_params(deep=True).items()})
        return params

    def set_params(self, **params: Any) -> TopicModelEstimator:
        """Set parameters; values are checked at the next ``fit``, not here.

        Parameters
        ----------
        **params
            ``name=value`` for parameters of this estimator, ``name__param=value`` for parameters
            of a parameter that is an estimator.

        Returns
        -------
        TopicModelEstimator
            ``self``.

        Raises
        ------
        InvalidParameterError
            A name that is not a parameter; the message lists the valid ones.
        """
        explicit = set(self._get_param_names())
        settings = self._settings_name()
        extra = self._extra_param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if sub:
                nested.setdefault(name, {})[sub] = value
                continue
            if name in explicit:
                setattr(self, name, value)
            elif settings is not None and (extra is None or name in extra):
                setattr(self, settings, {**getattr(self, settings), name: value})
            else:
                valid = sorted(explicit | (extra or set()))
                raise InvalidParameterError(
                    f"{type(self).__name__} has no parameter {name!r}; valid parameters: {', '.join(valid)}."
                )
        for name, sub_params in nested.items():
            owner = getattr(self, name, None) if name in explicit else None
            if owner is None or not hasattr(owner, "set_params"):
                raise InvalidParameterError(
                    f"{type(self).__name__} has no estimator parameter {name!r} to set {sorted(sub_params)} on."
                )
            owner.set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {
            p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()
            if p.default is not p.empty
        }
        shown = []
        for name, value in self.get_params(deep=False).items():
            default = defaults.get(name, inspect.Parameter.empty)
            if default is inspect.Parameter.empty or not _same_value(value, default):
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _validate_params(self) -> None:
        """Check every parameter listed in :attr:`_parameter_constraints` (called once by ``fit``).

        Raises
        ------
        InvalidParameterError
            The first parameter outside its allowed values, with the allowed values listed.
        """
        params = self.get_params(deep=False)
        for name, constraints in self._parameter_constraints.items():
            check_parameter(type(self).__name__, name, params[name], constraints)

    # ------------------------------------------------------------------ fitted state

    def _check_fitted(self) -> Any:
        """Return the fitted model (``model_``), or raise :class:`NotFittedError` saying what to call."""
        model = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; {self._fit_hint}.")
        return model

    def __sklearn_is_fitted__(self) -> bool:
        """Return whether the estimator holds a fitted model (read by ``sklearn.utils.validation.check_is_fitted``).

        Returns
        -------
        bool
        """
        return getattr(self, "model_", None) is not None

    def fit_transform(self, corpus: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit the model, then return the document-topic proportions of the same documents.

        Parameters
        ----------
        corpus : Any
            Training documents, in any form ``fit`` and ``transform`` accept.
        y : None
            Ignored (scikit-learn's signature).
        **fit_params
            Passed to ``fit``; ``vocabulary`` and ``fields`` are passed to ``transform`` too.

        Returns
        -------
        Any
            What ``transform`` returns for ``corpus``.
        """
        transform_params = {k: v for k, v in fit_params.items() if k in ("vocabulary", "fields")}
        fitted = self.fit(corpus, y, **fit_params)  # type: ignore[attr-defined]
        return fitted.transform(corpus, **transform_params)

    # ------------------------------------------------------------------ scikit-learn tags

    def __sklearn_tags__(self) -> Any:
        """Describe the estimator to scikit-learn (its checks read these tags).

        Documents are rows of non-negative integer counts: ``positive_only``, and ``categorical``,
        which is the tag that makes scikit-learn's checks feed rounded non-negative integers
        (there is no tag for count data); ``sparse`` because scipy.sparse matrices are accepted.

        Returns
        -------
        sklearn.utils.Tags
        """
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags() if hasattr(self, "transform") else None,
            input_tags=InputTags(sparse=True, positive_only=True, categorical=True),
            requires_fit=True,
        )


def _same_value(value: Any, default: Any) -> bool:
    """Whether a parameter still has its default (arrays and odd types compare by identity)."""
    if value is default:
        return True
    try:
        return bool(type(value) is type(default) and value == default)
    except (TypeError, ValueError):
        return False


def split_client(y: Any, client: Any) -> Any:
    """Return the Dask client of a call that takes scikit-learn's ``(X, y=None, *, client=None)``.

    Older code passes a ``distributed.Client`` second (``fit(corpus, client)``): a client found in
    the place of ``y`` is taken as the client; any other ``y`` is ignored, as unsupervised
    scikit-learn estimators ignore it.

    Parameters
    ----------
    y : Any
        The second positional argument.
    client : distributed.Client or None
        The ``client`` keyword.

    Returns
    -------
    distributed.Client or None

    Raises
    ------
    InvalidParameterError
        A client was given both ways.
    """
    if y is None or "distributed" not in sys.modules:  # no Client can exist without distributed imported
        return client
    from distributed import Client

    if isinstance(y, Client):
        if client is not None:
            raise InvalidParameterError("a Dask client was given twice (second argument and client=); give one.")
        return y
    return client
