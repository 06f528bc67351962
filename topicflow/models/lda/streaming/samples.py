"""Read-outs of a cloud's individual samples, for the evaluation protocol of Canini et al. (2009, sec. 5.2).

Canini, Shi and Griffiths score every streaming sampler by "the sample having highest posterior
probability at each step": o-LDA and incremental Gibbs run 100 independent samples (here: one cloud
of P particles that is never resampled, all starting from the same initialization), the particle
filter its 100 particles. This module owns that selection and the two clusterings they score:

- the training set: every document observed so far, each given its most frequent topic in the best
  sample *now* (so rejuvenation of old documents shows), and
- the held-out set: the test documents observed "as if they were the next ones", on a copy of the
  cloud that is then dropped, so the sampler is returned "to its original state and position".

Pure NumPy + numba; no I/O. The documents' counts are read from the lineage store, so the cloud must
keep every document: ``rejuvenation_source="history"`` (Canini et al.'s R(i), uniform over 1..i).

Glossary: P (n_particles), K (n_topics), n_dk (document row), n_wk (term row), log p(w, z) (the
collapsed joint, Griffiths and Steyvers 2004, eqs. 2-3), "position" (global document position).

References
----------
Canini, Shi and Griffiths (2009). Online inference of topics with latent Dirichlet allocation.
AISTATS, PMLR 5:65-72 (sec. 5.2).
"""
from __future__ import annotations

from dataclasses import replace

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common import lineage as lin
from topicflow.models.common.blocks import DocBlock
from topicflow.models.lda.gibbs.scores import log_joint_of_counts
from topicflow.models.lda.streaming.particle_filter import (
    ParticleCloud,
    PFParams,
    cloud_from_arrays,
    cloud_to_arrays,
    observe,
    particle_topic_word_counts,
)


@numba.njit(nogil=True, cache=True)
def _gather_doc_rows(st, node, keys, out, found):
    """out[i] = the row of keys[i] seen from ``node``; found[i] = whether it is stored."""
    for i in range(keys.shape[0]):
        r = lin.find_row(st, node, keys[i])
        found[i] = r >= 0
        if r >= 0:
            out[i, :] = st.rows[r, :]


def _check_history(cloud: ParticleCloud) -> None:
    if cloud.params.rejuvenation_source != "history":
        raise InvalidParameterError(
            "the documents' topic counts are kept only with rejuvenation_source='history' (this cloud uses "
            f"{cloud.params.rejuvenation_source!r}); the training-set clustering of Canini et al. needs them all"
        )


def _check_particle(cloud: ParticleCloud, particle: int) -> int:
    if not 0 <= int(particle) < cloud.n_particles:
        raise InvalidParameterError(f"particle {particle!r} is not in [0, {cloud.n_particles})")
    return int(particle)


def seen_positions(cloud: ParticleCloud) -> IntArray:
    """Global positions of every document the cloud has observed, ``0 .. next_doc - 1`` (prefix included)."""
    return np.arange(cloud.next_doc, dtype=np.int64)


def particle_doc_topic_counts(cloud: ParticleCloud, particle: int,
                              doc_positions: IntArray) -> tuple[Int32Array, np.ndarray]:
    """Return the counts n_dk of the given documents in one particle.

    Parameters
    ----------
    cloud : ParticleCloud
        With ``rejuvenation_source="history"``.
    particle : int
    doc_positions : ndarray of shape (n_docs,), int
        Global document positions.

    Returns
    -------
    counts : ndarray of shape (n_docs, n_topics), int32
        Zeros for a document without a stored row (one without tokens).
    found : ndarray of shape (n_docs,), bool
        Whether the document has a row.

    Raises
    ------
    InvalidParameterError
        Another rejuvenation source, or a particle out of range.
    """
    _check_history(cloud)
    keys = cloud.params.n_terms + 1 + np.asarray(doc_positions, dtype=np.int64)
    out = np.zeros((keys.shape[0], cloud.params.n_topics), dtype=np.int32)
    found = np.zeros(keys.shape[0], dtype=np.bool_)
    _gather_doc_rows(cloud.store, cloud.store.leaf[_check_particle(cloud, particle)], keys, out, found)
    return out, found


