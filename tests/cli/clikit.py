"""Test kit of the command tests: a small reference set with every kind of chunk entry, and the
installed ``refzarr`` command."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.model import INLINED, MISSING


def make_group() -> RefGroup:
    """Two arrays: 'temp' with referenced, inlined and missing chunks; 'sub/flag' all missing."""
    paths = ["s3://bucket/a.nc", "s3://bucket/b.nc"]
    path_id = np.array([[0, 1], [INLINED, MISSING]])
    offset = np.array([[100, 200], [0, 0]])
    length = np.array([[50, 60], [0, 0]])
    manifest = ChunkManifest.from_arrays(
        paths, path_id, offset, length, inlined={(1, 0): b"\x00\xff\x10"}
    )
    temp = RefArray(
        ArrayMeta(
            shape=(4, 6),
            chunks=(2, 3),
            dtype=np.dtype("<f4"),
            fill_value=float("nan"),
            codecs=({"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 4}),
            dimension_names=("y", "x"),
        ),
        manifest,
    )
    flag = RefArray(
        ArrayMeta(shape=(3,), chunks=(3,), dtype=np.dtype("u1")), ChunkManifest.missing((1,))
    )
    return RefGroup({"title": "cli test"}, {"temp": temp, "sub": RefGroup(members={"flag": flag})})


def installed_command() -> str:
    """The ``refzarr`` script installed next to this interpreter (else the one on PATH)."""
    beside = Path(sys.executable).with_name("refzarr")
    found = str(beside) if beside.exists() else shutil.which("refzarr")
    if found is None:
        pytest.fail("the refzarr command is not installed: pip install -e .")
    return found
