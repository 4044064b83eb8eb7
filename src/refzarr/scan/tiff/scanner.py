"""The TIFF / GeoTIFF / COG / BigTIFF scanner: every image series tifffile lists, every
reduced-resolution level, one chunk per tile or strip, with GeoTIFF coordinates.

`TiffScanner` is a configured callable (options in the constructor, no state between calls,
picklable), so scanning many files is ``executor.map(TiffScanner(...), urls)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import tifffile

from refzarr.codecs.tiff import register_imagecodecs
from refzarr.errors import RefzarrError, ScanError, UnsupportedFeatureError
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.scan.base import ScanOptions
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip
from refzarr.scan.tiff.codecs import segment_codecs
from refzarr.scan.tiff.gdal import gdal_attributes, gdal_nodata, text_tags
from refzarr.scan.tiff.geo import Georeference, georeference
from refzarr.scan.tiff.layout import SeriesLayout, series_layout
from refzarr.scan.tiff.source import TiffSource, open_tiff

__all__ = ["TiffScanner"]

register_imagecodecs()


@dataclass(frozen=True, slots=True)
class TiffScanner(ScanOptions):
    """Scan TIFF, GeoTIFF, COG and BigTIFF files into reference groups.

    Takes the options every scanner takes (`ScanOptions`: ``storage_options``,
    ``inline_threshold``, ``on_unsupported``, ``inline_coordinates``). Series 0 is the root
    group, series ``i`` the group ``series_{i}``; each holds its image as ``band_data`` and
    its reduced-resolution levels as groups ``overview_{l}``; images of several bands have a
    ``band`` coordinate (1..n, as rioxarray). GeoTIFFs add ``x``, ``y`` and ``spatial_ref``
    (see ``docs/formats/tiff.md``).

    Examples
    --------
    >>> scanner = TiffScanner(on_unsupported="skip")  # doctest: +SKIP
    >>> groups = list(executor.map(scanner, urls))  # doctest: +SKIP
    """

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one file (a local path or an fsspec URL).

        Returns
        -------
        ScannedGroup
            The root group (series 0); ``skipped`` lists what ``on_unsupported="skip"``
            left out.
        """
        with open_tiff(str(url), self.storage_options) as source:
            walk = _Walk(self, source)
            members: dict[str, RefArray | RefGroup] = {}
            for index, series in enumerate(_series(source)):
                group = walk.guarded(_group_path(index), partial(walk.series, series, index))
                if group is None:
                    continue
                if index == 0:
                    members.update(group.members)
                else:
                    members[f"series_{index}"] = group
        return ScannedGroup({}, members, tuple(walk.skipped))


def _series(source: TiffSource) -> list[Any]:
    try:
        return list(source.tiff.series)
    except RefzarrError:
        raise
    except Exception as exc:  # tifffile on damaged IFDs
        raise ScanError(f"{source.url}: tifffile cannot list its image series: {exc}") from exc


