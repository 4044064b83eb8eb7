"""The name of the first scale attached to an axis, without asking HDF5 to search the file.

HDF5 names a scale it found through a reference by searching the file for a hard link to
it. A scale with exactly one hard link has one name, whatever the search order: the name of
that link. `ScaleNames` knows the hard links of the groups the scan walked (with their
objects' link counts, asked of HDF5 when a scale's name is) and the scales of each axis
(``DIMENSION_LIST``, read from the file);
when the first scale of an axis is hard-linked once from one of those groups, that link's
name is its name. Otherwise it says it does not know, and the caller asks HDF5.
"""

from __future__ import annotations

from typing import Any

import h5py
from h5py import h5d, h5g, h5o

from refzarr.scan.hdf5.group_links import HARD, Link
from refzarr.scan.hdf5.headers import ObjectHeaders
from refzarr.scan.hdf5.ohdr import objno_address

__all__ = ["UNKNOWN", "ScaleNames"]

UNKNOWN: Any = object()
"""What `ScaleNames.first_scale` gives when it cannot tell."""

_HARD = frozenset({h5g.GROUP, h5g.DATASET, h5g.TYPE})


class ScaleNames:
    """Scale names of one file, found from its hard links and ``DIMENSION_LIST`` attributes.

    Parameters
    ----------
    headers
        The file's object headers.
    """

    __slots__ = ("_counted", "_dataset", "_headers", "_links", "_scales", "_where")

    def __init__(self, headers: ObjectHeaders) -> None:
        self._headers = headers
        self._links: dict[int, str | None] = {}
        """The name of the one hard link to each object seen (None: more than one)."""
        self._counted: set[int] = set()
        """The objects of `_links` HDF5 said have one hard link in all."""
        self._where: dict[int, tuple[Any, bytes]] = {}
        """A group id and link name that open each object."""
        self._dataset: Any = None
        self._scales: list[list[int]] | None = None

    def add_group(self, group: h5py.Group, names: list[Any]) -> dict[str, int]:
        """Learn the hard links of ``group`` (its member ``names``, as h5py lists them); the
        header address of the object each hard link names."""
        addresses: dict[str, int] = {}
        for name in names:
            if not isinstance(name, str):
                continue  # a name h5py keeps as bytes: left to HDF5
            try:
                info = h5g.get_objinfo(group.id, name.encode("utf8"), follow_link=False)
            except (KeyError, OSError, RuntimeError, ValueError):
                continue
            if info.type not in _HARD:
                continue
            address = addresses[name] = objno_address(info.objno)
            # a second link to one object (here or elsewhere): its name depends on the search
            unique = info.nlink == 1 and address not in self._links
            self._links[address] = name if unique else None
            self._counted.add(address)
            self._where.setdefault(address, (group.id, name.encode("utf8")))
        return addresses

    def add_links(self, group: h5py.Group, links: list[Link]) -> None:
        """Learn the hard links of ``group`` from ``links`` (read from the file; how many
        hard links each object has in all is asked only of scales, when named)."""
        for link in links:
            address = link.value
            if link.kind != HARD or not isinstance(link.name, str) or not isinstance(address, int):
                continue  # a name h5py keeps as bytes: left to HDF5
            self._links[address] = None if address in self._links else link.name
            self._where.setdefault(address, (group.id, link.name.encode("utf8")))

    def first_scale(self, ds: h5py.Dataset, axis: int) -> Any:
        """The name of the first scale attached to ``axis`` of ``ds`` (None: no scale), or
        `UNKNOWN`."""
        scales = self._axis(ds, axis)
        if scales is UNKNOWN:
            return UNKNOWN
        if not scales:
            return None
        name = self._links.get(scales[0])
        if name is not None and scales[0] not in self._counted:
            name = self._count(scales[0], name)
        return UNKNOWN if name is None else name

    def _count(self, address: int, name: str) -> str | None:
        """``name`` when the object at ``address`` has one hard link in all (asked of HDF5
        once), else None."""
        try:
            info = h5g.get_objinfo(*self._where[address], follow_link=False)
        except (KeyError, OSError, RuntimeError, ValueError):
            info = None
        if info is None or info.nlink != 1:
            self._links[address] = None
            return None
        self._counted.add(address)
        return name

    def only_scale(self, ds: h5py.Dataset, axis: int) -> Any:
        """The id of the scale attached to ``axis`` of ``ds`` when it is the only one (None:
        none or several), or `UNKNOWN`."""
        scales = self._axis(ds, axis)
        if scales is UNKNOWN:
            return UNKNOWN
        if len(scales) != 1:
            return None
        where = self._where.get(scales[0])
        if where is None:
            return UNKNOWN
        try:
            scale = h5o.open(*where)
        except (KeyError, OSError, RuntimeError, ValueError):
            return UNKNOWN
        return scale if isinstance(scale, h5d.DatasetID) else UNKNOWN

    def _axis(self, ds: h5py.Dataset, axis: int) -> Any:
        """The addresses of the scales of ``axis`` of ``ds``, or `UNKNOWN`."""
        if self._dataset is not ds.id:
            address = getattr(ds, "header_address", None)  # a ScannedDataset knows it
            self._dataset, self._scales = ds.id, self._headers.dimension_list(ds.id, address)
        scales = self._scales
        if scales is None or (scales and len(scales) != ds.ndim):
            return UNKNOWN
        return scales[axis] if scales else []
