"""The DMR++ scanner: the arrays of the HDF5 / netCDF4 file a sidecar describes, from the
sidecar alone, laid out as `refzarr.scan.hdf5` lays out the file itself.

`DmrppScanner` is a configured callable (options in the constructor, no state between calls,
picklable), so scanning thousands of sidecars is ``executor.map(DmrppScanner(...), urls)``.
The data file is read only for what the sidecar cannot give: dimension coordinates loaded per
``inline_coordinates``, chunks stored in several blocks or that skipped filters, chunks under
``inline_threshold``, and its size when ``check_data_file`` asks for it.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import fsspec
import numpy as np

from refzarr.errors import (
    RefFormatError,
    RefzarrError,
    ScanError,
    SourceNotFoundError,
    UnsupportedFeatureError,
)
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.model.attr_types import (
    NETCDF_KEY,
    RESERVED_ATTRS,
    TYPES_ATTR,
    attribute_type,
    has_untyped_numbers,
    reserved_attribute,
    with_types,
)
from refzarr.scan.base import ScanOptions
from refzarr.scan.coordinates import load_coordinate
from refzarr.scan.dmrpp.locate import DataFiles, data_file_url
from refzarr.scan.dmrpp.storage import (
    Layout,
    Storage,
    codecs_for,
    compact_storage,
    listed_storage,
)
from refzarr.scan.dmrpp.strings import string_dtype, vlen_array
from refzarr.scan.dmrpp.values import (
    NUMERIC_TYPES,
    attribute_value,
    compound_dtype,
    fill_from_text,
    numeric_dtype,
    value_in_dtype,
)
from refzarr.scan.dmrpp.xmldoc import DMRPP, Names, parse_document
from refzarr.scan.hdf5.attrs import INTERNAL_ATTRS
from refzarr.scan.hdf5.dims import NETCDF_DIMENSION_ONLY, PhonyDimensions
from refzarr.scan.hdf5.source import check_within_file
from refzarr.scan.hdf5.types import ENUM_ATTR, ENUM_NAME_ATTR
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip

__all__ = ["DmrppScanner"]

T = TypeVar("T")

_VARIABLES = frozenset(
    {*NUMERIC_TYPES, "String", "URL", "Char", "Enum", "Opaque", "Structure", "Sequence"}
)
_UNSUPPORTED_FILLS = {
    "unsupported-string": "variable-length strings the sidecar does not hold",
    "unsupported-variable-length-string": "variable-length strings the sidecar does not hold",
    "unsupported-array": "HDF5 array types",
    "unsupported-compound": "HDF5 compound types",
}
"""What ``build_dmrpp`` writes as ``fillValue`` of a variable it could not describe."""

_NON_COORD = "_nc4_non_coord_"
_PROVENANCE = "build_dmrpp_metadata"
"""The root attribute container ``build_dmrpp`` adds (its version, configuration, command)."""


@dataclass(frozen=True, slots=True)
class DmrppScanner(ScanOptions):
    """Scan DMR++ sidecars into the reference groups of the files they describe.

    Takes the options every scanner takes (`ScanOptions`: ``storage_options`` for the sidecar
    and the data file, ``inline_threshold``, ``on_unsupported``, ``inline_coordinates``) and:

    Parameters
    ----------
    data_url
        The data file the chunks are in. None (default): the sidecar's URL without
        ``.dmrpp``, else its ``dmrpp:href`` when that is an absolute URL. ``{name}`` in it
        stands for the sidecar's file name without ``.dmrpp`` and ``{href}`` for its
        ``dmrpp:href``, so that one scanner serves many sidecars
        (``"s3://bucket/granules/{name}"``, ``"{href}"``).
    multi_block_bytes
        A chunk stored in several separate blocks is read from the data file and inlined
        when it has at most this many bytes (default 1 MiB); a larger one is unsupported.
    check_data_file
        Also check that every chunk ends within the data file (one size request per data
        file). A sidecar alone cannot know the file's size, so by default only what the
        sidecar says is checked (chunks inside the shape, not overlapping).

    Examples
    --------
    >>> scanner = DmrppScanner(data_url="s3://bucket/granule.h5")
    >>> group = scanner("granule.h5.dmrpp")  # doctest: +SKIP
    """

    data_url: str | None = None
    multi_block_bytes: int = 2**20
    check_data_file: bool = False

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)
        if self.data_url is not None and not isinstance(self.data_url, str):
            raise TypeError(f"data_url must be a str, got {self.data_url!r}")
        if _relative_path(self.data_url):  # made absolute now: the scan record keeps it
            object.__setattr__(self, "data_url", os.path.abspath(str(self.data_url)))
        if isinstance(self.multi_block_bytes, bool) or not isinstance(self.multi_block_bytes, int):
            raise TypeError(f"multi_block_bytes must be an int, got {self.multi_block_bytes!r}")
        if self.multi_block_bytes < 0:
            raise ValueError(f"multi_block_bytes must be >= 0, got {self.multi_block_bytes}")

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one sidecar (a local path or an fsspec URL).

        Returns
        -------
        ScannedGroup
            The root group; ``skipped`` lists what ``on_unsupported="skip"`` left out.
        """
        url = str(url)
        root, names = parse_document(_read_sidecar(url, self.storage_options), url)
        href = root.get(DMRPP + "href")
        target = data_file_url(url, self.data_url, href)
        walk = _Walk(self, url, names, DataFiles(target, href, self.storage_options))
        walk.old = root.get(DMRPP + "version") is None
        group = walk.group(root, "")
        return ScannedGroup(group.attributes, group.members, tuple(walk.skipped))


