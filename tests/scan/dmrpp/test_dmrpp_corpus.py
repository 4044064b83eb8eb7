"""Every DMR++ sidecar of the corpus, scanned alone: the same group as the HDF5 scan of the
data file beside it (differences listed and explained below), and exactly h5py's values
through refzarr's store and through fsspec + zarr on our JSON and Parquet."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from dmrppkit import CORPUS_SIDECARS, assert_values_match_h5, differences

import refzarr
from refzarr.scan import ScannedGroup

pytestmark = pytest.mark.skipif(not CORPUS_SIDECARS, reason="corpus absent")

# fsspec reads Parquet reference sets with fastparquet by default
FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

LEVEL_UNKNOWN = "the sidecar gives no deflateLevel: level 6 (the level never changes decoding)"
STALE = "FletcherShuffle.nc4.dmrpp"
"""A sidecar of another version of its data file: every offset is 40 bytes short of the
file's (its header grew), the file's deflate filter and ``_Deflate`` attribute differ."""

ACCEPTED = {
    "FValue_c_b.h5.dmrpp": {
        "chunks_all_fill: codecs": LEVEL_UNKNOWN,
        "chunks_some_fill: codecs": LEVEL_UNKNOWN,
    },
    "SDS_fle_shuf_def.h5.dmrpp": {"IntArray: codecs": LEVEL_UNKNOWN},
    "chunked_gzipped_threeD.h5.dmrpp": {
        "d_8_gzipped_chunks: attribute 'fullnamepath'": "written by the handler, not in the file",
        "d_8_gzipped_chunks: attribute 'origname'": "written by the handler, not in the file",
    },
    "chunked_shufzip_fourD.h5.dmrpp": {
        "d_16_shufzip_chunks: attribute 'fullnamepath'": "written by the handler",
        "d_16_shufzip_chunks: attribute 'origname'": "written by the handler",
    },
    "chunked_twoD_uneven.h5.dmrpp": {
        "d_10_odd_chunks: attribute 'fullnamepath'": "written by the handler",
        "d_10_odd_chunks: attribute 'origname'": "written by the handler",
    },
    "d_int.h5.dmrpp": {"d16_2: attribute 'value_2d'": "DAP4 attributes are flat: 2-D lost"},
    "vl_str_array.h5.dmrpp": {
        "str_cmp: chunks": "the sidecar does not give a vlen string dataset's HDF5 chunks"
    },
}


@pytest.fixture(scope="module", params=CORPUS_SIDECARS, ids=lambda p: p.name)
def scans(request: pytest.FixtureRequest) -> tuple[Path, ScannedGroup, refzarr.RefGroup]:
    sidecar: Path = request.param
    return sidecar, refzarr.scan(str(sidecar)), refzarr.scan(str(sidecar)[: -len(".dmrpp")])


def test_detected_as_dmrpp(scans: tuple[Path, ScannedGroup, refzarr.RefGroup]) -> None:
    from refzarr.scan.detect import detect_format

    assert detect_format(str(scans[0])).name == "dmrpp"


def test_same_group_as_the_hdf5_scan(scans: tuple[Path, ScannedGroup, refzarr.RefGroup]) -> None:
    sidecar, dmrpp, hdf5 = scans
    assert dmrpp.skipped == ()
    found = differences(dmrpp, hdf5)
    if sidecar.name == STALE:
        assert all("manifest" in d or d.startswith("Y: ") for d in found), found
        return
    accepted = ACCEPTED.get(sidecar.name, {})
    unexplained = [d for d in found if not any(d.startswith(key + ":") for key in accepted)]
    assert unexplained == []
    assert len(found) == len(accepted)


@FASTPARQUET
def test_values_identical_to_h5py(
    scans: tuple[Path, ScannedGroup, refzarr.RefGroup], tmp_path: Path
) -> None:
    sidecar, dmrpp, _ = scans
    data = Path(str(sidecar)[: -len(".dmrpp")])
    if sidecar.name == STALE:
        pytest.skip("stale sidecar: see test_stale_sidecar_is_told_apart")
    assert assert_values_match_h5(dmrpp, data, tmp_path) == 3 * len(list(dmrpp.arrays()))


def test_stale_sidecar_is_told_apart() -> None:
    """The corpus's FletcherShuffle sidecar describes another version of its data file: its
    offsets are 40 bytes short. Contiguous data cannot tell; the fletcher32 checksum of ``Y``
    does, so reading it is an error, never wrong values."""
    sidecar = next(p for p in CORPUS_SIDECARS if p.name == STALE)
    group = refzarr.scan(str(sidecar))
    hdf5 = refzarr.scan(str(sidecar)[: -len(".dmrpp")])
    offsets = {p: a.manifest.offset.ravel()[0] for p, a in group.arrays()}
    truth = {p: a.manifest.offset.ravel()[0] for p, a in hdf5.arrays()}
    assert {p: int(truth[p]) - int(o) for p, o in offsets.items()} == dict.fromkeys(offsets, 40)
    with h5py.File(str(sidecar)[: -len(".dmrpp")]) as f:
        assert f["fvcom_mesh"][()] == 666
    with pytest.raises(refzarr.ChunkDecodeError, match="fletcher32 checksum"):
        np.asarray(refzarr.open_dataset(group)["Y"].values)