def sample_log_joints(cloud: ParticleCloud) -> FloatArray:
    """Compute log p(w, z) of every particle over everything it has observed.

    Parameters
    ----------
    cloud : ParticleCloud
        With ``rejuvenation_source="history"``.

    Returns
    -------
    ndarray of shape (n_particles,), float64
        :func:`topicflow.models.lda.gibbs.scores.log_joint_of_counts` of each particle's n_wk and the
        n_dk of documents ``0 .. next_doc - 1``.

    Examples
    --------
    >>> params = PFParams(2, 3, rejuvenation_source="history", n_particles=2)
    >>> from topicflow.models.lda.streaming.particle_filter import initial_cloud
    >>> cloud = initial_cloud(params, np.array([0, 2]), np.array([0, 0]), np.array([0, 1]))
    >>> bool(np.all(sample_log_joints(cloud) == sample_log_joints(cloud)[0]))
    True
    """
    _check_history(cloud)
    positions = seen_positions(cloud)
    params = cloud.params
    out = np.empty(cloud.n_particles)
    for p in range(cloud.n_particles):
        docs, _ = particle_doc_topic_counts(cloud, p, positions)
        out[p] = log_joint_of_counts(docs, particle_topic_word_counts(cloud, p).T, params.doc_topic_prior,
                                     params.topic_word_prior)
    return out


def best_sample(log_joints: FloatArray) -> int:
    """Index of the sample of highest posterior probability (the first among ties).

    Parameters
    ----------
    log_joints : ndarray of shape (n_samples,), float64
        From :func:`sample_log_joints`.

    Returns
    -------
    int

    Examples
    --------
    >>> best_sample(np.array([-3.0, -1.0, -1.0]))
    1
    """
    values = np.asarray(log_joints, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise InvalidParameterError(f"log_joints must be a non-empty vector; got shape {values.shape!r}")
    return int(np.argmax(values))


def sample_clusters(cloud: ParticleCloud, particle: int, doc_positions: IntArray) -> IntArray:
    """Each document's most frequent topic in one particle (the first among ties; -1 without tokens).

    Parameters
    ----------
    cloud : ParticleCloud
        With ``rejuvenation_source="history"``.
    particle : int
    doc_positions : ndarray of shape (n_docs,), int

    Returns
    -------
    ndarray of shape (n_docs,), int64
    """
    counts, found = particle_doc_topic_counts(cloud, particle, doc_positions)
    return np.where(found, np.argmax(counts, axis=1), -1).astype(np.int64)


def training_clusters(cloud: ParticleCloud, doc_positions: IntArray | None = None) -> tuple[IntArray, int]:
    """Canini et al.'s training-set clustering: every document seen, under the best sample now.

    Parameters
    ----------
    cloud : ParticleCloud
        With ``rejuvenation_source="history"``.
    doc_positions : ndarray of shape (n_docs,), int, optional
        The documents to cluster; default every document seen, ``0 .. next_doc - 1``.

    Returns
    -------
    clusters : ndarray of shape (n_docs,), int64
        The most frequent topic of each document in the best sample (-1 without tokens).
    best : int
        That sample's index (:func:`best_sample` of :func:`sample_log_joints`).
    """
    best = best_sample(sample_log_joints(cloud))
    positions = seen_positions(cloud) if doc_positions is None else np.asarray(doc_positions, dtype=np.int64)
    return sample_clusters(cloud, best, positions), best


def copy_cloud(cloud: ParticleCloud) -> ParticleCloud:
    """A deep copy sharing no array with ``cloud`` (through :func:`cloud_to_arrays`, exact)."""
    arrays, meta = cloud_to_arrays(cloud)
    return cloud_from_arrays(arrays, meta)


def observe_as_next(cloud: ParticleCloud, block: DocBlock, params: PFParams) -> tuple[IntArray, int]:
    """Cluster test documents by observing them as the next documents of the stream, then forget them.

    Parameters
    ----------
    cloud : ParticleCloud
        With ``rejuvenation_source="history"``; never modified (a copy observes the documents).
    block : DocBlock
        The test documents, term ids in the stream's vocabulary; their positions are moved to
        ``cloud.next_doc, ...``.
    params : PFParams
        The cloud's own settings: the test documents are processed exactly as training ones would
        be (proposal, reweighting, resampling, rejuvenation over the whole history).

    Returns
    -------
    clusters : ndarray of shape (block.n_docs,), int64
        The most frequent topic of each test document in the sample of highest posterior
        probability after all of them were observed (-1 for a document without tokens).
    best : int
        That sample.

    Notes
    -----
    Canini et al. (2009, sec. 5.2): "each algorithm was run on the held-out documents as if they were
    the next ones to be observed, the nMI score was calculated for the held-out documents, and the
    algorithm was returned to its original state and position in the training set." The random
    numbers are those the next training tokens will use (they are keyed by stream position), which
    is harmless: the copy is dropped, so training never sees them twice.
    """
    _check_history(cloud)
    shifted = replace(block, first_doc=cloud.next_doc)
    after, _ = observe(copy_cloud(cloud), shifted, params)
    best = best_sample(sample_log_joints(after))
    positions = cloud.next_doc + np.arange(block.n_docs, dtype=np.int64)
    return sample_clusters(after, best, positions), best