def _relative_path(data_url: str | None) -> bool:
    """Whether ``data_url`` is a relative local path (``data/{name}``): a record of the scan
    keeps it, so `refresh` run from another folder would look elsewhere."""
    if not data_url or data_url.startswith("{") or ":" in data_url:
        return False
    return not os.path.isabs(data_url)


def _read_sidecar(url: str, storage_options: Any) -> bytes:
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    try:
        return bytes(fs.cat_file(path))
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file") from exc
    except IsADirectoryError as exc:
        raise ScanError(f"{url}: a directory, not a DMR++ sidecar") from exc


@dataclass
class _Walk:
    """The state of one scan: dimensions and enumerations declared, phony names, skips."""

    options: DmrppScanner
    sidecar: str
    names: Names
    files: DataFiles
    old: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    phony: PhonyDimensions = field(default_factory=PhonyDimensions)
    sizes: dict[str, int] = field(default_factory=dict)
    enums: dict[str, ET.Element] = field(default_factory=dict)

    def where(self, path: str, kind: str = "variable") -> str:
        return f"{self.sidecar}: {kind} {path or '/'!r}"

    def guarded(self, path: str, build: Callable[[], T]) -> T | None:
        """``build()``, or None after recording the skip when unsupported and skipping."""
        return build_or_skip(build, path, self.options.on_unsupported, self.skipped)

    # -- groups ---------------------------------------------------------------------------

    def group(self, element: ET.Element, path: str) -> RefGroup:
        """A ``Dataset`` or ``Group`` element (at ``path``, "" for the root) and its members."""
        kinds = [(self.names.local(child.tag), child) for child in element]
        for kind, child in kinds:
            if kind == "Dimension":
                self.declare_dimension(child, path)
            elif kind == "Enumeration":
                self.enums[_join(path, self.required(child, "name", path))] = child
        variables = {c.get("name") for k, c in kinds if k in _VARIABLES}
        members: dict[str, RefArray | RefGroup] = {}
        for kind, child in kinds:
            if kind == "Group":
                name = self.required(child, "name", path)
                sub = _join(path, name)
                member: RefArray | RefGroup | None = self.guarded(
                    sub, partial(self.group, child, sub)
                )
            elif kind in _VARIABLES:
                name = self.required(child, "name", path)
                sub = _join(path, name)
                member = self.guarded(sub, partial(self.variable, child, kind, path))
                name = _variable_name(name, variables)
            else:
                continue
            if member is not None:
                members[name] = member
        attrs = _shown(self.attributes(element, path, hide_provenance=not path))
        try:
            return RefGroup(attrs, members)
        except (RefFormatError, TypeError) as exc:
            raise ScanError(f"{self.where(path, 'group')}: {exc}") from None

    def required(self, element: ET.Element, name: str, path: str) -> str:
        value = element.get(name)
        if not value:
            tag = self.names.local(element.tag) or element.tag
            raise ScanError(f"{self.where(path, 'group')}: a {tag} element has no {name!r}")
        return value

    def declare_dimension(self, element: ET.Element, path: str) -> None:
        name = self.required(element, "name", path)
        size = self.required(element, "size", path)
        if not size.strip().isdigit():
            raise ScanError(f"{self.where(path, 'group')}: dimension {name!r} has size {size!r}")
        self.sizes[_join(path, name)] = _dimension_size(size, self.where(path, "group"))

    # -- variables ------------------------------------------------------------------------

    def variable(self, element: ET.Element, kind: str, group: str) -> RefArray | None:
        """One variable element as an array (None: a netCDF dimension without a variable)."""
        path = _join(group, element.get("name", ""))
        where = self.where(path)
        attrs = self.attributes(element, path)
        name_attr = attrs.get("NAME")
        if isinstance(name_attr, str) and name_attr.encode().startswith(NETCDF_DIMENSION_ONLY):
            return None
        dims = self.dimensions(element, group, where)
        shape = tuple(size for _, size in dims)
        try:
            names = self.dimension_names(dims, group)
            array = self.build(element, kind, attrs, names, shape, where)
        except RefFormatError as exc:
            raise ScanError(f"{where}: {exc}") from None
        limit = self.options.inline_coordinates
        if not limit:
            return array
        key = _variable_name(element.get("name", ""), set())
        reader = self.files.reader(self.files.url, where)
        try:
            return load_coordinate(array, key, self.files.url, reader, limit, where)
        except (RefzarrError, OSError):  # data file unreachable: loading is only a shortcut
            return array

    def build(
        self,
        element: ET.Element,
        kind: str,
        attrs: dict[str, Any],
        names: tuple[str, ...],
        shape: tuple[int, ...],
        where: str,
    ) -> RefArray:
        chunks = element.find(DMRPP + "chunks")
        fill_text = None if chunks is None else chunks.get("fillValue")
        _check_fill_marker(fill_text, element, bool(shape), where)
        shown = _shown(attrs)
        vlsa = element.find(DMRPP + "vlsa")
        if vlsa is not None:
            return vlen_array(vlsa, self.names("v"), shape, names, shown, where)
        dtype = self.dtype(element, kind, chunks, shown, where, scalar=not shape)
        codecs, stages = codecs_for(chunks, dtype, where, old=self.old)
        storage = self.storage(element, chunks, Layout(where, shape, dtype, codecs, stages))
        fill = _fill(storage, fill_text, attrs.get("_FillValue"), dtype, where)
        # a fill value that is no _FillValue (netCDF's default fill) reads, masks nothing
        with_types(shown, {}, mark=fill is not None and "_FillValue" not in shown)
        meta = ArrayMeta(
            shape=shape,
            chunks=storage.chunks,
            dtype=dtype,
            fill_value=fill,
            codecs=codecs,
            attributes=shown,
            dimension_names=names,
        )
        return RefArray(meta, storage.manifest)

    def dtype(
        self,
        element: ET.Element,
        kind: str,
        chunks: ET.Element | None,
        shown: dict[str, Any],
        where: str,
        *,
        scalar: bool = False,
    ) -> np.dtype[Any]:
        byte_order = None if chunks is None else chunks.get("byteOrder")
        if kind in NUMERIC_TYPES:
            return numeric_dtype(kind, byte_order, where)
        if kind == "Enum":
            base, mapping = self.enumeration(element, where)
            shown[ENUM_ATTR] = mapping
            shown[ENUM_NAME_ATTR] = element.get("enum", "").rpartition("/")[2]
            return numeric_dtype(base, byte_order, where)
        if kind == "String":
            return string_dtype(element, chunks, scalar, where)
        if kind == "Structure":
            return compound_dtype(element, self.names, chunks, where)
        raise UnsupportedFeatureError(f"{where}: DAP4 {kind} variables are not supported")

    def enumeration(self, element: ET.Element, where: str) -> tuple[str, dict[str, int]]:
        ref = element.get("enum", "")
        definition = self.enums.get(ref)
        if definition is None:  # never an Element's truth value (deprecated in Python 3.12)
            definition = self.enums.get(_join(where.rpartition("/")[0], ref))
        if definition is None:
            raise ScanError(f"{where}: its enumeration {ref!r} is not declared")
        base = definition.get("basetype", "")
        if base not in NUMERIC_TYPES or NUMERIC_TYPES[base][0] not in "iu":
            raise ScanError(f"{where}: enumeration {ref!r} has basetype {base!r}")
        mapping = {}
        for const in definition.findall(self.names("EnumConst")):
            value = attribute_value(base, [const.get("value")], where)
            mapping[str(const.get("name"))] = int(value)
        return base, mapping

    def storage(self, element: ET.Element, chunks: ET.Element | None, layout: Layout) -> Storage:
        compact = element.find(DMRPP + "compact")
        if compact is not None:
            return compact_storage(compact.text, layout)
        missing = element.find(DMRPP + "missingdata")
        if missing is not None:
            return compact_storage(missing.text, layout, compressed=True)
        if element.find(DMRPP + "specialstructuredata") is not None:
            raise UnsupportedFeatureError(f"{layout.where}: DMR++ special structure data")
        contiguous = element.find(DMRPP + "chunk")
        if chunks is None and contiguous is None:
            raise ScanError(
                f"{layout.where}: the sidecar says nothing of where its data is (no dmrpp:chunks, "
                "dmrpp:chunk, dmrpp:compact or dmrpp:vlsa)"
            )
        storage = listed_storage(
            chunks,
            contiguous,
            layout,
            self.files,
            inline_threshold=self.options.inline_threshold,
            multi_block_bytes=self.options.multi_block_bytes,
        )
        self.check(storage, layout.where)
        return storage

    def check(self, storage: Storage, where: str) -> None:
        """Chunks of one array never share bytes; with ``check_data_file``, end in the file."""
        for url in storage.manifest.paths:
            size = self.files.size(url, where) if self.options.check_data_file else 2**63 - 1
            check_within_file(storage.manifest, url, size, where)

    # -- dimensions and attributes --------------------------------------------------------

    def dimensions(
        self, element: ET.Element, group: str, where: str
    ) -> list[tuple[str | None, int]]:
        """``(name or None, size)`` of each ``Dim`` of a variable."""
        out: list[tuple[str | None, int]] = []
        for dim in element.findall(self.names("Dim")):
            name, size = dim.get("name"), dim.get("size")
            if name:
                out.append((name.rpartition("/")[2], self.dimension_size(name, group, where)))
            elif size and size.strip().isdigit():
                out.append((None, _dimension_size(size, where)))
            else:
                raise ScanError(f"{where}: a Dim has neither a name nor a size ({dim.attrib})")
        return out

    def dimension_size(self, name: str, group: str, where: str) -> int:
        candidates = [name] if name.startswith("/") else []
        scope = group
        while not candidates:
            candidates.append(_join(scope, name))
            if not scope:
                break
            scope = scope.rpartition("/")[0]
        for key in candidates:
            if key in self.sizes:
                return self.sizes[key]
        raise ScanError(f"{where}: dimension {name!r} is not declared")

    def dimension_names(self, dims: list[tuple[str | None, int]], group: str) -> tuple[str, ...]:
        """Names as the HDF5 scanner gives them: declared ones, else phony ones per group
        (``group``: the variable's group path, "" for the root, as the HDF5 scanner keys them)."""
        names: list[str] = []
        phonies: list[str] = []
        for declared, length in dims:
            name = declared
            if name is None or name in phonies:
                name = self.phony.name(group, length, names)
                phonies.append(name)
            names.append(name)
        return tuple(names)

    def attributes(
        self, element: ET.Element, path: str, *, hide_provenance: bool = False, typed: bool = True
    ) -> dict[str, Any]:
        """The DAP4 attributes of an element (containers as objects), in document order;
        ``typed``: the numeric types JSON loses recorded as the HDF5 scanner records them."""
        out: dict[str, Any] = {}
        types: dict[str, str] = {}
        owner = "group" if self.names.local(element.tag) in ("Dataset", "Group") else "variable"
        for child in element.findall(self.names("Attribute")):
            name, kind = child.get("name"), child.get("type")
            where = f"{self.where(path, owner)}: attribute {name!r}"
            if not name or not kind:
                raise ScanError(f"{where}: an Attribute without name or type")
            if hide_provenance and name == _PROVENANCE:
                continue
            read = partial(self.value, child, kind, where, path)
            if typed and name in RESERVED_ATTRS:  # as the HDF5 scanner refuses it
                read = partial(_refuse_reserved, self.where(path, owner), name)
            value = self.guarded(f"{path or '/'}@{name}", read)
            if value is not None:
                out[name] = value
                recorded = _recorded_type(kind, value)
                if recorded is not None and typed:
                    types[name] = recorded
        if typed:  # as the HDF5 scanner records it: the sidecar describes an HDF5 file
            with_types(
                out, types, mark=False, netcdf=4 if has_untyped_numbers(out, types) else None
            )
        else:
            with_types(out, types, mark=False)
        return out

    def value(self, element: ET.Element, kind: str, where: str, path: str) -> Any:
        if kind == "Container":
            return self.attributes(element, f"{path}@{element.get('name')}", typed=False)
        if kind == "OtherXML":
            raise UnsupportedFeatureError(f"{where}: OtherXML attributes are not supported")
        texts = [v.text for v in element.findall(self.names("Value"))]
        return attribute_value(kind, texts, where)


