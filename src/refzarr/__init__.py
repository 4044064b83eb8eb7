"""refzarr: archival scientific files as virtual Zarr, through kerchunk-compatible references.

The public API is what ``__all__`` lists; everything else is private.
"""

import importlib
from typing import TYPE_CHECKING, Any

from refzarr.combine import FromAttribute, FromCallable, FromData, FromRegex, combine, merge
from refzarr.errors import (
    ChunkDecodeError,
    ChunkFetchError,
    ConcurrentWriteError,
    ForbiddenURLError,
    IncompatibleError,
    MissingDependencyError,
    RefFormatError,
    RefzarrError,
    ScanError,
    SourceChangedError,
    SourceNotFoundError,
    UnsupportedFeatureError,
)
from refzarr.formats.api import WriteResult, expand_references, read, write
from refzarr.model import ArrayMeta, ChunkManifest, ChunkRef, RefArray, RefGroup
from refzarr.model.kerchunk import from_kerchunk, to_kerchunk
from refzarr.parallel import scan_many
from refzarr.scan import scan
from refzarr.scan.base import registered_formats as scan_formats

if TYPE_CHECKING:  # the lazy names below, typed for users' type checkers
    from refzarr.formats.icechunk.repository import CommitConflictError, commit_icechunk
    from refzarr.formats.icechunk.write import to_icechunk
    from refzarr.interop.virtualizarr import from_virtual_dataset, to_virtual_dataset
    from refzarr.reader.store import ReferenceStore
    from refzarr.reader.xarray_backend import open_dataset, open_datatree, open_groups
    from refzarr.sources.check import SourceChange, check_sources
    from refzarr.sources.refresh import refresh

__version__ = "0.1.0.dev0"

_LAZY = {
    "ReferenceStore": "refzarr.reader.store",
    "open_dataset": "refzarr.reader.xarray_backend",
    "open_datatree": "refzarr.reader.xarray_backend",
    "open_groups": "refzarr.reader.xarray_backend",
    "to_icechunk": "refzarr.formats.icechunk.write",
    "CommitConflictError": "refzarr.formats.icechunk.repository",
    "SourceChange": "refzarr.sources.check",
    "commit_icechunk": "refzarr.formats.icechunk.repository",
    "check_sources": "refzarr.sources.check",
    "refresh": "refzarr.sources.refresh",
    "to_virtual_dataset": "refzarr.interop.virtualizarr",
    "from_virtual_dataset": "refzarr.interop.virtualizarr",
}
"""Public names whose modules import zarr's Store API or xarray (or VirtualiZarr, when called):
loaded on first use."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'refzarr' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ArrayMeta",
    "ChunkDecodeError",
    "ChunkFetchError",
    "ChunkManifest",
    "ChunkRef",
    "CommitConflictError",
    "ConcurrentWriteError",
    "ForbiddenURLError",
    "FromAttribute",
    "FromCallable",
    "FromData",
    "FromRegex",
    "IncompatibleError",
    "MissingDependencyError",
    "RefArray",
    "RefFormatError",
    "RefGroup",
    "ReferenceStore",
    "RefzarrError",
    "ScanError",
    "SourceChange",
    "SourceChangedError",
    "SourceNotFoundError",
    "UnsupportedFeatureError",
    "WriteResult",
    "__version__",
    "check_sources",
    "combine",
    "commit_icechunk",
    "expand_references",
    "from_kerchunk",
    "from_virtual_dataset",
    "merge",
    "open_dataset",
    "open_datatree",
    "open_groups",
    "read",
    "refresh",
    "scan",
    "scan_formats",
    "scan_many",
    "to_icechunk",
    "to_kerchunk",
    "to_virtual_dataset",
    "write",
]
