#!/usr/bin/env python3
"""tests/man/check.py SRC BIN CMAKE: the man pages say what the programs do.

One source of truth with --help where that is practical: the programs'
--help texts are the reference, and the pages (man/man1, man/man8, man/man5) must
agree with them:
- every option a program's --help names is in its page (an `Fl` macro),
  and every option the page names is in --help;
- every grantctl command in `grantctl --help` has an `.It Ic` entry in
  grantctl(8), and the other way round;
- every 2fa command in grant-shell's `2fa help` has one in grant-shell(8),
  and the other way round;
- every key common/config.c reads is documented in grantd.conf(5) (an
  `.It Cm KEY No =` entry), and the page documents no other key.
- `cmake --install` (CMAKE, of the build tree above BIN, into a temporary
  prefix) puts every page under share/man/man1, man5 and man8.
Prints what differs and exits 1; exits 0 when everything agrees.
(mandoc -T lint is the test man/lint.)
"""
import os
import re
import subprocess
import sys
import tempfile

SRC, BIN, CMAKE = sys.argv[1], sys.argv[2], sys.argv[3]
PROGRAMS = ["grantd", "grantctl", "grant-shell", "grant-keys", "grant-hook",
            "grant-log"]
# the section of each program's page: 8 but for the users' programs
SECTION = {"grant-log": 1}
failures = []


def page(name, section=8):
    with open(os.path.join(SRC, "man", "man%d" % section,
                           "%s.%d" % (name, section))) as f:
        return f.read()


def run(argv, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(argv, capture_output=True, text=True, env=e,
                          check=False).stdout


def compare(what, ref_name, ref, page_name, got):
    for x in sorted(ref - got):
        failures.append("%s: %s is in %s but not in %s"
                        % (what, x, ref_name, page_name))
    for x in sorted(got - ref):
        failures.append("%s: %s is in %s but not in %s"
                        % (what, x, page_name, ref_name))
    print("%s: %d in %s, %d in %s" % (what, len(ref), ref_name, len(got),
                                      page_name))


def help_options(text):
    # -t, --config, --secret-file: a dash after a space, '[', '(', '|'
    # or a line start, then a letter ("opt-in", "grant-keys-list" and
    # "(- : stdin)" are no options)
    return set(m.group(2) for m in
               re.finditer(r"(^|[\s\[(|,])(--?[a-z][a-z0-9-]*)", text, re.M))


def page_options(text):
    # .Fl -config / Op Fl t / Fl -totp | Fl -hotp; a bare Fl is "-"
    opts = set()
    for line in text.splitlines():
        if line.startswith(".\\\""):
            continue
        for m in re.finditer(r"\bFl\s+(-?[a-z][a-z0-9-]*)", line):
            opts.add("-" + m.group(1))
    return opts


for prog in PROGRAMS:
    helptext = run([os.path.join(BIN, prog), "--help"])
    if not helptext:
        failures.append("%s --help printed nothing" % prog)
        continue
    sec = SECTION.get(prog, 8)
    compare("options of %s" % prog, "%s --help" % prog,
            help_options(helptext), "%s(%d)" % (prog, sec),
            page_options(page(prog, sec)))

# grantctl's commands: the indented lines of its help, one or two words
# ("keygen", "user add", "rebuild"), against the page's .It Ic entries.
helptext = run([os.path.join(BIN, "grantctl"), "--help"])
cmds = set()
for line in helptext.splitlines():
    m = re.match(r"^  ([a-z]+)( [a-z]+)?\b", line)
    if m:
        cmds.add(m.group(1) + (m.group(2) or ""))
pcmds = set()
for m in re.finditer(r"^\.(?:It )?Ic ([a-z]+)( [a-z]+)?\b",
                     page("grantctl"), re.M):
    pcmds.add(m.group(1) + (m.group(2) or ""))
compare("grantctl commands", "grantctl --help", cmds, "grantctl(8)", pcmds)

# the 2fa commands: grant-shell's greeting (no command) prints `2fa help`
helptext = run([os.path.join(BIN, "grant-shell"), "--config",
                "/nonexistent", "nobody"],
               {"SSH_CONNECTION": "192.0.2.1 1 192.0.2.2 22",
                "SSH_ORIGINAL_COMMAND": ""})
twofa = set(m.group(1) for m in
            re.finditer(r"^  ([a-z][a-z-]*)\b", helptext, re.M))
ptwofa = set(m.group(1) for m in
             re.finditer(r"^\.It Ic ([a-z][a-z-]*)", page("grant-shell"),
                         re.M))
if not twofa:
    failures.append("grant-shell printed no 2fa help: %r" % helptext)
compare("2fa commands", "grant-shell's 2fa help", twofa, "grant-shell(8)",
        ptwofa)

# configuration keys: the tables and comparisons of common/config.c
with open(os.path.join(SRC, "common", "config.c")) as f:
    csrc = f.read()
keys = set(re.findall(r'\{ "([a-z_]+)", offsetof', csrc))
keys |= set(re.findall(r'strcmp\(name, "([a-z_]+)"\)', csrc))
m = re.search(r"policy_key\(.*?keys\[\] = \{(.*?)\};", csrc, re.S)
if m:
    keys |= set(re.findall(r'"([a-z_]+)"', m.group(1)))
else:
    failures.append("common/config.c: no policy keys[] table found")
pkeys = set(re.findall(r"^\.It Cm ([a-z_]+) No =", page("grantd.conf", 5),
                       re.M))
compare("configuration keys", "common/config.c", keys, "grantd.conf(5)",
        pkeys)

# cmake --install: the pages land where man(1) looks
with tempfile.TemporaryDirectory() as prefix:
    r = subprocess.run([CMAKE, "--install", os.path.dirname(BIN), "--prefix",
                        prefix], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        failures.append("cmake --install failed: %s" % r.stderr)
    want = set("man%d/%s.%d" % (SECTION.get(p, 8), p, SECTION.get(p, 8))
               for p in PROGRAMS) | {"man5/grantd.conf.5"}
    have = set()
    for sec in ("man1", "man5", "man8"):
        d = os.path.join(prefix, "share", "man", sec)
        if os.path.isdir(d):
            have |= set("%s/%s" % (sec, f) for f in os.listdir(d))
    compare("installed pages", "the list of pages", want,
            "PREFIX/share/man", have)

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
