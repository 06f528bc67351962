"""topicflow: out-of-core topic models on Dask."""
from __future__ import annotations

from topicflow import config as _config  # noqa: F401  (registers dask.config defaults)
from topicflow.io.zarr_shards import Corpus

__version__ = "0.1.0"

__all__ = ["Corpus", "__version__"]
