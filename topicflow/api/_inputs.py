"""What the estimators accept as documents, converted in one place.

Accepted inputs (the ``X`` or ``corpus`` of ``fit``, ``partial_fit``, ``transform``, ``score`` ...):

- a corpus store: its path, or an opened :class:`~topicflow.io.corpus.reader.Corpus`;
- a document-term matrix of counts in memory: scipy.sparse (any format), a NumPy array or a
  pydata/sparse array, with an optional ``vocabulary`` (one term per column; default ``t0, t1, ...``);
- a Dask array of such counts, whose chunks are scipy.sparse, pydata/sparse or NumPy;
- texts: a Dask DataFrame (or Series) with a text column, or a Dask bag of strings or dicts, read with
  ``fields`` (:class:`~topicflow.io.sources.base.FieldSpec`: text, id and label columns) and tokenized
  with the default :class:`~topicflow.io.tokenizer.TokenizerConfig`.

Fitting and scoring read a store, so :func:`store_for` writes any other input to one first, out of
core: a Dask array chunk by chunk (one row of chunks in memory at a time, cut into shards of
``topicflow.shard-size`` documents), texts partition by partition through ingest. The store goes to
``store_path`` if given (and is kept), else to a temporary directory under ``topicflow.scratch-dir``
(default: the system's temporary directory), removed when the call that wrote it returns or fails.

``transform`` needs no store: :func:`transform_blocks` turns the input into lazy document blocks in
the model's term ids, so its result on a Dask input stays lazy and has one row per input row (empty
documents included).

This module must not train or evaluate models; it only moves documents into the shapes the
pipelines read.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal, Mapping, Sequence

import dask
import numpy as np

from topicflow import config as tf_config
from topicflow.errors import InputError, InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.models.common.blocks import DocBlock, remap_terms
from topicflow.pipeline.cluster import compute

if TYPE_CHECKING:
    from topicflow.io.sources.base import FieldSpec

InputKind = Literal["store", "matrix", "dask-array", "dask-frame", "dask-bag"]
#: Inputs whose documents are texts (tokenized) rather than counts.
TEXT_KINDS = ("dask-frame", "dask-bag")


def input_kind(documents: Any) -> InputKind:
    """Return which kind of accepted input ``documents`` is.

    Parameters
    ----------
    documents : Any
        A store path or Corpus, a matrix, a Dask array, a Dask DataFrame or Series, or a Dask bag.

    Returns
    -------
    {"store", "matrix", "dask-array", "dask-frame", "dask-bag"}
        ``"matrix"`` for anything else; :func:`~topicflow.io.corpus.from_arrays.count_matrix` then
        says why it is not a matrix of counts.
    """
    if isinstance(documents, (Corpus, str, os.PathLike)):
        return "store"
    if dask.is_dask_collection(documents):
        import dask.array as da
        import dask.bag as db

        if isinstance(documents, da.Array):
            return "dask-array"
        if isinstance(documents, db.Bag):
            return "dask-bag"
        frames = sys.modules.get("dask.dataframe")  # loaded whenever a Dask DataFrame exists
        if frames is not None and isinstance(documents, (frames.DataFrame, frames.Series)):
            return "dask-frame"
        raise InputError(
            f"a Dask {type(documents).__name__} cannot be read as documents; pass a Dask array of counts, "
            "a Dask DataFrame or Series of texts, or a Dask bag of texts."
        )
    return "matrix"


def shard_size() -> int:
    """Return the documents per shard of the stores written here (``topicflow.shard-size``).

    Returns
    -------
    int
    """
    return int(tf_config.get("shard-size", 1000))


def check_options(kind: InputKind, *, vocabulary: Any, fields: Any) -> None:
    """Refuse options that do not apply to the input's kind.

    Parameters
    ----------
    kind : InputKind
    vocabulary : sequence of str or None
        Only for matrices and Dask arrays.
    fields : FieldSpec or None
        Only for texts.

    Raises
    ------
    InvalidParameterError
        The option does not apply, or ``fields`` is not a FieldSpec.
    """
    if vocabulary is not None and kind not in ("matrix", "dask-array"):
        raise InvalidParameterError(
            f"vocabulary= names the columns of a matrix or Dask array of counts; this input is a {kind} "
            "(a store has its own vocabulary, texts are tokenized)."
        )
    if fields is not None:
        if kind not in TEXT_KINDS:
            raise InvalidParameterError(f"fields= applies to Dask DataFrames and bags of texts, not to a {kind}.")
        # Imported here: it loads every source format (pyarrow), which only texts need.
        from topicflow.io.sources.base import FieldSpec

        if not isinstance(fields, FieldSpec) or fields.is_multilingual:
            raise InvalidParameterError(
                f"fields must be a monolingual topicflow.io.sources.base.FieldSpec, got {fields!r}."
            )


# ----------------------------------------------------------------------------- stores


@contextlib.contextmanager
def store_for(
    documents: Any, *, vocabulary: Sequence[str] | None = None, fields: FieldSpec | None = None,
    store_path: str | os.PathLike[str] | None = None, client: Any = None,
) -> Iterator[Corpus]:
    """Yield the documents as an opened corpus store, writing one if they are not a store.

    Parameters
    ----------
    documents : Any
        Any accepted input (see the module docstring).
    vocabulary : sequence of str, optional
        Terms of the columns of a matrix or Dask array; default ``t0, t1, ...``.
    fields : FieldSpec, optional
        Columns (DataFrame) or keys (bag of dicts) of texts; default ``FieldSpec()``: ``text``,
        and ``id`` where present.
    store_path : str or os.PathLike, optional
        Where to write the store, which must not exist; it is kept. By default a temporary
        directory under ``topicflow.scratch-dir``, removed when the ``with`` block ends.
    client : distributed.Client, optional
        Computes the chunks or partitions; default the current client, else local threads.

    Yields
    ------
    Corpus
        The store (the given one for a store input, where ``store_path`` is ignored).

    Raises
    ------
    InputError
        Counts that are negative, fractional or not numbers, or texts that cannot be read.
    InvalidParameterError
        An option that does not fit the input.
    StoreExistsError
        ``store_path`` exists.
    """
    kind = input_kind(documents)
    check_options(kind, vocabulary=vocabulary, fields=fields)
    if kind == "store":
        yield as_corpus(documents)
        return
    work = Path(tempfile.mkdtemp(prefix="topicflow-input-", dir=_scratch_root()))
    try:
        path = Path(store_path).absolute() if store_path is not None else work / "corpus.zarr"
        if kind == "matrix":
            _write_matrix(documents, path, vocabulary)
        elif kind == "dask-array":
            _write_dask_array(documents, path, vocabulary, client)
        else:
            from topicflow.io.sources.base import FieldSpec

            _write_texts(documents, kind, path, fields or FieldSpec(), work, client)
        yield Corpus.open(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _scratch_root() -> str | None:
    """``topicflow.scratch-dir`` (created if missing), else None for the system's temporary directory."""
    root = tf_config.get("scratch-dir")
    if not root:
        return None
    Path(root).mkdir(parents=True, exist_ok=True)
    return str(root)


