#!/bin/bash
# A [peer] section named otherwise than the site calls itself (the
# operator's trial: [peer site-a] for a site called sitea).  Its key is
# right, so ZAP lets it in, and every message it sends is dropped: the log
# must name what the sender calls itself, and say it at most once per
# 10 s per place (LOG_LIMIT_MS), not four times a second; the drops are
# still all counted.
. "$(dirname "$0")/lib.sh"

t_cluster_up
PA=$(t_dir paloalto)

t_section "paloalto's [peer montreal] renamed [peer montreal-x]"
t_stop paloalto
sed -i 's/^\[peer montreal\]$/[peer montreal-x]/' "$PA/grantd.conf"
t_check "the section is renamed" grep -qx '\[peer montreal-x\]' "$PA/grantd.conf"
# its verifier key names montreal: refused at start, naming the section
t_expect 2 "grantd -t refuses the section's verifier_key" "$GD_BIN/grantd" -t --config "$PA/grantd.conf"
t_has "... saying it names another site" "$ERR" "[peer montreal-x] verifier_key: it names another site"
# without it (taken unchecked), the node starts and says what the sender
# calls itself
python3 - "$PA/grantd.conf" <<'PY'
import sys
p = sys.argv[1]
out, sec, n = [], None, 0
for line in open(p).read().splitlines(True):
    if line.startswith("["):
        sec = line.strip()
    if sec == "[peer montreal-x]" and line.startswith("verifier_key = "):
        n += 1
        continue
    out.append(line)
assert n == 1
open(p, "w").write("".join(out))
PY
t_start paloalto
SAYS="it calls itself 'montreal' (is [peer montreal-x] misnamed?)"
# logged N: paloalto's log names the sender at least N times
logged() { (($(grep -cF -- "$SAYS" "$PA/grantd.log") >= $1)); }
t_expect_soon 0 10 "paloalto's log names what the sender calls itself" logged 1
# dropped N: paloalto counted at least N dropped peer messages
dropped() { t_sj paloalto "1/0 if j['counts']['dropped'] < $1 else 1" >/dev/null 2>&1; }
# montreal's heartbeats come every 250 ms: 20 of them in about 5 s
t_expect_soon 0 20 "paloalto counts every dropped message (20 or more)" dropped 20
N=$(grep -cF -- "$SAYS" "$PA/grantd.log")
t_check "yet its log said so at most once per place ($N lines, not one per message)" test "$N" -le 2
t_hasnt "and never with the old, nameless text alone" \
	"$(grep -F 'peer message dropped peer=montreal-x' "$PA/grantd.log")" \
	"sender does not match its link dropped="

t_stop paloalto
sed -i 's/^\[peer montreal-x\]$/[peer montreal]/' "$PA/grantd.conf"
t_start paloalto
t_expect_converged "named right again, the three sites agree" 20
t_done
