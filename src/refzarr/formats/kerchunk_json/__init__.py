"""kerchunk JSON reference sets: Version 0 written (one key per line, optionally zstd or gzip
compressed, Version 1 templates), Version 0 and 1 read column-wise (`read`)."""
