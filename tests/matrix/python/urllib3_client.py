"""Plain urllib3: a PoolManager with Retry(total=3, backoff_factor=0.5,
status_forcelist=[429, 503]), default allowed_methods and respect_retry_after_header.
urllib3 does not read HTTP_PROXY itself, so, as its users behind a proxy do, a ProxyManager
is used when HTTP_PROXY is set.

Usage: urllib3_client.py METHOD URL. Exits 0 on a 2xx, 1 otherwise.
"""
import os
import sys

import urllib3
from urllib3.util.retry import Retry

method, url = sys.argv[1], sys.argv[2]
retries = Retry(total=3, backoff_factor=0.5, status_forcelist=[429, 503])
proxy = os.environ.get("HTTPS_PROXY" if url.startswith("https:") else "HTTP_PROXY")
if proxy:
    http = urllib3.ProxyManager(proxy, retries=retries, ca_certs=os.environ.get("SSL_CERT_FILE"))
else:
    http = urllib3.PoolManager(retries=retries)
try:
    response = http.request(method, url, body=b"{}" if method == "POST" else None, timeout=30)
except urllib3.exceptions.HTTPError as error:
    print(error, file=sys.stderr)
    sys.exit(1)
sys.exit(0 if 200 <= response.status < 300 else 1)
