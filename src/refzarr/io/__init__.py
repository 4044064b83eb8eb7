"""Byte access: many (url, offset, length) ranges read at once, merged, concurrent, retried."""

from refzarr.io.allow import URLPolicy, normalize_url
from refzarr.io.fetch import FetchedBlock, RangeReader
from refzarr.io.plan import Block, ReadPlan, plan_reads
from refzarr.io.policy import (
    DEFAULT_DEADLINE,
    LOCAL_POLICY,
    REMOTE_POLICY,
    FetchPolicy,
    set_read_deadline,
)
from refzarr.io.retry import call_within_deadline, set_reference_retries

__all__ = [
    "DEFAULT_DEADLINE",
    "LOCAL_POLICY",
    "REMOTE_POLICY",
    "Block",
    "FetchPolicy",
    "FetchedBlock",
    "RangeReader",
    "ReadPlan",
    "URLPolicy",
    "call_within_deadline",
    "normalize_url",
    "plan_reads",
    "set_read_deadline",
    "set_reference_retries",
]
