"""Settings for the differential fuzz tests: few examples in CI, as many as asked for locally.

Each format's fuzz tests write random files with the format's own library and compare what
refzarr reads with what that library reads. CI runs a fixed, small number of examples (the
``ci`` profile derandomizes them); ``REFZARR_FUZZ_EXAMPLES=2000 pytest tests/scan/<format>``
explores many more on a developer's machine.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def fuzz_settings(ci_examples: int) -> settings:
    """Hypothesis settings for one fuzz test.

    Parameters
    ----------
    ci_examples
        How many examples the test draws when ``REFZARR_FUZZ_EXAMPLES`` is not set; keep it
        small enough for the whole suite's time budget (a few seconds per test).

    Returns
    -------
    settings
        No deadline and no "too slow"/"filter" health checks (a loaded machine and a format's
        rare combinations are no bug).
    """
    examples = int(os.environ.get("REFZARR_FUZZ_EXAMPLES", ci_examples))
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )
