"""Counter-based randomness: every random draw is a function of (seed, stream, epoch, document).

Nothing here depends on workers, partitions or threads, which is what makes fits reproducible on any
cluster size. The mixer is SplitMix64 (Steele et al. 2014), cheap enough to call per document inside
numba kernels.
"""
from __future__ import annotations

import math

import numba
import numpy as np

_MASK = (1 << 64) - 1

def _stream_id(number: int) -> int:
    """A stream identifier as a NumPy integer, not a Python int.

    numba types a Python-int global read inside a kernel as a literal, so every stream compiled its
    own copy of :func:`counter_key` and of each kernel it passes through (17 copies of ``counter_key``
    in one process, each compile paid by a fresh cache); a NumPy integer is typed ``int64``: one
    signature for all. It behaves as an int everywhere else.
    """
    return np.int64(number)  # type: ignore[return-value]


#: Stream identifiers keep independent uses of the same (seed, doc) apart.
STREAM_GAMMA_INIT = _stream_id(1)
STREAM_GIBBS = _stream_id(2)
STREAM_SYNTH = _stream_id(3)
STREAM_SPLIT = _stream_id(4)
STREAM_TOPIC_INIT = _stream_id(5)
STREAM_SHUFFLE = _stream_id(6)
STREAM_PARTICLE = _stream_id(7)  # per-token draws of a streaming sampler (particle, token)
STREAM_RESAMPLE = _stream_id(8)  # resampling of a particle cloud
STREAM_RESERVOIR = _stream_id(9)  # reservoir sampling over the token stream
STREAM_REJUVENATE = _stream_id(10)  # choice and resampling of rejuvenation tokens
STREAM_INIT_TRIAL = _stream_id(11)  # independent initializations of a streaming sampler
STREAM_FOLD_IN = _stream_id(12)  # Gibbs sweeps on held-out documents with topics fixed
STREAM_LEFT_TO_RIGHT = _stream_id(13)  # left-to-right held-out estimator (particle, document)
STREAM_EVAL_SAMPLE = _stream_id(14)  # documents sampled for an evaluation (topics as features)
STREAM_CVB0_DOC_START = _stream_id(15)  # random start of a document's n_dk in the collapsed VB methods
STREAM_TREE_PATH = _stream_id(16)  # path draws y | z of the tree hybrid E-step (per seed, epoch, language)
STREAM_INFVOC_GIBBS = _stream_id(17)  # hybrid Gibbs sweeps of the infinite-vocabulary E-step (seed, minibatch, document)


@numba.njit(nogil=True, cache=True)
def splitmix64(x: np.uint64) -> np.uint64:
    """One SplitMix64 finalizer step (a bijection on 64-bit words)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(nogil=True, cache=True)
def counter_key(seed: int, stream: int, epoch: int, doc: int) -> np.uint64:
    """A 64-bit key that identifies one (seed, stream, epoch, document) tuple."""
    h = splitmix64(np.uint64(seed))
    h = splitmix64(h ^ np.uint64(stream))
    h = splitmix64(h ^ np.uint64(epoch))
    return splitmix64(h ^ np.uint64(doc))


@numba.njit(nogil=True, cache=True)
def uniform_from_key(key: np.uint64, index: int) -> float:
    """The ``index``-th uniform double in [0, 1) of the sequence named by ``key``."""
    bits = splitmix64(key + np.uint64(index) * np.uint64(0xD1B54A32D192ED03))
    return float(bits >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(nogil=True, cache=True)
def standard_normal_from_key(key: np.uint64, index: int) -> float:
    """A standard normal draw from uniforms ``2 index`` and ``2 index + 1`` of ``key`` (Box-Muller)."""
    u1 = 1.0 - uniform_from_key(key, 2 * index)  # in (0, 1], so the log is finite
    u2 = uniform_from_key(key, 2 * index + 1)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@numba.njit(nogil=True, cache=True)
def gamma_rows_from_keys(seed: int, stream: int, first_doc: int, shape: float, scale: float, out: np.ndarray) -> None:
    """Fill row d of ``out`` with Gamma(shape, scale) draws keyed by document ``first_doc + d``.

    Marsaglia and Tsang (2000)'s squeeze method (``shape >= 1``): each draw uses a normal and a uniform
    from the document's own counter sequence, so a row never depends on the block it is drawn in.
    """
    d_const = shape - 1.0 / 3.0
    c_const = 1.0 / math.sqrt(9.0 * d_const)
    for d in range(out.shape[0]):
        key = counter_key(seed, stream, 0, first_doc + d)
        index = 0
        for k in range(out.shape[1]):
            while True:
                z = standard_normal_from_key(key, index)
                u = uniform_from_key(key, 1 << 40 | index)
                index += 1
                v = 1.0 + c_const * z
                if v <= 0.0:
                    continue
                v = v * v * v
                if math.log(1.0 - u) < 0.5 * z * z + d_const - d_const * v + d_const * math.log(v):
                    out[d, k] = d_const * v * scale
                    break


def doc_generator(seed: int, stream: int, epoch: int, doc: int) -> np.random.Generator:
    """A NumPy generator for one document, for code outside hot loops (synthesis, splits)."""
    key = int(counter_key(seed, stream, epoch, doc))
    return np.random.Generator(np.random.PCG64(key))
