"""Byte access: many (url, offset, length) ranges read at once, merged, concurrent, retried."""

from refzarr.io.allow import URLPolicy, normalize_url
from refzarr.io.fetch import (
    DEFAULT_DEADLINE,
    LOCAL_POLICY,
    REMOTE_POLICY,
    FetchedBlock,
    FetchPolicy,
    RangeReader,
    call_within_deadline,
    set_read_deadline,
    set_reference_retries,
)
from refzarr.io.plan import Block, ReadPlan, plan_reads

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
