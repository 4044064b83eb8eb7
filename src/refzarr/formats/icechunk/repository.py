"""Icechunk repositories made or opened from a URL (a local path or ``s3://bucket/prefix``),
with a virtual chunk container (and read access) for every place the references point into
(local folders, S3 buckets), and one commit per write (`commit_icechunk`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from refzarr.errors import RefzarrError, UnsupportedFeatureError
from refzarr.formats.written import WriteResult
from refzarr.model import RefGroup
from refzarr.sources.state import is_local, local_path

__all__ = [
    "CommitConflictError",
    "commit_icechunk",
    "commit_session",
    "commit_written",
    "container_credentials",
    "open_repository",
    "quiet_local_storage_logs",
    "source_prefixes",
]

LOCAL_STORAGE_LOG_TARGETS = (
    "icechunk::storage::object_store",  # Icechunk 1.x
    "icechunk_arrow_object_store",  # 2.x
    "icechunk_storage::readback",  # 2.x: conditional writes without metadata (local storage)
)
"""The Rust modules whose warnings about local-disk storage (not safe for concurrent commits;
no lost-response recovery) the CLI silences: advice for library users choosing a storage,
printed on every command that opens a local repository."""


class CommitConflictError(RefzarrError, RuntimeError):
    """Another writer committed to the branch while this write was under way: nothing of
    this write was committed (run it again on the new state)."""


def source_prefixes(group: RefGroup) -> list[str]:
    """The container prefix of every place ``group`` refers to, sorted: ``file:///folder/``
    for local files, ``s3://bucket/`` for S3 objects.

    Raises
    ------
    UnsupportedFeatureError
        For references to other protocols (make the repository, with its virtual chunk
        containers, yourself and call `refzarr.to_icechunk`).
    """
    stores = _local_stores(group)
    urls: set[str] = set()
    for _, array in group.arrays():
        urls |= _urls(array.manifest.iter_written_blocks())
    by_folder: dict[str, str] = {}  # thousands of files in a few folders: each folder once
    prefixes: set[str] = set()
    for url in sorted(urls):  # the same first unsupported URL named at every run
        if not is_local(url):
            prefixes.add(_prefix(url))
            continue
        folder = os.path.dirname(local_path(url))
        prefix = by_folder.get(folder)
        if prefix is None:
            prefix = by_folder[folder] = _folder_prefix(folder, stores)
        prefixes.add(prefix)
    return sorted(prefixes)


def _local_stores(group: RefGroup) -> frozenset[str]:
    """The local Zarr stores the group's record says were scanned: one container each, not
    one per folder of chunk files (a v3 store has a folder per row of chunks: thousands)."""
    scans = (group.sources or {}).get("scans") or ()
    return frozenset(
        local_path(scan["url"]).rstrip("/")
        for scan in scans
        if scan.get("format") == "zarr"
        and isinstance(scan.get("url"), str)
        and is_local(scan["url"])
    )


def _prefix(url: str, stores: frozenset[str] = frozenset()) -> str:
    if is_local(url):
        return _folder_prefix(os.path.dirname(local_path(url)), stores)
    protocol, _, rest = url.partition("://")
    if protocol in ("s3", "s3a"):
        return f"s3://{rest.split('/', 1)[0]}/"
    raise UnsupportedFeatureError(
        f"{url}: refzarr makes Icechunk virtual chunk containers for local files and S3 only; "
        "for other stores, make the repository (with its containers) in Python and call "
        "refzarr.to_icechunk"
    )


def _folder_prefix(folder: str, stores: frozenset[str]) -> str:
    """The container prefix of the local files in ``folder`` (the Zarr store of ``stores``
    holding it, if any)."""
    store = next((f for f in _ancestors(folder) if f in stores), folder) if stores else folder
    return f"file://{_plain_ancestor(store).rstrip('/')}/"


def _ancestors(folder: str) -> Iterator[str]:
    """``folder`` and the folders above it, nearest first (``/a/b``: ``/a/b``, ``/a``)."""
    while folder not in ("", "/"):
        yield folder
        folder = os.path.dirname(folder)


def _plain_ancestor(folder: str) -> str:
    """``folder``, or its nearest ancestor whose path needs no percent-encoding: chunk
    locations are encoded (`write.location`) but Icechunk matches a container's prefix
    as written, so a prefix with a space, ``#``, ``%``, non-ASCII letter... matches none."""
    parts = folder.split("/")
    plain = next((k for k, part in enumerate(parts) if quote(part) != part), len(parts))
    return "/".join(parts[:plain]) or "/"


def _urls(blocks: Iterable[Any]) -> set[str]:
    urls: set[str] = set()
    for block in blocks:
        used = {int(i) for i in set(block.path_id.tolist()) if i >= 0}
        urls.update(block.paths[i] for i in used)
    return urls


