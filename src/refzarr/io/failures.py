"""What a failed request was: whether another attempt may fix it (`transient`), and how
messages name it (`described_failure`; an unreachable S3 endpoint, `unreachable_endpoint`)."""

from __future__ import annotations

import sys
import urllib.parse

__all__ = ["answered", "described_failure", "transient", "unreachable_endpoint"]

_NOT_TRANSIENT = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    ValueError,
    TypeError,
    KeyError,
    NotImplementedError,
)
"""Failures that another attempt cannot fix; everything else (timeouts, resets, 5xx) is retried."""

_TRANSIENT_STATUS = frozenset({408, 425, 429})
"""HTTP client-error statuses that another attempt may fix (timeout, too early, slow down)."""


def transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed: not for the `_NOT_TRANSIENT` kinds nor an HTTP
    4xx answer (forbidden, bad request, ...) other than `_TRANSIENT_STATUS`; yes for the rest
    (timeouts, connection resets, 5xx answers)."""
    if isinstance(exc, _NOT_TRANSIENT) or _missing_credentials(exc):
        return False
    if unreachable_endpoint(exc) is not None:
        return False
    status = getattr(exc, "status", None)  # aiohttp's ClientResponseError (fsspec's HTTP)
    if isinstance(status, int) and 400 <= status < 500:
        return status in _TRANSIENT_STATUS
    return True


def _missing_credentials(exc: BaseException) -> bool:
    """Whether ``exc`` is botocore's "no credentials" (s3fs found none, or only half): no
    later try finds them (botocore is asked only when something loaded it)."""
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is None:
        return False
    return isinstance(exc, botocore.NoCredentialsError | botocore.PartialCredentialsError)


def unreachable_endpoint(exc: BaseException | None) -> str | None:
    """The endpoint (``scheme://host:port``) botocore could not connect to when ``exc`` (or
    the failure it was raised from) is its ``EndpointConnectionError`` (connection refused, no
    such host), else None. botocore has retried the connection already: ours would only
    multiply its wait (a wrong ``endpoint_url`` took 37 s for 9 files with 4 tries)."""
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is None or exc is None:
        return None
    found = next(
        (e for e in (exc, exc.__cause__) if isinstance(e, botocore.EndpointConnectionError)), None
    )
    if found is None:
        return None
    url = str(getattr(found, "kwargs", {}).get("endpoint_url", ""))
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url or "(unknown)"


def described_failure(exc: BaseException) -> str:
    """What failed, for messages: the exception's type and text; for an unreachable S3
    endpoint, which one and what to check."""
    endpoint = unreachable_endpoint(exc)
    if endpoint is None:
        return f"{type(exc).__name__}: {exc}"
    return (
        f"cannot connect to the S3 endpoint {endpoint} (nothing answers there: connection "
        "refused or no such host; botocore retried it); check the endpoint_url in the storage "
        "options' client_kwargs (--storage-options) and that the server is up and reachable"
    )


def answered(exc: Exception) -> BaseException:
    """The failure to judge: fsspec's HTTP ``info`` (so ``size``) raises FileNotFoundError
    for any failed answer, chained from it; a transient answer (a 503) is judged as itself."""
    cause = exc.__cause__
    answered = isinstance(getattr(cause, "status", None), int)
    if isinstance(exc, FileNotFoundError) and cause is not None and answered and transient(cause):
        return cause
    return exc
