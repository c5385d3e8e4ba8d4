"""A client that honours Retry-After (on a 429, 503 or 413) as RFC 9110 says, through the
proxy variables (urllib reads HTTP_PROXY for http URLs): it waits the delay-seconds, or until
the HTTP-date by the server's own clock (its Date header); without Retry-After, until X-RateLimit-Reset when
X-RateLimit-Remaining is 0 (GitHub); it gives up on a malformed hint, backs off 1 s, then 2 s,
then 4 s when there is none, gives up on a used-up quota (OpenAI's insufficient_quota), and
retries a POST only with an Idempotency-Key (with --no-key: without one, blindly); it follows a
redirect only once its Retry-After has passed.

Variants, each an option: --cap S waits at most S seconds whatever the hint says, then retries
(the cap some SDKs have); --max-wait S gives up instead when the hint is longer than S seconds
(a client that defers the work); --jitter adds up to a second (random) to the backoff when
there is no hint, --jitter-up-to S up to S seconds; --attempts N makes N attempts (3 by
default); --at-least S waits at least S seconds, the longer of that and the hint (a local
backoff longer than short hints).
Usage: honours.py [--no-key] [--cap S] [--max-wait S] [--jitter] [--jitter-up-to S]
       [--attempts N] [--at-least S] [GET|POST] URL
"""
import email.utils
import random
import sys
import time
import urllib.error
import urllib.request

args = sys.argv[1:]
blind = cap = max_wait = jitter = None
at_least = 0.0
attempts = 3
while args[0].startswith("--"):
    option = args.pop(0)
    if option == "--no-key":
        blind = True
    elif option == "--cap":
        cap = float(args.pop(0))
    elif option == "--max-wait":
        max_wait = float(args.pop(0))
    elif option == "--jitter":
        jitter = 1.0
    elif option == "--jitter-up-to":
        jitter = float(args.pop(0))
    elif option == "--attempts":
        attempts = int(args.pop(0))
    elif option == "--at-least":
        at_least = float(args.pop(0))
method, url = (args[0], args[1]) if len(args) > 1 else ("GET", args[0])


def server_now(headers):
    """The server's clock, by its Date header, else the local one."""
    date = headers.get("Date")
    return email.utils.parsedate_to_datetime(date).timestamp() if date else time.time()


def wait_for(headers, attempt):
    """Seconds to wait, or None for a malformed hint."""
    value = headers.get("Retry-After")
    if value is None:
        reset = headers.get("X-RateLimit-Reset")
        if headers.get("X-RateLimit-Remaining") == "0" and reset and reset.isdigit():
            return max(0.0, int(reset) - server_now(headers))
        return 2.0 ** attempt + (random.uniform(0, jitter) if jitter else 0.0)
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
    return max(0.0, date.timestamp() - server_now(headers))


class WaitingRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect once its Retry-After has passed (RFC 9110 §10.2.3)."""

    def redirect_request(self, req, fp, code, msg, hdrs, newurl):
        wait = wait_for(hdrs, 0) if hdrs.get("Retry-After") is not None else 0.0
        time.sleep(wait or 0.0)
        return super().redirect_request(req, fp, code, msg, hdrs, newurl)


opener = urllib.request.build_opener(WaitingRedirects)
headers = {}
for attempt in range(attempts):
    body = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with opener.open(request, timeout=10) as response:
            print(response.status, response.read().decode())
            sys.exit(0)
    except urllib.error.HTTPError as err:
        if err.code not in (413, 429, 503):
            sys.exit(1)
        if b"insufficient_quota" in err.read():
            print("quota used up: giving up", file=sys.stderr)
            sys.exit(1)
        if attempt == attempts - 1:
            print(f"HTTP {err.code} after {attempts} attempts: giving up", file=sys.stderr)
            sys.exit(1)
        wait = wait_for(err.headers, attempt)
        if wait is None:
            print("malformed Retry-After: giving up", file=sys.stderr)
            sys.exit(1)
        if max_wait is not None and wait > max_wait:
            print(f"told to wait {wait:.0f} s: giving up, to try later", file=sys.stderr)
            sys.exit(1)
        wait = max(wait, at_least)
        if cap is not None:
            wait = min(wait, cap)
        if method == "POST" and not blind:
            # A hint does not make a POST safe: repeat it only as the same operation.
            headers["Idempotency-Key"] = "holdoff-check-test-1"
        time.sleep(wait)
sys.exit(1)
