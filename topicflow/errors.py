"""Error hierarchy of topicflow.

Every error subclasses :class:`TopicflowError` and, where it refines one, the builtin a caller
would naturally catch (``ValueError``, ``FileNotFoundError``, ``FileExistsError``). Errors carry the
place they refer to (``path``, ``line``, ``doc_id``, ``shard``) so messages and callers agree.
"""
from __future__ import annotations


class TopicflowError(Exception):
    """Base class of every error raised on purpose by topicflow."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        doc_id: str | None = None,
        shard: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.doc_id = doc_id
        self.shard = shard


class InputError(TopicflowError, ValueError):
    """An input record or file cannot be read (bad UTF-8, malformed JSON, missing field, schema)."""


class EmptyInputError(InputError):
    """The input holds no usable document."""


class CorpusFormatError(TopicflowError, ValueError):
    """A corpus store is damaged, inconsistent or of an unknown format."""


class FormatVersionError(CorpusFormatError):
    """A store or model was written by a newer topicflow format version than this one reads."""


class StoreExistsError(TopicflowError, FileExistsError):
    """The output path exists already and ``overwrite`` was not asked for."""


class StoreNotFoundError(TopicflowError, FileNotFoundError):
    """No corpus store or model at the given path."""


class ModelNotFoundError(StoreNotFoundError):
    """No saved model at the given path."""


class VocabularyMismatchError(TopicflowError, ValueError):
    """Input cannot be encoded consistently with an existing store's vocabulary or tokenizer."""


class InvalidParameterError(TopicflowError, ValueError):
    """A hyperparameter or setting is outside its allowed values."""


class NotFittedError(TopicflowError, AttributeError):
    """An estimator method needs a fitted model."""


class NumericalError(TopicflowError, FloatingPointError):
    """An update produced non-finite values; the message says where."""


class LockedError(TopicflowError, RuntimeError):
    """Another process holds the lock on a model or store."""


# ----------------------------------------------------------------------------- DSGS


class ParameterServerLost(TopicflowError):
    """The worker holding a DSGS run's parameter server died; the run's counts are gone."""
