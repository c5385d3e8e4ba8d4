"""Under pytest-xdist: two tests retry at once, each on its own path; two wait."""

import requests


def test_a_waits(honouring, upstream):
    assert honouring.get(upstream + "/a", timeout=30).status_code == 200


def test_b_retries_at_once(upstream):
    assert requests.get(upstream + "/b", timeout=30).status_code == 429
    requests.get(upstream + "/b", timeout=30)


def test_c_waits(honouring, upstream):
    assert honouring.get(upstream + "/c", timeout=30).status_code == 200


def test_d_retries_at_once(upstream):
    assert requests.get(upstream + "/d", timeout=30).status_code == 429
    requests.get(upstream + "/d", timeout=30)
