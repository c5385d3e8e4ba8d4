"""The holdoff proxy a pytest session runs behind: ``holdoff run`` started by the plugin with a
stand-in command, and its control API.

``holdoff run --control-port 0 [options] -- python _hold.py`` starts the proxy with a throwaway
CA and runs ``_hold.py`` with the environment it gives every command (the proxy variables, the
CA bundles, ``HOLDOFF_CONTROL_URL``). ``_hold.py`` prints that environment and waits; the plugin
takes it over into its own process, so that pytest and its xdist workers (started later, with
that environment) send their requests through the proxy and trust its CA exactly as a command
under ``holdoff run`` would. Closing ``_hold.py``'s input ends the run: holdoff stops the proxy,
prints its summary on stderr and exits with its verdict.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from typing import Any, Dict, List, Optional

#: The variable ``holdoff run --control-port`` sets to the control API's URL.
CONTROL_URL = "HOLDOFF_CONTROL_URL"

#: How long holdoff may take to start (a config to read, a CA to make).
START_TIMEOUT_S = 60.0

#: How long holdoff may take to stop once its command is done: its ``--grace`` (5 s) for the
#: requests in flight, then the reports.
STOP_TIMEOUT_S = 60.0


class HoldoffError(Exception):
    """holdoff could not be started, reached or stopped; the message says why and what to do."""


class Control:
    """The control API of a running proxy, at ``http://127.0.0.1:PORT``."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise HoldoffError(
                f"{CONTROL_URL}={url} is not the URL of holdoff's control API "
                f"(http://127.0.0.1:PORT): unset it, or run under `holdoff run --control-port 0`"
            )
        self.url = url
        self._host = parts.hostname
        self._port = parts.port

    def get(self, path: str) -> Any:
        """The JSON answer to ``GET path``. Never through a proxy: the connection is direct."""
        connection = http.client.HTTPConnection(self._host, self._port, timeout=30)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
        except OSError as err:
            raise HoldoffError(
                f"cannot reach holdoff's control API at {self.url}: {err}; did the holdoff "
                f"proxy stop? (its summary at the end of the session says why)"
            ) from err
        finally:
            connection.close()
        if response.status != 200:
            text = body.decode("utf-8", "replace").strip()
            raise HoldoffError(
                f"holdoff's control API answered {response.status} to GET {path}: {text}; is "
                f"this holdoff binary older than the plugin? (holdoff --version)"
            )
        return json.loads(body)

    def verdicts(self, since: int) -> Dict[str, Any]:
        """``GET /verdicts?since=N``: ``next``, ``missed`` and the ``verdicts`` from ``N`` on."""
        return self.get(f"/verdicts?since={since}")


class Proxy:
    """``holdoff run`` serving the session: started by :meth:`start`, ended by :meth:`stop`."""

    def __init__(
        self,
        process: subprocess.Popen,
        workdir: str,
        environment: Dict[str, Optional[str]],
    ) -> None:
        self._process = process
        self._workdir = workdir
        #: The variables holdoff set or changed for its command, and those it removed (None).
        self.environment = environment
        self.control = Control(environment.get(CONTROL_URL) or "")

    @classmethod
    def start(cls, holdoff: str, args: List[str]) -> "Proxy":
        """Starts ``holdoff run --control-port 0 ARGS -- python _hold.py`` and reads the
        environment it gives its command. Its log goes to a file (``--log-file``), so that what
        it prints on stderr is its summary alone.

        Raises :class:`HoldoffError` with holdoff's own message when it does not start.
        """
        workdir = tempfile.mkdtemp(prefix="holdoff-pytest-")
        log = os.path.join(workdir, "holdoff.log")
        stderr_path = os.path.join(workdir, "stderr")
        hold = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hold.py")
        command = [holdoff, "run", "--control-port", "0", "--log-file", log, *args, "--"]
        command += [sys.executable, "-I", hold]
        with open(stderr_path, "wb") as stderr:
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    # Out of the terminal's reach: a Ctrl-C is pytest's to handle, and the
                    # plugin ends the run by closing _hold.py's input.
                    start_new_session=True,
                )
            except OSError as err:
                shutil.rmtree(workdir, ignore_errors=True)
                raise HoldoffError(f"cannot run {holdoff}: {err}") from err
        line = _read_line(process, START_TIMEOUT_S)
        if line is None:
            process.kill()
            process.wait()
            said = _read(stderr_path) + _read(log)
            shutil.rmtree(workdir, ignore_errors=True)
            raise HoldoffError(
                f"holdoff did not start within {START_TIMEOUT_S:.0f} s "
                f"(`{' '.join(command[:-4])}`): run that command with `-- true` at the end "
                f"to see what it waits for; it said:\n{said}"
            )
        if not line:
            code = process.wait()
            said = (_read(stderr_path) or _read(log)).strip()
            shutil.rmtree(workdir, ignore_errors=True)
            raise HoldoffError(
                f"holdoff could not start the proxy (`{' '.join(command[:-4])}` exited "
                f"{code}): {said}"
            )
        given = json.loads(line)
        # What holdoff set for its command: the variables new or changed, and those removed.
        changed: Dict[str, Optional[str]] = {
            name: value for name, value in given.items() if os.environ.get(name) != value
        }
        for name in os.environ:
            if name not in given:
                changed[name] = None
        return cls(process, workdir, changed)

    def stop(self) -> "Stopped":
        """Ends the run (closes ``_hold.py``'s input) and waits for holdoff's summary and exit
        status."""
        process = self._process
        try:
            if process.stdin:
                process.stdin.close()
        except OSError:
            pass
        try:
            code = process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if process.stdout:
            process.stdout.close()
        summary = _read(os.path.join(self._workdir, "stderr"))
        shutil.rmtree(self._workdir, ignore_errors=True)
        return Stopped(code, summary)


class Stopped:
    """What holdoff said when it stopped: its exit status and its summary."""

    def __init__(self, code: int, summary: str) -> None:
        #: 0 pass, 3 a retry broke its window, 4 not tested (docs/judge.md), or another failure.
        self.code = code
        self.summary = summary

    def lines(self) -> List[str]:
        """The summary's lines, but the ``reproduce:`` line: it names the stand-in command."""
        return [
            line
            for line in self.summary.splitlines()
            if line.strip() and not line.startswith("reproduce: ")
        ]


def _read_line(process: subprocess.Popen, timeout: float) -> Optional[str]:
    """The first line ``process`` prints (empty if it exits first), or None after ``timeout``."""
    stdout = process.stdout
    assert stdout is not None
    read: List[bytes] = []
    reader = threading.Thread(target=lambda: read.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not read:
        return None
    return read[0].decode("utf-8")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""
