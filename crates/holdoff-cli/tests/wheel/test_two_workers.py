"""Under pytest-xdist: two tests retry at once, each on its own path; two wait."""


def test_a_waits(honouring, upstream):
    assert honouring.get(upstream + "/a", timeout=30).status_code == 200


def test_b_retries_at_once(impatient, upstream):
    impatient(upstream + "/b")


def test_c_waits(honouring, upstream):
    assert honouring.get(upstream + "/c", timeout=30).status_code == 200


def test_d_retries_at_once(impatient, upstream):
    impatient(upstream + "/d")
