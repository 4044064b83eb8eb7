"""Restricting which URLs an (untrusted) reference set may make refzarr read."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from refzarr.errors import ForbiddenURLError

__all__ = ["URLPolicy", "normalize_url"]


def normalize_url(url: str) -> str:
    """``protocol://path`` with ``.`` and ``..`` resolved; local paths become ``file://`` URLs."""
    if "://" not in url:
        return "file://" + os.path.normpath(os.path.abspath(url))
    protocol, rest = url.split("://", 1)
    protocol = "file" if protocol == "local" else protocol.lower()
    head, sep, path = rest.partition("/")
    if protocol == "file":
        return "file://" + os.path.normpath("/" + rest if not rest.startswith("/") else rest)
    normalized = posixpath.normpath("/" + path) if sep else ""
    if path.endswith("/") and normalized != "/":
        normalized += "/"
    return f"{protocol}://{head}{normalized}"


@dataclass(frozen=True, slots=True)
class URLPolicy:
    """Which URLs may be read: by protocol (``"s3"``, ``"file"``) or URL prefix.

    Parameters
    ----------
    allowed
        Protocols (no ``://``) and URL prefixes (with ``://``; end a directory prefix with
        ``/`` so that ``s3://bucket/`` does not admit ``s3://bucket-other``). None allows all.
    """

    allowed: Sequence[str] | None = None

    def check(self, urls: Iterable[str]) -> None:
        """Raise `ForbiddenURLError` naming the first URL that is not allowed."""
        if self.allowed is None:
            return
        protocols = {a.lower() for a in self.allowed if "://" not in a}
        protocols |= {"file" for a in protocols if a == "local"}
        prefixes = tuple(normalize_url(a) for a in self.allowed if "://" in a)
        for url in urls:
            normalized = normalize_url(url)
            protocol = normalized.split("://", 1)[0]
            if protocol in protocols or normalized.startswith(prefixes):
                continue
            raise ForbiddenURLError(
                f"{url}: this reference set may only read from {list(self.allowed)}; "
                "the reference points elsewhere (pass allowed_protocols to widen it)"
            )
