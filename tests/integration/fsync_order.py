#!/usr/bin/env python3
"""fsync_order.py: judge, from an strace log, whether a reply left before the
fsync that covers it (test_durability.sh; SPEC 2.1, 2.2).

kill -9 keeps the page cache, so no crash test sees a missing fsync; the
order of the system calls does.  The log comes from

  strace -f -qq -yy -s 256 -xx -e trace=write,pwrite64,writev,pwritev,\
fsync,fdatasync,sendto,sendmsg,recvfrom,recvmsg,openat,rename,exit_group

(one line per call, "PID CALL(ARGS) = RET", split into "<unfinished ...>"
and "<... CALL resumed>" when another thread's call comes in between; -y
names the file or socket (its path) behind every descriptor).  strace stops a thread
at each call's entry and exit, so the order of the lines is the order of
the events: a call printed whole had nothing traced in between.

  fsync_order.py replies LOG MIN
      the node: every answer on the user or admin socket that reports
      success (status 0) to a request that wrote the WAL (a NNNNNN.log file
      under data/) leaves only after an fsync/fdatasync of that WAL which
      began after the write had finished; at least MIN such answers seen.
  fsync_order.py peer LOG
      the node applying a peer's batch: every write to its WAL is followed
      by an fsync/fdatasync of that WAL that began after the write (exit 1
      while one is still uncovered: poll it); at least one WAL write seen.
  fsync_order.py voter LOG SYNC_PORT USER
      a voter of the token quorum (token_quorum = majority): after the
      write of a promise of USER (a CF_PROMISES record in the WAL), no
      send on a connection of its sync ROUTER (local port SYNC_PORT: the
      vote answers) begins before an fsync/fdatasync of that WAL which
      began after the write has finished.  Exit 2 (poll it) until a send
      on such a connection followed a promise.
  fsync_order.py origin LOG USER
      the origin of a vote: the write of USER's mark (CF_MARKS) after the
      write of its own promise of USER begins only after an fsync of the
      WAL that began after the promise's write finished (its own promise
      counts once durable).  Exit 2 until a mark followed a promise.
  fsync_order.py spool LOG
      grant-hook with the node down: the spool file is written, fsynced,
      renamed to its final name, then the spool directory is fsynced, all
      before grant-hook exits 0.

Prints what it judged; exits 0 when the order holds, 1 when it does not
(naming the call), 2 when the log shows nothing to judge.
"""
import os
import re
import sys

LINE = re.compile(r'^(\d+)\s+(.*)$')
RESUMED = re.compile(r'^<\.\.\. (\w+) resumed>(.*)$')
CALL = re.compile(r'^(\w+)\((.*)$')
FD = re.compile(r'^(-?\d+)<(.*?)>(?:,|\)|\s|$)')
RET = re.compile(r'\)\s+=\s+(-?\d+)(?:<[^>]*>)?(?:\s.*)?$')
WAL = re.compile(r'/data/\d+\.log$')
CTL = re.compile(r'^UNIX-STREAM:\[(\d+)(?:->\d+)?,"(.*/(?:user|admin)\.sock)"\]$')


class Call:
    """One system call: its name, first-argument descriptor and path,
    its arguments' text, return value, and the positions (line numbers)
    of its entry and exit."""

    def __init__(self, tid, name, args, entry):
        self.tid, self.name, self.args = tid, name, args
        self.entry, self.exit, self.ret = entry, None, None
        m = FD.match(args)
        self.fd, self.path = (int(m.group(1)), m.group(2)) if m else (None, '')
        # -xx spells every byte of the name as \xHH too
        self.path = re.sub(r'\\x([0-9a-f]{2})',
                           lambda h: chr(int(h.group(1), 16)), self.path)

    def done(self, rest, pos):
        self.args += rest
        self.exit = pos
        m = RET.search(self.args)
        self.ret = int(m.group(1)) if m else None


def parse(path):
    calls, pending = [], {}
    with open(path, errors='replace') as f:
        for pos, line in enumerate(f):
            line = line.rstrip('\n')
            m = LINE.match(line)
            if not m:
                continue
            tid, body = m.group(1), m.group(2)
            r = RESUMED.match(body)
            if r:
                c = pending.pop(tid, None)
                if c and c.name == r.group(1):
                    c.done(r.group(2), pos)
                continue
            m = CALL.match(body)
            if not m:
                continue  # signals, exits
            name, args = m.group(1), m.group(2)
            if args.endswith('<unfinished ...>'):
                c = Call(tid, name, args[:-len('<unfinished ...>')], pos)
                pending[tid] = c
                calls.append(c)
                continue
            c = Call(tid, name, args, pos)
            c.args = ''
            c.done(args, pos)
            calls.append(c)
    return calls


