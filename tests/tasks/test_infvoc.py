"""Graph builders and task bodies of the infvoc driver (tasks/infvoc.py)."""
from __future__ import annotations

import dask
import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import OrderedBlock
from topicflow.models.infvoc_lda import (
    InfVocParams,
    InfVocStats,
    empty_state,
    estep_documents,
    prepare_weights,
)
from topicflow.tasks.infvoc import (
    estep_piece,
    first_seen_codes,
    map_codes,
    map_estep,
    map_pieces,
    merge_infvoc,
    piece_codes,
    piece_word_ids,
)

PARAMS = InfVocParams(n_topics=3, burn_in=1, samples=2, seed=3)


def random_block(seed: int, n_docs: int = 9, n_terms: int = 6, n_oov: int = 3) -> OrderedBlock:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 8, n_docs)
    tokens = rng.integers(-n_oov, n_terms, lengths.sum()).astype(np.int32)
    return OrderedBlock(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), tokens,
                        np.array([f"oov{j}" for j in range(n_oov)], dtype=object),
                        np.array([f"d{d}" for d in range(n_docs)], dtype=object), 100, n_terms)


@pytest.mark.parametrize("seed", range(5))
def test_first_seen_codes_by_brute_force(seed: int) -> None:
    block = random_block(seed)
    expected: list[int] = []
    for code in block.tokens.tolist():  # one token at a time
        if code not in expected:
            expected.append(code)
    assert first_seen_codes(block).tolist() == expected
    codes, oov = piece_codes(block)
    assert oov == [f"oov{-c - 1}" for c in expected if c < 0]


def test_piece_word_ids_maps_every_token() -> None:
    block = random_block(7)
    codes = first_seen_codes(block)
    ids = np.arange(codes.shape[0]) * 10 + 5
    table = dict(zip(codes.tolist(), ids.tolist()))
    assert piece_word_ids(block, codes, ids).tolist() == [table[c] for c in block.tokens.tolist()]
    with pytest.raises(InvalidParameterError, match="no word id"):
        piece_word_ids(block, codes[1:], ids[1:])


def test_estep_piece_is_estep_documents_on_the_ids() -> None:
    block = random_block(2)
    codes = first_seen_codes(block)
    ids = np.arange(codes.shape[0])[::-1].copy()
    words = piece_word_ids(block, codes, ids)
    weights = prepare_weights(empty_state(3), words)
    stats, gamma = estep_piece(block, codes, ids, weights, PARAMS, 4)
    direct, direct_gamma = estep_documents(block.indptr, words, weights, PARAMS, first_doc=100, minibatch=4)
    assert np.array_equal(stats.kept_counts, direct.kept_counts) and np.array_equal(gamma, direct_gamma)


def test_graph_merges_pieces_into_the_whole_blocks_statistics(client: object) -> None:
    block = random_block(11, n_docs=12)
    pieces = map_pieces({0: dask.delayed(block)}, [(0, 0, 5), (0, 5, 6), (0, 6, 12)], token="t")
    assert [p.key for p in pieces] == ["infvoc-piece-t-0", "infvoc-piece-t-1", "infvoc-piece-t-2"]
    found = dask.compute(*map_codes(pieces, token="t"), scheduler="sync")
    codes = first_seen_codes(block)
    ids = np.arange(codes.shape[0])
    id_of = dict(zip(codes.tolist(), ids.tolist()))
    piece_ids = [np.array([id_of[c] for c in c_.tolist()]) for c_, _ in found]
    weights = prepare_weights(empty_state(3), ids)
    merged, gammas = map_estep(pieces, [c for c, _ in found], piece_ids, weights, PARAMS, minibatch=2, token="t",
                               split_every=2, doc_topics=True)
    if client is None:
        out = dask.compute(merged, *gammas, scheduler="threads")
    else:
        out = client.gather(client.compute([merged, *gammas]))  # type: ignore[attr-defined]
    whole, gamma = estep_documents(block.indptr, piece_word_ids(block, codes, ids), weights, PARAMS, first_doc=100,
                                   minibatch=2)
    assert np.array_equal(out[0].word_ids, whole.word_ids) and np.array_equal(out[0].kept_counts, whole.kept_counts)
    assert (out[0].n_docs, out[0].n_tokens) == (12, block.n_tokens)
    assert np.array_equal(np.concatenate(out[1:]), gamma)


def test_merge_is_order_free() -> None:
    parts = [InfVocStats(np.array([1, 4]), np.array([[1.0, 0, 2], [0, 3, 0]]), 1, 6, 2),
             InfVocStats(np.array([2, 4]), np.array([[2.0, 2, 0], [1, 0, 1]]), 2, 6, 2),
             InfVocStats(np.array([0]), np.array([[0.0, 0, 4]]), 1, 4, 2)]
    forward, backward = merge_infvoc(*parts), merge_infvoc(*parts[::-1])
    assert forward.word_ids.tolist() == [0, 1, 2, 4] and np.array_equal(forward.kept_counts, backward.kept_counts)
    assert forward.kept_counts[3].tolist() == [1.0, 3.0, 1.0] and (forward.n_docs, forward.n_tokens) == (4, 16)
