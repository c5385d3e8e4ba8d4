"""Every client waits as long as Retry-After says: the session passes."""

import os


def test_waits_over_http(honouring, upstream):
    assert honouring.get(upstream + "/a", timeout=30).status_code == 200


def test_waits_over_https(honouring):
    # The proxy's mock throttles the first request, then the upstream its own first: two
    # waits, over TLS the proxy intercepts with the CA the plugin made requests trust.
    response = honouring.get(os.environ["UPSTREAM_TLS"] + "/api", timeout=30)
    assert response.status_code == 200
