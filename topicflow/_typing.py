"""Shared type aliases and the Literal names of algorithm choices.

The Literal spellings are the ones used in CLI flags, config keys and model JSON.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
Float32Array = NDArray[np.float32]
IntArray = NDArray[np.int64]
Int32Array = NDArray[np.int32]
#: Term or topic ids of either width: int32 as stored in blocks, int64 after remapping.
IndexArray = NDArray[np.signedinteger[Any]]

OnError = Literal["raise", "skip"]
AlphaMode = Literal["auto", "symmetric", "fixed"]
LearningMethod = Literal["batch", "online"]
EStepKind = Literal["vb", "hybrid"]
StreamAlgorithm = Literal["gibbs", "olda", "incgibbs", "pf", "sgs", "dsgs"]
ResamplingScheme = Literal["multinomial", "residual", "stratified", "systematic"]
RejuvenationSource = Literal["history", "window", "reservoir"]
InitSelection = Literal["nmi", "perplexity"]
