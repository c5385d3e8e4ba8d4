"""Writes the client matrix page and verdicts.json from scripts/client-matrix's results.

Usage: render.py --results DIR --notes FILE --holdoff-version TEXT --out FILE --verdicts FILE
                 [--fast] -- CLIENT...

DIR holds, per client, CLIENT.json (its `holdoff check --json`) and
CLIENT.version. FILE's `## CLIENT` sections are the notes.
"""
import argparse
import datetime
import json
import os
import re
import sys

# Short column names, in the order holdoff's table has the scenarios (the columns' order too: a
# scenario holdoff reports that is not here goes after them, under its own name).
SHORT = {
    "delay-429": "429",
    "delay-503": "503",
    "too-large": "413",
    "redirect": "3xx",
    "http-date": "date",
    "clock-behind": "skew",
    "date-past": "past",
    "second-throttle": "2nd",
    "retry-after-ms": "ms",
    "malformed": "soon",
    "malformed-negative": "-1",
    "malformed-decimal": "1.5",
    "malformed-empty": "empty",
    "wrong-weekday": "wday",
    "no-hint": "none",
    "quota": "quota",
    "ratelimit-reset": "reset",
    "backoff": "grow",
    "persistent": "bound",
    "post": "post",
    "long-90": "90s",
    "long-150": "150s",
    "long-hour": "1h",
    "reads-hint": "reads",
}

# Scenarios holdoff runs only for some clients, and what decides it. Their hint is the client's
# own, so the column list gives each client's.
ADAPTIVE = {
    "reads-hint": (
        "run only for a client whose every retry on a hint (delay-*, too-large, http-date, "
        "second-throttle, retry-after-ms, ratelimit-reset) came more than half a second and a "
        "fifth after it: a hint twice its longest such wait, which a client that reads "
        "`Retry-After` waits out and one with a long fixed wait does not"),
}

# Sections of the notes that are the page's own, after the clients' notes.
PAGE_SECTIONS = ("Not in the matrix",)

# The verdicts, as the page explains them.
LEGEND = (
    "pass: the client did what the scenario's rule asks (waited at least as long as the hint "
    "permits, backed off 100 ms or more from a malformed or missing hint, let its waits grow, "
    "stopped retrying after a bounded number), or did not retry where that is the right answer "
    "(`quota`, `post` without an Idempotency-Key, `long-hour`); **fail**: it retried before the "
    "hint permitted, or read a malformed hint as zero; warn: allowed but unwise (a POST repeated "
    "without an Idempotency-Key, a used-up quota retried, a date read by the client's own clock, "
    "no backoff without a hint, waits that do not grow, still waiting at the time limit); "
    "gave up: the client made no retry, so nothing about honouring a hint was shown, and it is "
    "never counted as honouring one; unreliable: a pass too close to its threshold for the "
    "machine's load, measured twice and both times within the scheduling noise, so neither a "
    "pass nor a fail; n/a: the client sent no request the scenario throttles. `holdoff check "
    "--list` describes every scenario, docs/check.md its rule. A client that takes a method is "
    "given GET, and POST for `post`; openai-python, anthropic-python and openai-node send POST "
    "in every scenario.")
NOT_RUN = " —: the scenario was not run for this client (it is adaptive: see its column above)."


