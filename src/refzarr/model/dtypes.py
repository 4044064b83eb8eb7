"""numpy dtypes and fill values to and from their Zarr v2 JSON encodings."""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

__all__ = [
    "decode_fill_value",
    "dtype_from_json",
    "dtype_to_json",
    "encode_fill_value",
]


def dtype_to_json(dtype: np.dtype[Any]) -> Any:
    """Return the Zarr v2 ``dtype`` field: a type string, or a field list for structured dtypes."""
    if dtype.fields is None:
        if dtype.subdtype is not None:
            raise ValueError(f"a sub-array dtype {dtype} is only valid as a structured field")
        return dtype.str
    return [_field_to_json(item) for item in dtype.descr]


def _field_to_json(item: tuple[Any, ...]) -> list[Any]:
    name, type_ = item[0], item[1]
    if not isinstance(name, str):
        raise ValueError(f"structured dtype field {name!r} has a title; Zarr v2 cannot store one")
    encoded = [name, type_ if isinstance(type_, str) else [_field_to_json(t) for t in type_]]
    if len(item) == 3:
        encoded.append(list(item[2]))
    return encoded


def dtype_from_json(value: Any) -> np.dtype[Any]:
    """Parse the Zarr v2 ``dtype`` field; raise ValueError when it is not a valid dtype."""
    if isinstance(value, str):
        return np.dtype(value)
    if isinstance(value, list | tuple):
        return np.dtype([_field_from_json(item) for item in value])
    raise ValueError(f"expected a dtype string or a list of fields, got {value!r}")


def _field_from_json(item: Any) -> tuple[Any, ...]:
    if not isinstance(item, list | tuple) or len(item) not in (2, 3):
        raise ValueError(f"a structured dtype field must be [name, type(, shape)], got {item!r}")
    name, type_ = item[0], item[1]
    parsed = type_ if isinstance(type_, str) else [_field_from_json(t) for t in type_]
    if len(item) == 3:
        return (name, parsed, tuple(item[2]))
    return (name, parsed)


_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _encode_float(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _decode_float(value: Any) -> float:
    if isinstance(value, str):
        if value in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[value]
        raise ValueError(f"expected a number, 'NaN', 'Infinity' or '-Infinity', got {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def encode_fill_value(value: Any, dtype: np.dtype[Any]) -> Any:
    """Encode a fill value (numpy scalar, Python value or None) as Zarr v2 JSON."""
    if value is None:
        return None
    kind = dtype.kind
    if kind == "O":
        return value
    if kind == "f":
        return _encode_float(float(value))
    if kind == "c":
        c = complex(value)
        return [_encode_float(c.real), _encode_float(c.imag)]
    if kind == "b":
        if not isinstance(value, bool | np.bool_ | int | np.integer) or value not in (0, 1):
            raise ValueError(f"expected a boolean fill value, got {value!r}")
        return bool(value)
    if kind in "iu":
        if isinstance(value, float | np.floating) and not float(value).is_integer():
            raise ValueError(f"fill value {value!r} is not an integer (dtype {dtype})")
        return int(value)
    if kind in "Mm":
        # astype, not view: a view would read a big-endian value's bytes as a native integer
        return int(np.asarray(value, dtype=dtype).astype(np.int64))
    if kind == "U":
        return str(np.asarray(value, dtype=dtype)[()])
    # S, V and structured dtypes: the raw bytes, base64-encoded
    return base64.standard_b64encode(np.asarray(value, dtype=dtype).tobytes()).decode("ascii")


def decode_fill_value(value: Any, dtype: np.dtype[Any]) -> Any:
    """Decode a Zarr v2 JSON fill value to a numpy scalar of ``dtype`` (None stays None).

    Raises ValueError when the value does not fit the dtype.
    """
    if value is None:
        return None
    kind = dtype.kind
    if kind == "O":
        return value
    if kind == "f":
        return dtype.type(_decode_float(value))
    if kind == "c":
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise ValueError(f"a complex fill value must be [real, imag], got {value!r}")
        return dtype.type(complex(_decode_float(value[0]), _decode_float(value[1])))
    if kind == "b":
        if not isinstance(value, bool | int):
            raise ValueError(f"expected a boolean fill value, got {value!r}")
        return np.bool_(value)
    if kind in "iu":
        return _decode_integer(value, dtype)
    if kind in "Mm":
        return np.asarray(_decode_integer(value, np.dtype("i8"))).astype(dtype)[()]
    if kind == "U":
        if not isinstance(value, str):
            raise ValueError(f"expected a string fill value, got {value!r}")
        return np.asarray(value, dtype=dtype)[()]
    if not isinstance(value, str):
        if kind == "S" and isinstance(value, int) and value == 0:
            return np.zeros((), dtype=dtype)[()]  # zarr-python 2 wrote 0 for empty S fills
        raise ValueError(f"expected a base64 string fill value for dtype {dtype}, got {value!r}")
    raw = base64.standard_b64decode(value)
    if len(raw) != dtype.itemsize:
        raise ValueError(
            f"base64 fill value decodes to {len(raw)} bytes, dtype {dtype} needs {dtype.itemsize}"
        )
    return np.frombuffer(raw, dtype=dtype)[0]


def _decode_integer(value: Any, dtype: np.dtype[Any]) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer fill value for dtype {dtype}, got {value!r}")
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ValueError(f"fill value {value} does not fit dtype {dtype}")
    return dtype.type(value)
