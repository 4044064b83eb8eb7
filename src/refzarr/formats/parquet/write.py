"""`RefGroup` -> fsspec's Parquet reference layout, with explicit column types.

Writes ``root/.zmetadata`` (every group's ``.zgroup``/``.zattrs`` and every array's
``.zarray``/``.zattrs`` as JSON objects, plus ``record_size``), the record of sources in a
file of its own (`refzarr.formats.parquet.sources_file`) and, for every array with at
least one chunk, one ``root/<array>/refs.<i>.parq`` per record, all-missing records included:
a reader can then tell a lost file from a record with nothing in it. Arrays with no chunk
written get no record files, as fsspec does. Chunk keys are always written with ``.`` as
dimension separator: fsspec's lazy mapper splits the array path from the chunk key at the
last ``/``, so ``/``-separated keys of 2-D or larger arrays would not resolve.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from refzarr.formats.parquet.source import COMPLETE_KEY, record_file_name
from refzarr.formats.parquet.sources_file import SOURCES_FILE, SOURCES_KEY, sources_file
from refzarr.formats.parquet.tables import entry_slices, record_table
from refzarr.model.group import RefArray, RefGroup
from refzarr.model.hierarchy import metadata_documents, require_regular_grids
from refzarr.model.sparse import check_dense

__all__ = [
    "encode_record",
    "set_documents",
    "write_parquet",
    "write_records",
    "zmetadata_document",
]

_THREADS = 4
"""Record files encoded at once (zstd and Parquet encoding release the GIL)."""
_INT_ENCODING = {"offset": "DELTA_BINARY_PACKED", "size": "DELTA_BINARY_PACKED"}


def write_parquet(group: RefGroup, fs: Any, root: str, *, record_size: int) -> None:
    """Write ``group`` as ``root/.zmetadata`` and ``root/<array>/refs.<i>.parq``.

    Parameters
    ----------
    group
        The hierarchy to write.
    fs
        fsspec filesystem to write on.
    root
        Directory to create (its parent exists or is created).
    record_size
        References per record file.

    Raises
    ------
    UnsupportedFeatureError
        When an array's chunk grid is irregular; raised before anything is written.
    RefFormatError
        When a mostly unwritten grid has more chunks than
        `refzarr.model.sparse.max_dense_entries` (one record file per ``record_size``
        chunks would be written, written or not); raised before anything is written.
    """
    require_regular_grids(group)
    for path, array in group.arrays():
        if array.manifest.sparse:  # every record file is written, whether chunks are or not
            check_dense(array.manifest.nchunks, f"array {path!r} written as Parquet")
    fs.makedirs(root, exist_ok=True)
    with ThreadPoolExecutor(_THREADS) as pool:
        for path, array in group.arrays():
            if array.manifest.nchunks:
                fs.makedirs(f"{root}/{path}", exist_ok=True)
                write_records(pool, fs.pipe_file, f"{root}/{path}", array, record_size)
    for name, data in set_documents(group, record_size).items():
        fs.pipe_file(f"{root}/{name}", data)


def write_records(
    pool: ThreadPoolExecutor | None,
    put: Callable[[str, bytes], Any],
    directory: str,
    array: RefArray,
    record_size: int,
    first: int = 0,
) -> int:
    """Encode the record files of ``array`` from record ``first`` on and hand each to
    ``put(path, data)`` (``directory`` exists), on ``pool``'s threads (None: in this
    thread); the number of files written."""

    def write(number: int, table: pa.Table) -> None:
        put(f"{directory}/{record_file_name(number)}", encode_record(table))

    pending = []
    count = 0
    for number, entries in enumerate(entry_slices(array.manifest, record_size, first), first):
        count += 1
        if pool is None:
            write(number, record_table(entries))
            continue
        pending.append(pool.submit(write, number, record_table(entries)))
        if len(pending) >= 2 * _THREADS:
            pending.pop(0).result()
    for future in pending:
        future.result()
    return count


def encode_record(table: pa.Table) -> bytes:
    """The Parquet bytes of one record file (zstd).

    Integer columns carry statistics: without a null count fastparquet assumes they may hold
    nulls and reads them as floats, which fsspec would pass on as byte offsets. They are
    delta-encoded (``DELTA_BINARY_PACKED``, read by pyarrow, fastparquet and every Parquet
    reader): offsets grow within a file and sizes vary little, so the file is smaller and
    written in about half the time of plain values compressed with zstd alone.
    """
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression="zstd",
        write_statistics=["offset", "size"],
        use_dictionary=["path"],
        column_encoding=_INT_ENCODING,
    )
    data: bytes = sink.getvalue().to_pybytes()
    return data


def set_documents(group: RefGroup, record_size: int) -> dict[str, bytes]:
    """The files of the set's root, in the order to write them: its record of sources
    (`SOURCES_FILE`, when it has one), then ``.zmetadata`` naming it."""
    record = sources_file(group.sources)
    out = {} if record is None else {SOURCES_FILE: record[0]}
    out[".zmetadata"] = zmetadata_document(
        group, record_size, None if record is None else record[1]
    )
    return out


def zmetadata_document(
    group: RefGroup, record_size: int, sources: dict[str, Any] | None = None
) -> bytes:
    """The ``.zmetadata`` JSON: every metadata key as a JSON object, ``record_size``, the
    `COMPLETE_KEY` marker, and ``sources`` (the `SOURCES_KEY` entry naming the record of
    sources, which is then left out of the root's attributes; None: the record, if any, is
    written there, as sets were before `SOURCES_FILE`)."""
    documents = metadata_documents(group, with_sources=sources is None)
    metadata: dict[str, Any] = dict(documents)  # each group's members together
    for path, _ in group.arrays():
        metadata[f"{path}/.zarray"]["dimension_separator"] = "."  # see the module docstring
    # Every record file of every array is written, so a reader can tell a lost record file
    # from one fsspec never wrote (fsspec ignores keys it does not know).
    document = {"metadata": metadata, "record_size": record_size, COMPLETE_KEY: True}
    if sources is not None:
        document[SOURCES_KEY] = sources
    return json.dumps(document, separators=(",", ":")).encode("utf-8")
