"""What a first Parquet write, open and append import: not pandas. pyarrow imports it
(~0.4 s CPU) whenever ``pa.array``, ``to_numpy``, ``Table.group_by`` or a compute function
with Python scalars runs; the Parquet writer, reader and append build and read their Arrow
arrays through buffers (`refzarr.formats.parquet.arrow`). An append extending a last record
file whose ``path`` column is dictionary-encoded (many chunks per file) imported it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from appendkit import synthetic_file, values_of

import refzarr
from childkit import run_python

pytestmark = pytest.mark.filterwarnings(
    # fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet engine
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)

IN_A_FRESH_PROCESS = """
import sys
from pathlib import Path

import refzarr
from appendkit import synthetic_file

folder, step = Path(sys.argv[1]), sys.argv[2]
target = folder / "set.parq"
first, new = synthetic_file(folder, 0, 10), synthetic_file(folder, 10, 4)
assert "pandas" not in sys.modules, "pandas imported before"
if step == "write":
    refzarr.write(first, target, record_size=4)
elif step == "open":
    group = refzarr.read(target)
    for _, array in group.arrays():
        array.manifest.count_written()
    refzarr.expand_references(target)
elif step == "append":
    refzarr.write(new, target, append_dim="time")
print(sorted(name for name in sys.modules if name.split(".")[0] == "pandas")[:3])
"""


def test_a_first_write_open_and_append_import_no_pandas(tmp_path: Path) -> None:
    for step in ("write", "open", "append"):
        done = run_python("-c", IN_A_FRESH_PROCESS, str(tmp_path), step)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]", step
    import pyarrow.parquet as pq

    record = pq.read_schema(tmp_path / "set.parq" / "x" / "refs.2.parq")
    assert str(record.field("path").type).startswith("dictionary")  # the case that imported it


def test_the_extended_dictionary_record_reads_alike(tmp_path: Path) -> None:
    """The appended set (its last record file extended, dictionary-encoded) reads in refzarr
    and in fsspec + zarr as the 14 steps written at once."""
    from roundtrip import open_zarr_group

    target = tmp_path / "set.parq"
    first, new = synthetic_file(tmp_path, 0, 10), synthetic_file(tmp_path, 10, 4)
    refzarr.write(first, target, record_size=4)
    refzarr.write(new, target, append_dim="time")
    whole = refzarr.combine([first, new], concat_dims="time")
    assert refzarr.read(target) == whole
    np.testing.assert_array_equal(open_zarr_group(str(target))["x"][:], values_of(0, 14))
