"""The global word index of infinite-vocabulary LDA: strings -> word ids, append-only, in first-seen order.

The model's math (:mod:`topicflow.models.infvoc_lda`) sees only integer word ids; this index gives them.
An id is never reused or changed: the first string seen gets 0, the next new one 1, and so on, in the
order the driver meets them (document order within a minibatch, so the ids do not depend on how a
minibatch is split into pieces). It grows with the stream (one entry per distinct string ever seen,
whether or not it is still in some topic's truncation ordered set). Saved as UTF-8 bytes plus offsets
(:meth:`WordIndex.to_arrays`), never pickled.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from topicflow._typing import IntArray
from topicflow.errors import InvalidParameterError


class WordIndex:
    """Append-only map from strings to word ids 0, 1, 2, ... in first-seen order.

    Parameters
    ----------
    words : iterable of str, optional
        Strings already indexed, in id order (no repeats).

    Examples
    --------
    >>> index = WordIndex()
    >>> index.add(["fox", "dog", "fox", "emu"]).tolist()
    [0, 1, 0, 2]
    >>> index.words, len(index)
    (('fox', 'dog', 'emu'), 3)
    """

    __slots__ = ("_words", "_ids")

    def __init__(self, words: Iterable[str] = ()) -> None:
        self._words: list[str] = []
        self._ids: dict[str, int] = {}
        for word in words:
            if word in self._ids:
                raise InvalidParameterError(f"word index: {word!r} appears twice; an index holds each string once")
            self._ids[str(word)] = len(self._words)
            self._words.append(str(word))

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WordIndex) and self._words == other._words

    def __repr__(self) -> str:
        return f"WordIndex({len(self)} words)"

    @property
    def words(self) -> tuple[str, ...]:
        """Every indexed string, in id order."""
        return tuple(self._words)

    def word(self, word_id: int) -> str:
        """Return the string of ``word_id``.

        Parameters
        ----------
        word_id : int

        Returns
        -------
        str
        """
        return self._words[int(word_id)]

    def strings(self, word_ids: Sequence[int] | IntArray) -> list[str]:
        """Return the strings of ``word_ids``, in order.

        Parameters
        ----------
        word_ids : sequence of int

        Returns
        -------
        list of str
        """
        return [self._words[int(i)] for i in np.asarray(word_ids, dtype=np.int64).tolist()]

    def ids(self, words: Iterable[str]) -> IntArray:
        """Return the ids of known strings; -1 for a string not in the index.

        Parameters
        ----------
        words : iterable of str

        Returns
        -------
        ndarray of int64
        """
        return np.array([self._ids.get(w, -1) for w in words], dtype=np.int64)

    def add(self, words: Iterable[str]) -> IntArray:
        """Give every new string the next id (in the order given); return the ids of all of them.

        Parameters
        ----------
        words : iterable of str
            Strings in the order met (repeats allowed).

        Returns
        -------
        ndarray of int64
            The id of each given string.
        """
        out = []
        for word in words:
            found = self._ids.get(word)
            if found is None:
                found = len(self._words)
                self._ids[word] = found
                self._words.append(word)
            out.append(found)
        return np.array(out, dtype=np.int64)

    def copy(self) -> WordIndex:
        """Return an independent copy (further additions do not reach this one)."""
        return WordIndex(self._words)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Return the index as plain arrays: ``bytes`` (uint8, the UTF-8 of every word) and ``offsets``.

        Returns
        -------
        dict of str to ndarray
            ``offsets`` (n_words + 1,) int64: word i is ``bytes[offsets[i]:offsets[i + 1]]``.
        """
        encoded = [w.encode("utf-8") for w in self._words]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        return {"bytes": data, "offsets": offsets}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> WordIndex:
        """Rebuild an index from :meth:`to_arrays`'s output.

        Parameters
        ----------
        arrays : mapping of str to ndarray
            ``bytes`` and ``offsets``.

        Returns
        -------
        WordIndex

        Raises
        ------
        InvalidParameterError
            Offsets that do not delimit the bytes, bytes that are not UTF-8, or a repeated word.
        """
        data = np.asarray(arrays["bytes"], dtype=np.uint8).tobytes()
        offsets = np.asarray(arrays["offsets"], dtype=np.int64)
        if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != len(data) \
                or np.any(np.diff(offsets) < 0):
            raise InvalidParameterError(
                f"word index offsets do not delimit its {len(data)} bytes (damaged model or checkpoint)")
        try:
            words = [data[int(lo):int(hi)].decode("utf-8") for lo, hi in zip(offsets[:-1], offsets[1:])]
        except UnicodeDecodeError as exc:
            raise InvalidParameterError(f"word index bytes are not UTF-8 ({exc}); the model is damaged") from exc
        return cls(words)
