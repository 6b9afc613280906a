#!/usr/bin/env python3
"""bench/rebuild_gen.py: the `git fast-import` streams of bench/run-rebuild.

    rebuild_gen.py base SCALE              the base history (refs/heads/main)
    rebuild_gen.py ext SCALE SEED N FROM REF [COUNT]
                                           N commits on top of FROM (a tip of
                                           the base made with the same SCALE)
                                           on REF, editing the base's files;
                                           COUNT such on REF1..REFCOUNT
    rebuild_gen.py small SEED              a small repository of its own

Everything is seeded: the same arguments give the same objects, so the
bench's fork and push commits edit the base's files exactly as they are.

The base, at SCALE 1: 20,000 files in a tree four levels deep (12 top
directories, 8 below each, 6 below those, the files in the last), most of
them text (a median of 60 lines, log-normal, a few thousand lines at the
top), one in 200 binary (10-300 KB of random bytes, rarely changed), in an
initial commit; then 150,000 commits, each touching 1-6 files of one
directory (a few of them a second directory), now and then adding or
deleting one; the directories' activity is skewed (a few are hot).  Each
changed file costs a blob, each directory on its path a tree: about 7
objects a commit, ~1.1 million in all (275,506 and 55 MB packed at SCALE
0.25).  Every count is multiplied by SCALE.

fast-import deltifies a blob only against the blob written just before
it; so that the pack holds deltas as a repacked repository does (without a
repack of a million objects), every version of one file is written in a
row (`blob` with a mark), and the commits come after, naming the marks.
Progress and the plan's figures go to stderr.
"""
import itertools
import random
import sys

WORDS = ("static int struct return unsigned long void const char if else "
         "for while switch case break goto out err ret dev data len size "
         "buf ptr next prev list head lock unlock spin mutex irq page "
         "addr phys virt map unmap alloc free init exit probe remove "
         "read write open close flags mode state count index offset "
         "0 1 2 4 8 16 32 0xff NULL -EINVAL -ENOMEM = == != += -> . , ; "
         "( ) { } [ ] * & | ^ ~ << >> /* */ // u8 u16 u32 u64 bool true "
         "false sizeof kfree kmalloc GFP_KERNEL pr_err dev_err").split()
TOPS = ("arch drivers fs net kernel mm include sound tools lib crypto "
        "security").split()


def line(rnd):
    n = rnd.randint(1, 12)
    return ("\t" * rnd.randint(0, 3) +
            " ".join(rnd.choice(WORDS) for _ in range(n)))


class Shape:
    """The parameters of one history."""

    def __init__(self, files, commits, tops, mids, leaves, seed):
        self.files, self.commits = files, commits
        self.tops, self.mids, self.leaves = tops, mids, leaves
        self.seed = seed


def dirs_of(shape):
    out = []
    for a in range(shape.tops):
        for b in range(shape.mids):
            for c in range(shape.leaves):
                out.append("%s/sub%02d/part%02d" % (TOPS[a % len(TOPS)] +
                           ("" if a < len(TOPS) else str(a)), b, c))
    return out


class Plan:
    """Which file changes in which commit; no contents (those come from
    a random stream of each file's own, version after version)."""

    def __init__(self, shape):
        rnd = random.Random("plan:%s" % shape.seed)
        self.shape = shape
        self.dirs = dirs_of(shape)
        # skewed activity: a directory's weight is 1/rank
        order = list(range(len(self.dirs)))
        rnd.shuffle(order)
        weight = [0.0] * len(self.dirs)
        for rank, d in enumerate(order):
            weight[d] = 1.0 / (rank + 1)
        self.cum = list(itertools.accumulate(weight))
        self.in_dir = [[] for _ in self.dirs]  # live paths per directory
        self.versions = {}  # path -> number of versions written
        self.binary = set()
        self.serial = 0
        self.initial = []
        for _ in range(shape.files):
            self.initial.append(self.new_path(rnd, rnd.randrange(len(self.dirs))))
        self.commits = []  # per commit: [(path, version) or (path, -1)]
        self.extend(rnd, shape.commits)

    def new_path(self, rnd, d):
        self.serial += 1
        binary = rnd.random() < 0.005
        p = "%s/file%05d.%s" % (self.dirs[d], self.serial,
                                "bin" if binary else rnd.choice("chS"))
        if binary:
            self.binary.add(p)
        self.in_dir[d].append(p)
        self.versions[p] = 1
        return p

    def pick_dir(self, rnd):
        while True:
            d = rnd.choices(range(len(self.dirs)), cum_weights=self.cum)[0]
            if self.in_dir[d]:
                return d

    def extend(self, rnd, n):
        """n more commits on the live files; returns them."""
        start = len(self.commits)
        for _ in range(n):
            ch = {}
            for _ in range(1 + (rnd.random() < 0.08)):
                d = self.pick_dir(rnd)
                live = self.in_dir[d]
                k = min(len(live), 1 + int(rnd.expovariate(0.8)), 6)
                for p in rnd.sample(live, k):
                    if p in ch or (p in self.binary and rnd.random() < 0.9):
                        continue
                    ch[p] = self.versions[p]
                    self.versions[p] += 1
                r = rnd.random()
                if r < 0.05:
                    p = self.new_path(rnd, d)
                    ch[p] = 0
                elif r < 0.06 and len(live) > 1:
                    p = rnd.choice(live)
                    if p not in ch:
                        live.remove(p)
                        ch[p] = -1
            self.commits.append(sorted(ch.items()))
        return self.commits[start:]


