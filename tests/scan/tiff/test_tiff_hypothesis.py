"""Random small TIFFs (shape, dtype, tiles or strips, planar or chunky, compression, predictor,
byte order, BigTIFF) read back through refzarr exactly as tifffile reads them."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiffkit import assert_matches_tiff

import refzarr


@st.composite
def tiffs(draw: st.DrawFn) -> tuple[np.ndarray, dict[str, Any]]:
    height, width = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    samples = draw(st.sampled_from([1, 1, 3, 4]))
    dtype = np.dtype(draw(st.sampled_from(["u1", "u2", "i2", "u4", "f4", "f8"])))
    planar = samples > 1 and draw(st.booleans())
    shape = (samples, height, width) if planar else (height, width, samples)
    seed = draw(st.integers(0, 2**16))
    values = np.random.default_rng(seed).normal(0, 300, shape)
    data = values.astype(dtype) if dtype.kind == "f" else np.abs(values).astype(dtype)
    if samples == 1:
        data = data[..., 0]
    kwargs: dict[str, Any] = {
        "photometric": "minisblack",
        "byteorder": draw(st.sampled_from(["<", ">"])),
        "bigtiff": draw(st.booleans()),
        "compression": draw(st.sampled_from([None, "zlib", "lzw", "packbits", "zstd"])),
        "metadata": None,
    }
    if samples > 1:
        kwargs["planarconfig"] = "separate" if planar else "contig"
    if draw(st.booleans()):
        kwargs["tile"] = (16 * draw(st.integers(1, 2)), 16 * draw(st.integers(1, 2)))
    else:
        kwargs["rowsperstrip"] = draw(st.integers(1, height + 2))
    if kwargs["compression"] in ("zlib", "lzw") and draw(st.booleans()):
        kwargs["predictor"] = "floatingpoint" if dtype.kind == "f" else "horizontal"
    return data, kwargs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiffs())
def test_random_tiffs_read_back(case: tuple[np.ndarray, dict[str, Any]]) -> None:
    data, kwargs = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.tif"
        tifffile.imwrite(path, data, **kwargs)
        assert_matches_tiff(refzarr.scan(path), path)
