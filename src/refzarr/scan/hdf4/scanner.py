"""The HDF4 scanner: SDS arrays at the root, dimension scales as coordinates, file attributes
on the root, Vdata tables under ``vdata/``, GR raster images under ``images/``.

`Hdf4Scanner` is a configured callable (options in the constructor, no state between calls,
picklable), so scanning many files is ``executor.map(Hdf4Scanner(...), urls)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np

import refzarr.codecs.hdf4  # noqa: F401  # registers the codecs the references name
from refzarr.errors import RefzarrError, ScanError, UnsupportedFeatureError
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.scan.base import ScanOptions
from refzarr.scan.coordinates import load_coordinate
from refzarr.scan.hdf4.dd import read_dd_table
from refzarr.scan.hdf4.elements import Chunked, Compressed, Contiguous, External, resolve
from refzarr.scan.hdf4.eos import grid_coordinates, grid_mappings
from refzarr.scan.hdf4.images import read_images
from refzarr.scan.hdf4.sd import SdFile, SdVariable, read_sd, record_count
from refzarr.scan.hdf4.source import Source, open_source
from refzarr.scan.hdf4.storage import Context, Layout, layout_of
from refzarr.scan.hdf4.tables import read_tables
from refzarr.scan.hdf4.vsets import Vsets
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip

__all__ = ["Hdf4Scanner", "default_fill"]

T = TypeVar("T")
DFTAG_SD, DFTAG_SDG, DFTAG_NDG = 702, 700, 720


@dataclass(frozen=True, slots=True)
class Hdf4Scanner(ScanOptions):
    """Scan HDF4 files (SD interface, Vdata, GR images, HDF-EOS2) into reference groups.

    Takes the options every scanner takes (`ScanOptions`: ``storage_options``,
    ``inline_threshold``, ``on_unsupported``, ``inline_coordinates``) and:

    Parameters
    ----------
    eos_coordinates
        Compute 1-D ``x``/``y`` (or ``lon``/``lat``) coordinates of HDF-EOS2 grids from
        their ``StructMetadata`` where the projection allows, and a ``spatial_ref`` (CRS,
        GeoTransform) named by the grid's SDS in ``grid_mapping`` where refzarr can
        express the projection (default True).

    Examples
    --------
    >>> scanner = Hdf4Scanner(on_unsupported="skip")  # doctest: +SKIP
    >>> group = scanner("MOD09GA.hdf")  # doctest: +SKIP
    """

    eos_coordinates: bool = True

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)
        if not isinstance(self.eos_coordinates, bool):
            raise TypeError(f"eos_coordinates must be a bool, got {self.eos_coordinates!r}")

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one file (a local path or an fsspec URL)."""
        with open_source(str(url), self.storage_options) as source:
            walk = _Walk(self, source)
            try:
                return walk.root()
            except RefzarrError:
                raise
            except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
                # a damaged structure the checks did not name more precisely
                raise ScanError(
                    f"{source.url}: damaged HDF4 structure ({type(exc).__name__}: {exc})"
                ) from exc


