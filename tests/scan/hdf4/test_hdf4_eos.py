"""HDF-EOS2 grids get 1-D coordinates from ``StructMetadata.0``: checked on the MODIS tile of
the corpus against the MODIS sinusoidal tiling (tile h14v17: 1,111,950.5197 m tiles from
x = -20,015,109.354 m, y = 10,007,554.677 m), and on packed-degree geographic grids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from h4kit import refzarr_reader

import refzarr
from corpus import CORPUS
from refzarr.scan.hdf4.eos import axes, packed_degrees, parse_grids

MODIS = CORPUS / "hdf4" / "MOD09GA.A2008296.h14v17.006.2015181011753.hdf"
TILE = 1_111_950.5197665233
"""Width of a MODIS sinusoidal tile, metres (the published tiling constant)."""


@pytest.fixture(scope="module")
def modis() -> tuple[refzarr.RefGroup, Any]:
    if not MODIS.exists():
        pytest.skip("corpus absent")
    group = refzarr.scan(MODIS)
    return group, refzarr_reader(group)


@pytest.mark.parametrize(
    ("grid", "cells"), [("MODIS_Grid_500m_2D", 2400), ("MODIS_Grid_1km_2D", 1200)]
)
def test_modis_tile_coordinates(modis: tuple[refzarr.RefGroup, Any], grid: str, cells: int) -> None:
    group, read = modis
    x, y = read(f"XDim:{grid}"), read(f"YDim:{grid}")
    size = TILE / cells  # the file's corners are rounded to the micrometre: 1 cm tolerance
    left, top = -20_015_109.354 + 14 * TILE, 10_007_554.677 - 17 * TILE
    np.testing.assert_allclose(x, left + (np.arange(cells) + 0.5) * size, rtol=0, atol=1e-2)
    np.testing.assert_allclose(y, top - (np.arange(cells) + 0.5) * size, rtol=0, atol=1e-2)
    assert group[f"XDim:{grid}"].meta.attributes["standard_name"] == "projection_x_coordinate"


def test_geographic_grid_in_packed_degrees() -> None:
    text = """GROUP=GridStructure
	GROUP=GRID_1
		GridName="Geo"
		XDim=4
		YDim=2
		UpperLeftPointMtrs=(-180000000.000000,90000000.000000)
		LowerRightMtrs=(180000000.000000,-90000000.000000)
		Projection=GCTP_GEO
		GridOrigin=HDFE_GD_UL
		GROUP=Dimension
		END_GROUP=Dimension
	END_GROUP=GRID_1
END_GROUP=GridStructure
"""
    (grid,) = parse_grids(text)
    x, y = axes(grid)
    np.testing.assert_allclose(x, [-135, -45, 45, 135])
    np.testing.assert_allclose(y, [45, -45])
    assert packed_degrees(-45030000.0) == pytest.approx(-45.5)
