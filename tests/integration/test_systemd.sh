#!/bin/bash
# grantd under systemd (SPEC 8, Type=notify), without systemd: the test
# plays the manager's side of sd_notify(3).  notify_listen.py listens on
# the unix datagram socket NOTIFY_SOCKET names and records every message
# with whether the node had logged "sync done" when it came.
# - READY=1 goes once, only when the node serves (its start-up sync with
#   its peers over: 2 peers down, so after the 5 s grace), after STATUS=
#   lines saying it is starting;
# - STATUS= follows the peers connected ("serving; peers 2/2; syncing no");
# - WATCHDOG=1 every half of WATCHDOG_USEC when WATCHDOG_PID is the node
#   (or unset), none when it names another process;
# - STOPPING=1 on SIGTERM; a NOTIFY_SOCKET nobody listens on is logged once
#   and changes nothing.
# The unit file itself is checked by test_systemd_unit.sh.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }

NS=$T_DIR/notify.sock
NL=$T_DIR/notify.log
PA=$T_DIR/paloalto
python3 "$T_HERE/notify_listen.py" "$NS" "$NL" "$PA/grantd.log" &
LPID=$!
gd_wait_for 10 test -S "$NS" || t_fatal "the notify listener binds $NS"

# msgs [FROM]: the messages received (third column), from line FROM on.
msgs() { tail -n +"${1:-1}" "$NL" | cut -f3-; }
# count PATTERN [FROM]: messages matching the fixed string PATTERN.
count() { msgs "${2:-1}" | grep -cF -- "$1"; }
# seen PATTERN [FROM]: at least one.
seen() { (($(count "$@") > 0)); }
lines() { wc -l <"$NL"; }

t_section "a node with two peers down: READY=1 once the start-up sync is over"
t_cluster_config
# the node as systemd starts it: WATCHDOG_PID is its own pid (exec keeps it)
t_wrap_grantd "$T_DIR/bin-wd" "export NOTIFY_SOCKET='$NS' WATCHDOG_USEC=200000 WATCHDOG_PID=\$\$
exec \"\$REAL\" \"\$@\"" || t_fatal "wrapper"
GD_BIN=$T_DIR/bin-wd gd_grantd_start "$PA" || t_fatal "paloalto starts"
t_check "the node answers grantctl status" t_c paloalto status
t_check "READY=1 comes within 20 s" gd_wait_for 20 seen READY=1
READY=$(grep -F READY=1 "$NL" | head -1)
t_eq "READY=1 came once" "$(count READY=1)" 1
t_eq "READY=1 came after the node logged 'sync done' (not while syncing)" \
	"$(cut -f2 <<<"$READY")" 1
t_has "with STATUS=serving, peers 0/2, syncing no" "$READY" \
	"READY=1 | STATUS=serving; peers 0/2; syncing no"
t_check "before it: STATUS=starting; peers 0/2; syncing yes" \
	eval 'msgs | sed "/READY=1/q" | grep -qxF "STATUS=starting; peers 0/2; syncing yes"'
t_check "no READY=1 before the first STATUS= line" \
	eval '[[ $(msgs | grep -m1 -E "READY|STATUS") == STATUS=starting* ]]'
t_check "the log says it serves and told systemd" \
	grep -qF "serving: told systemd READY=1" "$PA/grantd.log"
t_check "the log names the watchdog interval" \
	grep -qF "systemd watchdog on interval_ms=200 ping_ms=100" "$PA/grantd.log"

t_section "WATCHDOG=1 every half of WATCHDOG_USEC (200 ms)"
t_check "10 WATCHDOG=1 pings within 10 s" gd_wait_for 10 eval '(($(count WATCHDOG=1) >= 10))'
GAP=$(grep -F WATCHDOG=1 "$NL" | cut -f1 |
	awk 'NR > 1 { print $1 - prev } { prev = $1 }' | sort -n |
	awk '{ g[NR] = $1 } END { print g[int((NR + 1) / 2)] }')
t_check "the median gap between pings ($GAP ms) is under the 200 ms interval" \
	eval '[[ -n $GAP ]] && ((GAP >= 50 && GAP < 200))'

t_section "STATUS= follows the peers"
t_start portland
t_start montreal
t_check "STATUS=serving; peers 2/2; syncing no once both peers are up" \
	gd_wait_for 20 seen "STATUS=serving; peers 2/2; syncing no"
t_stop montreal
t_check "STATUS=serving; peers 1/2; syncing no when one stops" \
	gd_wait_for 20 seen "STATUS=serving; peers 1/2; syncing no"
t_eq "still one READY=1" "$(count READY=1)" 1
FROM=$(($(lines) + 1))
t_stop paloalto
t_check "STOPPING=1 on SIGTERM" seen "STOPPING=1 | STATUS=stopping" "$FROM"

t_section "WATCHDOG_PID naming another process: no pings"
t_wrap_grantd "$T_DIR/bin-other" "export NOTIFY_SOCKET='$NS' WATCHDOG_USEC=200000 WATCHDOG_PID=1
exec \"\$REAL\" \"\$@\"" || t_fatal "wrapper"
FROM=$(($(lines) + 1))
WD_LOGGED=$(grep -cF "systemd watchdog on" "$PA/grantd.log")
GD_BIN=$T_DIR/bin-other gd_grantd_start "$PA" || t_fatal "paloalto starts again"
t_check "READY=1 comes (portland is up: no grace to wait)" gd_wait_for 20 seen READY=1 "$FROM"
t_check "no WATCHDOG=1 within a second after READY=1" \
	eval '! gd_wait_for 1 seen WATCHDOG=1 "$FROM"'
t_eq "and no watchdog in the log" "$(grep -cF "systemd watchdog on" "$PA/grantd.log")" "$WD_LOGGED"
t_stop paloalto

t_section "a NOTIFY_SOCKET nobody listens on: logged once, the node serves"
t_wrap_grantd "$T_DIR/bin-none" "export NOTIFY_SOCKET='$T_DIR/nobody.sock' WATCHDOG_USEC=200000
exec \"\$REAL\" \"\$@\"" || t_fatal "wrapper"
GD_BIN=$T_DIR/bin-none gd_grantd_start "$PA" || t_fatal "paloalto starts with a dead NOTIFY_SOCKET"
t_check "it logs that it cannot notify systemd" \
	gd_wait_for 10 grep -qF "cannot notify systemd (NOTIFY_SOCKET)" "$PA/grantd.log"
t_check "not again at every ping (none more in a second: 10 pings)" \
	eval '! gd_wait_for 1 eval "(( \$(grep -cF \"cannot notify systemd\" \"\$PA/grantd.log\") > 1 ))"'
t_check "the node serves: grantctl user add works" t_c paloalto user add zed

kill "$LPID" 2>/dev/null
t_done