def commit_icechunk(
    group: RefGroup,
    repository: str | os.PathLike[str],
    *,
    message: str = "refzarr",
    append_dim: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    source_options: Mapping[str, Any] | None = None,
    branch: str = "main",
) -> str:
    """Write ``group`` into an Icechunk repository and commit it; the new snapshot's id.

    The repository (a local path or ``s3://bucket/prefix``) is created when absent. It gets
    (and saves in its config) a virtual chunk container for every local folder and S3
    bucket the references point into, and read access to them. Every chunk carries its
    source's checksum as scanned (see `refzarr.to_icechunk`).

    Parameters
    ----------
    group
        What to write (a scan, a combination, a reference set read back).
    repository
        Local path, or ``s3://bucket/prefix``.
    message
        The commit message.
    append_dim
        Append along this dimension to what the branch holds (`refzarr.to_icechunk`).
    storage_options
        s3fs-style options for an S3 repository: ``key``, ``secret``, ``token``, ``anon``,
        ``endpoint_url`` (or ``client_kwargs={"endpoint_url": ..., "region_name": ...}``).
        A ``http://`` endpoint allows plain HTTP and uses path-style addressing.
    source_options
        The same for the sources on S3 (default: ``storage_options``).
    branch
        The branch to commit to.

    Raises
    ------
    CommitConflictError
        When another writer committed to ``branch`` meanwhile (nothing was committed).
    UnsupportedFeatureError, IncompatibleError
        As `refzarr.to_icechunk`; when a reference points where no container can be made.
    """
    snapshot, _ = commit_written(
        group,
        repository,
        message=message,
        append_dim=append_dim,
        storage_options=storage_options,
        source_options=source_options,
        branch=branch,
    )
    return snapshot


def commit_written(
    group: RefGroup,
    repository: str | os.PathLike[str],
    *,
    message: str = "refzarr",
    append_dim: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    source_options: Mapping[str, Any] | None = None,
    branch: str = "main",
) -> tuple[str, WriteResult]:
    """`commit_icechunk`, with what was written (its ``target`` the repository)."""
    from refzarr.formats.icechunk.write import ICECHUNK_REFUSES, to_icechunk
    from refzarr.model.hierarchy import refuse_empty_chunks

    refuse_empty_chunks(group, ICECHUNK_REFUSES)  # before a new repository is made
    shown = os.fspath(repository)
    sources = source_options if source_options is not None else storage_options
    repo = open_repository(shown, storage_options, sources, source_prefixes(group), create=True)
    session = repo.writable_session(branch)
    result = to_icechunk(group, session.store, append_dim=append_dim, storage_options=sources)
    snapshot = commit_session(session, message, shown, branch)
    return snapshot, dataclasses.replace(result, target=shown)


def open_repository(
    repository: str,
    storage_options: Mapping[str, Any] | None,
    source_options: Mapping[str, Any] | None = None,
    prefixes: Iterable[str] = (),
    *,
    create: bool = False,
) -> Any:
    """The Icechunk repository at ``repository`` (created when absent and ``create``), with
    a virtual chunk container and read access for each of ``prefixes``, saved in its config."""
    import icechunk

    prefixes = sorted(prefixes)
    config = icechunk.RepositoryConfig.default()
    for prefix in prefixes:
        config.set_virtual_chunk_container(
            icechunk.VirtualChunkContainer(prefix, _container_store(prefix, source_options))
        )
    credentials = container_credentials(prefixes, source_options)
    storage = _storage(repository, storage_options)
    if create:
        try:
            repo = icechunk.Repository.open_or_create(
                storage, config, authorize_virtual_chunk_access=credentials
            )
        except ValueError as exc:  # Icechunk's InvalidInputError is a ValueError
            _refuse_bucket_root(repository, exc)
            raise
        if not prefixes:
            return repo
    # an existing repository learns the containers of new places (merged into its own)
    repo = icechunk.Repository.open(
        storage, config if prefixes else None, authorize_virtual_chunk_access=credentials
    )
    if prefixes:
        repo.save_config()
    return repo


def commit_session(session: Any, message: str, shown: str, branch: str) -> str:
    """Commit ``session``; its snapshot id, or CommitConflictError naming the branch."""
    import icechunk

    try:
        snapshot: str = session.commit(message)
    except icechunk.ConflictError as exc:
        raise CommitConflictError(
            f"{shown}: another writer committed to branch {branch!r} while this write was "
            f"under way (now at snapshot {exc.actual_parent}); nothing of this write was "
            "committed: run it again"
        ) from exc
    return snapshot


def container_credentials(
    prefixes: Iterable[str], source_options: Mapping[str, Any] | None = None
) -> Any:
    """What authorises reading the virtual chunk containers ``prefixes`` (``file:///folder/``,
    ``s3://bucket/``), for ``icechunk.Repository.open(...,
    authorize_virtual_chunk_access=...)``; S3 credentials from ``source_options`` (s3fs-style,
    as `commit_icechunk` takes them), else from the environment."""
    import icechunk

    return icechunk.containers_credentials(
        {prefix: _credentials(prefix, source_options) for prefix in prefixes}
    )


