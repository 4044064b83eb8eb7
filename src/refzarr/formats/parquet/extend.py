"""A partial last record file extended by new rows, its existing rows copied as Arrow data.

An append rewrites the last record file of each growing array with the new entries after
the existing ones. Those existing rows go to the new file as they are (like the record files
the append hard-links), so they are read as an Arrow table and joined with the new rows'
table, never decoded into manifest columns and encoded back. A file that does not hold
exactly the expected rows in refzarr's own column types is left to the general path, which
decodes it, checks it and reports what is wrong.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from refzarr.formats.parquet.arrow import int_array, string_array
from refzarr.formats.parquet.records import COLUMNS
from refzarr.formats.parquet.tables import RECORD_SCHEMA

__all__ = ["extended_record"]

_TYPES = {field.name: field.type for field in RECORD_SCHEMA}
_PATH_TYPES = (pa.string(), pa.dictionary(pa.int32(), pa.string()))


def extended_record(path: str, rows: int, new: pa.Table) -> pa.Table | None:
    """The rows of local record file ``path`` (which must hold exactly ``rows``) followed by
    ``new`` (a `refzarr.formats.parquet.tables.record_table`); None when the file is not one
    refzarr wrote in that form (the caller then takes the general path)."""
    try:
        with open(path, "rb") as file:
            old = pq.ParquetFile(file).read(use_threads=False)
    except (pa.ArrowException, OSError, ValueError):
        return None
    if old.num_rows != rows or not _refzarr_columns(old.schema):
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
        # through buffers: pa.array would import pandas (half a second) for an append
        ids = np.fromiter((table.setdefault(url, len(table)) for url in urls), np.int32, len(urls))
        indices.append(pc.take(int_array(ids), chunk.indices))  # nulls stay null
    dictionary = string_array(list(table))
    return pa.DictionaryArray.from_arrays(pa.concat_arrays(indices), dictionary)


def _plain(chunk: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(chunk.type):
        return chunk.dictionary_decode()
    return chunk.cast(pa.string())
