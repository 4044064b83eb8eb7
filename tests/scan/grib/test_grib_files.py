"""GRIB files the tests write from corpus messages: multi-field GRIB2 messages, fields that
cannot share a hypercube, remote files, and files combined along ``time`` and ``step``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from gribkit import assert_matches_eccodes, eccodes_fields, scan

import refzarr
from corpus import CORPUS
from refzarr.codecs.grib import grib2_fields
from refzarr.codecs.grib_eccodes import load_eccodes
from roundtrip import open_zarr_group

GRIB = CORPUS / "grib"


def messages(path: Path) -> list[bytes]:
    """The messages of a file, split by their section 0 lengths (padding dropped)."""
    data = path.read_bytes()
    out, position = [], 0
    while (position := data.find(b"GRIB", position)) >= 0:
        edition = data[position + 7]
        length = int.from_bytes(
            data[position + 4 : position + 7]
            if edition == 1
            else data[position + 8 : position + 16],
            "big",
        )
        out.append(data[position : position + length])
        position += length
    return out


def multi_field(*parts: bytes) -> bytes:
    """One GRIB2 message holding the fields of ``parts`` (single-field messages on one grid):
    sections 0, 1 and 3 of the first, then sections 4 to 7 of each."""
    first = parts[0]
    fields = grib2_fields(first)[0]
    head = first[16 : fields.product[0]]
    body = head + b"".join(p[slice(grib2_fields(p)[0].product[0], len(p) - 4)] for p in parts)
    total = 16 + len(body) + 4
    return first[:8] + total.to_bytes(8, "big") + body + b"7777"


def read_refzarr(group: refzarr.RefGroup) -> Any:
    def read(path: str, name: str) -> Any:
        with refzarr.open_dataset(group, group=path) as ds:
            return ds[name].values

    return read


def test_multi_field_message(tmp_path: Path) -> None:
    """Three fields of one message: each its own chunk, its index in the codec config (so
    each field index its own group); the first field again, in a message of its own, lands
    in an occupied cell: a fourth group."""
    parts = messages(GRIB / "regular_gg_ml_g2.grib")
    path = tmp_path / "multi.grib2"
    path.write_bytes(multi_field(*parts) + parts[0])
    group = scan(path)
    paths = sorted(p for p, _ in group.groups() if p.count("/") == 2)
    assert paths == ["t/instant/hybrid", *(f"t/instant/hybrid_{k}" for k in (2, 3, 4))]
    codecs = [group[f"{p}/t"].meta.codecs[-1] for p in paths]  # type: ignore[union-attr]
    assert [c.get("field", 0) for c in codecs] == [0, 1, 2, 0]
    ecc = eccodes_fields(path)
    assert len(ecc) == 4  # 3 + 1: ecCodes' multi-field support sees the same fields
    assert assert_matches_eccodes(group, ecc, read_refzarr(group)) == 4
    refzarr.write(group, tmp_path / "multi.json")

    def through_zarr(leaf: str, name: str) -> Any:
        return open_zarr_group(tmp_path / "multi.json", leaf)[name][...]

    assert_matches_eccodes(group, ecc, through_zarr)


def test_fields_on_two_grids(tmp_path: Path) -> None:
    """The same variable on two grids: the second grid's fields go to a ``_2`` group."""
    gg = messages(GRIB / "eccodes_ifs_gg_sfc_ccsds.grib2")[0]
    eccodes = load_eccodes()
    handle = eccodes.codes_new_from_message(gg)
    try:
        eccodes.codes_set(handle, "dataDate", 20200102)
        later = eccodes.codes_get_message(handle)
    finally:
        eccodes.codes_release(handle)
    regular = messages(GRIB / "regular_gg_ml_g2.grib")[0]
    handle = eccodes.codes_new_from_message(regular)
    try:
        eccodes.codes_set(handle, "typeOfLevel", "surface")
        surface = eccodes.codes_get_message(handle)
    finally:
        eccodes.codes_release(handle)
    path = tmp_path / "grids.grib2"
    path.write_bytes(gg + surface + later)
    group = scan(path)
    assert group["t/instant/surface/t"].shape == (2, 1, 13280)
    assert group["t/instant/surface_2/t"].shape == (1, 1, 160, 320)
    assert_matches_eccodes(group, eccodes_fields(path), read_refzarr(group))