WRITES = ('write', 'pwrite64', 'writev', 'pwritev', 'pwritev2')
SYNCS = ('fsync', 'fdatasync')


def wal_writes(calls):
    return [c for c in calls if c.name in WRITES and WAL.search(c.path)
            and c.exit is not None and c.ret is not None and c.ret > 0]


def covering_sync(calls, w, before=None):
    """The first fsync/fdatasync of w's file that began after w finished
    and succeeded (finished before position `before`, when given)."""
    for c in calls:
        if (c.name in SYNCS and c.path == w.path and c.entry > w.exit
                and c.exit is not None and c.ret == 0
                and (before is None or c.exit < before)):
            return c
    return None


def unhex(args):
    """The bytes of the buffer argument (strace -xx), after the fd."""
    fd = FD.match(args)
    if fd:
        args = args[fd.end():]
    m = re.search(r'"((?:\\x[0-9a-f]{2})*)"', args)
    if not m:
        return b''
    return bytes(int(h, 16) for h in re.findall(r'\\x([0-9a-f]{2})', m.group(1)))


def reply_status(data):
    """The status of the first grantd.v1.Reply in a send on the user or
    admin socket (node/requests/usersock.h: a 4-byte big-endian length,
    then the Reply, whose field 1 is the status), or None."""
    if len(data) < 6 or data[4] != 0x08:
        return None
    return data[5]


def judge_replies(calls, want):
    starts, sends = {}, []
    for i, c in enumerate(calls):
        m = CTL.match(c.path)
        if not m:
            continue
        conn = m.group(1)
        starts.setdefault(conn, c.entry)
        if c.name in ('sendto', 'sendmsg'):
            sends.append((conn, c))
    writes = wal_writes(calls)
    acked, bad = set(), []
    for conn, s in sends:
        st = reply_status(unhex(s.args))
        if st != 0:
            continue
        mine = [w for w in writes if starts[conn] < w.exit < s.entry]
        if not mine:
            continue
        acked.add(conn)
        last = max(mine, key=lambda w: w.exit)
        if not covering_sync(calls, last, before=s.entry):
            bad.append('answer on %s (line %d) left before the WAL write to '
                       '%s (line %d) was fsynced' %
                       (s.path.split('"')[1], s.entry + 1, last.path,
                        last.exit + 1))
    print('answers with status 0 to requests that wrote the WAL: %d '
          '(want at least %d); WAL writes %d; fsyncs %d' %
          (len(acked), want, len(writes),
           sum(1 for c in calls if c.name in SYNCS and WAL.search(c.path))))
    for b in bad:
        print('FAIL ' + b)
    if bad:
        return 1
    return 0 if len(acked) >= want else 2


def judge_peer(calls):
    writes = wal_writes(calls)
    bad = [w for w in writes if not covering_sync(calls, w)]
    print('WAL writes %d, not yet followed by an fsync of the WAL %d' %
          (len(writes), len(bad)))
    for w in bad[:5]:
        print('FAIL WAL write to %s (line %d) not fsynced' % (w.path, w.exit + 1))
    if not writes:
        return 2
    return 1 if bad else 0


def judge_spool(calls):
    tmp = [c for c in calls if c.name in WRITES and
           re.search(r'/grantd-spool/[^/]+\.refs\.tmp$', c.path) and
           c.ret is not None and c.ret > 0]
    if not tmp:
        print('no write to a grantd-spool/*.refs.tmp file')
        return 2
    last = max(tmp, key=lambda w: w.exit)
    sync = covering_sync(calls, last)
    ren = [c for c in calls if c.name == 'rename' and c.ret == 0 and
           '.refs.tmp"' in re.sub(r'\\x([0-9a-f]{2})',
                                  lambda h: chr(int(h.group(1), 16)), c.args)]
    dsync = [c for c in calls if c.name in SYNCS and
             re.search(r'/grantd-spool$', c.path) and c.ret == 0]
    ex = [c for c in calls if c.name == 'exit_group']
    print('spool writes %d, file fsync %s, rename %s, directory fsync %s, '
          'exit %s' % (len(tmp), 'yes' if sync else 'no',
                       'yes' if ren else 'no', 'yes' if dsync else 'no',
                       ex[-1].args.split(')')[0] if ex else '?'))
    fails = []
    if not sync:
        fails.append('the spool file was not fsynced after its last write')
    if not ren:
        fails.append('the spool file never got its final name')
    if sync and ren and not ren[-1].entry > sync.exit:
        fails.append('the spool file was renamed before its fsync finished')
    if ren and not [d for d in dsync if d.entry > ren[-1].exit]:
        fails.append('the spool directory was not fsynced after the rename')
    if not ex or not ex[-1].args.startswith('0'):
        fails.append('grant-hook did not exit 0')
    elif fails == [] and not all(c.exit is not None and c.exit < ex[-1].entry
                                 for c in [sync] + dsync):
        fails.append('grant-hook exited before its fsyncs finished')
    for f in fails:
        print('FAIL ' + f)
    return 1 if fails else 0