def _refuse_reserved(where: str, name: str) -> Any:
    raise reserved_attribute(where, name)


def _check_fill_marker(text: str | None, element: ET.Element, array: bool, where: str) -> None:
    reason = _UNSUPPORTED_FILLS.get(text or "")
    if reason is None:
        return
    if text == "unsupported-string" and element.find(DMRPP + "vlsa") is not None:
        return
    if text == "unsupported-string" and (
        element.find(DMRPP + "FixedLengthStringArray") is not None or not array
    ):
        return
    raise UnsupportedFeatureError(f"{where}: build_dmrpp could not describe it ({reason})")


def _recorded_type(kind: str, value: Any) -> str | None:
    """The numpy type to record for a numeric attribute JSON would not keep (as the HDF5
    scanner records it), None for text, containers and int64/float64."""
    code = NUMERIC_TYPES.get(kind)
    if code is None or isinstance(value, dict):
        return None
    return attribute_type(np.zeros(1, dtype=code))


def _shown(attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes the HDF5 scanner shows: netCDF and dimension-scale bookkeeping hidden."""
    hidden = set(INTERNAL_ATTRS)
    if attrs.get("CLASS") == "DIMENSION_SCALE":
        hidden |= {"CLASS", "NAME"}
    shown = {k: v for k, v in attrs.items() if k not in hidden and k != TYPES_ATTR}
    entry = attrs.get(TYPES_ATTR)
    types = {k: v for k, v in entry["types"].items() if k in shown} if entry else {}
    family = entry.get(NETCDF_KEY) if entry else None  # unless only hidden ones needed it
    family = family if family and has_untyped_numbers(shown, types) else None
    with_types(shown, types, mark=False, netcdf=family)
    return shown


def _fill(
    storage: Storage, text: str | None, declared: Any, dtype: np.dtype[Any], where: str
) -> Any:
    """The HDF5 scanner's fill value rule: every chunk written -> the ``_FillValue``
    attribute (None without one); a chunk missing -> the HDF5 fill value (None when zero)."""
    if storage.complete:
        return None if declared is None else value_in_dtype(declared, dtype)
    if text is None:
        return None
    return fill_from_text(text, dtype, declared, where)


def _variable_name(name: str, siblings: set[str | None]) -> str:
    """netCDF's ``_nc4_non_coord_x`` is ``x`` unless ``x`` is a variable too."""
    stripped = name.removeprefix(_NON_COORD)
    return stripped if stripped != name and stripped not in siblings else name


def _join(group: str, name: str) -> str:
    return f"{group.rstrip('/')}/{name}"


def _dimension_size(text: str, where: str) -> int:
    """A Dim size (digits), refused past 2**63 - 1 (no array is longer; 5,000 digits would
    not even convert)."""
    digits = text.strip().lstrip("0") or "0"
    if len(digits) > 19 or int(digits) > 2**63 - 1:
        shown = digits if len(digits) <= 40 else f"{digits[:20]}... ({len(digits)} digits)"
        raise ScanError(f"{where}: dimension size {shown} is larger than 2**63 - 1")
    return int(digits)
