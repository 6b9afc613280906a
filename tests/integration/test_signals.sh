#!/bin/bash
# SIGTERM, SIGINT and SIGHUP reach the main thread's loop only: every other
# thread of a running node (RocksDB's, libzmq's, the node's own) has them
# blocked, so none can sit on one (node/daemon/main.c main_thread_signals:
# under ThreadSanitizer a SIGTERM handed to a RocksDB thread asleep on its
# timer was held there and the node ignored it).  Then SIGHUP reloads and
# SIGTERM stops the node with status 0.
. "$(dirname "$0")/lib.sh"

t_config
gd_grantd_start "$T_SITE" || t_fatal "grantd starts and answers grantctl status"
pid=$(<"$T_SITE/grantd.pid")

# SigBlk of task TID of the node, as a number; its name after it
sigblk() {
	local hex
	hex=$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$pid/task/$1/status")
	echo "$((16#$hex)) $(cat "/proc/$pid/task/$1/comm")"
}

t_section "each thread's blocked signals"
want=$(((1 << 0) | (1 << 1) | (1 << 14))) # SIGHUP, SIGINT, SIGTERM
others=0 open=()
for task in /proc/"$pid"/task/*; do
	tid=${task##*/}
	read -r mask name < <(sigblk "$tid")
	if [[ $tid == "$pid" ]]; then
		t_eq "the main thread takes SIGTERM, SIGINT and SIGHUP" \
			"$((mask & want))" 0
		continue
	fi
	others=$((others + 1))
	(((mask & want) == want)) || open+=("$tid ($name)")
done
t_check "the node runs more threads than the main one ($others)" \
	test "$others" -gt 3
t_eq "no other thread takes SIGTERM, SIGINT or SIGHUP" "${open[*]:-none}" none

t_section "the signals do what they say"
kill -HUP "$pid"
t_check "SIGHUP: the node reloads its config" \
	gd_wait_for 10 grep -q "reload done" "$T_SITE/grantd.log"
t_check "the node still answers after SIGHUP" t_ctl status
t_check "SIGTERM: the node stops within 10 s" \
	gd_stop_pid "$pid" "$T_SITE/grantd.conf" 10
rm -f "$T_SITE/grantd.pid" # stopped by the test, as gd_grantd_stop does
t_eq "... with status 0" "$(gd_grantd_exit_status "$T_SITE")" 0

t_done
