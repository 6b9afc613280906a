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
