"""Failures that are not refzarr's own (Python's recursion limit, int() of 5,000 digits) come
out as refzarr errors naming the reference set or key, fast."""

from __future__ import annotations

from pathlib import Path

import pytest

import refzarr


def _v1(url: str) -> dict[str, object]:
    return {
        "version": 1,
        "refs": {
            ".zgroup": '{"zarr_format":2}',
            "v/.zarray": '{"shape":[1],"chunks":[1],"dtype":"|u1","fill_value":null,'
            '"order":"C","filters":null,"compressor":null,"zarr_format":2}',
            "v/0": [url, 0, 1],
        },
    }


@pytest.mark.parametrize("read", [refzarr.read, refzarr.expand_references])
def test_json_nested_100000_deep(tmp_path: Path, read: object) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(refzarr.RefFormatError, match=r"deep\.json"):
        read(path)  # type: ignore[operator]


@pytest.mark.parametrize("read", [refzarr.read, refzarr.expand_references])
def test_integer_of_5000_digits(tmp_path: Path, read: object) -> None:
    path = tmp_path / "digits.json"
    path.write_text('{".zgroup": {"zarr_format": 2}, "v/0": ["x", ' + "9" * 5000 + ", 1]}")
    with pytest.raises(refzarr.RefFormatError, match=r"digits\.json"):
        read(path)  # type: ignore[operator]


@pytest.mark.parametrize("expression", ["(" * 50_000 + "1" + ")" * 50_000, "-" * 50_000 + "1"])
def test_templates_nested_50000_deep(expression: str) -> None:
    refs = _v1("{{" + expression + "}}")
    with pytest.raises(refzarr.RefFormatError, match=r"v/0.*nested too deeply|v/0"):
        refzarr.expand_references(refs)
    with pytest.raises(refzarr.RefFormatError):
        refzarr.read(refs)


def test_soft_link_cycles_are_a_scan_error(tmp_path: Path) -> None:
    import h5py
    import numpy as np

    path = tmp_path / "cycle.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(3)
        f["a"] = h5py.SoftLink("/b")
        f["b"] = h5py.SoftLink("/a")
    with pytest.raises(refzarr.RefzarrError, match=r"cycle\.h5"):
        refzarr.scan(path)
    group = refzarr.scan(path, on_unsupported="skip")
    assert "data" in group.members