def cf_ids():
    """{name: column family id}: the rows of GD_RECORD_KINDS (node/
    records.h), whose order is the families' creation order, so their
    RocksDB ids."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                       '..', 'node', 'state', 'records.h')
    text = open(os.environ.get('GD_SRC', '') + '/node/state/records.h'
                if os.environ.get('GD_SRC') else src).read()
    body = text[text.index('#define GD_RECORD_KINDS'):]
    body = body[:body.index('clang-format on')]
    return {n: i for i, n in enumerate(re.findall(r'X\((\w+),', body))}


def wal_records(calls, cf, user):
    """WAL writes holding a put of family cf whose key starts with user \\0
    (RocksDB's WAL: kTypeColumnFamilyValue 0x05, the family's id, the
    key's length, the key; key user \\0 enroll_id(8))."""
    key = user.encode() + b'\x00'
    pat = bytes([0x05, cf, len(key) + 8]) + key
    return [w for w in wal_writes(calls) if pat in unhex(w.args)]


def judge_voter(calls, port, user):
    ids = cf_ids()
    promises = wal_records(calls, ids['PROMISES'], user)
    sync = re.compile(r'^TCP:\[[0-9.]+:%d->' % port)
    sends = [c for c in calls if c.name in ('sendto', 'sendmsg', 'write',
                                            'writev')
             and sync.match(c.path) and c.ret is not None and c.ret > 0]
    bad, judged = [], 0
    for p in promises:
        after = [s for s in sends if s.entry > p.exit]
        if not after:
            continue
        judged += 1
        first = min(after, key=lambda s: s.entry)
        if not covering_sync(calls, p, before=first.entry):
            bad.append('send on %s (line %d) before the promise written at '
                       'line %d was fsynced' % (first.path, first.entry + 1,
                                                p.exit + 1))
    print('promises of %s written %d, followed by a send on the sync '
          'socket %d; fsyncs %d' % (user, len(promises), judged,
                                    sum(1 for c in calls if c.name in SYNCS
                                        and WAL.search(c.path))))
    for b in bad:
        print('FAIL ' + b)
    if bad:
        return 1
    return 0 if judged else 2


def judge_origin(calls, user):
    ids = cf_ids()
    promises = wal_records(calls, ids['PROMISES'], user)
    marks = wal_records(calls, ids['MARKS'], user)
    bad, judged = [], 0
    for p in promises:
        after = [m for m in marks if m.entry > p.exit]
        if not after:
            continue
        judged += 1
        m = min(after, key=lambda m: m.entry)
        if not covering_sync(calls, p, before=m.entry):
            bad.append('mark written (line %d) before its own promise '
                       '(line %d) was fsynced' % (m.entry + 1, p.exit + 1))
    print('promises of %s written %d, followed by its mark %d' %
          (user, len(promises), judged))
    for b in bad:
        print('FAIL ' + b)
    if bad:
        return 1
    return 0 if judged else 2


def main(argv):
    if len(argv) >= 5 and argv[1] == 'voter':
        return judge_voter(parse(argv[2]), int(argv[3]), argv[4])
    if len(argv) >= 4 and argv[1] == 'origin':
        return judge_origin(parse(argv[2]), argv[3])
    if len(argv) < 3 or argv[1] not in ('replies', 'peer', 'spool'):
        print(__doc__.strip().split('\n\n')[0], file=sys.stderr)
        print('usage: fsync_order.py replies LOG MIN | peer LOG | spool LOG',
              file=sys.stderr)
        return 2
    calls = parse(argv[2])
    if argv[1] == 'replies':
        return judge_replies(calls, int(argv[3]) if len(argv) > 3 else 1)
    if argv[1] == 'peer':
        return judge_peer(calls)
    return judge_spool(calls)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
