"""Sidecars written by hand: what the corpus lacks (linked blocks, per-chunk hrefs, missing
data, enumerations, compressed vlsa values) and every kind of bad input, which must fail with
an error naming the sidecar, the variable and what is wrong (never an entity expanded)."""

from __future__ import annotations

import base64
import pickle
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

import refzarr
from refzarr import ScanError, UnsupportedFeatureError
from refzarr.scan.base import Probe
from refzarr.scan.dmrpp import DmrppScanner, is_dmrpp

HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<Dataset xmlns="http://xml.opendap.org/ns/DAP/4.0#" '
    'xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#" dapVersion="4.0" name="x.h5" '
    'dmrpp:href="{href}" dmrpp:version="3.21.1">\n'
)
VALUES = np.arange(8, dtype="<i4") * 11


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, int]:
    """A data file holding `VALUES` contiguously, and their offset."""
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=VALUES)
        offset = f["v"].id.get_offset()
    return path, offset


def write(tmp_path: Path, body: str, *, href: str = "data/x.h5", name: str = "x.h5.dmrpp") -> str:
    path = tmp_path / name
    path.write_text(HEAD.format(href=href) + body + "\n</Dataset>\n")
    return str(path)


def int32(body: str, dims: str = '<Dim size="8"/>', name: str = "v") -> str:
    return f'<Int32 name="{name}">{dims}{body}</Int32>'


def chunk(offset: int, n: int = 32, extra: str = "") -> str:
    return f'<dmrpp:chunk offset="{offset}" nBytes="{n}" {extra}/>'


def values(group: refzarr.RefGroup, name: str = "v") -> np.ndarray:
    return np.asarray(refzarr.open_dataset(group)[name].values)


# -- detection ----------------------------------------------------------------------------------


def test_detection_looks_at_the_namespace() -> None:
    head = HEAD.format(href="x").encode()
    assert is_dmrpp(Probe("a", head))
    assert is_dmrpp(Probe("a", b"\xef\xbb\xbf  " + head))
    assert not is_dmrpp(Probe("a", b'<?xml version="1.0"?><Dataset xmlns="other"/>'))
    assert not is_dmrpp(Probe("a", b"\x89HDF\r\n\x1a\n" + head))


# -- where the chunks are ---------------------------------------------------------------------


def test_data_file_beside_the_sidecar(tmp_path: Path, data: tuple[Path, int]) -> None:
    group = refzarr.scan(write(tmp_path, int32(f"<dmrpp:chunks>{chunk(data[1])}</dmrpp:chunks>")))
    assert group["v"].manifest.paths == (str(data[0]),)
    np.testing.assert_array_equal(values(group), VALUES)


def test_data_url_option_wins(tmp_path: Path, data: tuple[Path, int]) -> None:
    other = tmp_path / "copy.h5"
    other.write_bytes(data[0].read_bytes())
    sidecar = write(tmp_path, int32(chunk(data[1])), href="https://example.org/x.h5")
    group = refzarr.scan(sidecar, data_url=str(other))
    assert group["v"].manifest.paths == (str(other),)


def test_absolute_href_when_the_name_says_nothing(tmp_path: Path, data: tuple[Path, int]) -> None:
    url = data[0].as_uri()
    sidecar = write(tmp_path, int32(chunk(data[1])), href=url, name="sidecar.xml")
    assert refzarr.scan(sidecar)["v"].manifest.paths == (url,)
    placeholder = write(
        tmp_path, int32(chunk(data[1])), href="OPeNDAP_DMRpp_DATA_ACCESS_URL", name="s.xml"
    )
    with pytest.raises(ScanError, match=r"s\.xml: cannot tell where the data file is.*data_url"):
        refzarr.scan(placeholder, format="dmrpp")


