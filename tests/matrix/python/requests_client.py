"""Python requests with urllib3's Retry mounted on an HTTPAdapter, as requests' users write it:
Retry(total=3, backoff_factor=0.5, status_forcelist=[429, 503]), default allowed_methods and
respect_retry_after_header.

Usage: requests_client.py METHOD URL. Exits 0 on a 2xx, 1 otherwise.
"""
import sys

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

method, url = sys.argv[1], sys.argv[2]
session = requests.Session()
retries = Retry(total=3, backoff_factor=0.5, status_forcelist=[429, 503])
session.mount("http://", HTTPAdapter(max_retries=retries))
session.mount("https://", HTTPAdapter(max_retries=retries))
try:
    response = session.request(method, url, json={} if method == "POST" else None, timeout=30)
except requests.RequestException as error:
    print(error, file=sys.stderr)
    sys.exit(1)
sys.exit(0 if response.ok else 1)
