"""The GRIB scanner: every field of a GRIB 1 / 2 file placed in hypercubes, one group per
``(name, stepType, typeOfLevel)`` at ``<name>/<stepType>/<typeOfLevel>``, each chunk a
message's byte range.

Messages are framed from their section 0 headers (`framing`); ecCodes opens each field from
its bytes and only its keys are read, never its values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from refzarr.codecs.grib import extract_field
from refzarr.codecs.grib_eccodes import ECCODES_HANDLES, MISSING, load_eccodes
from refzarr.errors import RefzarrError, ScanError
from refzarr.model import RefArray, RefGroup
from refzarr.scan.base import ScanOptions
from refzarr.scan.grib.build import cube_group, grid_coordinates
from refzarr.scan.grib.cube import Cube, Cubes
from refzarr.scan.grib.fields import FieldKeys, field_keys
from refzarr.scan.grib.framing import Garbage, Message, iter_messages
from refzarr.scan.grib.grid import Grid, grid_of
from refzarr.scan.grib.sections import FieldLayout, message_fields
from refzarr.scan.grib.source import open_source
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip

__all__ = ["GribScanner", "Placed", "Recording"]

DATA_KEYS = ("paramId", "dataType", "numberOfPoints", "typeOfLevel", "stepUnits", "stepType",
             "gridType", "uvRelativeToGrid")  # fmt: skip
"""Keys of a field kept as ``GRIB_<key>`` attributes unless undefined (cfgrib's)."""
EXTRA_KEYS = ("shortName", "units", "name", "cfName", "cfVarName", "totalNumber",
              "numberOfDirections", "numberOfFrequencies", "NV",
              "gridDefinitionDescription")  # fmt: skip
"""Keys kept as ``GRIB_<key>`` attributes whenever the field has them (cfgrib's)."""
GLOBAL_KEYS = ("edition", "centre", "centreDescription", "subCentre")


@dataclass(frozen=True, slots=True)
class GribScanner(ScanOptions):
    """Scan GRIB edition 1 and 2 files into reference groups.

    Takes the options every scanner takes (`ScanOptions`). ``inline_threshold``: messages
    shorter than it are held in the reference set. ``inline_coordinates`` does not apply:
    GRIB coordinates are computed, not stored, so they are always held in the reference set.
    ``on_unsupported="skip"`` leaves out (and lists) fields that cannot be referenced and
    bytes between messages that are not GRIB.

    Parameters
    ----------
    grib_index
        ``"auto"``: `refzarr.scan_many` builds files from their ``.idx`` sidecars where these
        agree with a scanned file of the same layout (`refzarr.scan.grib.index`); None
        (default): every file is scanned. Scanning one file does not use it.

    Examples
    --------
    >>> group = GribScanner()("gfs.t00z.pgrb2.0p25.f000")  # doctest: +SKIP
    >>> group["t/instant/isobaricInhPa/t"].shape  # doctest: +SKIP
    (1, 1, 41, 721, 1440)
    """

    grib_index: Literal["auto"] | None = None

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)
        if self.grib_index not in (None, "auto"):
            raise ValueError(f"grib_index must be 'auto' or None, not {self.grib_index!r}")

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one file (a local path or an fsspec URL).

        Raises
        ------
        ScanError
            When a message is truncated, corrupt or separated from the next by non-GRIB bytes
            (names the file, the message number and its byte offset).
        UnsupportedFeatureError
            When a field cannot be referenced (with ``on_unsupported="raise"``).
        """
        group, _ = self.scan_recorded(url)
        return group

    def scan_recorded(self, url: str) -> tuple[ScannedGroup, Recording]:
        """`__call__`, and how each field was placed, in file order (for `.idx` sidecars)."""
        load_eccodes()
        with open_source(str(url), self.storage_options) as source:
            scan = _Scan(self, source.url)
            skip = self.on_unsupported == "skip"
            for item in iter_messages(source.read_at, source.size, source.url, skip=skip):
                if isinstance(item, Garbage):
                    scan.skipped.append(Skipped(f"bytes {item.offset}..{item.end}", item.reason))
                else:
                    scan.message(item)
            root = scan.group()
        recording = Recording(tuple(scan.placed), tuple(scan.grid_list), bool(scan.skipped))
        return ScannedGroup(root.attributes, root.members, tuple(scan.skipped)), recording

    def from_placements(self, url: str, placed: list[Placed], grids: tuple[Grid, ...]) -> RefGroup:
        """The group of a file whose fields are ``placed`` as given (keys, byte ranges) on
        ``grids``, without reading it: built as `__call__` builds it."""
        scan = _Scan(self, url, grid_list=list(grids))
        for one in placed:
            scan.place(one)
        root = scan.group()
        return ScannedGroup(root.attributes, root.members, ())


@dataclass(frozen=True, slots=True)
class Recording:
    """How a scan placed a file's fields, in file order, the grids they are on, and whether
    anything was skipped."""

    placed: tuple[Placed, ...]
    grids: tuple[Grid, ...]
    skipped: bool


@dataclass(frozen=True, slots=True)
class Placed:
    """One field as a scan placed it: its message's byte range and field count, its number
    in the message, its keys and what its template says (grid, attributes)."""

    offset: int
    length: int
    fields: int
    number: int
    keys: FieldKeys
    known: _Template
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class _Template:
    """What ecCodes said of the first field of a template: its keys, grid and attributes,
    and whether its reference time (and step) are those read from its octets (then fields of
    the same template take their time and step from their octets, without asking ecCodes)."""

    keys: FieldKeys
    grid: int
    attributes: dict[str, Any]
    group_attributes: dict[str, Any]
    from_bytes: bool


@dataclass
class _Scan:
    """The state of one scan: hypercubes, grids met, what was skipped."""

    options: GribScanner
    url: str
    cubes: Cubes = field(default_factory=Cubes)
    grids: dict[tuple[int, bytes], int] = field(default_factory=dict)
    grid_list: list[Grid] = field(default_factory=list)
    templates: dict[bytes, _Template] = field(default_factory=dict)
    attributes: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict
    )
    skipped: list[Skipped] = field(default_factory=list)
    placed: list[Placed] = field(default_factory=list)

    def where(self, message: Message) -> str:
        return f"{self.url}: GRIB message {message.number} at byte offset {message.offset}"

    def message(self, message: Message) -> None:
        """Place every field of ``message``."""
        try:
            fields = message_fields(message.data, message.edition)
        except ValueError as exc:
            raise ScanError(f"{self.where(message)}: {exc}") from exc
        for layout in fields:
            where = self.where(message) + (f", field {layout.number}" if len(fields) > 1 else "")
            build_or_skip(
                partial(self.field, message, layout, len(fields), where),
                where,
                self.options.on_unsupported,
                self.skipped,
            )

    def field(self, message: Message, layout: FieldLayout, count: int, where: str) -> None:
        """Place one field: its keys from the cache of its template, else from ecCodes."""
        known = self.templates.get(layout.template)
        if known is None or not known.from_bytes:
            known = self._read(message, layout, where)
        keys = known.keys
        if known.from_bytes and layout.time is not None:
            keys = keys._replace(time=layout.time)
            if layout.step is not None:
                keys = keys._replace(step=layout.step)
        inline = message.length < self.options.inline_threshold
        data = message.data if inline else None
        self.place(Placed(message.offset, message.length, count, layout.number, keys, known, data))

    def place(self, field: Placed) -> None:
        """Put a field in its hypercube (a new one when none can take it)."""
        keys, known = field.keys, field.known
        cube, cell = self.cubes.place(keys, known.grid, field.number)
        if cube is None:
            cube = self.cubes.new(
                keys, known.grid, field.number, known.attributes, known.group_attributes
            )
        cube.add(cell, field.offset, field.length, keys)
        if field.data is not None:
            cube.inlined[len(cube.offsets) - 1] = field.data
        self.placed.append(field)

    def _read(self, message: Message, layout: FieldLayout, where: str) -> _Template:
        """What ecCodes says of a field, remembered for its template."""
        data = extract_field(message.data, layout.number) if layout.number else message.data
        with ECCODES_HANDLES:  # once per template: the keys read definition files
            known = self._read_keys(data, message.edition, layout, where)
        self.templates[layout.template] = known
        return known

    def _read_keys(self, data: bytes, edition: int, layout: FieldLayout, where: str) -> _Template:
        eccodes = load_eccodes()
        try:
            handle = eccodes.codes_new_from_message(data)
        except eccodes.GribInternalError as exc:
            raise ScanError(f"{where}: ecCodes cannot read it: {exc}") from exc
        try:
            keys = field_keys(handle, edition, where)
            try:
                grid = self._grid(handle, edition, layout.grid)
            except ValueError as exc:
                raise ScanError(f"{where}: {exc}") from exc
            exact = keys.time == layout.time and layout.step in (None, keys.step)
            attributes = self._attributes(handle, keys, grid)
            return _Template(keys, grid, *attributes, exact)
        except eccodes.GribInternalError as exc:
            raise ScanError(f"{where}: ecCodes cannot read its keys: {exc}") from exc
        finally:
            eccodes.codes_release(handle)

    def _attributes(
        self, handle: Any, keys: FieldKeys, grid: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The data array's and the group's attributes, read once per variable and grid."""
        key = (keys.name, keys.step_type, keys.level_type, keys.param_id, grid)
        found = self.attributes.get(key)
        if found is None:
            found = self.attributes[key] = (_data_attributes(handle), _globals(handle))
        return found

    def _grid(self, handle: Any, edition: int, grid_bytes: bytes) -> int:
        key = (edition, grid_bytes)
        found = self.grids.get(key)
        if found is None:
            found = self.grids[key] = len(self.grid_list)
            self.grid_list.append(grid_of(handle))
        return found

    def group(self) -> RefGroup:
        """The root group: ``<name>/<stepType>/<typeOfLevel>`` for every hypercube."""
        tree: dict[str, Any] = {}
        shared: dict[int, dict[str, RefArray]] = {}
        for path, cube in self.cubes.paths():
            grid = self.grid_list[cube.grid]
            node = tree
            *parents, leaf = path.split("/")
            for part in parents:
                node = node.setdefault(part, {})
            coordinates = shared.get(cube.grid)
            if coordinates is None:
                coordinates = shared[cube.grid] = grid_coordinates(grid)
            node[leaf] = cube_group(cube, grid, self.url, _codec(cube, grid), coordinates)
        return _as_group(tree)


