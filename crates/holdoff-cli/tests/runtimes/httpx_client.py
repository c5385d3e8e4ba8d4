# httpx as its users write it: httpx.get reads HTTPS_PROXY and SSL_CERT_FILE (trust_env is on by
# default). It retries a 429 once its delay-seconds Retry-After has passed.
# Usage: python httpx_client.py URL. Prints the body; exits 1 if still throttled.
import sys
import time

import httpx

for _ in range(3):
    response = httpx.get(sys.argv[1])
    if response.status_code != 429:
        print(response.text)
        sys.exit(0)
    time.sleep(int(response.headers["retry-after"].strip()))
sys.exit(1)
