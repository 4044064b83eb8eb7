"""Every numcodecs codec refzarr defines is declared as a ``numcodecs.codecs`` entry point, so
that numcodecs (and through it zarr-python, fsspec, xarray, refzarr's own reader in a fresh
process) finds it without anyone importing refzarr first."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import pkgutil
import tomllib
from pathlib import Path

import numpy as np
import pytest
from numcodecs.abc import Codec

import refzarr
import refzarr.codecs
from childkit import run_python
from corpus import CORPUS

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _defined_codecs() -> dict[str, str]:
    """``codec_id -> "module:Class"`` of every public numcodecs codec in refzarr.codecs."""
    out = {}
    for info in pkgutil.walk_packages(refzarr.codecs.__path__, "refzarr.codecs."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional library missing: its codecs are checked where it is
            continue
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Codec)
                and cls.__module__ == module.__name__
                and not name.startswith("_")
                and getattr(cls, "codec_id", None)
            ):
                out[cls.codec_id] = f"{cls.__module__}:{name}"
    return out


def _declared(group: str) -> dict[str, str]:
    with PYPROJECT.open("rb") as f:
        groups = tomllib.load(f)["project"]["entry-points"]
    return dict(groups.get(group, {}))


def test_every_codec_is_declared_for_numcodecs() -> None:
    defined = _defined_codecs()
    assert {"refzarr.fits_tile", "refzarr.grib", "refzarr_hdf5_nbit"} <= set(defined)
    declared = _declared("numcodecs.codecs")
    assert {k: declared.get(k) for k in defined} == defined


def test_no_numcodecs_codec_is_declared_as_a_zarr_v3_codec() -> None:
    """``zarr.codecs`` entry points are Zarr v3 codec classes: a numcodecs codec there is
    found by zarr under the wrong contract (and by numcodecs not at all)."""
    assert _declared("zarr.codecs") == {"refzarr.numcodecs": "refzarr.codecs.zarr3:NumcodecsStage"}


def test_installed_metadata_declares_them() -> None:
    """What pip installed agrees with pyproject.toml (a stale install: pip install -e .)."""
    installed = {e.name: e.value for e in importlib.metadata.entry_points(group="numcodecs.codecs")}
    declared = _declared("numcodecs.codecs")
    assert {k: installed.get(k) for k in declared} == declared


FRESH = """
import sys
import numpy as np, xarray as xr
refs, out = sys.argv[1], sys.argv[2]
assert "refzarr.codecs.fits" not in sys.modules
options = {"fo": refs, "remote_protocol": "file"}
ds = xr.open_dataset("reference://", engine="zarr", consolidated=False,
                     backend_kwargs={"storage_options": options})
np.save(out, ds["COMPRESSED_IMAGE"].values)
"""


def test_fits_tiles_decode_in_a_fresh_process(tmp_path: Path) -> None:
    """A tile-compressed FITS image's references decode through fsspec + zarr, and through
    ``refzarr validate --decode``, in processes that never imported refzarr's FITS codecs
    (both failed: the codecs were declared in the wrong entry-point group)."""
    astropy_fits = pytest.importorskip("astropy.io.fits")
    source = CORPUS / "fits" / "m13_rice.fits"
    refs = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(str(source)), refs)
    assert "refzarr.fits_tile" in json.dumps(json.loads(refs.read_text()))
    result = run_python("-c", FRESH, str(refs), str(tmp_path / "out.npy"))
    assert result.returncode == 0, result.stderr[-2000:]
    with astropy_fits.open(source) as hdus:
        want = hdus[1].data
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), want, strict=False)
    cli = "import sys; from refzarr.cli import main; sys.exit(main(sys.argv[1:]))"
    result = run_python("-c", cli, "validate", str(refs), "--decode")
    assert result.returncode == 0, result.stdout + result.stderr
