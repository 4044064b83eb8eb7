"""The refzarr exception hierarchy: every error refzarr raises derives from `RefzarrError`."""

from __future__ import annotations

__all__ = [
    "ChunkDecodeError",
    "ChunkFetchError",
    "ConcurrentWriteError",
    "ForbiddenURLError",
    "IncompatibleError",
    "MissingDependencyError",
    "RefFormatError",
    "RefzarrError",
    "ScanError",
    "SourceChangedError",
    "SourceNotFoundError",
    "UnsupportedFeatureError",
]


class RefzarrError(Exception):
    """Base class of every error raised by refzarr."""


class RefFormatError(RefzarrError, ValueError):
    """A reference set (JSON, Parquet or in-memory dict) is malformed.

    The message names the key or file and says what was expected.
    """


class UnsupportedFeatureError(RefzarrError, NotImplementedError):
    """A source file uses a feature refzarr cannot reference (names file, variable, feature)."""


class ScanError(RefzarrError, ValueError):
    """A source file could not be scanned (corrupt, truncated, not the expected format)."""


class ChunkFetchError(RefzarrError, OSError):
    """The bytes of a chunk could not be fetched (names url, offset, length and key)."""


class ReferenceFetchError(ChunkFetchError):
    """A remote reference set itself (a JSON file, a Parquet set's files) could not be
    fetched: no answer within the read deadline, or its server failed (names the URL)."""


class SourceChangedError(ChunkFetchError):
    """A source file is not as its scan recorded it (size, modification time or ETag): its
    chunks are not read, for its references may point at other bytes now. Names the file,
    what was recorded and what was found, and the ``refzarr refresh`` to run."""


class ChunkDecodeError(RefzarrError, ValueError):
    """A chunk's bytes could not be decoded into the array's chunk (names the chunk key)."""


class ForbiddenURLError(RefzarrError, PermissionError):
    """A reference points outside the protocols or URL prefixes the caller allowed."""


class SourceNotFoundError(RefzarrError, FileNotFoundError):
    """A file or reference set that was asked for does not exist (names the path)."""


class IncompatibleError(RefzarrError, ValueError):
    """Reference sets cannot be combined as asked: names the files and what differs."""


class MissingDependencyError(RefzarrError, ImportError):
    """A format's optional library is not installed (names the ``pip install`` to run)."""


class ConcurrentWriteError(RefzarrError, RuntimeError):
    """Another writer replaced a reference set on an object store while an append or a
    refresh of it ran (nothing is locked there), or held a local set's lock longer than the
    writer's ``lock_timeout``: nothing was written; run it again."""
