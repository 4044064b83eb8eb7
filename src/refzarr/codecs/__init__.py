"""Decoding chunks: the codecs numcodecs lacks, one subpackage or module per source format
(`refzarr.codecs.hdf5`, ...), registered with numcodecs so that any zarr reader finds them, and
the chunk decoders refzarr's reader, combine and scanners share (`chunk`, `batch`, `inflate`,
`unshuffle`)."""
