"""The ``refzarr.grib`` codec (registered with numcodecs, importable without ecCodes) and
one process importing refzarr, ecCodes, pyproj, rasterio and cfgrib in any order."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numcodecs
import numpy as np
import pytest
from gribkit import eccodes_fields

import refzarr
from childkit import run_python
from corpus import CORPUS
from refzarr.codecs.grib import GribCodec, extract_field, grib2_fields

SOURCE = CORPUS / "grib" / "gec00_20250101_00_soilw.grib2"  # a bitmap, complex packing


def test_codec_is_registered_and_round_trips_its_config() -> None:
    codec = numcodecs.get_codec({"id": "refzarr.grib", "field": 2, "rows": [3, 4]})
    assert isinstance(codec, GribCodec)
    assert codec.get_config() == {"id": "refzarr.grib", "field": 2, "rows": [3, 4]}
    assert GribCodec().get_config() == {"id": "refzarr.grib"}


def test_codec_decodes_a_message_with_missing_points() -> None:
    data = SOURCE.read_bytes()
    values = GribCodec().decode(data)
    (field,) = eccodes_fields(SOURCE).values()
    np.testing.assert_array_equal(values, field.values, strict=True)
    assert np.isnan(values).any()
    out = np.empty(values.size, np.float32)
    GribCodec().decode(data, out=out)
    np.testing.assert_array_equal(out, values, strict=True)


def test_codec_refuses_to_encode() -> None:
    with pytest.raises(NotImplementedError, match="cannot encode"):
        GribCodec().encode(b"")


def test_field_index_of_a_single_field_message() -> None:
    data = SOURCE.read_bytes()
    assert len(grib2_fields(data)) == 1
    assert extract_field(data, 0) is data
    with pytest.raises(ValueError, match="holds 1 field"):
        extract_field(data, 1)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter importing this refzarr (the one under test)."""
    return run_python("-c", code, cwd=Path(__file__).parent)


DECODE = f"""
import numpy as np, refzarr
group = refzarr.scan({str(SOURCE)!r})
with refzarr.open_dataset(group, group="soilw/instant/depthBelowLandLayer") as ds:
    assert np.isfinite(ds["soilw"].values).any()
"""
PROJ = "import pyproj; assert pyproj.CRS.from_epsg(4326).name == 'WGS 84'\n"


LAZY = """
import sys, refzarr, refzarr.scan.grib, refzarr.codecs.grib
from refzarr.scan.base import registered_formats
registered_formats()
assert "eccodes" not in sys.modules and "pyproj" not in sys.modules, "loaded too early"
"""


@pytest.mark.parametrize(
    "order",
    [
        ["LAZY", "DECODE", "PROJ", "import cfgrib", "import rasterio", "PROJ"],
        ["import eccodes", "import rasterio", "import cfgrib", "DECODE", "PROJ"],
        ["import pyproj", "PROJ", "import refzarr", "DECODE", "import rasterio", "PROJ"],
        ["import xarray; xarray.backends.list_engines()", "PROJ", "DECODE", "PROJ"],
    ],
    ids=["refzarr-first", "eccodes-first", "pyproj-first", "xarray-engines-first"],
)
def test_libraries_in_one_process(order: list[str]) -> None:
    """refzarr loads no ecCodes (nor pyproj) until a GRIB file is scanned or decoded, and is
    never the import that breaks pyproj (or crashes the process)."""
    pytest.importorskip("rasterio")
    steps = {"DECODE": DECODE, "PROJ": PROJ, "LAZY": LAZY}
    code = "\n".join(steps.get(step, step) for step in order)
    result = _run(code + "\nprint('ok')\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")


def test_codec_reverses_alternate_rows() -> None:
    """``rows``: every other row reversed, as cfgrib does for alternative row scanning."""
    data = SOURCE.read_bytes()
    plain = GribCodec().decode(data).reshape(361, 720)
    turned = GribCodec(rows=(361, 720)).decode(data).reshape(361, 720)
    np.testing.assert_array_equal(turned[0::2], plain[0::2], strict=True)
    np.testing.assert_array_equal(turned[1::2], plain[1::2, ::-1], strict=True)


THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from refzarr.codecs.grib import GribCodec
messages = list(np.load(sys.argv[1], allow_pickle=False).values())
assert "eccodes" not in sys.modules  # cold: ecCodes has parsed no definitions yet
with ThreadPoolExecutor(8) as pool:
    decoded = list(pool.map(lambda m: GribCodec().decode(m.tobytes()), messages))
np.savez(sys.argv[2], *decoded)
print("ok")
"""


def test_codec_decodes_from_many_threads_in_a_cold_process(tmp_path: Path) -> None:
    """The first messages ecCodes sees, decoded from eight threads at once (as the reader does
    on a reference set it did not scan), give ecCodes' values: creating handles in parallel
    crashed the process ("fatal flex scanner internal error") or failed ("no definitions
    found")."""
    messages: list[bytes] = []
    for path in sorted((CORPUS / "grib").glob("*.grib*")):
        for _, array in refzarr.scan(str(path)).arrays():
            if array.meta.codecs and array.meta.codecs[-1].get("id") == "refzarr.grib":
                block = array.manifest.block(0)
                for row in np.flatnonzero(block.path_id >= 0)[:3].tolist():
                    with open(block.paths[int(block.path_id[row])], "rb") as f:
                        f.seek(int(block.offset[row]))
                        messages.append(f.read(int(block.length[row])))
    assert len(messages) > 30
    np.savez(tmp_path / "in.npz", *[np.frombuffer(m, np.uint8) for m in messages])
    for _ in range(3):
        result = _run(
            THREADS.replace("sys.argv[1]", repr(str(tmp_path / "in.npz"))).replace(
                "sys.argv[2]", repr(str(tmp_path / "out.npz"))
            )
        )
        assert result.returncode == 0, result.stderr[-2000:]
        decoded = list(np.load(tmp_path / "out.npz").values())
        for message, values in zip(messages, decoded, strict=True):
            np.testing.assert_array_equal(values, GribCodec().decode(message), strict=True)


SCAN_THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
import refzarr
files, out = sys.argv[1].split(","), sys.argv[2]
with ThreadPoolExecutor(8) as pool:
    groups = refzarr.scan_many(files, executor=pool)
for k, group in enumerate(groups):
    refzarr.write(group, f"{out}.{k}.json")
print("ok")
"""


def test_scan_many_on_threads_in_a_cold_process(tmp_path: Path) -> None:
    """Scanning GRIB files from eight threads at once (``scan_many`` with a thread pool)
    gives the serial scans: ecCodes' first key lookups crashed the process."""
    paths = sorted((CORPUS / "grib").glob("*.grib*"), key=lambda p: p.stat().st_size)
    files = [str(p) for p in paths if p.stat().st_size < 1_000_000]  # both editions, 9 files
    out = str(tmp_path / "g")
    code = SCAN_THREADS.replace("sys.argv[1]", repr(",".join(files))).replace(
        "sys.argv[2]", repr(out)
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr[-2000:]
    for k, path in enumerate(files):
        assert refzarr.read(f"{out}.{k}.json") == refzarr.scan(path)
