"""A client that honours Retry-After as RFC 9110 says, through the proxy variables (urllib
reads HTTP_PROXY for http URLs): it waits the delay-seconds, or until the HTTP-date by the
server's own clock (its Date header); it gives up on a malformed hint, backs off 1 s when
there is none, gives up on a used-up quota (OpenAI's insufficient_quota), and retries a POST
only with an Idempotency-Key (with --no-key: without one, blindly).

Variants, each an option: --cap S waits at most S seconds whatever the hint says, then retries
(the cap some SDKs have); --max-wait S gives up instead when the hint is longer than S seconds
(a client that defers the work); --jitter backs off 1 to 2 s (random) when there is no hint.
Usage: honours.py [--no-key] [--cap S] [--max-wait S] [--jitter] [GET|POST] URL
"""
import email.utils
import random
import sys
import time
import urllib.error
import urllib.request

args = sys.argv[1:]
blind = cap = max_wait = jitter = None
while args[0].startswith("--"):
    option = args.pop(0)
    if option == "--no-key":
        blind = True
    elif option == "--cap":
        cap = float(args.pop(0))
    elif option == "--max-wait":
        max_wait = float(args.pop(0))
    elif option == "--jitter":
        jitter = True
method, url = (args[0], args[1]) if len(args) > 1 else ("GET", args[0])


def wait_for(headers):
    """Seconds to wait, or None for a malformed hint."""
    value = headers.get("Retry-After")
    if value is None:
        return 1.0 + random.random() if jitter else 1.0
    value = value.strip(" \t")
    if value.isdigit():
        return int(value)
    try:
        date = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    # RFC 9110: the weekday must be the day the date falls on; email.utils does not check.
    if date is None or not value.startswith(date.strftime("%a") + ","):
        return None
    server_now = headers.get("Date")
    now = email.utils.parsedate_to_datetime(server_now).timestamp() if server_now else time.time()
    return max(0.0, date.timestamp() - now)


headers = {}
for attempt in range(3):
    body = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            print(response.status, response.read().decode())
            sys.exit(0)
    except urllib.error.HTTPError as err:
        if err.code not in (429, 503):
            sys.exit(1)
        if b"insufficient_quota" in err.read():
            print("quota used up: giving up", file=sys.stderr)
            sys.exit(1)
        wait = wait_for(err.headers)
        if wait is None:
            print("malformed Retry-After: giving up", file=sys.stderr)
            sys.exit(1)
        if max_wait is not None and wait > max_wait:
            print(f"told to wait {wait:.0f} s: giving up, to try later", file=sys.stderr)
            sys.exit(1)
        if cap is not None:
            wait = min(wait, cap)
        if method == "POST" and not blind:
            # A hint does not make a POST safe: repeat it only as the same operation.
            headers["Idempotency-Key"] = "holdoff-check-test-1"
        time.sleep(wait)
sys.exit(1)
