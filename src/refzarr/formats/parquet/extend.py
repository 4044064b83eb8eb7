"""A partial last record file extended by new rows, its existing rows copied as Arrow data;
what an append reads of the existing set, read ahead in a thread while it plans.

An append rewrites the last record file of each growing array with the new entries after
the existing ones. Those existing rows go to the new file as they are (like the record files
the append hard-links), so they are read as an Arrow table and joined with the new rows'
table, never decoded into manifest columns and encoded back. A file that does not hold
exactly the expected rows in refzarr's own column types is left to the general path, which
decodes it, checks it and reports what is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from refzarr.formats.parquet.records import COLUMNS
from refzarr.formats.parquet.source import record_file_name
from refzarr.formats.parquet.tables import RECORD_SCHEMA
from refzarr.model.group import RefGroup

__all__ = ["LastRecords", "extended_record", "read_rows"]

_TYPES = {field.name: field.type for field in RECORD_SCHEMA}
_PATH_TYPES = (pa.string(), pa.dictionary(pa.int32(), pa.string()))
_PREFETCHED = 16
"""Manifest blocks of an array without the dimension read ahead at most (the rest as used)."""


def read_rows(path: str) -> pa.Table | None:
    """The rows of local record file ``path`` as Arrow data; None when it is not in the form
    refzarr writes (its columns and their types) or cannot be read."""
    try:
        with open(path, "rb") as file:
            old = pq.ParquetFile(file).read(use_threads=False)
    except (pa.ArrowException, OSError, ValueError):
        return None
    return old if _refzarr_columns(old.schema) else None


def extended_record(old: pa.Table | None, rows: int, new: pa.Table) -> pa.Table | None:
    """The rows of a record file, ``old`` (`read_rows`; it must hold exactly ``rows``),
    followed by ``new`` (a `refzarr.formats.parquet.tables.record_table`); None when the file
    is not one refzarr wrote in that form (the caller then takes the general path)."""
    if old is None or old.num_rows != rows:
        return None
    columns = [_joined_path(old.column("path"), new.column("path"))]
    columns += [
        pa.concat_arrays([*old.column(n).chunks, *new.column(n).chunks]) for n in COLUMNS[1:]
    ]
    schema = RECORD_SCHEMA.set(0, pa.field("path", columns[0].type))
    return pa.Table.from_arrays(columns, schema=schema)


def _refzarr_columns(schema: pa.Schema) -> bool:
    if schema.names != list(COLUMNS):
        return False
    if schema.field("path").type not in _PATH_TYPES:
        return False
    return all(schema.field(name).type == _TYPES[name] for name in COLUMNS[1:])


def _joined_path(old: pa.ChunkedArray, new: pa.ChunkedArray) -> pa.Array:
    """The ``path`` column of both: dictionary-encoded when both are (the old rows' indices
    kept, the new rows' moved onto the joined dictionary), else plain strings."""
    chunks = [*old.chunks, *new.chunks]
    if not all(pa.types.is_dictionary(chunk.type) for chunk in chunks):
        return pa.concat_arrays([_plain(chunk) for chunk in chunks])
    table: dict[str, int] = {}
    indices = []
    for chunk in chunks:
        urls = chunk.dictionary.to_pylist()
        remap = pa.array([table.setdefault(url, len(table)) for url in urls], pa.int32())
        indices.append(pc.take(remap, chunk.indices))  # nulls stay null
    dictionary = pa.array(list(table), pa.string())
    return pa.DictionaryArray.from_arrays(pa.concat_arrays(indices), dictionary)


def _plain(chunk: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(chunk.type):
        return chunk.dictionary_decode()
    return chunk.cast(pa.string())


class LastRecords:
    """What an append will read of a set, read in a thread from the moment this is entered
    (Arrow and numpy release the GIL meanwhile): the manifest blocks of the arrays without
    the dimension (combine compares them by value), then the partial last record file of each
    array along it but its coordinate, as Arrow data (`read_rows`). `rows` waits for one of
    those files (or reads one not foreseen); the blocks land in the manifests' own caches (a
    block that fails to load there is loaded again, and its error raised, where used)."""

    def __init__(self, root: str, existing: RefGroup, dim: str, record_size: int) -> None:
        self.record_size = record_size
        self._blocks: list[Callable[[], object]] = []
        self._files: list[str] = []
        for path, array in existing.arrays():
            names, count = array.meta.dimension_names or (), array.manifest.nchunks
            if dim not in names and not array.manifest.sparse:
                blocks = range(min(array.manifest.nblocks, _PREFETCHED))
                self._blocks += [partial(array.manifest.block, k) for k in blocks]
            elif names[0] == dim and count % record_size and path.rpartition("/")[2] != dim:
                name = record_file_name(count // record_size)
                self._files.append(os.path.join(root, *path.split("/"), name))
        self._read: dict[str, Future[pa.Table | None]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> LastRecords:
        if self._files or self._blocks:
            self._pool = ThreadPoolExecutor(1)
            for load in self._blocks:
                self._pool.submit(load)
            self._read = {path: self._pool.submit(read_rows, path) for path in self._files}
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def rows(self, path: str) -> pa.Table | None:
        """The rows of record file ``path`` (`read_rows`)."""
        future = self._read.get(path)
        return read_rows(path) if future is None else future.result()
