"""The pytest plugin: ``pytest --holdoff``.

The session runs behind a holdoff proxy that the plugin starts (``holdoff run``, see
:mod:`holdoff_pytest.proxy`), its environment taken over by pytest and its xdist workers. Every
process — the session, or each xdist worker — asks the proxy's control API for the judge's
verdicts (``GET /verdicts?since=N``) when a test starts and after each of its phases, and keeps
those of its own process id: a client retried early in that process while that test ran. A
failing verdict fails the phase it came in with the judge's sentence; the proxy records a
verdict before it answers the retry, so it is listed by the time the client's call returns.

At the end the session prints holdoff's summary, lists the failing verdicts no test claimed (a
process a test started, a thread still running after its test), and fails if holdoff's verdict
did (``holdoff run``'s exit status: a retry broke its window, or no request reached the proxy).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Set

import pytest

from holdoff_pytest.binary import HoldoffNotFound, find_holdoff
from holdoff_pytest.proxy import CONTROL_URL, Control, HoldoffError, Proxy, Stopped

#: A ``since`` past every verdict: the answer carries only ``next``.
_LATEST = 2**63 - 1

#: Where each xdist worker tells the session which verdicts its tests claimed.
_CLAIMED = "holdoff_claimed"

#: ``holdoff run``'s exit statuses that fail the session (docs/judge.md).
_EXITS = {
    3: "a client retried too early",
    4: "not tested: no request reached the proxy, or a client did not trust its CA",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("holdoff", "holdoff: retries that come before Retry-After")
    group.addoption(
        "--holdoff",
        action="store_true",
        help="run the session behind a holdoff throttling proxy (holdoff run): a test during "
        "which a client retried before its Retry-After had passed fails, with the judge's "
        "sentence",
    )
    group.addoption(
        "--holdoff-config",
        metavar="FILE",
        help="the faults to inject, from a holdoff or Dev Proxy config file (holdoff run "
        "--config); default: holdoff.json here, else the throttle preset",
    )
    group.addoption(
        "--holdoff-preset",
        metavar="NAME",
        help="a built-in preset instead of a config file: openai, github, graph, ... "
        "(holdoff config preset lists them)",
    )
    group.addoption(
        "--holdoff-failure-rate",
        metavar="PERCENT",
        help="percent of requests that get an error response, 0-100 (0: the proxy injects "
        "nothing and judges the real upstream's own throttles)",
    )
    group.addoption(
        "--holdoff-seed",
        metavar="N",
        help="the seed of the faults' random choices, to repeat a session's faults",
    )
    group.addoption(
        "--holdoff-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="any other holdoff run option, e.g. --holdoff-arg=--report-html=holdoff.html "
        "(repeat for more)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("holdoff"):
        return
    worker = hasattr(config, "workerinput")
    if worker or os.environ.get(CONTROL_URL):
        # An xdist worker (or a session already under `holdoff run --control-port`): the
        # proxy is there, in the environment.
        if not worker and _run_args(config):
            raise pytest.UsageError(
                f"pytest already runs under holdoff ({CONTROL_URL} is set): give the "
                "--holdoff-* options to that holdoff run, or unset it"
            )
        try:
            session = Session(config, Control(os.environ.get(CONTROL_URL, "")), None)
        except HoldoffError as err:
            raise pytest.UsageError(f"--holdoff: {err}") from err
        config.pluginmanager.register(session, "holdoff-session")
        return
    if config.option.collectonly:
        return
    try:
        proxy = Proxy.start(find_holdoff(), _run_args(config))
    except (HoldoffNotFound, HoldoffError) as err:
        raise pytest.UsageError(f"--holdoff: {err}") from err
    try:
        session = Session(config, proxy.control, proxy)
    except HoldoffError as err:
        proxy.stop()
        raise pytest.UsageError(f"--holdoff: {err}") from err
    config.pluginmanager.register(session, "holdoff-session")


def _run_args(config: pytest.Config) -> List[str]:
    """The ``holdoff run`` options the ``--holdoff-*`` ones stand for."""
    args: List[str] = []
    for option, flag in (
        ("holdoff_config", "--config"),
        ("holdoff_preset", "--preset"),
        ("holdoff_failure_rate", "--failure-rate"),
        ("holdoff_seed", "--seed"),
    ):
        value = config.getoption(option)
        if value is not None:
            args += [flag, str(value)]
    return args + list(config.getoption("holdoff_arg"))


class Session:
    """What one process of the session does: the session's own, or an xdist worker's."""

    def __init__(self, config: pytest.Config, control: Control, proxy: Optional[Proxy]):
        self.config = config
        self.control = control
        #: The proxy this process started and serves the session: none in an xdist worker.
        self.proxy = proxy
        self.pid = os.getpid()
        #: The verdicts from this number on are this session's; from ``since`` on, not taken
        #: yet.
        self.first = self.since = self._next()
        #: The environment before the proxy's was taken over, to put back at the end.
        self.saved: Dict[str, Optional[str]] = {}
        if proxy is not None:
            for name, value in proxy.environment.items():
                self.saved[name] = os.environ.get(name)
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        #: The failing verdicts this process's tests claimed, by number.
        self.claimed: Set[int] = set()
        #: The numbers the workers' tests claimed, once each is done.
        self.claimed_by_workers: Set[int] = set()
        self.stopped: Optional[Stopped] = None
        self.unclaimed: List[Dict[str, Any]] = []
        self.trouble: Optional[str] = None
        if self.proxy is not None and config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_WorkerClaims(self), "holdoff-xdist")

    def _next(self) -> int:
        return int(self.control.verdicts(_LATEST)["next"])

    def _take(self) -> List[Dict[str, Any]]:
        """The verdicts on this process's retries since the last time."""
        listed = self.control.verdicts(self.since)
        self.since = int(listed["next"])
        return [v for v in listed["verdicts"] if v.get("pid") == self.pid]

    def _runs_tests(self) -> bool:
        """Whether tests run in this process: not in the session of xdist's workers."""
        return self.config.pluginmanager.get_plugin("dsession") is None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if not self._runs_tests():
            return
        # What came between tests is no test's: it stays unclaimed.
        try:
            self._take()
        except HoldoffError as err:
            self.trouble = str(err)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        try:
            found = self._take()
        except HoldoffError as err:
            _fail(report, f"holdoff: {err}")
            return
        failing = [v for v in found if v.get("fails")]
        warnings = [v for v in found if not v.get("fails")]
        if warnings:
            report.sections.append(("holdoff warnings", _describe(warnings)))
        if not failing:
            return
        self.claimed.update(int(v["seq"]) for v in failing)
        times = "" if len(failing) == 1 else f" {len(failing)} times"
        heading = (
            f"holdoff: a client retried too early{times} while this test ran "
            f"(in its {report.when}):"
        )
        _fail(report, f"{heading}\n{_describe(failing)}")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        output = getattr(self.config, "workeroutput", None)
        if output is not None:
            # An xdist worker: the session learns what its tests claimed.
            output[_CLAIMED] = sorted(self.claimed)
        if self.proxy is None:
            return
        try:
            listed = self.control.verdicts(self.first)
            claimed = self.claimed | self.claimed_by_workers
            self.unclaimed = [
                v for v in listed["verdicts"] if v.get("fails") and int(v["seq"]) not in claimed
            ]
        except HoldoffError as err:
            self.trouble = str(err)
        self.stopped = self.proxy.stop()
        self._restore()
        if self.stopped.code != 0 and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.stopped is None:
            return
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "holdoff")
        for line in self.stopped.lines():
            write(line)
        if self.unclaimed:
            count = len(self.unclaimed)
            write(
                f"holdoff: {count} {'retry' if count == 1 else 'retries'} too early outside any "
                "test (in a process a test started, or a thread still running after its test):"
            )
            write(_describe(self.unclaimed))
        if self.trouble:
            write(f"holdoff: {self.trouble}")
        if self.stopped.code != 0:
            why = _EXITS.get(self.stopped.code, "see holdoff's summary above")
            write(f"holdoff: the session fails: holdoff run exited {self.stopped.code} ({why})")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # Interrupted before the session finished: the proxy must not outlive pytest.
        if self.proxy is not None and self.stopped is None:
            self.stopped = self.proxy.stop()
            self._restore()

    def _restore(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved = {}


class _WorkerClaims:
    """pytest-xdist's hook, registered only where xdist is: each worker says, as it goes down,
    which verdicts its tests claimed."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.session.claimed_by_workers.update(int(seq) for seq in output.get(_CLAIMED, []))


def _describe(verdicts: List[Dict[str, Any]]) -> str:
    """One line per verdict: the request, the judge's sentence and how it read the hint."""
    lines = []
    for v in verdicts:
        line = f"  {v['method']} {v['url']}: {v['why']}"
        if v.get("judged_by"):
            line += f" (judged by {v['judged_by']})"
        lines.append(f"{line}; client {v.get('client_name') or v['client']}")
    return "\n".join(lines)


def _fail(report: pytest.TestReport, text: str) -> None:
    """Fails ``report`` with ``text``; one that failed already keeps its own failure, and
    carries ``text`` as a section."""
    if report.failed:
        report.sections.append(("holdoff", text))
        return
    report.outcome = "failed"
    report.longrepr = text
