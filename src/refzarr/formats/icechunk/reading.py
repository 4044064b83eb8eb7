"""Reading what refzarr recorded in an Icechunk repository (its sources and where each scan's
chunks are) and checking those sources: refzarr reads no Icechunk repository into a
`RefGroup` (Icechunk gives no public access to its chunk references), so `check_sources` and
`refresh` on a repository work from the record alone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refzarr.errors import RefFormatError
from refzarr.formats.icechunk.record import Regions, read_regions
from refzarr.model import RefGroup
from refzarr.model.hierarchy import SOURCES_ATTR
from refzarr.sources.record import ScanRecord, read_record
from refzarr.sources.state import is_local, local_path

__all__ = [
    "IcechunkRecord",
    "is_icechunk_repository",
    "read_icechunk_record",
    "record_of_store",
    "unrecorded_locations",
]

_SUFFIXES = (".json", ".json.zst", ".json.zstd", ".json.gz", ".parq", ".parquet")


def is_icechunk_repository(url: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``url`` (a local path or fsspec URL) is an Icechunk repository: a folder
    holding ``snapshots/`` and either ``refs/`` (Icechunk 1.x's layout) or the ``repo``
    object (2.x's); a reference set's suffix is never asked about."""
    import fsspec

    if url.lower().rstrip("/").endswith(_SUFFIXES):
        return False
    if is_local(url):  # where the system opens it (``link/..``), as the repository is opened
        url = local_path(url)
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        path = path.rstrip("/")
        if not fs.isdir(f"{path}/snapshots"):
            return False
        return bool(fs.isdir(f"{path}/refs") or fs.isfile(f"{path}/repo"))
    except (OSError, ValueError, ImportError):
        return False


@dataclass(frozen=True, slots=True)
class IcechunkRecord:
    """What a repository's branch records: its scans, their regions and its root attributes."""

    scans: list[ScanRecord]
    regions: Regions
    attributes: Mapping[str, Any]


def read_icechunk_record(
    repository: str, storage_options: Mapping[str, Any] | None = None, *, branch: str = "main"
) -> IcechunkRecord:
    """The record of sources at the tip of ``branch`` (reads the root group's metadata only).

    Raises
    ------
    RefFormatError
        When the record is malformed (an absent record gives no scans).
    """
    from refzarr.formats.icechunk.repository import open_repository

    repo = open_repository(repository, storage_options)
    return record_of_store(repo.readonly_session(branch=branch).store, repository)


def record_of_store(store: Any, where: str) -> IcechunkRecord:
    """The record held by the root group of an Icechunk session's ``store`` (read without
    zarr-python, which would start its I/O thread: `refzarr.formats.icechunk.rootdoc`)."""
    from refzarr.formats.icechunk.rootdoc import group_document

    document = group_document(store, "")
    if document is None:  # no Zarr v3 group at the root: as zarr says it
        import zarr

        attributes = zarr.open_group(store, mode="r").attrs.asdict()
    else:
        attributes = document.get("attributes", {})
        if not isinstance(attributes, dict):
            raise RefFormatError(f"{where}: the root group's attributes are no JSON object")
    sources = attributes.get(SOURCES_ATTR)
    if sources is not None and not isinstance(sources, Mapping):
        raise RefFormatError(f"{where}: attribute {SOURCES_ATTR!r} is no object")
    scans = read_record(RefGroup(sources=sources), where)
    return IcechunkRecord(scans, read_regions(attributes, where), attributes)


def unrecorded_locations(
    repository: str,
    scans: list[ScanRecord],
    storage_options: Mapping[str, Any] | None = None,
    *,
    branch: str = "main",
) -> list[str]:
    """The virtual chunk locations of the branch that no recorded scan names (chunks another
    writer added: their files cannot be checked). Reads every manifest of the snapshot."""
    from refzarr.formats.icechunk.repository import open_repository
    from refzarr.formats.icechunk.write import location

    repo = open_repository(repository, storage_options)
    known = {location(url, "") for scan in scans for url in scan.files}
    locations = repo.readonly_session(branch=branch).all_virtual_chunk_locations()
    return sorted(set(locations) - known)
