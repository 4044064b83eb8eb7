"""Names an HDF5 file stores that are not UTF-8 text: link names, attribute names, the names
of dimension scales.

HDF5 stores names as bytes; h5py gives a name that is not UTF-8 as bytes, netCDF4-python
cannot open such a file (UnicodeDecodeError), h5netcdf fails on it. Zarr keys, attribute
names and dimension names are text, and decoding the bytes some other way (Latin-1, U+FFFD,
escapes) would invent a name the file does not hold, which two such names could share. So
each such name is refused by name (`UnsupportedFeatureError`: file, group or object, the
name's bytes, what to do); ``on_unsupported="skip"`` leaves out what it names and lists it.
"""

from __future__ import annotations

from refzarr.errors import UnsupportedFeatureError

__all__ = ["NotText", "not_text", "shown"]

_REMEDY = {
    "link": (
        "rename the link to UTF-8 text (h5py: group.move(old_bytes, new_text)), or scan with "
        "on_unsupported='skip' to leave it out"
    ),
    "attribute": (
        "rewrite the attribute under a UTF-8 name (h5py: obj.attrs[new_text] = value, then "
        "del obj.attrs[old_bytes]), or scan with on_unsupported='skip' to leave it out"
    ),
    "dimension scale": (
        "rename the scale's link to UTF-8 text (h5py: group.move(old_bytes, new_text)), or "
        "scan with on_unsupported='skip' to leave this dataset out"
    ),
}


class NotText(Exception):
    """A name that is not UTF-8 met where the file and object are not at hand: the caller
    turns it into `not_text`'s error."""

    def __init__(self, what: str, name: bytes) -> None:
        super().__init__(f"{what} name {name!r} is not UTF-8")
        self.what, self.name = what, name


def not_text(where: str, what: str, name: bytes) -> UnsupportedFeatureError:
    """The error for the ``what`` (``"link"``, ``"attribute"``, ``"dimension scale"``) named
    ``name`` at ``where`` (file and group or object), whose name is not UTF-8."""
    return UnsupportedFeatureError(
        f"{where}: {what} name {name!r} is not UTF-8 text (h5py lists it as bytes; "
        "netCDF4-python cannot open the file): Zarr keys, attribute and dimension names are "
        f"text, and refzarr never invents one for it; {_REMEDY[what]}"
    )


def shown(name: str | bytes) -> str:
    """``name`` as text for paths in messages and skip lists: bytes that are not UTF-8 as
    ``\\xNN`` escapes."""
    return name if isinstance(name, str) else name.decode("utf8", "backslashreplace")
