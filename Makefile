# Everything a fresh machine needs: `make demo` (the main job, end to end) and `make test` (all checks).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit test-newest newest-venv bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The newest side's environment is installed while the 3.11 suite runs (pytest keeps one core
# busy, pip mostly waits on the network and the disk); its tests run after.
test: lint typecheck
	$(MAKE) --no-print-directory -j2 unit newest-venv
	$(MAKE) --no-print-directory test-newest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q --hypothesis-profile=ci

# The newest side: the tests most sensitive to zarr-python / numcodecs / numpy / Icechunk /
# VirtualiZarr versions, on Python 3.12 with the newest releases (pinned in
# ci/newest-constraints.txt so that CI is reproducible), in .venv312; the full suite runs above
# on the default Python. Skipped (and green) where no Python 3.12 is found: pyenv's, or
# python3.12 on PATH; PYTHON312=... chooses another.
PYTHON312 ?= $(firstword $(lastword $(sort $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.12*/bin/python))) $(shell command -v python3.12 2>/dev/null))
VENV312 := .venv312
STAMP312 := $(VENV312)/.installed
NEWEST_TESTS := \
	tests/reader/test_store.py tests/reader/test_array_reader.py tests/reader/test_dask_workers.py \
	tests/reader/test_small_reads.py \
	tests/sources/test_sources_read_check.py \
	tests/codecs/hdf5/test_hdf5_codecs.py tests/codecs/hdf4 tests/codecs/test_fits_codecs.py \
	tests/codecs/test_batch.py tests/codecs/test_unshuffle.py \
	tests/formats/kerchunk_json/test_json_write.py tests/formats/parquet/test_parquet.py \
	tests/formats/parquet/test_parquet_sources_file.py \
	tests/formats/icechunk tests/formats/test_write_result.py tests/interop \
	tests/formats/test_append_fuzz.py tests/combine/test_combine_fuzz.py \
	tests/scan/zarr/test_zarr_fuzz.py tests/scan/tiff/test_tiff_fuzz.py tests/scan/hdf5/test_hdf5_fuzz.py \
	tests/scan/hdf5/test_hdf5_xarray.py tests/scan/netcdf3/test_netcdf3_corpus.py \
	tests/scan/tiff/test_tiff_corpus.py tests/scan/grib/test_grib_corpus.py \
	tests/scan/fits/test_fits_corpus.py tests/scan/hdf4/test_hdf4_corpus.py \
	tests/scan/dmrpp/test_dmrpp_corpus.py tests/scan/zarr/test_zarr_corpus.py

# pip's output goes to a log (shown only if it fails) so that it does not break into pytest's.
$(STAMP312): pyproject.toml ci/newest-constraints.txt
	test -x $(VENV312)/bin/python || $(PYTHON312) -m venv $(VENV312)
	{ $(VENV312)/bin/python -m pip install --quiet --upgrade pip && \
	  $(VENV312)/bin/python -m pip install --quiet -c ci/newest-constraints.txt -e '.[test]'; \
	} > $(VENV312)/install.log 2>&1 || { cat $(VENV312)/install.log; exit 1; }
	touch $(STAMP312)

ifeq ($(strip $(PYTHON312)),)
newest-venv:
	@:
test-newest:
	@echo "test-newest skipped: no Python 3.12 (pyenv's versions/3.12*/bin/python or python3.12 on PATH)"
else
newest-venv: $(STAMP312)
test-newest: $(STAMP312)
	$(VENV312)/bin/python -c "import sys, zarr, numcodecs, numpy, icechunk, virtualizarr; \
		print('newest side: Python', sys.version.split()[0], 'zarr', zarr.__version__, \
		'numcodecs', numcodecs.__version__, 'numpy', numpy.__version__, \
		'icechunk', icechunk.__version__, 'virtualizarr', virtualizarr.__version__)"
	$(VENV312)/bin/pytest -q -p no:cacheprovider --hypothesis-profile=ci $(NEWEST_TESTS)
endif

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/bench_formats.py
	$(BIN)/python benchmarks/bench_scan.py
	$(BIN)/python benchmarks/bench_read.py
	$(BIN)/python benchmarks/bench_combine.py

clean:
	rm -rf $(VENV) $(VENV312) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
