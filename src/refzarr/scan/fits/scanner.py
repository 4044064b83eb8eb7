"""The FITS scanner: one array per HDU with data, at the root, as `FORMATS.md` lays it out.

`FitsScanner` is a configured callable (options in the constructor, no state between calls,
picklable), so scanning many files is ``executor.map(FitsScanner(...), urls)``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from astropy.io import fits
from astropy.utils.exceptions import AstropyWarning

from refzarr.errors import RefzarrError, ScanError, UnsupportedFeatureError
from refzarr.model import RefArray
from refzarr.scan.base import ScanOptions
from refzarr.scan.fits.context import HduScan
from refzarr.scan.fits.contiguous import DEFAULT_CHUNK_BYTES
from refzarr.scan.fits.declared import HEADER_TEXT, declared_beyond, unreadable_header
from refzarr.scan.fits.header import header_attributes
from refzarr.scan.fits.image import image_array
from refzarr.scan.fits.names import array_names
from refzarr.scan.fits.source import OpenFits, open_fits
from refzarr.scan.fits.stack import stack_extensions
from refzarr.scan.fits.tables import ascii_table_array, binary_table_array, groups_array
from refzarr.scan.fits.tiles import compressed_array
from refzarr.scan.result import ScannedGroup, Skipped

__all__ = ["DEFAULT_INLINE_DECODED", "FitsScanner"]

DEFAULT_INLINE_DECODED = 2**22
"""Largest decoded size (4 MiB) of what cannot be referenced chunk by chunk (quantized tiles,
variable-length columns) that is decoded and held in the reference set."""


@dataclass(frozen=True, slots=True)
class FitsScanner(ScanOptions):
    """Scan FITS files into reference groups: one array per HDU with data.

    Takes the options every scanner takes (`ScanOptions`) and:

    Parameters
    ----------
    chunk_bytes
        Largest chunk cut from uncompressed data (images, table rows): whole rows of the
        slowest axis. Tile-compressed images keep their tiles.
    inline_decoded
        What cannot be referenced chunk by chunk (quantized floating-point tiles,
        variable-length table columns, tiles whose shape cannot be told from their length)
        is decoded and held in the reference set up to this many bytes, else raises
        `UnsupportedFeatureError` (or is skipped with ``on_unsupported="skip"``).
    stack_extensions
        Combine image extensions sharing a name (one per CCD: ``SCI`` with ``EXTVER`` 1, 2,
        ...) and their shape, dtype, codecs and scaling into one array ``<name>`` with a
        leading dimension ``<name>_extver`` (chunks stay per extension).
    """

    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    inline_decoded: int = DEFAULT_INLINE_DECODED
    stack_extensions: bool = False

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)
        for name in ("chunk_bytes", "inline_decoded"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if self.chunk_bytes == 0:
            raise ValueError("chunk_bytes must be > 0")
        if not isinstance(self.stack_extensions, bool):
            raise TypeError(f"stack_extensions must be a bool, got {self.stack_extensions!r}")

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one file (a local path or an fsspec URL).

        Returns
        -------
        ScannedGroup
            The root group (attributes: the primary header); ``skipped`` lists what
            ``on_unsupported="skip"`` left out.
        """
        with open_fits(str(url), self.storage_options) as source, warnings.catch_warnings():
            warnings.simplefilter("ignore", AstropyWarning)
            hdus = _read_headers(source)
            scan = HduScan(source, self.chunk_bytes, self.inline_threshold, self.inline_decoded)
            names = array_names([h.name for h in hdus], [h.ver for h in hdus])
            members: dict[str, RefArray] = {}
            skipped: list[Skipped] = []
            for index, (hdu, name) in enumerate(zip(hdus, names, strict=True)):
                array = self._guarded(scan, index, hdu, name, skipped)
                if array is not None:
                    members[name] = array
            attrs = header_attributes(hdus[0].header)
            if self.stack_extensions:
                members = stack_extensions(
                    members, [h.name for h in hdus], names, scan.dims, source.url
                )
        return ScannedGroup(attrs, members, tuple(skipped))

    def _guarded(
        self, scan: HduScan, index: int, hdu: Any, name: str, skipped: list[Skipped]
    ) -> RefArray | None:
        where = scan.source.where(index, hdu.name)
        try:
            return _hdu_array(scan, index, hdu, name, where)
        except UnsupportedFeatureError as exc:
            if self.on_unsupported == "raise":
                raise
            skipped.append(Skipped(f"/{name}", str(exc)))
            return None
        except RefzarrError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:  # astropy on damaged headers
            raise ScanError(f"{where}: reading it failed (damaged header?): {exc}") from exc


