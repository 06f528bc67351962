"""Blocks and partitions of the distributed Gibbs sampler (topicflow.tasks.gibbs): store-defined, graph-only."""
from __future__ import annotations

from topicflow.io.corpus.layout import ShardInfo
from topicflow.tasks.gibbs import plan_blocks, plan_partitions


def _shards() -> list[ShardInfo]:
    sizes, first, out = (5, 3, 6), 0, []
    for i, n in enumerate(sizes):
        out.append(ShardInfo(f"{i:06d}", first, n, {"default": 10 * n}, "sha256:x"))
        first += n
    return out


def test_blocks_are_runs_of_documents_across_shards() -> None:
    blocks = plan_blocks(_shards(), 4)
    assert [(b.index, b.first_doc, b.n_docs) for b in blocks] == [(0, 0, 4), (1, 4, 4), (2, 8, 4), (3, 12, 2)]
    assert blocks[1].pieces == ((0, 4, 5), (1, 0, 3))
    assert blocks[2].pieces == ((2, 0, 4),)
    assert sum(b.n_docs for b in plan_blocks(_shards(), 100)) == 14


def test_partitions_group_consecutive_blocks_and_name_their_shards() -> None:
    shards = _shards()
    blocks = plan_blocks(shards, 4)
    partitions = plan_partitions(shards, blocks, 3)
    assert [[b.index for b in p.blocks] for p in partitions] == [[0, 1, 2], [3]]
    assert sorted(partitions[0].shards) == [0, 1, 2] and sorted(partitions[1].shards) == [2]
    assert [len(p.blocks) for p in plan_partitions(shards, blocks, 1)] == [1, 1, 1, 1]
