"""Parsing a DMR++ document safely, and the names of its elements and attributes.

Sidecars come from strangers (reference sets, archives), so the document is refused before
parsing when it declares a DTD or entities: no entity is ever expanded (no "billion laughs")
and no external entity is ever fetched. XML needs neither in a DMR++ document. Only encodings
in which ASCII markup is ASCII bytes (UTF-8, ISO-8859-x: what ``build_dmrpp`` writes) are read,
so that the check on the bytes cannot be bypassed by another encoding.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from refzarr.errors import ScanError

__all__ = ["DAP_NAMESPACE", "DMRPP", "Names", "parse_document"]

DAP_NAMESPACE = "http://xml.opendap.org/ns/DAP/4.0#"
DMRPP = "{http://xml.opendap.org/dap/dmrpp/1.0.0#}"
"""The DMR++ namespace as ElementTree spells it in qualified names."""

_REFUSED = (b"<!DOCTYPE", b"<!ENTITY")
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


@dataclass(frozen=True, slots=True)
class Names:
    """Qualified names of the DAP4 elements of one document (whose default namespace may be
    the DAP4 one, or none)."""

    dap: str

    def __call__(self, local: str) -> str:
        """The qualified tag of the DAP4 element ``local`` (``"Dim"``, ``"Attribute"``)."""
        return self.dap + local

    def local(self, tag: str) -> str | None:
        """The local name of a DAP4 tag, or None for an element of another namespace."""
        if not tag.startswith(self.dap) or (not self.dap and tag.startswith("{")):
            return None
        return tag[len(self.dap) :]


def parse_document(data: bytes, url: str) -> tuple[ET.Element, Names]:
    """The ``Dataset`` element of a DMR++ document, and the names of its DAP4 elements.

    Raises
    ------
    ScanError
        When the document declares a DTD or entities, is in a wide encoding (UTF-16/32), is
        not well-formed XML, or its root is not a DAP4 ``Dataset``.
    """
    if data.startswith(_WIDE_BOMS) or b"\x00" in data[:4]:
        raise ScanError(
            f"{url}: the DMR++ document is in UTF-16 or UTF-32; refzarr reads UTF-8 and "
            "ISO-8859-1 sidecars (what build_dmrpp writes): convert it to UTF-8"
        )
    for marker in _REFUSED:
        if marker in data:
            raise ScanError(
                f"{url}: the DMR++ document holds {marker.decode()}; refzarr refuses DTDs and "
                "entity declarations in sidecars (entity expansion, external entities), which "
                "a DMR++ document never needs"
            )
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ScanError(f"{url}: the DMR++ document is not well-formed XML: {exc}") from None
    dap = root.tag[: -len("Dataset")] if root.tag.endswith("Dataset") else None
    if dap not in ("", "{" + DAP_NAMESPACE + "}"):
        raise ScanError(
            f"{url}: the root element is {root.tag!r}, not the DAP4 'Dataset' of a DMR++ document"
        )
    return root, Names(dap)