def _write_matrix(matrix: Any, path: Path, vocabulary: Sequence[str] | None) -> None:
    from topicflow.io.corpus.from_arrays import count_matrix, write_count_store

    counts = count_matrix(matrix)
    size = shard_size()
    blocks = (counts[start : start + size] for start in range(0, counts.shape[0], size))
    write_count_store(path, blocks, n_terms=counts.shape[1], terms=vocabulary, shard_size=size, source="X")


def _check_dask_array(array: Any) -> int:
    """Number of columns of a Dask array of counts; refuses arrays that are not 2-D or whose width is unknown."""
    if array.ndim != 2:
        raise InputError(
            f"the Dask array must be 2-D (documents x terms); got {array.ndim} dimensions, shape {array.shape!r}."
        )
    if math.isnan(array.shape[1]):
        raise InputError("the Dask array has an unknown number of columns; call X.compute_chunk_sizes() first.")
    return int(array.shape[1])


def _write_dask_array(array: Any, path: Path, vocabulary: Sequence[str] | None, client: Any) -> None:
    from topicflow.io.corpus.from_arrays import hstack_counts, write_count_store

    n_terms = _check_dask_array(array)

    def rows() -> Iterator[Any]:
        for row in array.to_delayed():  # one row of chunks in memory at a time
            yield hstack_counts(compute(*row, client=client))

    write_count_store(path, rows(), n_terms=n_terms, terms=vocabulary, shard_size=shard_size(),
                      source="the Dask array")


