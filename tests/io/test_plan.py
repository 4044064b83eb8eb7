"""plan_reads: every request maps into exactly one block holding its bytes; limits respected."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refzarr.io import plan_reads

requests = st.lists(
    st.tuples(st.sampled_from(["a", "b", "s3://c/d"]), st.integers(0, 5000), st.integers(0, 400)),
    max_size=60,
)


@given(requests, st.integers(0, 300), st.integers(1, 2000))
def test_every_request_lies_inside_its_block(
    reqs: list[tuple[str, int, int]], max_gap: int, max_block: int
) -> None:
    urls = [u for u, _, _ in reqs]
    offsets = [o for _, o, _ in reqs]
    lengths = [n for _, _, n in reqs]
    plan = plan_reads(urls, offsets, lengths, max_gap=max_gap, max_block=max_block)
    for i, (url, offset, length) in enumerate(reqs):
        block = plan.blocks[int(plan.block_of[i])]
        assert block.url == url
        assert block.start + int(plan.offset_in_block[i]) == offset
        assert offset + length <= block.end
        assert int(plan.lengths[i]) == length
    for block in plan.blocks:
        members = np.flatnonzero(plan.block_of == plan.blocks.index(block))
        assert members.size, "no empty blocks"
        # a block bigger than max_block is one that a single request needs whole
        if block.length > max_block:
            assert any(lengths[m] > max_block or len(members) == 1 for m in members)


@given(requests)
def test_without_gaps_a_block_is_covered_by_its_requests(
    reqs: list[tuple[str, int, int]],
) -> None:
    plan = plan_reads(
        [u for u, _, _ in reqs],
        [o for _, o, _ in reqs],
        [n for _, _, n in reqs],
        max_gap=0,
        max_block=1,
    )
    for index, block in enumerate(plan.blocks):
        covered = np.zeros(block.length, dtype=bool)
        for member in np.flatnonzero(plan.block_of == index):
            start = int(plan.offset_in_block[member])
            covered[start : start + reqs[member][2]] = True
        assert covered.all(), "max_gap=0 reads no byte that was not asked for"


def test_neighbours_merge_and_distant_ranges_do_not() -> None:
    plan = plan_reads(
        ["f", "f", "f", "g"], [0, 110, 5000, 0], [100, 50, 10, 10], max_gap=10, max_block=1000
    )
    assert [(b.url, b.start, b.end) for b in plan.blocks] == [
        ("f", 0, 160),
        ("f", 5000, 5010),
        ("g", 0, 10),
    ]
    assert plan.block_of.tolist() == [0, 0, 1, 2]
    assert plan.offset_in_block.tolist() == [0, 110, 0, 0]


def test_max_block_splits_a_run_of_adjacent_ranges() -> None:
    plan = plan_reads(["f"] * 10, range(0, 1000, 100), [100] * 10, max_gap=0, max_block=300)
    assert [(b.start, b.end) for b in plan.blocks] == [
        (0, 300),
        (300, 600),
        (600, 900),
        (900, 1000),
    ]


def test_bad_requests_are_rejected() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        plan_reads(["f"], [0, 1], [1], max_gap=0, max_block=1)
    with pytest.raises(ValueError, match="non-negative"):
        plan_reads(["f"], [-1], [1], max_gap=0, max_block=1)
    assert plan_reads([], [], [], max_gap=0, max_block=1).blocks == ()
