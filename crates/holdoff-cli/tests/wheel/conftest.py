"""Fixtures of the pytest sessions crates/holdoff-cli/tests/wheel.rs runs with `--holdoff`."""

import os

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


@pytest.fixture
def upstream() -> str:
    """The loopback upstream, `http://127.0.0.1:PORT`: each path answers its first request 429
    with `Retry-After: 1`, and 200 after."""
    return os.environ["UPSTREAM"]


@pytest.fixture
def honouring() -> requests.Session:
    """requests with urllib3's Retry, which waits as long as Retry-After says."""
    retry = Retry(total=3, status_forcelist=[429], respect_retry_after_header=True)
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=retry))
    session.mount("https://", HTTPAdapter(max_retries=retry))
    return session


@pytest.fixture
def impatient():
    """A client that retries a 429 at once, whatever Retry-After says: `impatient(url)` gets
    `url`, checks that it was throttled, and asks again."""

    def get_twice(url: str) -> None:
        assert requests.get(url, timeout=30).status_code == 429
        requests.get(url, timeout=30)

    return get_twice
