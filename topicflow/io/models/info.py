"""What a saved model says about itself: the typed :class:`~topicflow.io.models.info.ModelInfo` record of ``model.json``,
its corpus provenance, and the shards it has not seen yet.

``model.json`` holds the record's fields at its top level, beside the keys the model store adds
(format, version, shapes: see docs/model-format.md). Keys this version does not know are kept in
:attr:`ModelInfo.extra` and written back unchanged, so a model saved by a newer topicflow keeps what
it recorded when an older one updates it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence

from topicflow._typing import Family, choices
from topicflow.errors import ModelFormatError, VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus

#: Keys the model store writes into ``model.json`` beside the record (never part of it).
STORE_KEYS = frozenset({"format", "format_version", "topicflow_version", "saved", "n_topics", "languages",
                        "vocab_sizes", "topic_names", "topic_word_prior", "sampler_state"})

#: Fields of the record and the JSON types they must have: (types, what the message calls them).
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "family": ((str,), "a string"), "kind": ((str,), "a string"), "method": ((str, type(None)), "a string or null"),
    "algorithm": ((str, type(None)), "a string or null"), "settings": ((dict,), "an object"),
    "trace": ((list,), "a list"), "converged": ((bool,), "true or false"), "corpus": ((dict,), "an object"),
    "online": ((dict, type(None)), "an object or null"), "summary": ((list,), "a list"),
    "unknown_seed_words": ((dict,), "an object"), "sgs_state": ((dict, type(None)), "an object or null"),
    "position": ((dict, type(None)), "an object or null"),
    "collapsed_state": ((dict, type(None)), "an object or null"),
    "topics_in_use": ((int, type(None)), "an integer or null"),
}


@dataclass(frozen=True)
class ModelInfo:
    """The description of a saved model: its family, how it was made, and what it has seen.

    Attributes
    ----------
    family : {"lda", "hdp"}
        The model family (docs/architecture.md); selects how the model is continued and read.
    kind : str
        ``"vb_lda"`` for variational models, ``"stream"`` for a streaming sampler's model, ``"hdp"``
        for the collapsed HDP methods, ``"scvb0"`` for SCVB0's LDA models.
    method : str or None
        ``"batch"`` or ``"online"`` for variational models; ``"pcsvb0"`` or ``"pcvb0"`` (hdp),
        ``"scvb0"``.
    algorithm : str or None
        The streaming algorithm (``topicflow stream --algo``) of a streamed model.
    settings : dict
        The settings it was made with (``VBConfig.to_dict()`` or ``StreamConfig.to_dict()``).
    trace : list of dict
        One record per iteration or minibatch of the fit.
    converged : bool
        Whether a batch fit met its stopping rule.
    corpus : dict
        Provenance: the store, its size and every shard processed (see :func:`corpus_provenance`).
    online : dict or None
        Online VB: its settings and the step-size schedule's position (``t``, ``docs_seen``).
    summary : list of dict
        Streamed models: the trace summarized per evaluation point.
    unknown_seed_words : dict
        Informed priors: seed words missing from the vocabulary, per language.
    sgs_state : dict or None
        SGS and DSGS models: the sampler state's scalars (its arrays are the model's sampler state).
    position : dict or None
        SGS and DSGS models: documents, minibatches and tokens seen.
    collapsed_state : dict or None
        Collapsed variational models (hdp, scvb0): the scalars of their state (alpha, gamma, beta, the
        training totals n and D, the step-size counters, documents and tokens seen); the arrays are
        the model's sampler state.
    topics_in_use : int or None
        HDP models: topics holding at least the recorded share of the expected tokens (never T).
    extra : dict
        Every other key of ``model.json``, kept as read and written back unchanged.
    """

    family: Family = "lda"
    kind: str = "vb_lda"
    method: str | None = None
    algorithm: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)
    converged: bool = False
    corpus: dict[str, Any] = field(default_factory=dict)
    online: dict[str, Any] | None = None
    summary: list[dict[str, Any]] = field(default_factory=list)
    unknown_seed_words: dict[str, Any] = field(default_factory=dict)
    sgs_state: dict[str, Any] | None = None
    position: dict[str, Any] | None = None
    collapsed_state: dict[str, Any] | None = None
    topics_in_use: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.family not in choices(Family):
            raise ModelFormatError(
                f"model family {self.family!r} is unknown to this topicflow (it knows {list(choices(Family))}); "
                "upgrade topicflow to read this model"
            )

    def to_json(self) -> dict[str, Any]:
        """The record as ``model.json`` holds it (``None`` fields left out, ``extra`` merged in).

        Returns
        -------
        dict
            JSON-able; :meth:`from_json` reads it back to an equal record.
        """
        payload = dict(self.extra)
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name != "extra" and value is not None:
                payload[item.name] = value
        return payload

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], *, where: str = "model.json") -> ModelInfo:
        """Read the record from a ``model.json`` payload, checking the type of every known field.

        Models saved before the record existed have no ``family``: they are LDA models.

        Parameters
        ----------
        payload : mapping
            The parsed ``model.json`` (the store's own keys are ignored).
        where : str
            What to name in error messages.

        Returns
        -------
        ModelInfo

        Raises
        ------
        ModelFormatError
            A known field has the wrong JSON type, or the family is unknown.
        """
        known = {item.name for item in fields(cls)} - {"extra"}
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in payload.items():
            if key in STORE_KEYS:
                continue
            if key not in known:
                extra[key] = value
                continue
            types, described = _FIELD_TYPES[key]
            if not isinstance(value, types):
                raise ModelFormatError(
                    f"{where}: {key!r} must be {described}, got {type(value).__name__} {value!r:.80}; "
                    "roll back to another version (`topicflow rollback`) or refit the model"
                )
            values[key] = value
        family = values.get("family", "lda")
        if family not in choices(Family):
            raise ModelFormatError(
                f"{where}: model family {family!r} is unknown to this topicflow (it knows "
                f"{list(choices(Family))}); upgrade topicflow to read this model", field="family",
                problem=f"unknown family {family!r}")
        return cls(**values, extra=extra)

    def with_changes(self, **changes: Any) -> ModelInfo:
        """A copy with some fields replaced.

        Parameters
        ----------
        **changes
            New values by field name.

        Returns
        -------
        ModelInfo
        """
        return type(self)(**{**{item.name: getattr(self, item.name) for item in fields(self)}, **changes})


def corpus_provenance(corpus: Corpus, shards: Sequence[int], seen: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """What a model records about its training data: the store and every shard it has processed."""
    processed = list(seen) + [{"id": corpus.shards[i].shard_id, "checksum": corpus.shards[i].checksum} for i in shards]
    return {
        "path": str(corpus.path), "n_docs": len(corpus), "n_tokens": corpus.n_tokens,
        "vocab_version": getattr(corpus, "vocab_version", 1), "shards": processed,
    }


def unseen_shards(model: Any, corpus: Corpus) -> list[int]:
    """Store indices of the shards the model has not processed, in store order.

    Raises
    ------
    VocabularyMismatchError
        A shard the model processed has different content now (the store was rebuilt, or it is
        another store with the same shard ids).
    """
    seen = {entry["id"]: entry["checksum"] for entry in model.info.corpus.get("shards", [])}
    new = []
    for index, shard in enumerate(corpus.shards):
        if shard.shard_id not in seen:
            new.append(index)
        elif seen[shard.shard_id] != shard.checksum:
            raise VocabularyMismatchError(
                f"shard {shard.shard_id} of store {str(corpus.path)!r} differs from the shard of that id the model "
                "was trained on: the store was rebuilt, or it is another store. Update the model only with the store "
                "it was fitted on (grown by `topicflow append`), or fit a new model on this store.",
                path=str(corpus.path),
            )
    return new