def load(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def cell(verdict):
    """A verdict as the table shows it: a fail stands out, a scenario not run is a dash."""
    if verdict is None:
        return "—"
    return "**fail**" if verdict == "fail" else verdict


def described(name, rows):
    """What the scenario sent: once when every client was sent the same, else each client's,
    after an adaptive scenario's rule."""
    sent = {row["client"]: row["sent"][name] for row in rows if name in row["sent"]}
    if len(set(sent.values())) == 1 and name not in ADAPTIVE:
        return next(iter(sent.values()))
    each = "; ".join(f"`{client}`: {text}" for client, text in sent.items())
    return f"{ADAPTIVE[name]}. Sent to {each}" if name in ADAPTIVE else each


def notes(path):
    """The `## name` sections of the notes file, by name."""
    sections, name = {}, None
    if not os.path.exists(path):
        return sections
    with open(path, encoding="utf-8") as file:
        for line in file:
            heading = re.match(r"^## (.+?)\s*$", line)
            if heading:
                name = heading.group(1)
                sections[name] = []
            elif name is not None:
                sections[name].append(line)
    return {name: "".join(lines).strip() for name, lines in sections.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", required=True)
    parser.add_argument("--notes", required=True)
    parser.add_argument("--holdoff-version", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--verdicts", required=True)
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("clients", nargs="+")
    args = parser.parse_args()

    rows, order, missing = [], [], []
    for client in args.clients:
        base = os.path.join(args.results, client)
        version = ""
        if os.path.exists(base + ".version"):
            with open(base + ".version", encoding="utf-8") as file:
                version = file.read().strip()
        if not os.path.exists(base + ".json"):
            missing.append(client)
            rows.append({"client": client, "version": version, "verdicts": {}, "sent": {},
                         "summary": None})
            continue
        result = load(base + ".json")
        verdicts, sent = {}, {}
        for scenario in result["scenarios"]:
            verdicts[scenario["scenario"]] = scenario["verdict"]
            sent[scenario["scenario"]] = scenario["sent"]
            if scenario["scenario"] not in order:
                order.append(scenario["scenario"])
        rows.append({"client": client, "version": version, "verdicts": verdicts, "sent": sent,
                     "summary": result["summary"]})
    order = [name for name in SHORT if name in order] + [n for n in order if n not in SHORT]

    # verdicts.json: the clients' names as --clients takes them.
    table = {row["client"]: {"version": row["version"], "verdicts": row["verdicts"]}
             for row in rows}
    with open(args.verdicts, "w", encoding="utf-8") as file:
        json.dump(table, file, indent=2)
        file.write("\n")

    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    fast = args.fast or not any(name.startswith("long-") for name in order)
    long_note = ("without `--long` (no long-90, long-150 or long-hour)" if fast
                 else "with `--long`")
    out = []
    out.append("# How HTTP clients handle Retry-After\n")
    out.append(
        "This page is `holdoff check` run against real HTTP clients and SDKs at pinned "
        "versions, each calling a loopback upstream through holdoff's proxy; regenerate it "
        "with `scripts/client-matrix` (the notes per client are in `tests/matrix/notes.md`, "
        "the verdicts as JSON in `tests/matrix/verdicts.json`).\n")
    out.append(f"Run on {today} with {args.holdoff_version}, {long_note}.\n")
    out.append("## Verdicts\n")
    header = ["client", "version"] + [SHORT.get(name, name) for name in order]
    out.append("| " + " | ".join(header) + " |")
    out.append("| " + " | ".join(["---"] * len(header)) + " |")
    for row in rows:
        cells = [f"`{row['client']}`", row["version"] or "?"]
        if row["summary"] is None:
            cells += (["not run"] + [""] * (len(order) - 1)) if order else []
        else:
            cells += [cell(row["verdicts"].get(name)) for name in order]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("Columns, and what each scenario answers the client's first request with:\n")
    for name in order:
        out.append(f"- **{SHORT.get(name, name)}**: `{name}`, {described(name, rows)}")
    adaptive = any(name in ADAPTIVE for name in order)
    out.append("\n" + LEGEND + (NOT_RUN if adaptive else "") + "\n")
    out.append(
        "On **skew** (`clock-behind`): holdoff reads an HTTP-date against the server's own "
        "clock, the response's `Date`, when there is one ([judge.md](judge.md)), so a server whose "
        "clock is an hour behind still means 3 s. A client that uses its own clock reads the "
        "date as an hour past and retries at once, 3 s before the server permits — which is "
        "what a server with a slow clock sees from nearly every client here. RFC 9110 does not "
        "say which clock to measure the date with, so that warns rather than fails. A client "
        "that does not read HTTP-dates at all (it fails **date** too) gets that finding "
        "instead.\n")
    out.append("## Summary lines\n")
    out.append("The summary line `holdoff check` printed for each client: what its failures "
               "and warnings say about it, with the scenarios that showed it.\n")
    for row in rows:
        if row["summary"] is None:
            out.append(f"- `{row['client']}`: not run")
            continue
        out.append(f"- `{row['client']}`: {row['summary']}")
    out.append("")
    out.append("## What each client gets wrong\n")
    sections = notes(args.notes)
    for row in rows:
        out.append(f"### {row['client']}\n")
        out.append((sections.get(row["client"]) or "No notes yet.") + "\n")
    for name in PAGE_SECTIONS:
        if sections.get(name):
            out.append(f"## {name}\n")
            out.append(sections[name] + "\n")
    with open(args.out, "w", encoding="utf-8") as file:
        file.write("\n".join(out).rstrip() + "\n")
    if missing:
        print("render.py: no results for " + ", ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
