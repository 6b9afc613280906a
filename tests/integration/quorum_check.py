#!/usr/bin/env python3
"""quorum_check.py: count the tokens accepted twice (issue 12; SPEC 9).

Reads the JSON lines tests/tools/offer.c printed (one per answer: round,
site, result, status, ms, text), where every round offered one fresh token
at every site at once, and, with --faults, the harness's line per round
(round, fault, states of the sites; quorum_lib.sh q_offer).  A token is
accepted twice when two answers of its round, at any sites, say accepted.

Prints the tokens offered, those accepted at least once and twice or more,
the same by fault, the refusals by text, and the latency of the answers;
then, with --mode local, "replay window: X of Y tokens accepted twice"
(the measured replay window of asynchronous token marks), and with
--mode majority, the rounds of any token accepted twice.  The last line is
always "doubles=X tokens=Y" (for scripts).

With --min-accepted N, fewer than N tokens accepted at some site is a
failure too: a cluster that refuses everything accepts nothing twice, and
must not pass for it (the liveness floor).

Exit status: 0, or 1 with --mode majority when any token was accepted
twice, or when fewer than --min-accepted tokens were accepted at all; 2 on
bad input (a line that is not an offer's).
"""
import argparse
import collections
import json
import sys


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def load(path, need):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                j = json.loads(line)
            except ValueError:
                raise ValueError("%s:%d: not JSON" % (path, n))
            if not isinstance(j, dict) or any(k not in j for k in need):
                raise ValueError("%s:%d: want the keys %s"
                                 % (path, n, ", ".join(need)))
            rows.append(j)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("local", "majority"), default="local")
    ap.add_argument("--faults", help="the harness's fault lines (JSON)")
    ap.add_argument("--min-accepted", type=int, default=0,
                    help="fewer tokens accepted at some site fail")
    ap.add_argument("results", help="offer's output (JSON lines)")
    a = ap.parse_args()

    try:
        offers = load(a.results, ("round", "site", "result"))
        faults = load(a.faults, ("round", "fault")) if a.faults else []
    except (OSError, ValueError) as e:
        print("quorum_check: %s" % e, file=sys.stderr)
        return 2
    fault_of = {f["round"]: f["fault"] for f in faults}
    offered_at = {f["round"]: f.get("offered") for f in faults}

    accepted = collections.defaultdict(list)   # round -> sites
    answers = collections.Counter()
    refusals = collections.Counter()
    ms = collections.defaultdict(list)
    rounds = set(fault_of)
    for o in offers:
        r = o["round"]
        rounds.add(r)
        answers[o["result"]] += 1
        if o["result"] == "accepted":
            accepted[r].append(o["site"])
        elif o["result"] in ("refused", "error", "bad-input"):
            refusals[o.get("text") or "(no text)"] += 1
        if o["result"] not in ("unreachable", "timeout") and "ms" in o:
            ms[o["result"]].append(float(o["ms"]))
    skipped = sum(max(0, (offered_at.get(r) or 0) -
                      sum(1 for o in offers if o["round"] == r))
                  for r in rounds)

    tokens = len(rounds)
    once = sum(1 for r in rounds if accepted.get(r))
    doubles = sorted(r for r in rounds if len(accepted.get(r, ())) >= 2)
    none = tokens - once
    print("tokens offered: %d (%d answers: %s)" % (
        tokens, sum(answers.values()),
        ", ".join("%s %d" % kv for kv in sorted(answers.items()))))
    if skipped:
        print("offers skipped (a frozen site, which would answer only "
              "after the client gave up): %d" % skipped)
    print("accepted at least once: %d; at no site: %d; accepted twice or "
          "more: %d" % (once, none, len(doubles)))
    if fault_of:
        by = collections.defaultdict(lambda: [0, 0, 0])
        for r in rounds:
            k = fault_of.get(r, "?").split(" ")[0]
            by[k][0] += 1
            by[k][1] += len(accepted.get(r, ())) >= 2
            by[k][2] += not accepted.get(r)
        for k in sorted(by):
            t, d, z = by[k]
            print("  fault %-9s %4d tokens, %4d accepted twice, %4d at "
                  "no site" % (k, t, d, z))
    for text, n in refusals.most_common(8):
        print("  refused %4dx: %s" % (n, text[:120]))
    for kind in sorted(ms):
        v = ms[kind]
        print("  answer time (%s, %d): p50 %.1f ms, p99 %.1f ms, max %.1f ms"
              % (kind, len(v), pct(v, 50), pct(v, 99), max(v)))
    rc = 0
    if a.mode == "local":
        print("replay window: %d of %d tokens accepted twice"
              % (len(doubles), tokens))
    elif doubles:
        print("FAIL: token_quorum = majority, yet %d of %d tokens were "
              "accepted twice: rounds %s" % (
                  len(doubles), tokens,
                  ", ".join("%d (%s%s)" % (
                      r, "+".join(accepted[r]),
                      ", " + fault_of[r] if r in fault_of else "")
                      for r in doubles[:20])))
        rc = 1
    else:
        print("majority: no token accepted twice (%d tokens)" % tokens)
    if once < a.min_accepted:
        print("FAIL: only %d of %d tokens were accepted at any site, want "
              "at least %d (a cluster that refuses everything accepts "
              "nothing twice)" % (once, tokens, a.min_accepted))
        rc = 1
    print("doubles=%d tokens=%d" % (len(doubles), tokens))
    return rc


if __name__ == "__main__":
    sys.exit(main())
