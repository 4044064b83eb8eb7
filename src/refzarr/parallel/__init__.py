"""Running scans over many files: in-process, thread or process pools, any executor, or a
dask.distributed cluster; and combining them on the cluster by a tree reduction."""

from refzarr.parallel.results import ScanFailure, ScanResults
from refzarr.parallel.scan_many import scan_many
from refzarr.parallel.tree import scan_and_combine

__all__ = ["ScanFailure", "ScanResults", "scan_and_combine", "scan_many"]
