"""How a local path is named in references and outputs: the file the system opens for it
(`opened_path`), which differs from ``os.path.abspath`` where a symbolic link precedes ``..``."""

from __future__ import annotations

import os

__all__ = ["opened_path"]


def opened_path(path: str) -> str:
    """The absolute path of the file the system opens for the local ``path``: how references
    name it.

    ``os.path.abspath`` makes a path absolute as text, dropping ``dir/..`` pairs, whereas the
    system follows a symbolic link before going up: ``link/../x.nc`` is the ``x.nc`` next to
    the link's target, not the one next to the link. So a path holding ``..`` is named by the
    real path of its directory (links followed) and its own name; any other path keeps its
    spelling (links not followed), as ``abspath`` gives it.

    Examples
    --------
    >>> opened_path("/data/./day1.nc")
    '/data/day1.nc'
    """
    if ".." not in path or ".." not in path.split(os.sep):
        return os.path.abspath(path)
    head, name = os.path.split(os.path.join(os.getcwd(), path))
    if name in ("", ".", ".."):  # a directory (a Zarr store) named by its parent
        return os.path.realpath(os.path.join(head, name))
    return os.path.join(os.path.realpath(head), name)
