"""What the hidden suites share: the hypothesis settings every property test runs under.

Loaded by pytest before the test modules below it (the grader's runner passes the suite folders
with the course root as rootdir), so a module takes the settings at import time with
`settings.get_profile("grader-hidden")`. Nothing here is loaded for the public suites or the
unit tests, and registering a profile changes no default for anyone else in the process.

The draws are the student's, not the run's: the grader's plugin seeds every hypothesis test
(and the `rng` fixture) from the suites, the assignment and the student (`grader.suites.seeds`),
so a regrade with nothing changed draws the same examples and gives the same score.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

# No example database (nothing a past run found changes this run's draws), no deadline and no
# health check (both depend on the machine's speed, so they could fail one run and not the
# next), one failure reported, no slow 'explain' phase and no reproduce blob in the feedback.
settings.register_profile(
    "grader-hidden",
    max_examples=25,
    deadline=None,
    derandomize=False,
    database=None,
    report_multiple_bugs=False,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
)