def test_remote_file_through_memory() -> None:
    """An fsspec URL: read through ranged reads, referenced by the URL as given."""
    source = GRIB / "fields_with_missing_values.grib"
    url = "memory://grib-test/fields.grib"
    fs = fsspec.filesystem("memory")
    fs.pipe(url, source.read_bytes())
    try:
        group = scan(url)
        array = group["t2m/instant/surface/t2m"]
        assert array.manifest.paths == (url,)  # type: ignore[union-attr]
        with refzarr.open_dataset(group, group="t2m/instant/surface") as ds:
            values = ds["t2m"].values
        ecc = sorted(eccodes_fields(source).values(), key=lambda f: f.offset)
        for k, field in enumerate(ecc):
            np.testing.assert_array_equal(values[k, 0].reshape(-1), field.values, strict=True)
        assert np.isnan(values).any()
    finally:
        fs.rm(url)


def test_scan_s3(s3: Any) -> None:
    """A file on S3 (moto): scanned through fsspec ranges, read back through refzarr."""
    source = GRIB / "regular_gg_ml_g2.grib"
    bucket, options = s3
    url = f"s3://{bucket}/regular_gg_ml_g2.grib"
    fsspec.filesystem("s3", **options).pipe(url, source.read_bytes())
    group = refzarr.scan(url, storage_options=options)
    with refzarr.open_dataset(group, group="t/instant/hybrid", storage_options=options) as ds:
        values = ds["t"].values
    ecc = sorted(eccodes_fields(source).values(), key=lambda f: f.offset)
    for k, field in enumerate(ecc):
        np.testing.assert_array_equal(values[0, 0, k].reshape(-1), field.values, strict=True)


def _split(path: Path, size: int, where: Path) -> list[Path]:
    parts = messages(path)
    files = []
    for k in range(0, len(parts), size):
        out = where / f"part{k // size:03d}.grib"
        out.write_bytes(b"".join(parts[k : k + size]))
        files.append(out)
    return files


def test_combine_along_time(tmp_path: Path) -> None:
    """Files of consecutive times combine along ``time`` into the whole file's dataset."""
    source = GRIB / "era5-levels-members.grib"
    files = _split(source, 40, tmp_path)  # 4 files of one time each (10 members x 2 levels x 2)
    groups = [scan(f) for f in files]
    combined = refzarr.combine(groups, concat_dims="time")
    whole = scan(source)
    for leaf in ("t/instant/isobaricInhPa", "z/instant/isobaricInhPa"):
        with (
            refzarr.open_dataset(combined, group=leaf) as got,
            refzarr.open_dataset(whole, group=leaf) as want,
        ):
            got.load()
            want.load()
            for name in ("time", "valid_time", "step", "number", "isobaricInhPa", leaf[0]):
                np.testing.assert_array_equal(got[name].values, want[name].values, strict=True)


def test_files_of_different_lengths_along_time(tmp_path: Path) -> None:
    """Files holding 1 and 3 times: ``valid_time`` (time, step), inlined in each file, joins
    into one chunk, so the set is written as kerchunk (it was refused as an irregular grid),
    read by fsspec + zarr, and an append of the second file gives the same set."""
    source = GRIB / "era5-levels-members.grib"
    parts = messages(source)
    files = [tmp_path / "first.grib", tmp_path / "rest.grib"]
    files[0].write_bytes(b"".join(parts[:40]))
    files[1].write_bytes(b"".join(parts[40:]))
    groups = [scan(f) for f in files]
    combined = refzarr.combine(groups, concat_dims="time")
    whole = scan(source)
    leaf = "t/instant/isobaricInhPa"
    with (
        refzarr.open_dataset(combined, group=leaf) as got,
        refzarr.open_dataset(whole, group=leaf) as want,
    ):
        for name in ("time", "valid_time", "step", "number", "isobaricInhPa", "t"):
            np.testing.assert_array_equal(got[name].values, want[name].values, strict=True)
    refzarr.write(combined, tmp_path / "refs.json")
    refzarr.write(whole, tmp_path / "whole.json")
    got_z = open_zarr_group(tmp_path / "refs.json", leaf)
    want_z = open_zarr_group(tmp_path / "whole.json", leaf)
    for name in ("valid_time", "t"):
        np.testing.assert_array_equal(got_z[name][...], want_z[name][...], strict=True)
    refzarr.write(groups[0], tmp_path / "refs.parq")
    refzarr.write(groups[1], tmp_path / "refs.parq", append_dim="time")
    assert refzarr.read(tmp_path / "refs.parq") == refzarr.read(tmp_path / "refs.json")