def contents(shape, path):
    """Every version of path, one after the other (a generator)."""
    rnd = random.Random("file:%s:%s" % (shape.seed, path))
    if path.endswith(".bin"):
        while True:
            yield rnd.randbytes(rnd.randint(10 * 1024, 300 * 1024))
    n = max(1, min(6000, int(rnd.lognormvariate(4.1, 1.1))))
    lines = [line(rnd) for _ in range(n)]
    while True:
        yield ("\n".join(lines) + "\n").encode()
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(lines))
            what = rnd.random()
            if what < 0.5:
                lines[i] = line(rnd)
            elif what < 0.85:
                lines[i:i] = [line(rnd) for _ in range(rnd.randint(1, 8))]
            elif len(lines) > 2:
                # never every line: a file of three lines lost them all at
                # scale 1, and the next edit had none to pick from
                k = min(rnd.randint(1, 3), len(lines) - 1)
                del lines[i:i + k]


class Out:
    def __init__(self):
        self.w = sys.stdout.buffer
        self.mark = 0

    def data(self, b):
        self.w.write(b"data %d\n" % len(b))
        self.w.write(b)
        self.w.write(b"\n")

    def blob(self, b):
        self.mark += 1
        self.w.write(b"blob\nmark :%d\n" % self.mark)
        self.data(b)
        return self.mark


def emit_blobs(out, shape, wanted, skip=None):
    """For each path of wanted (path -> set of versions), every version in
    a row; versions below skip[path] are made but not written (they are in
    the base already).  Returns {(path, version): mark}."""
    marks = {}
    for p in sorted(wanted):
        want = wanted[p]
        top = max(want)
        for v, b in enumerate(contents(shape, p)):
            if v in want:
                marks[(p, v)] = out.blob(b)
            if v >= top:
                break
    return marks


def emit_commits(out, commits, marks, ref, t0, rnd, first_from=None,
                 initial=None):
    for i, ch in enumerate(commits):
        out.w.write(b"commit %s\n" % ref.encode())
        t = t0 + i * 97
        who = rnd.randrange(400)
        out.w.write(b"author dev%03d <dev%03d@bench.invalid> %d +0000\n" %
                    (who, who, t - rnd.randrange(86400)))
        out.w.write(b"committer bench <bench@grantd.invalid> %d +0000\n" % t)
        body = "\n".join(line(rnd) for _ in range(rnd.choice((0, 0, 2, 5, 12))))
        out.data(("%s: %s\n\n%s\n" % (ch[0][0].rsplit("/", 1)[0] if ch else "tree",
                                      line(rnd), body)).encode())
        if i == 0 and first_from:
            out.w.write(b"from %s\n" % first_from.encode())
        if i == 0 and initial is not None:
            for p in initial:
                out.w.write(b"M 100644 :%d %s\n" % (marks[(p, 0)], p.encode()))
        for p, v in ch:
            if v < 0:
                out.w.write(b"D %s\n" % p.encode())
            else:
                out.w.write(b"M 100644 :%d %s\n" % (marks[(p, v)], p.encode()))


def base_shape(scale):
    return Shape(files=max(20, round(20000 * scale)),
                 commits=max(10, round(150000 * scale)),
                 tops=12, mids=8, leaves=6, seed="base")


def history(shape, ref):
    out = Out()
    plan = Plan(shape)
    wanted = {}
    for p in plan.initial:
        wanted.setdefault(p, set()).add(0)
    for ch in plan.commits:
        for p, v in ch:
            if v >= 0:
                wanted.setdefault(p, set()).add(v)
    nblobs = sum(len(v) for v in wanted.values())
    print("plan: %d files at first, %d commits, %d blobs" %
          (len(plan.initial), len(plan.commits), nblobs), file=sys.stderr)
    marks = emit_blobs(out, shape, wanted)
    rnd = random.Random("commits:%s" % shape.seed)
    emit_commits(out, [[]] + plan.commits, marks, ref, 1100000000, rnd,
                 initial=plan.initial)
    out.w.write(b"done\n")


def ext(scale, seed, n, frm, ref, count):
    """count histories of n commits, each on FROM: ref, or ref1..refCOUNT
    when count > 1 (each goes on from the files' versions the one before
    left: one plan, one pass over the contents)."""
    shape = base_shape(scale)
    plan = Plan(shape)
    base_commits = len(plan.commits)
    rnd = random.Random("ext:%s" % seed)
    news = [plan.extend(rnd, n) for _ in range(count)]
    wanted = {}
    for new in news:
        for ch in new:
            for p, v in ch:
                if v >= 0:
                    wanted.setdefault(p, set()).add(v)
    out = Out()
    marks = emit_blobs(out, shape, wanted)
    rnd = random.Random("commits:ext:%s" % seed)
    for k, new in enumerate(news):
        emit_commits(out, new, marks, ref if count == 1 else "%s%d" % (ref, k + 1),
                     1100000000 + base_commits * 97 + 1000, rnd, first_from=frm)
    out.w.write(b"done\n")


def main():
    a = sys.argv[1:]
    if a[:1] == ["base"] and len(a) == 2:
        history(base_shape(float(a[1])), "refs/heads/main")
    elif a[:1] == ["ext"] and len(a) in (6, 7):
        ext(float(a[1]), a[2], int(a[3]), a[4], a[5],
            int(a[6]) if len(a) == 7 else 1)
    elif a[:1] == ["small"] and len(a) == 2:
        rnd = random.Random("small:%s" % a[1])
        history(Shape(files=rnd.randint(3, 60), commits=rnd.randint(1, 40),
                      tops=2, mids=2, leaves=2, seed="small:%s" % a[1]),
                "refs/heads/main")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
