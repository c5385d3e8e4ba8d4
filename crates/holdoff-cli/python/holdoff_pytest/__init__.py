"""holdoff's pytest plugin: ``pytest --holdoff`` runs the session behind holdoff's throttling
proxy and fails each test during which a client retried before its ``Retry-After`` had passed,
with the judge's sentence in the test's report.

pytest finds the plugin through the ``pytest11`` entry point of the ``holdoff`` wheel, which
carries the ``holdoff`` binary too. How it works and its options: docs/pytest.md in holdoff's
repository.
"""

from holdoff_pytest.binary import HoldoffNotFound, find_holdoff

__all__ = ["HoldoffNotFound", "find_holdoff"]