def test_chunk_hrefs(tmp_path: Path, data: tuple[Path, int]) -> None:
    other = tmp_path / "other.bin"
    other.write_bytes(b"\0" * 16 + VALUES[::-1].tobytes())
    body = (
        "<dmrpp:chunks><dmrpp:chunkDimensionSizes>4</dmrpp:chunkDimensionSizes>"
        + chunk(data[1], 16, 'chunkPositionInArray="[0]" href="data/x.h5"')
        + chunk(16 + 16, 16, f'chunkPositionInArray="[4]" href="{other.as_uri()}"')
        + "</dmrpp:chunks>"
    )
    group = refzarr.scan(write(tmp_path, int32(body)))
    assert sorted(group["v"].manifest.paths) == sorted([str(data[0]), other.as_uri()])
    np.testing.assert_array_equal(values(group), [0, 11, 22, 33, 33, 22, 11, 0])
    relative = body.replace("data/x.h5", "elsewhere/y.h5")
    with pytest.raises(UnsupportedFeatureError, match=r"variable '/v'.*'elsewhere/y.h5'.*relative"):
        refzarr.scan(write(tmp_path, int32(relative)))


def test_remote_sidecar_and_data_in_memory(data: tuple[Path, int]) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/dmrpp/x.h5", data[0].read_bytes())
    fs.pipe(
        "/dmrpp/x.h5.dmrpp", (HEAD.format(href="x") + int32(chunk(data[1])) + "</Dataset>").encode()
    )
    group = refzarr.scan("memory://dmrpp/x.h5.dmrpp")
    assert group["v"].manifest.paths == ("memory://dmrpp/x.h5",)
    np.testing.assert_array_equal(values(group), VALUES)


def test_remote_sidecar_on_s3(s3: tuple[str, dict], data: tuple[Path, int]) -> None:
    import fsspec

    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)
    fs.pipe(f"{bucket}/g/x.h5", data[0].read_bytes())
    text = HEAD.format(href="OPeNDAP_DMRpp_DATA_ACCESS_URL") + int32(chunk(data[1])) + "</Dataset>"
    fs.pipe(f"{bucket}/g/x.h5.dmrpp", text.encode())
    group = refzarr.scan(f"s3://{bucket}/g/x.h5.dmrpp", storage_options=options)
    assert group["v"].manifest.paths == (f"s3://{bucket}/g/x.h5",)
    store = refzarr.ReferenceStore(group, storage_options=options)
    import zarr

    got = zarr.open_group(store, mode="r", zarr_format=2)["v"][...]
    np.testing.assert_array_equal(got, VALUES)


# -- what only the sidecar holds, and multi-block chunks ---------------------------------------


def test_compressed_repeated_vlsa_values(tmp_path: Path) -> None:
    packed = base64.b64encode(zlib.compress(b"hello there")).decode()
    body = (
        '<String name="s"><Dim size="4"/><dmrpp:vlsa>'
        f'<v>a &amp; b</v><v c="2">x</v><v s="11">{packed}</v></dmrpp:vlsa></String>'
    )
    got = refzarr.open_dataset(refzarr.scan(write(tmp_path, body)))["s"].values
    assert list(got) == ["a & b", "x", "x", "hello there"]
    with pytest.raises(ScanError, match=r"variable '/s'.*3 values for a shape \(4,\)"):
        refzarr.scan(write(tmp_path, body.replace(' c="2"', "")))


def test_missing_data_and_enumerations(tmp_path: Path) -> None:
    packed = base64.b64encode(zlib.compress(VALUES.tobytes())).decode()
    body = (
        f'<Int32 name="m"><Dim size="8"/><dmrpp:missingdata>{packed}</dmrpp:missingdata></Int32>'
        '<Enumeration name="colour" basetype="UInt8"><EnumConst name="red" value="0"/>'
        '<EnumConst name="blue" value="2"/></Enumeration>'
        '<Enum name="e" enum="/colour"><Dim size="2"/><dmrpp:compact>AAI=</dmrpp:compact></Enum>'
    )
    group = refzarr.scan(write(tmp_path, body))
    np.testing.assert_array_equal(values(group, "m"), VALUES)
    assert group["e"].meta.attributes["_hdf5_enum"] == {"red": 0, "blue": 2}
    np.testing.assert_array_equal(values(group, "e"), [0, 2])


