"""httpx with httpx-retries' RetryTransport and Retry(total=3, backoff_factor=0.5), as its
README shows (default status codes 429, 502, 503, 504 and default methods, which leave POST
out). httpx reads HTTP_PROXY only for a client without a transport of its own, so, as users
of RetryTransport behind a proxy do, the wrapped HTTPTransport is given the proxy.

Usage: httpx_retries_client.py METHOD URL. Exits 0 on a 2xx, 1 otherwise.
"""
import os
import sys

import httpx
from httpx_retries import Retry, RetryTransport

method, url = sys.argv[1], sys.argv[2]
proxy = os.environ.get("HTTPS_PROXY" if url.startswith("https:") else "HTTP_PROXY")
transport = RetryTransport(transport=httpx.HTTPTransport(proxy=proxy),
                           retry=Retry(total=3, backoff_factor=0.5))
with httpx.Client(transport=transport) as client:
    try:
        response = client.request(method, url, json={} if method == "POST" else None, timeout=30)
    except httpx.HTTPError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
sys.exit(0 if response.is_success else 1)
