"""`ArrayMeta` with the dtypes the HDF5 scanner now produces: object (vlen codecs) and void."""

from __future__ import annotations

import numpy as np
import pytest

from refzarr.errors import RefFormatError
from refzarr.model import ArrayMeta


@pytest.mark.parametrize("codec", ["vlen-utf8", "vlen-bytes"])
def test_object_dtype_with_a_vlen_codec_renders_and_parses(codec: str) -> None:
    meta = ArrayMeta((5, 2), (2, 2), np.dtype("O"), None, ({"id": codec},), {"a": 1}, ("x", "y"))
    zarray, zattrs = meta.to_zarr_v2()
    assert zarray["dtype"] == "|O"
    assert zarray["fill_value"] is None
    assert zarray["filters"] == [{"id": codec}]
    assert zarray["compressor"] is None
    assert ArrayMeta.from_zarr_v2(zarray, zattrs) == meta


def test_void_dtype_renders_and_parses() -> None:
    meta = ArrayMeta((3,), (3,), np.dtype("V6"), None, (), {"_hdf5_opaque_tag": "t"})
    zarray, zattrs = meta.to_zarr_v2()
    assert zarray["dtype"] == "|V6"
    assert ArrayMeta.from_zarr_v2(zarray, zattrs) == meta


def test_sub_array_dtype_is_only_valid_as_a_field() -> None:
    with pytest.raises(RefFormatError, match="sub-array"):
        ArrayMeta((3,), (3,), np.dtype(("<f4", (3,))))
