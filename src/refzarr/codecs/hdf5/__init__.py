"""HDF5 filters as numcodecs codecs: the filter pipeline of a dataset mapped to codec configs
(`filters`), and decoders for the filters numcodecs lacks (LZF, N-bit, scale-offset,
bitshuffle, Blosc2), registered under ``refzarr_hdf5_<name>``."""