def _refuse_bucket_root(repository: str, exc: ValueError) -> None:
    """UnsupportedFeatureError when ``exc`` is Icechunk (2.1+) refusing to create a repository
    at an object store bucket's root; nothing for any other error."""
    import icechunk

    refused = getattr(icechunk, "InvalidInputError", None)
    protocol, _, rest = repository.partition("://")
    at_root = protocol in ("s3", "s3a") and not rest.partition("/")[2].strip("/")
    if refused is None or not isinstance(exc, refused) or not at_root:
        return
    bucket = rest.partition("/")[0]
    raise UnsupportedFeatureError(
        f"{repository}: Icechunk {icechunk.__version__} creates no repository at a bucket's "
        f"root (refused since Icechunk 2.1; one made there before still opens); give a prefix "
        f"inside the bucket, e.g. s3://{bucket}/repo"
    ) from exc


def quiet_local_storage_logs() -> None:
    """Silence Icechunk's warnings about local-disk storage (`LOCAL_STORAGE_LOG_TARGETS`;
    their errors still show) through its public ``set_logs_filter``, unless the user set
    ``ICECHUNK_LOG``. For the CLI only: it changes Icechunk's logging for the process."""
    import icechunk

    if "ICECHUNK_LOG" in os.environ:
        return
    quiet = ",".join(f"{target}=error" for target in LOCAL_STORAGE_LOG_TARGETS)
    icechunk.set_logs_filter(f"warn,{quiet}")


def _storage(repository: str, options: Mapping[str, Any] | None) -> Any:
    import icechunk

    if is_local(repository):
        return icechunk.local_filesystem_storage(local_path(repository))
    protocol, _, rest = repository.partition("://")
    if protocol not in ("s3", "s3a"):
        raise UnsupportedFeatureError(
            f"{repository}: refzarr writes Icechunk repositories on local disks and S3; for "
            "others, open the repository with icechunk and call refzarr.to_icechunk"
        )
    bucket, _, prefix = rest.partition("/")
    settings = _s3_settings(options)
    return icechunk.s3_storage(
        bucket=bucket,
        prefix=prefix.strip("/") or None,
        region=settings["region"],
        endpoint_url=settings["endpoint_url"],
        allow_http=settings["allow_http"],
        force_path_style=settings["force_path_style"],
        access_key_id=settings["key"],
        secret_access_key=settings["secret"],
        session_token=settings["token"],
        anonymous=settings["anon"] or None,
        from_env=None if settings["key"] or settings["anon"] else True,
    )


def _container_store(prefix: str, options: Mapping[str, Any] | None) -> Any:
    import icechunk

    if prefix.startswith("file://"):
        return icechunk.local_filesystem_store(prefix.removeprefix("file://"))
    settings = _s3_settings(options)
    return icechunk.s3_store(
        region=settings["region"],
        endpoint_url=settings["endpoint_url"],
        allow_http=settings["allow_http"],
        anonymous=settings["anon"],
        s3_compatible=settings["endpoint_url"] is not None,
        force_path_style=settings["force_path_style"],
    )


def _credentials(prefix: str, options: Mapping[str, Any] | None) -> Any:
    import icechunk

    if prefix.startswith("file://"):
        import icechunk.credentials

        # Icechunk 2.x wants its explicit credential (it deprecates None); 1.x has none
        return getattr(icechunk.credentials, "LocalFileSystemAccess", None)
    settings = _s3_settings(options)
    if settings["anon"]:
        return icechunk.s3_anonymous_credentials()
    if settings["key"]:
        return icechunk.s3_static_credentials(
            access_key_id=settings["key"],
            secret_access_key=settings["secret"],
            session_token=settings["token"],
        )
    return icechunk.s3_from_env_credentials()


def _s3_settings(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Icechunk's S3 settings from s3fs-style storage options."""
    given = dict(options or {})
    client = dict(given.get("client_kwargs") or {})
    endpoint = given.get("endpoint_url") or client.get("endpoint_url")
    style = ((given.get("config_kwargs") or {}).get("s3") or {}).get("addressing_style")
    return {
        "region": client.get("region_name") or given.get("region"),
        "endpoint_url": endpoint,
        "allow_http": bool(endpoint and str(endpoint).startswith("http://")),
        "force_path_style": style == "path" or (endpoint is not None and style != "virtual"),
        "key": given.get("key") or given.get("aws_access_key_id"),
        "secret": given.get("secret") or given.get("aws_secret_access_key"),
        "token": given.get("token") or given.get("aws_session_token"),
        "anon": bool(given.get("anon", False)),
    }