def _write_texts(documents: Any, kind: InputKind, path: Path, fields: FieldSpec, work: Path, client: Any) -> None:
    """Write the partitions as parquet (DataFrame) or JSON Lines (bag) files, then ingest them."""
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    parts = work / "parts"
    if kind == "dask-frame":
        frame = _text_frame(documents, fields)
        graph = frame.to_parquet(str(parts), name_function=lambda i: f"part-{i:06d}.parquet", write_index=False,
                                 compute=False)
        compute(graph, client=client)
        inputs = sorted(parts.glob("*.parquet"))
    else:
        lines = documents.map(_json_line, fields.text_field)
        compute(*lines.to_textfiles(str(parts / "*.jsonl"), name_function=lambda i: f"part-{i:06d}",
                                    compute=False), client=client)
        inputs = sorted(parts.glob("*.jsonl"))
    ingest_corpus(inputs, path, fields=fields, client=client)
    shutil.rmtree(parts, ignore_errors=True)


def _text_frame(documents: Any, fields: FieldSpec) -> Any:
    """The columns ingest reads, checked to be there (a Series is the text column)."""
    frame = documents.to_frame(name=fields.text_field) if _is_series(documents) else documents
    columns = list(frame.columns)
    wanted = [name for name in (fields.id_field, fields.text_field, fields.label_field, fields.timestamp_field)
              if name is not None]
    required = [fields.text_field] + [n for n in (fields.label_field, fields.timestamp_field) if n is not None]
    missing = [name for name in required if name not in columns]
    if missing:
        raise InputError(
            f"the Dask DataFrame has no column {missing[0]!r} (columns: {columns}); name the text column with "
            "fields=FieldSpec(text_field=...), and the id and label columns likewise."
        )
    return frame[[name for name in wanted if name in columns]]


def _is_series(documents: Any) -> bool:
    """Whether a Dask DataFrame input is a Series (its values are the texts)."""
    frames = sys.modules.get("dask.dataframe")
    return frames is not None and isinstance(documents, frames.Series)


def _json_line(item: Any, text_field: str) -> str:
    """One bag item as a JSON Lines record: a string is the text, a dict is a record as it is."""
    if isinstance(item, str):
        return json.dumps({text_field: item}, ensure_ascii=False)
    if isinstance(item, Mapping):
        return json.dumps(dict(item), ensure_ascii=False, default=str)
    raise InputError(
        f"a Dask bag of documents holds strings (texts) or dicts (records with a {text_field!r} key); got "
        f"{type(item).__name__} {item!r:.80}."
    )


# ----------------------------------------------------------------------------- transform blocks


