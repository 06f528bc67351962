"""Numpydoc validation of every public docstring (style rule 24).

Every public function and class defined in a ``topicflow`` module is run through
``numpydoc.validate.validate`` and must pass the structure and format checks in
:data:`CORE_CHECKS`. The user-facing API (``topicflow.__all__`` and the public methods of
the classes it exports) must also document every parameter and return value
(:data:`API_CHECKS`).
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType
from typing import Any, Iterable, Iterator

import numpydoc.validate as numpydoc_validate
import pytest

import topicflow

#: Checks every public object must pass. These are structure and format checks: a docstring exists
#: (GL08), has a one-line capitalized imperative summary (SS01, SS02, SS05, SS06), uses known
#: sections in order (GL06, GL07), closes cleanly (GL02), names real parameters in signature order
#: (PR02, PR03) with well-formed types and capitalized descriptions (PR04, PR05, PR06, PR08),
#: and formats Returns/Yields correctly (RT02, RT04, YD01). They deliberately leave out the
#: completeness checks ("every parameter documented", PR01; Returns present, RT01; Examples,
#: See Also, extended summary), which internal helpers do not need.
CORE_CHECKS = frozenset({
    "GL02", "GL06", "GL07", "GL08",
    "SS01", "SS02", "SS05", "SS06",
    "PR02", "PR03", "PR04", "PR05", "PR06", "PR08",
    "RT02", "RT04", "YD01",
})

#: Added for the user-facing API (``topicflow.__all__`` and the public methods of its classes):
#: every parameter is documented (PR01) and every function that returns a value has a Returns
#: section (RT01).
API_CHECKS = CORE_CHECKS | {"PR01", "RT01"}

#: Subpackages and modules that are not part of the library API.
SKIPPED_MODULES = ("topicflow.testing", "topicflow.cli.demo")


def _is_skipped(module_name: str) -> bool:
    if module_name.rsplit(".", 1)[-1] == "__main__":
        return True
    return any(module_name == skip or module_name.startswith(skip + ".") for skip in SKIPPED_MODULES)


def _raise_import_error(name: str) -> None:
    # walk_packages silently skips subpackages that fail to import; a broken one must fail here.
    raise ImportError(f"cannot import {name!r} while collecting docstrings")


def _module_names() -> list[str]:
    names = ["topicflow"]
    for info in pkgutil.walk_packages(topicflow.__path__, prefix="topicflow.", onerror=_raise_import_error):
        if not _is_skipped(info.name):
            names.append(info.name)
    return sorted(names)


def _is_documentable(obj: Any) -> bool:
    # numba dispatchers are neither functions nor classes but wrap one (``py_func``).
    return inspect.isfunction(obj) or inspect.isclass(obj) or hasattr(obj, "py_func")


def _public_objects(module: ModuleType) -> Iterator[str]:
    """Yield the dotted names of the public functions and classes defined in ``module``.

    Parameters
    ----------
    module : module
        An imported ``topicflow`` module.

    Yields
    ------
    str
        ``"<module>.<name>"``, for objects whose ``__module__`` is ``module`` (not re-exports).
    """
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or not _is_documentable(obj):
            continue
        if getattr(obj, "__module__", None) == module.__name__:
            yield f"{module.__name__}.{name}"


def _public_methods(cls: type) -> Iterator[str]:
    """Yield the dotted names of the public methods and properties defined on ``cls``.

    Parameters
    ----------
    cls : type
        An exported class.

    Yields
    ------
    str
        ``"<module>.<Class>.<name>"``; inherited members are left to their own class.
    """
    for name, attr in sorted(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(attr, (classmethod, staticmethod)):
            attr = attr.__func__
        if inspect.isfunction(attr) or isinstance(attr, property):
            yield f"{cls.__module__}.{cls.__qualname__}.{name}"


def _exported_names() -> list[str]:
    names = []
    for name in topicflow.__all__:
        obj = getattr(topicflow, name)
        if not _is_documentable(obj):
            continue  # e.g. __version__
        qualified = f"{obj.__module__}.{obj.__qualname__}"
        names.append(qualified)
        if inspect.isclass(obj):
            names.extend(_public_methods(obj))
    return names


def _violations(names: Iterable[str], checks: frozenset[str]) -> list[str]:
    found = []
    for name in names:
        result = numpydoc_validate.validate(name)
        where = f"{result['file']}:{result['file_line']}"
        for code, message in result["errors"]:
            if code in checks:
                found.append(f"{name} ({where}) {code}: {message}")
    return found


@pytest.mark.parametrize("module_name", _module_names())
def test_public_docstrings_pass_core_checks(module_name: str) -> None:
    module = importlib.import_module(module_name)
    problems = _violations(_public_objects(module), CORE_CHECKS)
    assert not problems, f"{len(problems)} numpydoc problem(s) in {module_name}:\n" + "\n".join(problems)


def test_exported_api_documents_every_parameter() -> None:
    names = _exported_names()
    assert names, "topicflow.__all__ exports no function or class"
    problems = _violations(names, API_CHECKS)
    assert not problems, f"{len(problems)} numpydoc problem(s) in the exported API:\n" + "\n".join(problems)
