"""A client that never reads Retry-After: after any 429 or 503 it waits a fixed number of
seconds (--wait S, 5 by default, as resty's fixed retry wait), up to 3 times, and gives up on
any other status. Usage: fixed.py [--wait S] URL"""
import sys
import time
import urllib.error
import urllib.request

args = sys.argv[1:]
wait = 5.0
if args[0] == "--wait":
    wait = float(args[1])
    args = args[2:]
url = args[0]
for attempt in range(4):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            print(response.status, response.read().decode())
            sys.exit(0)
    except urllib.error.HTTPError as err:
        if err.code not in (429, 503):
            print(f"HTTP {err.code}: giving up", file=sys.stderr)
            sys.exit(1)
        if attempt < 3:
            time.sleep(wait)
print("still throttled after 3 retries", file=sys.stderr)
sys.exit(1)
