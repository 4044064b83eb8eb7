"""Icechunk output: a `RefGroup` written into an Icechunk session's store (metadata through
zarr-python, chunks as virtual references, inlined chunks as native chunks); see `write`."""