def test_linked_blocks_are_inlined_when_small(tmp_path: Path, data: tuple[Path, int]) -> None:
    offset = data[1]
    blocks = (
        f'<dmrpp:block offset="{offset}" nBytes="12"/><dmrpp:block offset="{offset + 12}" '
        'nBytes="20"/>'
    )
    group = refzarr.scan(write(tmp_path, int32(f"<dmrpp:chunks>{blocks}</dmrpp:chunks>")))
    assert group["v"].manifest.paths == ()
    np.testing.assert_array_equal(values(group), VALUES)
    with pytest.raises(UnsupportedFeatureError, match=r"variable '/v'.*2 separate blocks"):
        refzarr.scan(
            write(tmp_path, int32(f"<dmrpp:chunks>{blocks}</dmrpp:chunks>")), multi_block_bytes=16
        )
    lb = (
        '<dmrpp:chunks LBChunk="true"><dmrpp:chunkDimensionSizes>4</dmrpp:chunkDimensionSizes>'
        + chunk(offset, 8, 'chunkPositionInArray="[0]" LinkedBlockIndex="0"')
        + chunk(offset + 8, 8, 'chunkPositionInArray="[0]" LinkedBlockIndex="1"')
        + chunk(offset + 16, 16, 'chunkPositionInArray="[4]"')
        + "</dmrpp:chunks>"
    )
    np.testing.assert_array_equal(values(refzarr.scan(write(tmp_path, int32(lb)))), VALUES)


# -- bad input ----------------------------------------------------------------------------------