@dataclass
class _Walk:
    """The state of one scan: what was skipped."""

    options: TiffScanner
    source: TiffSource
    skipped: list[Skipped] = field(default_factory=list)

    def guarded(self, path: str, build: Any) -> Any:
        """``build()``, or None after recording the skip when unsupported and skipping."""
        return build_or_skip(build, path, self.options.on_unsupported, self.skipped)

    def series(self, series: Any, index: int) -> RefGroup:
        where = f"{self.source.url}: series {index}"
        geo = self.georeference(series, index)
        members = self.image(series, where, geo)
        levels = list(series.levels)
        full = _yx(members["band_data"])
        for level, reduced in enumerate(levels[1:], start=1):
            level_where = f"{where} level {level}"
            level_geo = _level_geo(geo, reduced, full)
            path = f"{_group_path(index).rstrip('/')}/overview_{level}"
            found = self.guarded(path, partial(self.image, reduced, level_where, level_geo))
            if found is not None:
                members[f"overview_{level}"] = RefGroup({}, found)
        return RefGroup({}, members)

    def georeference(self, series: Any, index: int) -> Georeference | None:
        page = series.keyframe
        geo = georeference(page)
        if geo is None and index > 0 and _is_mask(page):  # GDAL masks share the image's grid
            first = self.source.tiff.pages.first
            if (first.imagelength, first.imagewidth) == (page.imagelength, page.imagewidth):
                geo = georeference(first)
        return geo

    def image(
        self, series: Any, where: str, geo: Georeference | None
    ) -> dict[str, RefArray | RefGroup]:
        """``band_data`` of one series or level, with its coordinates."""
        try:
            layout = series_layout(series, where, self.source.tiff)
            array = self.band_data(series, layout, where, geo)
        except RefzarrError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, OSError) as exc:
            raise ScanError(
                f"{where}: reading its TIFF tags failed (damaged file?): {exc}"
            ) from exc
        members: dict[str, RefArray | RefGroup] = {"band_data": array}
        if "band" in layout.dims:  # numbered from 1, as rioxarray has it (GDAL's indexes)
            members["band"] = _inlined_1d("band", np.arange(1, _bands(layout) + 1, dtype="<i8"))
        if geo is not None:
            members.update(_geo_members(geo, layout))
        return members

    def band_data(
        self, series: Any, layout: SeriesLayout, where: str, geo: Georeference | None
    ) -> RefArray:
        page = series.keyframe
        _check_jpeg_tables(series, page, where)
        short = (layout.last_rows, layout.chunks[layout.y_axis]) if layout.short_last else None
        pipeline = segment_codecs(page, layout.chunks, layout.x_axis, short, where)
        dtype = pipeline.dtype
        manifest = self.source.manifest(layout, page, dtype, self.options.inline_threshold, where)
        fill = gdal_nodata(page, dtype)
        bands = _bands(layout)
        attrs: dict[str, Any] = text_tags(page)
        attrs.update(gdal_attributes(page, bands))
        if fill is not None:
            attrs["_FillValue"] = fill.item()
        if geo is not None:
            attrs["grid_mapping"] = "spatial_ref"
            attrs["coordinates"] = "spatial_ref"  # a coordinate, as rioxarray has it
            if geo.point:
                attrs["AREA_OR_POINT"] = "Point"
        meta = ArrayMeta(
            shape=layout.shape,
            chunks=layout.chunks,
            dtype=dtype,
            fill_value=fill,
            codecs=pipeline.codecs,
            attributes=attrs,
            dimension_names=layout.dims,
        )
        return RefArray(meta, manifest)


def _check_jpeg_tables(series: Any, page: Any, where: str) -> None:
    """JPEG tables are one codec parameter for the array: every page must share them."""
    if int(page.compression) not in (7, 34892) or len(series.pages) < 2:
        return
    # frames (tifffile's TiffFrame) are decoded with their key page's tables, as tifffile does
    tables = {p.jpegtables for p in series.pages if isinstance(p, tifffile.TiffPage)}
    if len(tables) > 1:
        raise UnsupportedFeatureError(
            f"{where}: its pages hold different JPEGTables; one array takes one set "
            "(scan the pages as separate files, or convert to a COG)"
        )


def _group_path(index: int) -> str:
    """Where series ``index`` goes in the scanned hierarchy (named in ``skipped``)."""
    return "/" if index == 0 else f"/series_{index}"


def _level_geo(geo: Georeference | None, series: Any, full: tuple[int, int]) -> Any:
    if geo is None:
        return None
    page = series.keyframe
    return geo.at_level(int(page.imagelength), int(page.imagewidth), full)


def _yx(member: RefArray | RefGroup) -> tuple[int, int]:
    assert isinstance(member, RefArray)
    dims = member.meta.dimension_names or ()
    shape = dict(zip(dims, member.meta.shape, strict=True))
    return shape["y"], shape["x"]


def _bands(layout: SeriesLayout) -> int:
    return dict(zip(layout.dims, layout.shape, strict=True)).get("band", 1)


def _is_mask(page: Any) -> bool:
    return bool(int(page.subfiletype) & 4) or int(page.photometric) == 4


def _geo_members(geo: Georeference, layout: SeriesLayout) -> dict[str, RefArray]:
    height, width = layout.shape[layout.y_axis], layout.shape[layout.x_axis]
    members = {"spatial_ref": _scalar(geo.spatial_ref)}
    coords = geo.coordinates(height, width)
    if coords is not None:
        members["y"] = _inlined_1d("y", coords[0].astype("<f8"))
        members["x"] = _inlined_1d("x", coords[1].astype("<f8"))
    return members


def _scalar(attrs: dict[str, Any]) -> RefArray:
    meta = ArrayMeta(
        shape=(), chunks=(), dtype=np.dtype("<i8"), attributes=attrs, dimension_names=()
    )
    return RefArray(meta, ChunkManifest.one_inlined(np.int64(0).tobytes(), ndim=0))


def _inlined_1d(name: str, values: np.ndarray[Any, Any]) -> RefArray:
    """A 1-D coordinate held in the reference set, stored little-endian in one chunk."""
    data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    meta = ArrayMeta(
        shape=data.shape, chunks=(max(data.size, 1),), dtype=data.dtype, dimension_names=(name,)
    )
    return RefArray(meta, ChunkManifest.one_inlined(data.tobytes(), ndim=1))
