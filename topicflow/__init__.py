"""topicflow: out-of-core topic models on Dask."""
from __future__ import annotations

# Set before the imports below: topicflow.io.model_store records it in every saved model.
__version__ = "0.1.0"

from topicflow import config as _config  # noqa: E402,F401  (registers dask.config defaults)
from topicflow.io.zarr_shards import Corpus  # noqa: E402
from topicflow.pipeline.estimators import LDA  # noqa: E402
from topicflow.pipeline.streaming_estimator import StreamingLDA  # noqa: E402

__all__ = ["Corpus", "LDA", "StreamingLDA", "__version__"]
