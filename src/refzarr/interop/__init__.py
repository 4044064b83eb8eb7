"""Bridges between refzarr's reference sets and other virtual-dataset tools (VirtualiZarr).

Light on purpose: the bridges import their tool only when called (`refzarr.interop.virtualizarr`).
"""

from __future__ import annotations