def _codec(cube: Cube, grid: Grid) -> dict[str, Any]:
    codec: dict[str, Any] = {"id": "refzarr.grib"}
    if cube.field_index:
        codec["field"] = cube.field_index
    if grid.rows is not None:
        codec["rows"] = list(grid.rows)
    if grid.columns is not None:
        codec["columns"] = list(grid.columns)
    return codec


def _as_group(tree: dict[str, Any]) -> RefGroup:
    members = {
        name: node if isinstance(node, RefGroup) else _as_group(node) for name, node in tree.items()
    }
    return RefGroup({}, members)


def _data_attributes(handle: Any) -> dict[str, Any]:
    """cfgrib's attributes of a data variable, from its first field."""
    out: dict[str, Any] = {}
    for key in DATA_KEYS:
        value = _scalar(handle, key)
        if value is not None and value not in ("undef", "unknown"):
            out[f"GRIB_{key}"] = value
    for key in EXTRA_KEYS:
        value = _scalar(handle, key)
        if value is not None:
            out[f"GRIB_{key}"] = value
    out["GRIB_missingValue"] = MISSING
    out["long_name"] = out.get("GRIB_name", f"original GRIB paramId: {out.get('GRIB_paramId')}")
    out["units"] = out.get("GRIB_units", "1")
    if "GRIB_cfName" in out:
        out["standard_name"] = out["GRIB_cfName"]
    return out


def _globals(handle: Any) -> dict[str, Any]:
    """cfgrib's dataset attributes, from a hypercube's first field."""
    out: dict[str, Any] = {}
    for key in GLOBAL_KEYS:
        value = _scalar(handle, key)
        if value is not None and value not in ("undef", "unknown"):
            out[f"GRIB_{key}"] = value
    out["Conventions"] = "CF-1.7"
    if "GRIB_centreDescription" in out:
        out["institution"] = out["GRIB_centreDescription"]
    return out


def _scalar(handle: Any, key: str) -> Any:
    """A key's native value (int, float or str), or None when the field lacks it."""
    eccodes = load_eccodes()
    try:
        value = eccodes.codes_get(handle, key)
    except (eccodes.GribInternalError, RefzarrError):
        return None
    if hasattr(value, "item"):
        value = value.item()
    return value
