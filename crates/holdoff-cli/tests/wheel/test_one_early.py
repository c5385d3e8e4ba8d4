"""One test's client retries at once after a 429: that test fails, its neighbours pass."""


def test_waits_before(honouring, upstream):
    assert honouring.get(upstream + "/before", timeout=30).status_code == 200


def test_retries_at_once(impatient, upstream):
    impatient(upstream + "/early")


def test_waits_after(honouring, upstream):
    assert honouring.get(upstream + "/after", timeout=30).status_code == 200
