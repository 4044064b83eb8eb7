"""Parquet reference sets (fsspec's layout: ``.zmetadata`` + record files per array), written
(`write`) and read lazily per array and per record file (`read`)."""
