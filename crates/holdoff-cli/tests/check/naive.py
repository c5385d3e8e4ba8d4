"""A client that ignores Retry-After: it retries at once after any 429 or 503, up to 3 times,
POST included, never with an Idempotency-Key. Usage: naive.py [GET|POST] URL"""
import sys
import urllib.error
import urllib.request

method, url = (sys.argv[1], sys.argv[2]) if len(sys.argv) > 2 else ("GET", sys.argv[1])
for attempt in range(4):
    body = b"{}" if method == "POST" else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method=method), timeout=10) as response:
            print(response.status, response.read().decode())
            sys.exit(0)
    except urllib.error.HTTPError as err:
        if err.code not in (429, 503):
            sys.exit(1)
sys.exit(1)
