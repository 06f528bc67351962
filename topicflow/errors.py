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

    def __repr__(self) -> str:
        """The error's class with its module, e.g. ``topicflow.errors.InputError('line 3 of ...')``.

        The module marks the error as topicflow's own wherever only its repr travels: Dask logs a
        failed task's exception by its repr, and
        :class:`~topicflow.pipeline.worker_logging.QuietTopicflowTaskErrors` recognises topicflow's errors
        by the ``topicflow.`` prefix (a name alone could be another library's ``InputError``).
        """
        cls = type(self)
        return f"{cls.__module__}.{cls.__qualname__}({', '.join(repr(arg) for arg in self.args)})"


class InputError(TopicflowError, ValueError):
    """An input record or file cannot be read (bad UTF-8, malformed JSON, missing field, schema)."""


class EmptyInputError(InputError):
    """The input holds no usable document."""


class CorpusFormatError(TopicflowError, ValueError):
    """A corpus store is damaged, inconsistent or of an unknown format."""


class CorruptShardError(CorpusFormatError):
    """A shard's files cannot be decoded, or decode to arrays its manifest entry contradicts.

    Raised by every shard read (:func:`topicflow.io.corpus.reader.load_multiblock` and what builds on
    it) and by :meth:`topicflow.io.corpus.reader.Corpus.verify`; ``path`` is the store and ``shard``
    the shard id.
    """


class ModelFormatError(CorpusFormatError):
    """A saved model, checkpoint or stream state is damaged or inconsistent with its own description.

    A subclass of :class:`CorpusFormatError` (which damaged models raised before) so callers that
    catch that keep working.

    Parameters
    ----------
    message : str
        The whole message: what is wrong, where, and what to do.
    path : str, optional
        The model (or checkpoint, or stream state) directory.
    version : int, optional
        The model version read, when the model has versions.
    field : str, optional
        What is inconsistent, as named in ``model.json`` or under ``arrays/`` (``"doc_topic_prior"``,
        ``"topic_word_var/en"``, ``"n_topics"``, ...).
    problem : str, optional
        What is wrong with ``field``, without the place or the remedy (for callers that re-word it).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        version: int | None = None,
        field: str | None = None,
        problem: str | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.version = version
        self.field = field
        self.problem = problem


class OrderNotKeptError(CorpusFormatError):
    """A corpus store was asked for its documents' tokens in order but does not keep them.

    Only stores ingested with ``topicflow ingest --keep-order`` hold the ordered-token layer; the
    message names the store and says to re-ingest it that way. ``path`` is the store.
    """


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


class MissingLabelsError(TopicflowError, ValueError):
    """An evaluation needs the documents' labels but the corpus store has none; ``path`` is the store."""


class NotFittedError(TopicflowError, AttributeError):
    """An estimator method needs a fitted model."""


class NumericalError(TopicflowError, FloatingPointError):
    """An update produced non-finite values; the message says where."""


class LockedError(TopicflowError, RuntimeError):
    """Another process holds the lock on a model or store."""


# ----------------------------------------------------------------------------- DSGS


class ParameterServerLost(TopicflowError):
    """The worker holding a DSGS run's parameter server died; the run's counts are gone."""


class StorageError(TopicflowError, OSError):
    """Object storage cannot be reached or used: a missing bucket, missing or refused credentials.

    The message names the URL and what to check (docs/storage.md).
    """


class UnsupportedStorageError(TopicflowError, ValueError):
    """A URL was given where topicflow accepts only a local path so far (e.g. model directories)."""


class DiskFullError(TopicflowError, OSError):
    """A write failed because the filesystem is full or the disk quota is exhausted (ENOSPC, EDQUOT).

    The message names the output being written (``path``), the file whose write failed (``failed``),
    says to free space on the filesystem holding ``path`` and rerun, and what was left as it was
    (e.g. which model version is still current). ``errno`` is the original error number, so code that
    checks ``exc.errno == errno.ENOSPC`` keeps working.

    Parameters
    ----------
    message : str
        The whole message.
    path : str, optional
        The output (model, store, state directory, file) being written.
    failed : str, optional
        The file whose write ran out of space.
    error_number : int, optional
        ``errno.ENOSPC`` or ``errno.EDQUOT``.
    """

    def __init__(self, message: str, *, path: str | None = None, failed: str | None = None,
                 error_number: int | None = None) -> None:
        super().__init__(message, path=path)
        self.failed = failed
        self.errno = error_number

    def __reduce__(self) -> tuple[object, ...]:
        # OSError pickles its errno from args, which hold the message only here: carry it in the state.
        return (type(self), (str(self),), {**self.__dict__, "errno": self.errno})
