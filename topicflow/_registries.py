"""Modules that fill the registries of the pure layers, loaded when a registry is first searched.

:mod:`topicflow.metrics` may not import the pipeline, yet :func:`topicflow.metrics.coherence`
accepts saved models and corpus stores, which :mod:`topicflow.pipeline.evaluation.coherence`
registers when imported. A registry calls :func:`load_providers` before its first lookup, the way
xarray loads backend entry points on first use; ``import topicflow`` then stays light (no Dask).
This module imports only the standard library and names the providers as strings.
"""
from __future__ import annotations

import importlib

#: Registry name -> modules that register into it when imported.
PROVIDERS: dict[str, tuple[str, ...]] = {
    "coherence": ("topicflow.pipeline.evaluation.coherence",),
}


def load_providers(registry: str) -> None:
    """Import the modules that fill ``registry`` (a no-op after the first call).

    Parameters
    ----------
    registry : str
        A key of :data:`PROVIDERS`.
    """
    for module in PROVIDERS.get(registry, ()):
        importlib.import_module(module)
