#!/usr/bin/env python3
"""bench/rebuild_wait.py: the waits of bench/run-rebuild, polled in one
process (a `grantctl status` costs a few ms, a python start far more).

    rebuild_wait.py level GRANTCTL TIMEOUT T0 REPOS ORIGIN_DIR CONF:DIR...
        until every site (CONF its config, DIR its repo_dir) reports the
        digest of the first, none is syncing, none has git.pending_refs,
        and every repository named in the file REPOS holds at DIR exactly
        the refs it holds at ORIGIN_DIR (read from the files: loose refs
        and packed-refs); prints the seconds since T0 (an epoch time) at
        which that was first seen, or "timeout" (exit 3).
    rebuild_wait.py push GIT_DIR DEST REF TIP TIMEOUT PEER_GIT_DIR...
        `git push` of TIP to REF of DEST, then every 1 ms reads REF at
        each PEER_GIT_DIR until all name TIP; prints "push_ms repl_ms
        peer_ms..." (from the push's return), -1 for a peer not there
        within TIMEOUT (exit 3).
    rebuild_wait.py timeline REPO ORIGIN_LOG SITE LOG...
        from the nodes' logs (millisecond stamps, one clock): the last
        "push recorded repo=REPO" at the origin, then at each SITE its
        "pack fetched" (with the node's own ms: pack asked to indexed)
        and "ref moved" after it, as offsets.
"""
import datetime
import re
import json
import os
import subprocess
import sys
import time


def refs_of(gitdir):
    """Every ref of the repository: loose ones over packed-refs."""
    out = {}
    try:
        with open(os.path.join(gitdir, "packed-refs"), "rb") as f:
            for line in f:
                p = line.split()
                if len(p) == 2 and p[1].startswith(b"refs/"):
                    out[p[1].decode()] = p[0].decode()
    except FileNotFoundError:
        pass
    top = os.path.join(gitdir, "refs")
    for root, _, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as f:
                    v = f.read().strip()
            except OSError:
                continue
            if len(v) == 40 and not v.startswith(b"ref:"):
                out[os.path.relpath(path, gitdir)] = v.decode()
    return out


def read_ref(gitdir, ref):
    try:
        with open(os.path.join(gitdir, ref), "rb") as f:
            v = f.read().strip()
        if v and not v.startswith(b"ref:"):
            return v.decode()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        pass
    return refs_of(gitdir).get(ref)


def status(grantctl, conf):
    r = subprocess.run([grantctl, "--config", conf, "status", "--json"],
                       capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def nodes_level(grantctl, confs):
    digest = None
    for conf in confs:
        j = status(grantctl, conf)
        if (j is None or j.get("syncing") or
                j.get("git", {}).get("pending_refs", 1) != 0):
            return False
        if digest is None:
            digest = j["digest"]
        elif j["digest"] != digest:
            return False
    return True


def level(a):
    grantctl, timeout, t0, repos_file, origin = a[0], float(a[1]), float(a[2]), a[3], a[4]
    sites = [s.split(":", 1) for s in a[5:]]
    with open(repos_file) as f:
        repos = [l.strip() for l in f if l.strip()]
    want = {r: refs_of(os.path.join(origin, r + ".git")) for r in repos}
    deadline = time.time() + timeout
    while time.time() < deadline:
        if nodes_level(grantctl, [c for c, _ in sites]):
            bad = [(d, r) for _, d in sites for r in repos
                   if refs_of(os.path.join(d, r + ".git")) != want[r]]
            if not bad:
                print("%.3f" % (time.time() - t0))
                return 0
        time.sleep(0.05)
    print("timeout")
    return 3


def push(a):
    work, dest, ref, tip, timeout = a[:5]
    peers = a[5:]
    t_start = time.monotonic()
    r = subprocess.run(["git", "--git-dir=" + work, "push", "-q", dest,
                        "%s:%s" % (tip, ref)], stdin=subprocess.DEVNULL)
    t0 = time.monotonic()
    if r.returncode != 0:
        print("git push failed", file=sys.stderr)
        return 1
    done = {}
    while len(done) < len(peers) and time.monotonic() - t0 < float(timeout):
        now = time.monotonic()
        for p in peers:
            if p not in done and read_ref(p, ref) == tip:
                done[p] = now
        if len(done) < len(peers):
            time.sleep(0.001)
    each = ["%.1f" % ((done[p] - t0) * 1000) if p in done else "-1"
            for p in peers]
    ok = len(done) == len(peers)
    repl = "%.1f" % ((max(done.values()) - t0) * 1000) if ok else "-1"
    print("%.1f %s %s" % ((t0 - t_start) * 1000, repl, " ".join(each)))
    return 0 if ok else 3


def stamp(line):
    try:
        t = line.split(" ", 1)[0].rstrip("Z")
        return datetime.datetime.fromisoformat(t).replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return None


def timeline(a):
    repo, olog = a[0], a[1]
    t0 = None
    with open(olog, errors="replace") as f:
        for line in f:
            if "push recorded repo=%s " % repo in line and stamp(line):
                t0 = stamp(line)
    if t0 is None:
        print("no push recorded in the origin's log")
        return 0
    out = []
    for site, log in zip(a[2::2], a[3::2]):
        fetched = moved = None
        with open(log, errors="replace") as f:
            for line in f:
                t = stamp(line)
                if t is None or t < t0 - 0.001:
                    continue
                m = re.search(r"pack fetched repo=%s .*bytes=(\d+) ms=(\d+)"
                              % re.escape(repo), line)
                if m and fetched is None:
                    fetched = (t, m.group(1), m.group(2))
                if "ref moved repo=%s " % repo in line and moved is None:
                    moved = t
        desc = site
        if fetched:
            desc += " pack fetched +%.0f ms (%s bytes, its fetch %s ms)" % (
                (fetched[0] - t0) * 1000, fetched[1], fetched[2])
        desc += " ref moved +%s ms" % (
            "%.0f" % ((moved - t0) * 1000) if moved else "?")
        out.append(desc)
    print("push recorded at the origin, then " + "; ".join(out))
    return 0


def main():
    a = sys.argv[1:]
    if a[:1] == ["level"] and len(a) >= 7:
        return level(a[1:])
    if a[:1] == ["push"] and len(a) >= 7:
        return push(a[1:])
    if a[:1] == ["timeline"] and len(a) >= 5 and len(a) % 2 == 1:
        return timeline(a[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