def _with_step(message: bytes, hours: int) -> bytes:
    eccodes = load_eccodes()
    handle = eccodes.codes_new_from_message(message)
    try:
        eccodes.codes_set(handle, "stepType", "instant")
        eccodes.codes_set(handle, "step", hours)
        return bytes(eccodes.codes_get_message(handle))
    finally:
        eccodes.codes_release(handle)


def test_combine_along_step(tmp_path: Path) -> None:
    """Forecast files of one run at different steps combine along ``step``; ``valid_time``
    follows (time x step), steps exact timedeltas."""
    first = messages(GRIB / "fields_with_missing_values.grib")[0]
    files = []
    for hours in (0, 6, 12):
        out = tmp_path / f"f{hours:03d}.grib"
        out.write_bytes(_with_step(first, hours))
        files.append(out)
    groups = [scan(f) for f in files]
    combined = refzarr.combine(groups, concat_dims="step")
    with refzarr.open_dataset(combined, group="t2m/instant/surface") as ds:
        steps = ds["step"].values
        hours = np.array([0, 6, 12], dtype="m8[h]").astype("m8[ns]")
        np.testing.assert_array_equal(steps, hours, strict=True)
        valid = ds["valid_time"].values
        assert (valid[0] - ds["time"].values[0]).tolist() == steps.tolist()
        values = ds["t2m"].values
    for k, path in enumerate(files):
        (field,) = eccodes_fields(path).values()
        np.testing.assert_array_equal(values[0, k].reshape(-1), field.values, strict=True)


def test_sub_hourly_steps_are_exact() -> None:
    group = scan(GRIB / "hrrr.wrfsubhf.sample.grib2")
    with refzarr.open_dataset(group, group="refc/instant/atmosphere") as ds:
        minutes = np.array([15], dtype="m8[m]").astype("m8[ns]")
        np.testing.assert_array_equal(ds["step"].values, minutes, strict=True)


def test_inline_threshold_holds_small_messages() -> None:
    path = GRIB / "spherical_harmonics.grib"
    group = scan(path, inline_threshold=100_000)
    array = group["z/instant/isobaricInhPa/z"]
    assert isinstance(array.manifest[0, 0, 0], bytes)  # type: ignore[union-attr]
    with refzarr.open_dataset(group, group="z/instant/isobaricInhPa") as ds:
        got = ds["z"].values.reshape(-1)
    (field,) = eccodes_fields(path).values()
    np.testing.assert_array_equal(got, field.values, strict=True)


@pytest.mark.parametrize("name", ["cl00010000_ecoclimap_rot.grib1"])
def test_unknown_parameters_are_named_by_table_entry(name: str) -> None:
    group = scan(GRIB / name)
    names = {p.split("/")[0] for p, _ in group.groups() if p.count("/") == 2}
    assert "unknown" not in names
    assert any(n.startswith("param_") for n in names)


def test_detected_from_bytes(tmp_path: Path) -> None:
    """Every corpus GRIB file is recognised from its bytes (the ECOCLIMAP file after a
    12,000-byte header of its own); text mentioning GRIB is not."""
    from gribkit import grib_corpus

    from refzarr.scan.detect import detect_format

    assert {detect_format(str(p)).name for p in grib_corpus()} == {"grib"}
    text = tmp_path / "notes.txt"
    text.write_bytes(b"x" * 5000 + b"GRIB\x00\x00\x10\x02" + b"\x00" * 5000)
    with pytest.raises(refzarr.ScanError, match="not a format refzarr recognises"):
        detect_format(str(text))


def test_cells_without_a_message_are_missing_chunks(tmp_path: Path) -> None:
    """A hypercube cell no message fills is a missing chunk (reads NaN), not a fill-in."""
    parts = messages(GRIB / "era5-levels-members.grib")
    path = tmp_path / "holes.grib"
    path.write_bytes(b"".join(parts[:7] + parts[8:]))
    group = scan(path)
    missing = 0
    for _, array in group.arrays():
        if array.meta.codecs and array.meta.codecs[-1]["id"] == "refzarr.grib":
            missing += int((array.manifest.path_id < 0).sum())
    assert missing == 1
    ecc = eccodes_fields(path)
    assert assert_matches_eccodes(group, ecc, read_refzarr(group)) == len(parts) - 1