def transform_blocks(
    documents: Any, kind: InputKind, *, terms: Sequence[str], language: str, owner: str,
    vocabulary: Sequence[str] | None = None, fields: FieldSpec | None = None,
) -> tuple[list[Any], list[float]]:
    """Cut a non-store input into document blocks in the model's term ids, lazily for Dask inputs.

    Parameters
    ----------
    documents : Any
        A matrix, a Dask array, a Dask DataFrame or Series, or a Dask bag.
    kind : InputKind
        Its :func:`input_kind` (not ``"store"``).
    terms : sequence of str
        The model's vocabulary (its term ids are positions in it).
    language : str
        The model's language.
    owner : str
        Estimator name, for messages.
    vocabulary : sequence of str, optional
        Terms of the columns; by default the columns are the model's terms, in order.
    fields : FieldSpec, optional
        Where the texts are; default ``FieldSpec()``.

    Returns
    -------
    blocks : list
        Per block, ``{language: DocBlock}`` (matrices) or a ``Delayed`` of it (Dask inputs).
    n_rows : list of float
        Documents per block; NaN where unknown before computing (texts).

    Raises
    ------
    ValueError
        Without ``vocabulary``, a matrix whose number of columns differs from the model's terms.
    InputError
        Counts that are not non-negative integers (for Dask inputs, when the block is computed).
    """
    from topicflow.io.corpus.from_arrays import count_matrix
    from topicflow.io.sources.base import FieldSpec

    check_options(kind, vocabulary=vocabulary, fields=fields)
    n_model = len(terms)
    if kind in TEXT_KINDS:
        return _text_blocks(documents, kind, terms, language, fields or FieldSpec())
    if kind == "matrix":
        counts = count_matrix(documents)
        term_map = _term_map(counts.shape[1], vocabulary, terms, owner)
        size = shard_size()
        blocks = [
            {language: _counts_block(counts[start : start + size], start, term_map, n_model, language)}
            for start in range(0, counts.shape[0], size)
        ]
        return blocks, [float(b[language].n_docs) for b in blocks]
    term_map = _term_map(_check_dask_array(documents), vocabulary, terms, owner)
    token = dask.base.tokenize(documents, term_map, language)
    task = dask.delayed(_chunk_block, pure=True)
    blocks, n_rows, first = [], [], 0
    for index, (row, height) in enumerate(zip(documents.to_delayed(), documents.chunks[0])):
        start = first if not math.isnan(height) else 0
        blocks.append(task(list(row), start, term_map, n_model, language,
                           dask_key_name=f"count-block-{token}-{index}"))
        n_rows.append(float(height))
        first += 0 if math.isnan(height) else int(height)
    return blocks, n_rows


def _term_map(n_columns: int, vocabulary: Sequence[str] | None, terms: Sequence[str], owner: str) -> np.ndarray | None:
    """Column -> model term id (-1: unknown to the model), or None when the columns are the model's terms."""
    from topicflow.io.corpus.from_arrays import parse_terms

    if vocabulary is None:
        if n_columns != len(terms):
            raise InputError(
                f"X has {n_columns} features, but {owner} is expecting {len(terms)} features as input; pass "
                "vocabulary= (one term per column) to match columns to the model's terms by name."
            )
        return None
    names = parse_terms(vocabulary, n_columns)
    if names == list(terms):
        return None
    index = {str(t): i for i, t in enumerate(terms)}
    return np.array([index.get(name, -1) for name in names], dtype=np.int64)


def _counts_block(counts: Any, first_doc: int, term_map: np.ndarray | None, n_terms: int, language: str) -> DocBlock:
    block = DocBlock(
        indptr=counts.indptr.astype(np.int64), term_ids=counts.indices.astype(np.int32),
        counts=counts.data.astype(np.int32),
        doc_ids=np.array([f"row-{i}" for i in range(first_doc, first_doc + counts.shape[0])], dtype=object),
        first_doc=first_doc, n_terms=n_terms if term_map is None else counts.shape[1], language=language,
    )
    return block if term_map is None else remap_terms(block, term_map, n_terms)


def _chunk_block(parts: Sequence[Any], first_doc: int, term_map: np.ndarray | None, n_terms: int,
                 language: str) -> dict[str, DocBlock]:
    """One row of chunks of a Dask array as a block in the model's term ids (validated here)."""
    from topicflow.io.corpus.from_arrays import count_matrix, hstack_counts

    counts = count_matrix(hstack_counts(parts), what="the Dask array", first_row=first_doc)
    return {language: _counts_block(counts, first_doc, term_map, n_terms, language)}


def _text_blocks(documents: Any, kind: InputKind, terms: Sequence[str], language: str,
                 fields: FieldSpec) -> tuple[list[Any], list[float]]:
    if kind == "dask-frame" and not _is_series(documents) and fields.text_field not in documents.columns:
        raise InputError(
            f"the Dask DataFrame has no column {fields.text_field!r} (columns: {list(documents.columns)}); name "
            "the text column with fields=FieldSpec(text_field=...)."
        )
    index = {str(t): i for i, t in enumerate(terms)}
    token = dask.base.tokenize(documents, fields.text_field, len(terms), language)
    shared_index = dask.delayed(index, traverse=False, name=f"term-index-{token}")
    task = dask.delayed(_text_block, pure=True)
    parts = documents.to_delayed()
    blocks = [
        task(part, fields.text_field, shared_index, len(terms), language, dask_key_name=f"text-block-{token}-{i}")
        for i, part in enumerate(parts)
    ]
    return blocks, [math.nan] * len(blocks)