def _read_headers(source: OpenFits) -> list[Any]:
    """Every HDU (headers read, data not); ScanError naming the HDU whose header is bad."""
    hdus: list[Any] = []
    try:
        # one by one, not extend(): astropy reads each header as the iteration reaches it,
        # and an error names the HDU it stopped at
        for hdu in source.hdul:
            hdus.append(hdu)  # noqa: PERF402
    except (OSError, ValueError, KeyError, IndexError) as exc:
        where, start = source.where(len(hdus)), _next_start(hdus)
        raise ScanError(
            unreadable_header(source.read_range, start, source.size, where, exc)
        ) from exc
    if not hdus:
        raise ScanError(f"{source.url}: no HDU could be read (no END card in the primary header?)")
    for index in range(len(hdus)):
        _check_header_text(source, index)
    _check_trailing(source, hdus)
    return hdus


def _next_start(hdus: list[Any]) -> int:
    """Where the HDU after ``hdus`` starts (after the last one's padded data)."""
    if not hdus:
        return 0
    info = hdus[-1].fileinfo()
    return int(info["datLoc"]) + int(info["datSpan"])


def _check_header_text(source: OpenFits, index: int) -> None:
    """ScanError when a header holds bytes that are not printable ASCII: its END card is
    missing, and astropy read on through the data to the next HDU's END."""
    info = source.hdul[index].fileinfo()  # not HDUList.fileinfo: it re-renders every header
    start, end = int(info["hdrLoc"]), int(info["datLoc"])
    text = source.read_range(start, end - start)
    if text.translate(None, HEADER_TEXT):
        position = start + next(k for k, b in enumerate(text) if b < 0x20 or b > 0x7E)
        raise ScanError(
            f"{source.where(index)}: its header (at offset {start}) holds a byte that is not "
            f"printable ASCII at offset {position}: its END card is missing or the header is "
            "damaged"
        )


def _check_trailing(source: OpenFits, hdus: list[Any]) -> None:
    """ScanError when astropy stopped before the end of the file on bytes that are not
    padding (a header without END that it gave up on)."""
    info = hdus[-1].fileinfo()
    end = int(info["datLoc"]) + int(info["datSpan"])
    if end + 80 > source.size:
        return
    tail = source.read_range(end, 80)
    if tail.strip(b"\0 "):
        where = source.where(len(hdus))
        beyond = declared_beyond(source.read_range, end, source.size, where)
        if beyond:  # astropy stopped at a header declaring more data than the file holds
            raise ScanError(beyond)
        raise ScanError(
            f"{source.where(len(hdus))}: the header at offset {end} cannot be read "
            f"(starts {tail[:40]!r}); it has no END card or is damaged"
        )


def _hdu_array(scan: HduScan, index: int, hdu: Any, name: str, where: str) -> RefArray | None:
    """The array of one HDU, or None when it has no data."""
    if isinstance(hdu, fits.CompImageHDU):
        return compressed_array(scan, index, hdu, name, where)
    if isinstance(hdu, fits.GroupsHDU):
        return groups_array(scan, index, hdu, name, where)
    if isinstance(hdu, fits.BinTableHDU):
        return binary_table_array(scan, index, hdu, name, where)
    if isinstance(hdu, fits.TableHDU):
        return ascii_table_array(scan, index, hdu, name, where)
    if isinstance(hdu, fits.PrimaryHDU | fits.ImageHDU):
        return image_array(scan, index, hdu, name, where)
    raise UnsupportedFeatureError(
        f"{where}: {type(hdu).__name__} extensions (XTENSION = "
        f"{hdu.header.get('XTENSION')!r}) are not supported"
    )