BOMB = (
    '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
    '<Dataset xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#" name="&b;"/>'
)
EXTERNAL = (
    '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    '<Dataset xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#" name="&x;"/>'
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BOMB, "refuses DTDs and entity"),
        (EXTERNAL, "refuses DTDs and entity"),
        (HEAD.format(href="x") + "<Int32 name='v'>", "not well-formed XML"),
        (
            '<?xml version="1.0"?><Other xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#"/>',
            "not the DAP4 'Dataset'",
        ),
        ("\ufeff<?xml version='1.0'?>".encode("utf-16").decode("latin-1"), "UTF-16"),
    ],
    ids=["entity-bomb", "external-entity", "malformed", "not-a-dataset", "utf16"],
)
def test_refused_documents(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.h5.dmrpp"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ScanError, match=rf"bad\.h5\.dmrpp: .*{message}"):
        refzarr.scan(str(path), format="dmrpp")


CHUNKED = (
    "<dmrpp:chunks {attrs}><dmrpp:chunkDimensionSizes>4</dmrpp:chunkDimensionSizes>"
    "{chunks}</dmrpp:chunks>"
)


@pytest.mark.parametrize(
    ("attrs", "chunks", "error", "message"),
    [
        (
            "",
            chunk(0, 16, 'chunkPositionInArray="[8]"'),
            ScanError,
            r"chunk 0 at .*\[8\].*inside the shape",
        ),
        ("", chunk(0, 16, 'chunkPositionInArray="[2]"'), ScanError, r"not the start of a chunk"),
        (
            "",
            '<dmrpp:chunk nBytes="4" chunkPositionInArray="[0]"/>',
            ScanError,
            "chunk 0 has no offset",
        ),
        ("", chunk(0, 16, 'chunkPositionInArray="0"'), ScanError, r"is not '\[i,j,...\]'"),
        (
            "",
            chunk(0, 16, 'chunkPositionInArray="[0]"')
            + chunk(16, 16, 'chunkPositionInArray="[0]"'),
            ScanError,
            "twice|duplicate|more than once",
        ),
        (
            "",
            chunk(0, 16, 'chunkPositionInArray="[0]"') + chunk(8, 16, 'chunkPositionInArray="[4]"'),
            ScanError,
            "overlap|share",
        ),
        ('compressionType="szip"', "", UnsupportedFeatureError, "compressionType 'szip'"),
        ('fillValue="unsupported-compound"', "", UnsupportedFeatureError, "compound"),
        ('byteOrder="XE"', "", ScanError, "byteOrder 'XE'"),
        ('deflateLevel="x" compressionType="deflate"', "", ScanError, "deflateLevel"),
    ],
    ids=[
        "outside",
        "misaligned",
        "no-offset",
        "bad-position",
        "duplicate",
        "overlap",
        "filter",
        "fill-marker",
        "byte-order",
        "level",
    ],
)
def test_bad_chunk_lists(
    tmp_path: Path, attrs: str, chunks: str, error: type, message: str
) -> None:
    sidecar = write(tmp_path, int32(CHUNKED.format(attrs=attrs, chunks=chunks)))
    with pytest.raises(error, match=rf"x\.h5\.dmrpp: variable '/v': .*({message})"):
        refzarr.scan(sidecar)


def test_unsupported_variables_are_named_or_skipped(tmp_path: Path, data: tuple[Path, int]) -> None:
    body = (
        int32(CHUNKED.format(attrs='compressionType="szip"', chunks=""), name="w")
        + '<Structure name="s"><Int32 name="a"><Dim size="2"/></Int32><dmrpp:chunks/></Structure>'
        + int32(chunk(data[1]))
        + '<Attribute name="x" type="OtherXML"><Value>&lt;a/&gt;</Value></Attribute>'
    )
    sidecar = write(tmp_path, body)
    with pytest.raises(UnsupportedFeatureError, match="variable '/w'"):
        refzarr.scan(sidecar)
    group = refzarr.scan(sidecar, on_unsupported="skip")
    assert list(group.members) == ["v"]
    assert [s.path for s in group.skipped] == ["/w", "/s", "/@x"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (int32("", dims='<Dim name="/nowhere"/>'), "dimension '/nowhere' is not declared"),
        (
            int32('<Attribute name="a"><Value>1</Value></Attribute>'),
            "an Attribute without name or type",
        ),
        (
            int32('<Attribute name="a" type="Int8"><Value>300</Value></Attribute>'),
            "300 is out of the range",
        ),
        (int32(""), "says nothing of where its data is"),
        (
            int32("<dmrpp:compact>AAAA</dmrpp:compact>"),
            "holds 3 bytes of data, the variable needs 32",
        ),
        (
            '<String name="v"><Dim size="2"/><dmrpp:chunks/></String>',
            "String variable whose length",
        ),
    ],
    ids=[
        "undeclared-dim",
        "attribute-type",
        "attribute-range",
        "no-storage",
        "compact-size",
        "string",
    ],
)
def test_bad_variables(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises((ScanError, UnsupportedFeatureError), match=rf"variable '/v'.*{message}"):
        refzarr.scan(write(tmp_path, body))


def test_offsets_past_the_data_file(tmp_path: Path, data: tuple[Path, int]) -> None:
    """A sidecar alone cannot know the data file's size: only ``check_data_file`` asks it."""
    sidecar = write(tmp_path, int32(chunk(10_000)))
    assert refzarr.scan(sidecar)["v"].manifest.offset.ravel().tolist() == [10_000]
    with pytest.raises(ScanError, match=r"variable '/v'.*(past|beyond|end)"):
        refzarr.scan(sidecar, check_data_file=True)


def test_scanner_options_and_pickling() -> None:
    scanner = DmrppScanner(data_url="s3://b/x.h5", multi_block_bytes=10)
    assert pickle.loads(pickle.dumps(scanner)) == scanner
    with pytest.raises(ValueError, match="multi_block_bytes"):
        DmrppScanner(multi_block_bytes=-1)
    with pytest.raises(TypeError, match="data_url"):
        DmrppScanner(data_url=3)  # type: ignore[arg-type]


def test_unsupported_string_marker(tmp_path: Path, data: tuple[Path, int]) -> None:
    """build_dmrpp's ``fillValue="unsupported-string"`` is harmless on a scalar or a
    fixed-length string array, and names the variable on a variable-length one."""
    marker = '<dmrpp:chunks fillValue="unsupported-string">{}</dmrpp:chunks>'
    scalar = f'<String name="t">{marker.format(chunk(data[1], 4))}</String>'
    group = refzarr.scan(write(tmp_path, scalar))
    assert group["t"].meta.dtype == np.dtype("S4")
    array = f'<String name="v"><Dim size="2"/>{marker.format("")}</String>'
    with pytest.raises(UnsupportedFeatureError, match=r"variable '/v'.*could not describe"):
        refzarr.scan(write(tmp_path, array))


def test_coordinates_stay_referenced_without_the_data_file(tmp_path: Path) -> None:
    """Loading dimension coordinates reads the data file; without it the scan still works."""
    body = (
        '<Dimension name="v" size="8"/>'
        + int32(chunk(4000), dims='<Dim name="/v"/>')
        + int32(chunk(5000), dims='<Dim name="/v"/>', name="w")
    )
    group = refzarr.scan(write(tmp_path, body, name="absent.h5.dmrpp"))
    assert group["v"].manifest.paths == (str(tmp_path / "absent.h5"),)
    assert group["w"].meta.dimension_names == ("v",)
