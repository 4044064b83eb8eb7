"""``--storage-options`` of the commands that read a reference set on S3 and its sources on S3
(moto): ``info``, ``validate`` (ranges, ``--decode``, ``--sources``), ``cat`` and ``expand``
reach both with them; without them a custom endpoint is never found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import refzarr
from refzarr.cli import main


@pytest.fixture
def s3_set(archive: list[Path], s3: tuple[str, dict[str, Any]]) -> tuple[str, str]:
    """A Parquet set on S3 referencing the archive's files on S3: ``(set URL, options JSON)``."""
    import fsspec

    bucket, options = s3
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
    for path in archive:
        fs.put_file(str(path), f"{bucket}/days/{path.name}")
    urls = [f"s3://{bucket}/days/{path.name}" for path in archive]
    groups = refzarr.scan_many(urls, storage_options=options, executor="serial")
    refs = f"s3://{bucket}/all.parq"
    refzarr.write(refzarr.combine(groups, concat_dims=["time"]), refs, storage_options=options)
    return refs, json.dumps(options)


COMMANDS = [
    (["info"], "4 unique URL(s)"),
    (["validate"], "OK (4 arrays, 4 files)"),
    (["validate", "--decode"], "chunks decoded)"),
    (["validate", "--sources"], "OK (4 source files as scanned)"),
    (["expand"], '".zgroup"'),
]
"""Each command and what its output shows when it reached the set and the sources."""


def test_commands_read_sets_and_sources_on_s3(
    capsysbinary: pytest.CaptureFixture[bytes], s3_set: tuple[str, str]
) -> None:
    refs, options = s3_set  # one set for all the commands: scanning it is the slow part
    for command, expected in COMMANDS:
        status = main([*command, refs, "--storage-options", options])
        out, err = capsysbinary.readouterr()
        assert (status, err.decode()) == (0, ""), command
        assert expected in out.decode(), command
    status = main(["cat", refs, "air/0.0.0", "--storage-options", options])
    out, err = capsysbinary.readouterr()
    assert (status, err) == (0, b"")
    entry = refzarr.read(refs, json.loads(options))["air"].manifest[0, 0, 0]
    assert len(out) == entry.length
