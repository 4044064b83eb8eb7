"""Local Icechunk repositories for the command line: created or opened at a path, with a
virtual chunk container (and read access) for every source folder the references point into."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import RefGroup

__all__ = ["commit_group", "source_prefixes"]


def source_prefixes(group: RefGroup) -> list[str]:
    """The ``file:///folder/`` prefix of every local file ``group`` refers to, sorted.

    Raises
    ------
    UnsupportedFeatureError
        For references to anything but local files (give the repository yourself, with
        containers for your object store, and call `refzarr.to_icechunk`).
    """
    folders: set[str] = set()
    for _, array in group.arrays():
        for url in _urls(array.manifest.iter_written_blocks()):
            if "://" in url and not url.startswith("file://"):
                raise UnsupportedFeatureError(
                    f"{url}: the command writes Icechunk repositories for local sources only; "
                    "for object stores, make the repository (with its virtual chunk "
                    "containers) in Python and call refzarr.to_icechunk"
                )
            path = url.removeprefix("file://")
            folders.add(os.path.dirname(os.path.abspath(path)))
    return sorted(f"file://{folder.rstrip('/')}/" for folder in folders)


def _urls(blocks: Iterable[Any]) -> set[str]:
    urls: set[str] = set()
    for block in blocks:
        used = {int(i) for i in set(block.path_id.tolist()) if i >= 0}
        urls.update(block.paths[i] for i in used)
    return urls


def commit_group(
    group: RefGroup, repository: str, message: str, append_dim: str | None = None
) -> str:
    """Write ``group`` into the local repository at ``repository`` (created when absent) on
    branch ``main`` and commit it; the snapshot id."""
    import icechunk

    from refzarr.formats.icechunk.write import to_icechunk

    prefixes = source_prefixes(group)
    config = icechunk.RepositoryConfig.default()
    for prefix in prefixes:
        folder = prefix.removeprefix("file://")
        store = icechunk.local_filesystem_store(folder)
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    credentials = icechunk.containers_credentials(dict.fromkeys(prefixes))
    storage = icechunk.local_filesystem_storage(os.path.abspath(repository))
    repo = icechunk.Repository.open_or_create(
        storage, config, authorize_virtual_chunk_access=credentials
    )
    if prefixes:  # an existing repository learns the containers of new source folders
        repo = icechunk.Repository.open(storage, config, authorize_virtual_chunk_access=credentials)
        repo.save_config()
    session = repo.writable_session("main")
    to_icechunk(group, session.store, append_dim=append_dim)
    snapshot: str = session.commit(message)
    return snapshot
