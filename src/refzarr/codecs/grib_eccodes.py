"""Loading ecCodes safely, and decoding one GRIB message's values with it.

The pip builds of ecCodes bundle their own PROJ (and, from 2.39, eckit): loaded before
pyproj, they can break pyproj's database in the same process. pyproj, when installed, is
therefore imported first (what works in every combination we tested), and ecCodes is loaded
only when a GRIB chunk is decoded or a GRIB file is scanned.
"""

from __future__ import annotations

import importlib.util
import threading
from types import ModuleType
from typing import Any

import numpy as np

from refzarr.errors import MissingDependencyError

__all__ = ["ECCODES_HANDLES", "decoded_values", "load_eccodes"]

MISSING = float(np.finfo(np.float32).max)
"""What ecCodes is told to write at missing points (cfgrib's choice), then made NaN."""

_lock = threading.Lock()
_module: ModuleType | None = None
ECCODES_HANDLES = threading.Lock()
"""Held while ecCodes makes a handle (and while the GRIB scanner reads keys): the first
handle of each kind of message, and the first lookup of a concept key, read and parse
definition files, which crashes the process ("fatal flex scanner internal error") or fails
("no definitions found") when two threads do it at once, even in builds with
ECCODES_THREADS. Unpacking the values (most of a decode's cost) runs unlocked."""


def load_eccodes() -> ModuleType:
    """The ``eccodes`` module, imported once, after pyproj when pyproj is installed.

    Raises
    ------
    MissingDependencyError
        When ecCodes is not installed (names ``pip install 'refzarr[grib]'``).
    """
    global _module
    if _module is not None:
        return _module
    with _lock:
        if _module is None:
            if importlib.util.find_spec("pyproj") is not None:
                import pyproj  # noqa: F401  (before ecCodes' bundled PROJ; see the module doc)
            try:
                import eccodes
            except ImportError as exc:
                raise MissingDependencyError(
                    "decoding GRIB needs ecCodes (the 'eccodes' package), which is not "
                    "installed or cannot load: pip install 'refzarr[grib]'"
                ) from exc
            _module = eccodes
    return _module


def decoded_values(message: bytes) -> Any:
    """The values of a single-field GRIB message as float32, missing points NaN.

    The points ecCodes reports as missing (bitmaps, complex packing's missing-value
    management) are made NaN as cfgrib does: ``missingValue`` is set to the largest float32
    before the values are read, and points holding it become NaN.
    """
    eccodes = load_eccodes()
    with ECCODES_HANDLES:  # ecCodes parses definitions lazily, unsafely from two threads
        handle = eccodes.codes_new_from_message(message)
    try:
        eccodes.codes_set_double(handle, "missingValue", MISSING)
        values = eccodes.codes_get_values(handle)
    finally:
        eccodes.codes_release(handle)
    result = np.asarray(values, dtype=np.float32)
    result[result == MISSING] = np.nan
    return result
