#!/usr/bin/env python3
"""circles.py: no circle between the node's modules, by include or by call.

A module is one node/*/NAME.c (its headers NAME.h and NAME_int.h belong to
it), or one module cut into rooms: NAME.c and every NAME_*.c that includes
the private header NAME_int.h (repl.c and repl_range.c ...: the rooms share
one struct behind NAME.h, their contract to the rest of the node, and call
each other both ways as the functions of one file would).  Between modules
every call goes one way.  Two graphs are drawn and each must be free of cycles:

  include  module A -> module B when A's .c, or a header of A, includes a
           header of B.  A node header without a .c (node.h) is a vertex
           of its own, so a circle through it is seen too.
  call     module A -> module B when A's object file uses a symbol that B's
           object file defines (`nm -u` against `nm -g --defined-only`),
           over the objects of gdnode and of grantd (main.c) in the build
           tree.

The call graph is the one that counts: a header like the old
gitrepl_int.h, declaring the functions of five files to all five, shows
no include circle, but its callers' objects do.

Usage: circles.py SOURCE_DIR BINARY_DIR [NM]
Exit 0 when no circle; 1 naming each circle found; 2 when it cannot look
(no objects: build first).
"""
import fnmatch
import os
import re
import subprocess
import sys

# Modules that may form a circle among themselves, and why.  Nothing else.
ALLOWED = [
    (["cmd", "cmd_*"],
     "cmd.c's table is made of the rows the cmd_*.c slices define, and each "
     "slice answers through cmd.c's helpers: one command table cut in "
     "files (OpenSSH's authmethods[] shape)"),
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


# module -> NAME for the rooms of a module cut into NAME.c + NAME_*.c that
# share NAME_int.h (filled by rooms())
ROOMS = {}


def rooms(cs):
    for name in cs:
        priv = name + "_int.h"
        members = [m for m in cs if (m == name or m.startswith(name + "_"))
                   and priv in includes(cs[m])]
        if len(members) > 1:
            for m in members:
                ROOMS[m] = name


def group_of(module):
    if module in ROOMS:
        return "%s*" % ROOMS[module]
    for i, (pats, _) in enumerate(ALLOWED):
        if any(fnmatch.fnmatchcase(module, p) for p in pats):
            return "{%s}" % ",".join(pats)
    return module


def sources(src):
    """name -> path of node/*/*.c and node/*/*.h"""
    cs, hs = {}, {}
    node = os.path.join(src, "node")
    for d in sorted(os.listdir(node)):
        p = os.path.join(node, d)
        if not os.path.isdir(p):
            continue
        for f in sorted(os.listdir(p)):
            if f.endswith(".c"):
                cs[f[:-2]] = os.path.join(p, f)
            elif f.endswith(".h"):
                hs[f] = os.path.join(p, f)
    return cs, hs


def header_module(h, cs):
    base = h[:-2]
    if base in cs:
        return base
    if base.endswith("_int") and base[:-4] in cs:
        return base[:-4]
    return h  # a header of its own


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as fp:
        return INCLUDE_RE.findall(fp.read())


def include_graph(cs, hs):
    """edges[(a, b)] = 'file includes header'"""
    edges = {}
    files = [(m, p) for m, p in cs.items()]
    files += [(header_module(h, cs), p) for h, p in hs.items()]
    for m, p in files:
        for inc in includes(p):
            inc = os.path.basename(inc)
            if inc not in hs:
                continue  # common/, system, generated
            b = header_module(inc, cs)
            if b != m:
                edges.setdefault((m, b), "%s includes %s" % (
                    os.path.relpath(p, os.path.dirname(os.path.dirname(
                        os.path.dirname(p)))), inc))
    return edges


def objects(src, bindir):
    """module -> object file: gdnode's and the grantd program's own.  An
    object counts only when its source is still there, at the same place
    under node/ (CMake leaves the objects of a moved or deleted file in
    the build tree: they would make circles of code that is gone)."""
    objs = {}
    for root, _, files in os.walk(bindir):
        parts = root.split(os.sep)
        for t in ("gdnode.dir", "grantd.dir"):
            if t in parts:
                sub = parts[parts.index(t) + 1:]
                break
        else:
            continue
        for f in files:
            if f.endswith(".c.o") and os.path.isfile(
                    os.path.join(src, "node", *sub, f[:-2])):
                objs[f[:-4]] = os.path.join(root, f)
    return objs


def nm_lines(nm, args, obj):
    out = subprocess.run([nm] + args + [obj], check=True,
                         capture_output=True, text=True).stdout
    return [l.split() for l in out.splitlines() if l.strip()]


def call_graph(nm, objs):
    defs, uses = {}, {}
    for m, o in objs.items():
        for f in nm_lines(nm, ["-g", "--defined-only"], o):
            if len(f) == 3 and f[1] in "TDBRVWC":
                defs.setdefault(f[2], m)
        uses[m] = [f[-1] for f in nm_lines(nm, ["-u"], o)]
    edges = {}
    for m, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != m:
                edges.setdefault((m, d), []).append(s)
    return {k: "uses " + ", ".join(sorted(v)[:4]) +
            (", ..." if len(v) > 4 else "") for k, v in edges.items()}


def collapse(edges):
    out = {}
    for (a, b), why in edges.items():
        ga, gb = group_of(a), group_of(b)
        if ga != gb:
            out.setdefault((ga, gb), "%s -> %s %s" % (a, b, why))
    return out


def sccs(vertices, adj):
    """Tarjan, iterative"""
    index, low, on, stack, out = {}, {}, set(), [], []
    n = 0
    for v0 in sorted(vertices):
        if v0 in index:
            continue
        work = [(v0, iter(sorted(adj.get(v0, ()))))]
        index[v0] = low[v0] = n
        n += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def one_circle(comp, adj):
    """a shortest circle through comp's first vertex, as a list"""
    start = comp[0]
    members = set(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(adj.get(v, ())):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [start]


def check(kind, edges):
    adj, vertices = {}, set()
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        vertices |= {a, b}
    found = 0
    for comp in sccs(vertices, adj):
        found += 1
        circle = one_circle(comp, adj)
        print("%s circle: %s" % (kind, " -> ".join(circle)))
        for a, b in zip(circle, circle[1:]):
            print("    %s" % edges[(a, b)])
        if len(comp) > len(circle) - 1:
            print("    (all of: %s)" % ", ".join(comp))
    return found


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src, bindir = sys.argv[1], sys.argv[2]
    nm = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else "nm"
    cs, hs = sources(src)
    rooms(cs)
    objs = objects(src, bindir)
    if "main" not in objs or len(objs) < len(cs) // 2:
        print("circles: %d node objects under %s (main.c.o: %s): build "
              "first" % (len(objs), bindir, "main" in objs),
              file=sys.stderr)
        return 2
    n = check("include", collapse(include_graph(cs, hs)))
    n += check("call", collapse(call_graph(nm, objs)))
    print("circles: %d modules (rooms: %s), %d objects, %d circle(s); "
          "allowed: %s" % (
        len(cs), ", ".join(sorted("%s*" % r for r in set(ROOMS.values()))),
        len(objs), n,
        "; ".join("%s (%s)" % (",".join(p), why[:60] + "...")
                  for p, why in ALLOWED)))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