@dataclass
class _Walk:
    """The state of one scan."""

    options: Hdf4Scanner
    source: Source
    skipped: list[Skipped] = field(default_factory=list)

    def guarded(self, path: str, build: Callable[[], T]) -> T | None:
        """``build()``, or None after recording the skip when unsupported and skipping."""
        return build_or_skip(build, path, self.options.on_unsupported, self.skipped)

    def root(self) -> ScannedGroup:
        source = self.source
        table = read_dd_table(source)
        vsets = Vsets(table, source)
        ctx = Context(source, table, vsets, self.options.inline_threshold)
        sd = read_sd(vsets, source.url)
        members: dict[str, RefArray | RefGroup] = {}
        attributes: dict[str, Any] = {}
        used_vgroups: set[int] = set()
        used_vdatas: set[int] = set()
        if sd is None and (table.refs(DFTAG_NDG) or table.refs(DFTAG_SDG)):
            self.guarded("/", partial(_dfsd_only, source.url))
        if sd is not None:
            members.update(self.sd_arrays(ctx, sd))
            attributes = sd.attributes
            used_vgroups, used_vdatas = sd.internal_vgroups, sd.internal_vdatas
            if self.options.eos_coordinates:
                coords = grid_coordinates(attributes, members, source.url)
                for name, array in coords.items():
                    members.setdefault(name, array)
                members.update(grid_mappings(attributes, members))
        images = read_images(ctx, self.guarded, used_vdatas)
        if images.members:
            members["images"] = images
        tables = read_tables(ctx, self.guarded, used_vgroups, used_vdatas)
        if tables.members:
            members["vdata"] = tables
        return ScannedGroup(attributes, members, tuple(self.skipped))

    def sd_arrays(self, ctx: Context, sd: SdFile) -> dict[str, RefArray]:
        out: dict[str, RefArray] = {}
        scales = [v for v in sd.variables if v.coordinate]
        for var in [v for v in sd.variables if not v.coordinate] + scales:
            name = _unique(var.name.replace("/", "_"), out)
            if var.coordinate and var.data_ref is None:
                continue  # a dimension with attributes but no scale values
            if var.coordinate and name != var.name:
                self.guarded(f"/{var.name}", partial(_scale_clash, ctx.source.url, var.name))
                continue
            array = self.guarded(f"/{var.name}", partial(self.sds, ctx, var))
            if array is None:
                continue
            if self.options.inline_coordinates and var.coordinate:
                array = load_coordinate(
                    array,
                    name,
                    ctx.source.url,
                    lambda o, n: ctx.source.read_range(o, n, "coordinate"),
                    self.options.inline_coordinates,
                    f"{ctx.source.url}: dimension scale {var.name!r}",
                )
            out[name] = array
        return out

    def sds(self, ctx: Context, var: SdVariable) -> RefArray:
        what = f"SDS {var.name!r}"
        assert var.dtype is not None
        dtype = var.dtype
        storage = None
        if var.data_ref is not None and ctx.table.get(DFTAG_SD, var.data_ref) is not None:
            dd = ctx.table.find(DFTAG_SD, var.data_ref, what)
            storage = resolve(ctx.table, ctx.source, dd, f"{what}: data")
        shape = _shape(var, storage)
        layout = layout_of(ctx, storage, shape, dtype, what)
        complete = layout.manifest.count_written() == layout.manifest.nchunks
        attrs = dict(var.attributes)
        meta = ArrayMeta(
            shape=shape,
            chunks=layout.chunks,
            dtype=dtype,
            fill_value=_fill_value(var, storage, layout, complete),
            codecs=layout.codecs,
            attributes=attrs,
            dimension_names=tuple(d.name for d in var.dimensions),
        )
        return RefArray(meta, layout.manifest)


def _dfsd_only(url: str) -> None:
    raise UnsupportedFeatureError(
        f"{url}: scientific data sets written only by HDF4's old DFSD interface (no CDF0.0 "
        "vgroup) are not supported"
    )


def _scale_clash(url: str, name: str) -> None:
    raise UnsupportedFeatureError(
        f"{url}: dimension scale {name!r}: an SDS of the same name takes the array name"
    )


def _unique(name: str, taken: dict[str, Any]) -> str:
    if name not in taken and name not in ("images", "vdata"):
        return name
    k = 2
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


def _shape(var: SdVariable, storage: Any) -> tuple[int, ...]:
    sizes = [d.size for d in var.dimensions]
    if not var.record:
        return tuple(int(s or 0) for s in sizes)
    if isinstance(storage, Chunked):
        records = storage.shape[0]
    elif isinstance(storage, Contiguous | External | Compressed):
        records = record_count(var, storage.length)
    else:
        records = 0
    return (records, *(int(s or 0) for s in sizes[1:]))


def _fill_value(var: SdVariable, storage: Any, layout: Layout, complete: bool) -> Any:
    """The Zarr fill value: the ``_FillValue`` attribute; where chunks are missing, what
    HDF4 reads there (a chunked SDS's header fill, else ``_FillValue`` or HDF4's default)."""
    assert var.dtype is not None
    dtype = var.dtype
    declared = _declared(var.attributes.get("_FillValue"), dtype)
    if complete:
        return declared
    if isinstance(storage, Chunked) and len(storage.fill) == dtype.itemsize:
        return np.frombuffer(storage.fill, dtype=dtype)[0]
    return declared if declared is not None else default_fill(dtype)


def _declared(value: Any, dtype: np.dtype[Any]) -> Any:
    if value is None or isinstance(value, list | str):
        return None
    try:
        return np.asarray(value).astype(dtype)[()]
    except (TypeError, ValueError, OverflowError):
        return None


def default_fill(dtype: np.dtype[Any]) -> Any:
    """What HDF4 reads where an SDS has no data and no ``_FillValue`` (netCDF's fills)."""
    if dtype.kind == "S":
        return b""
    if dtype.kind == "f":
        return dtype.type(9.9692099683868690e36)
    if dtype.itemsize == 8:
        return np.frombuffer(b"\xff" * 8, dtype=dtype)[0]
    signed = {1: -127, 2: -32767, 4: -2147483647}[dtype.itemsize]
    return np.asarray(signed, dtype=f"i{dtype.itemsize}").astype(dtype)[()]
