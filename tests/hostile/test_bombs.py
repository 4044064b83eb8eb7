"""Small input, bounded cost: ``gen`` entries that declare astronomically many references are
refused before anything is generated, in milliseconds."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import refzarr
from refzarr.model import templates

ZARRAY = (
    '{"shape":[1000000000000],"chunks":[1],"dtype":"|u1","fill_value":null,"order":"C",'
    '"filters":null,"compressor":null,"zarr_format":2}'
)


def _gen_set(*dimensions: dict[str, object]) -> dict[str, object]:
    dims = {f"i{n}": d for n, d in enumerate(dimensions)}
    key = "v/" + ".".join("{{i%d}}" % n for n in range(len(dimensions)))  # noqa: UP031
    return {
        "version": 1,
        "refs": {".zgroup": '{"zarr_format":2}', "v/.zarray": ZARRAY},
        "gen": [{"key": key, "url": "file:///x", "offset": "0", "length": "1", "dimensions": dims}],
    }


@pytest.fixture
def small_limit() -> Iterator[None]:
    templates.set_max_generated(1000)
    yield
    templates.set_max_generated(templates.MAX_GENERATED)


@pytest.mark.parametrize(
    "dimensions",
    [
        ({"stop": 10**12},),
        ({"stop": 10**5}, {"stop": 10**5}, {"stop": 3}),
        ({"start": -(10**15), "stop": 10**15, "step": 7},),
    ],
)
def test_gen_bombs_are_refused_before_expanding(
    tmp_path: Path, dimensions: tuple[dict[str, object], ...]
) -> None:
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(_gen_set(*dimensions)))
    assert path.stat().st_size < 1000
    for read in (refzarr.read, refzarr.expand_references):
        started = time.monotonic()
        with pytest.raises(refzarr.RefFormatError, match=r"gen\[0\]: generates .* limit"):
            read(path)
        assert time.monotonic() - started < 5  # a hang or an expansion would take minutes


def test_the_limit_is_configurable(small_limit: None) -> None:
    with pytest.raises(refzarr.RefFormatError, match=r"1,001 references .* limit of 1,000"):
        refzarr.expand_references(_gen_set({"stop": 1001}))
    assert len(refzarr.expand_references(_gen_set({"stop": 1000}))) == 1002
    with pytest.raises(ValueError, match="positive integer"):
        templates.set_max_generated(0)


def test_boolean_range_bounds_are_refused() -> None:
    with pytest.raises(refzarr.RefFormatError, match="start and step must be integers"):
        refzarr.expand_references(_gen_set({"start": True, "stop": 3}))