def _text_block(part: Any, text_field: str, index: Mapping[str, int], n_terms: int,
                language: str) -> dict[str, DocBlock]:
    """Tokenize one partition's texts (default tokenizer) and count the model's terms; one row per text."""
    from topicflow.io.tokenizer import TokenizerConfig, make_tokenizer
    from topicflow.tasks.ingest import encode_bag

    run = make_tokenizer(TokenizerConfig())
    indptr, term_ids, counts = [0], [], []
    texts = _texts_of(part, text_field)
    for text in texts:
        ids, values = encode_bag(Counter(run(text)) if text else None, index)
        term_ids.extend(ids)
        counts.extend(values)
        indptr.append(len(term_ids))
    block = DocBlock(
        indptr=np.asarray(indptr, dtype=np.int64), term_ids=np.asarray(term_ids, dtype=np.int32),
        counts=np.asarray(counts, dtype=np.int32), doc_ids=np.array([str(i) for i in range(len(texts))], dtype=object),
        first_doc=0, n_terms=n_terms, language=language,
    )
    return {language: block}


def _texts_of(part: Any, text_field: str) -> list[str]:
    """The texts of one partition: a pandas DataFrame's text column, a Series, or a bag's items."""
    if hasattr(part, "columns"):  # a pandas DataFrame
        values = list(part[text_field])
    elif hasattr(part, "dtype") and hasattr(part, "index"):  # pandas Series
        values = list(part)
    else:
        values = [item.get(text_field) if isinstance(item, Mapping) else item for item in part]
    texts = []
    for position, value in enumerate(values):
        if isinstance(value, str):
            texts.append(value)
        elif value is None or (isinstance(value, float) and math.isnan(value)):
            texts.append("")  # a missing text is an empty document
        else:
            raise InputError(
                f"document {position} of a partition has a {type(value).__name__} where a text (str) should be: "
                f"{value!r:.80}."
            )
    return texts


def column_terms(
    documents: Any, kind: InputKind, vocabulary: Sequence[str] | None, model_terms: Sequence[str] | None,
    *, owner: str, grow: bool = False,
) -> Sequence[str] | None:
    """The terms of the columns of a matrix or Dask array given to a fitted model without a vocabulary.

    The columns are the model's terms, in order (scikit-learn's convention); with ``grow``
    (``partial_fit``), columns past the model's terms are new terms ``t<column>``.

    Parameters
    ----------
    documents : Any
    kind : InputKind
    vocabulary : sequence of str or None
        The vocabulary given by the caller, returned as it is if not None.
    model_terms : sequence of str or None
        The fitted model's terms; None before the first fit.
    owner : str
        Estimator name, for messages.
    grow : bool, default False
        Allow more columns than the model has terms.

    Returns
    -------
    sequence of str or None
        The vocabulary to write the store with; None leaves the default (``t0, t1, ...``).

    Raises
    ------
    InputError
        The number of columns does not fit the model's terms.
    """
    if vocabulary is not None or model_terms is None or kind not in ("matrix", "dask-array"):
        return vocabulary
    shape = getattr(documents, "shape", None)
    if shape is None:
        shape = np.shape(documents)
    if len(shape) != 2 or math.isnan(shape[1]):
        return None  # count_matrix or the Dask array check says what is wrong
    n_columns, terms = int(shape[1]), [str(t) for t in model_terms]
    if n_columns == len(terms) or (grow and n_columns > len(terms)):
        return terms + [f"t{j}" for j in range(len(terms), n_columns)]
    raise InputError(
        f"X has {n_columns} features, but {owner} is expecting {len(terms)} features as input; pass vocabulary= "
        "(one term per column) to match columns to the model's terms by name."
    )
