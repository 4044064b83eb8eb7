"""Restricting which URLs an (untrusted) reference set may make refzarr read.

A URL is judged as the filesystem that will open it resolves it: fsspec's own protocol
stripping (``file:/x``, ``local:/x``, ``~/x`` are all local paths), the filesystem's canonical
protocol (``s3a`` is ``s3``), ``..`` resolved, and for local paths every symbolic link
followed (a link inside an allowed folder that leads out of it is outside). What cannot be
judged (an unknown protocol, a chained ``a::b`` URL) is refused.
"""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from refzarr.errors import ForbiddenURLError

__all__ = ["URLPolicy", "normalize_url"]

_LOCAL_PROTOCOLS = frozenset({"file", "local"})


def normalize_url(url: str) -> str:
    """``protocol://path`` as the URL's filesystem reads it: canonical protocol, ``.`` and
    ``..`` resolved; local paths (``/x``, ``x``, ``~/x``, ``file:/x``, ``local://x``) become
    ``file://`` URLs of their real path (symbolic links followed).

    Raises
    ------
    ForbiddenURLError
        When the URL cannot be judged: a chained URL (``a::b``), an unknown protocol.
    """
    if "::" in url:
        raise ForbiddenURLError(
            f"{url}: chained URLs (a::b) are not read from reference sets; refer to the file itself"
        )
    protocol = url.split("://", 1)[0].lower() if "://" in url else "file"
    if protocol in _LOCAL_PROTOCOLS:
        return "file://" + _real_local_path(url)
    cls = _filesystem_class(url, protocol)
    canonical = cls.protocol if isinstance(cls.protocol, str) else cls.protocol[0]
    if canonical in _LOCAL_PROTOCOLS:
        return "file://" + _real_local_path(url)
    if canonical in ("http", "https"):
        return _normalized_http(url)
    stripped = str(cls._strip_protocol(url))
    keep_slash = stripped.endswith("/") or url.endswith("/")
    normalized = posixpath.normpath("/" + stripped.lstrip("/"))
    if keep_slash and normalized != "/":
        normalized += "/"
    return f"{canonical}://{normalized.lstrip('/')}"


def _real_local_path(url: str) -> str:
    """The real path fsspec's local filesystem reads for ``url`` (links followed)."""
    from fsspec.implementations.local import LocalFileSystem

    path = str(LocalFileSystem._strip_protocol(url))
    real = os.path.realpath(path)
    if (url.endswith("/") or path.endswith("/")) and real != "/":
        real += "/"
    return real


def _filesystem_class(url: str, protocol: str) -> Any:
    import fsspec

    try:
        return fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as exc:
        raise ForbiddenURLError(
            f"{url}: protocol {protocol!r} is not one refzarr can judge ({exc}); refused"
        ) from None


def _normalized_http(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    path = posixpath.normpath("/" + urllib.parse.unquote(parts.path).lstrip("/"))
    if parts.path.endswith("/") and path != "/":
        path += "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


@dataclass(frozen=True, slots=True)
class URLPolicy:
    """Which URLs may be read: by protocol (``"s3"``, ``"file"``) or URL prefix.

    Parameters
    ----------
    allowed
        Protocols (no ``://``) and URL prefixes (with ``://``; end a directory prefix with
        ``/`` so that ``s3://bucket/`` does not admit ``s3://bucket-other``). None allows all.
        Both are judged as the filesystem resolves them (see `normalize_url`).
    """

    allowed: Sequence[str] | None = None

    def check(self, urls: Iterable[str]) -> None:
        """Raise `ForbiddenURLError` naming the first URL that is not allowed."""
        if self.allowed is None:
            return
        protocols = {_canonical_protocol(a) for a in self.allowed if "://" not in a}
        prefixes = tuple(normalize_url(a) for a in self.allowed if "://" in a)
        for url in urls:
            normalized = normalize_url(url)
            protocol = normalized.split("://", 1)[0]
            if protocol in protocols or _under(normalized, prefixes):
                continue
            raise ForbiddenURLError(
                f"{url}: this reference set may only read from {list(self.allowed)}; "
                f"the reference points elsewhere ({normalized}); pass allowed_protocols to "
                "widen it"
            )


def _canonical_protocol(protocol: str) -> str:
    lowered = protocol.lower()
    if lowered in _LOCAL_PROTOCOLS:
        return "file"
    try:
        cls = _filesystem_class(f"{lowered}://", lowered)
    except ForbiddenURLError:
        return lowered  # allowing an unknown protocol admits nothing that can be judged
    canonical = cls.protocol if isinstance(cls.protocol, str) else cls.protocol[0]
    return "file" if canonical in _LOCAL_PROTOCOLS else str(canonical)


def _under(normalized: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``normalized`` starts with one of ``prefixes`` (both normalized)."""
    return normalized.startswith(prefixes)
