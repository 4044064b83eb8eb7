"""Placing GRIB fields into hypercubes: one per ``(name, stepType, typeOfLevel)``, more when
fields cannot share one (another grid, another field index in their messages, or a cell
already taken), in message order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refzarr.scan.grib.fields import FieldKeys

__all__ = ["Cube", "Cubes"]

Cell = tuple[int | None, int, int, float]
"""``(number, time, step, level)``: where a field lies in its hypercube."""


@dataclass
class Cube:
    """The fields of one array: their cells and byte ranges, and what they share."""

    name: str
    step_type: str
    level_type: str
    grid: int
    field_index: int
    compatible: tuple[Any, ...]
    attributes: dict[str, Any]
    group_attributes: dict[str, Any]
    cells: dict[Cell, int] = field(default_factory=dict)
    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    inlined: dict[int, bytes] = field(default_factory=dict)
    bounds: dict[float, tuple[float, float] | None] = field(default_factory=dict)

    def add(self, cell: Cell, offset: int, length: int, keys: FieldKeys) -> None:
        """Record the field of ``cell`` (a free cell) stored at ``offset``."""
        self.cells[cell] = len(self.offsets)
        self.offsets.append(offset)
        self.lengths.append(length)
        self.bounds.setdefault(keys.level, keys.bounds)


class Cubes:
    """Every hypercube of a file, grouped by ``(name, stepType, typeOfLevel)``."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str, str], list[Cube]] = {}

    def place(self, keys: FieldKeys, grid: int, field_index: int) -> tuple[Cube | None, Cell]:
        """The cube the field goes to (None: a new one is needed) and its cell."""
        cell: Cell = (keys.number, keys.time, keys.step, keys.level)
        compatible = _compatibility(keys)
        for cube in self.by_key.get((keys.name, keys.step_type, keys.level_type), []):
            if (
                cube.grid == grid
                and cube.field_index == field_index
                and cube.compatible == compatible
                and cell not in cube.cells
                and cube.bounds.get(keys.level, keys.bounds) == keys.bounds
            ):
                return cube, cell
        return None, cell

    def new(
        self,
        keys: FieldKeys,
        grid: int,
        field_index: int,
        attributes: dict[str, Any],
        group_attributes: dict[str, Any],
    ) -> Cube:
        """A new hypercube for the field ``keys`` describes."""
        cube = Cube(
            keys.name,
            keys.step_type,
            keys.level_type,
            grid,
            field_index,
            _compatibility(keys),
            attributes,
            group_attributes,
        )
        self.by_key.setdefault((keys.name, keys.step_type, keys.level_type), []).append(cube)
        return cube

    def paths(self) -> list[tuple[str, Cube]]:
        """Every cube with its group path (``_2``, ``_3``, ... for the later ones of a key)."""
        out = []
        for (name, step_type, level_type), cubes in self.by_key.items():
            for k, cube in enumerate(cubes):
                suffix = f"_{k + 1}" if k else ""
                out.append((f"{name}/{step_type}/{level_type}{suffix}", cube))
        return out


def _compatibility(keys: FieldKeys) -> tuple[Any, ...]:
    """What every field of one hypercube shares besides grid and field index."""
    return (keys.param_id, keys.number is None)
