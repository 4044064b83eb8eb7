"""``import refzarr`` and the command's start-up (``refzarr --help``) load neither fsspec (with
asyncio, ssl, ...) nor numcodecs nor any heavier library: they load when first used (a read, a
scan, a decode). Every public name is still there."""

from __future__ import annotations

import json

import pytest

from childkit import child_env, run_python

HEAVY = (
    "fsspec",
    "asyncio",
    "numcodecs",
    "multiprocessing",
    "zarr",
    "xarray",
    "pyarrow",
    "s3fs",
    "h5py",
)

_LOADED = f"""
import json, sys
loaded = sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))
print(json.dumps(loaded))
"""


@pytest.mark.parametrize(
    "start",
    [
        "import refzarr",
        "import refzarr.cli\ntry:\n    refzarr.cli.main(['--help'])\nexcept SystemExit:\n    pass",
        "import refzarr.cli\ntry:\n    refzarr.cli.main(['validate', '--help'])\n"
        "except SystemExit:\n    pass",
    ],
    ids=["import", "help", "validate-help"],
)
def test_start_up_loads_no_heavy_library(start: str) -> None:
    done = run_python("-c", f"{start}\n{_LOADED}", env=child_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_every_public_name_is_there() -> None:
    code = (
        "import refzarr\n"
        "missing = [n for n in refzarr.__all__ if getattr(refzarr, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert callable(refzarr.scan) and callable(refzarr.combine), 'a module'\n"
        "refzarr.read({'.zgroup': '{\"zarr_format\": 2}'})\n"
        "import refzarr.scan.base, refzarr.combine.api\n"
        "assert callable(refzarr.scan) and callable(refzarr.combine), 'shadowed by a package'\n"
    )
    done = run_python("-c", code, env=child_env())
    assert done.returncode == 0, done.stderr


def test_lazy_names_are_typed() -> None:
    """Every name loaded on first use is also imported, from the same module, under
    ``TYPE_CHECKING`` (users' type checkers see its signature, not ``Any``)."""
    import ast
    import inspect

    import refzarr

    tree = ast.parse(inspect.getsource(refzarr))
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                typed.update({alias.name: str(stmt.module) for alias in stmt.names})
    assert typed == refzarr._LAZY
