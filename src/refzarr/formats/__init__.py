"""Reference-set serialisation: kerchunk JSON (v0 write, v0+v1 read) and kerchunk Parquet."""
