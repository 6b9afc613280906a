#!/bin/bash
# How the tests (and deploy/local-cluster) stop a node: never a SIGCONT
# after the SIGTERM.  A sanitizer build's grantd ends with LeakSanitizer's
# leak check, which stops every thread with ptrace (PTRACE_ATTACH queues a
# SIGSTOP); a SIGCONT that lands then discards that SIGSTOP, the tracer
# waits for a stop that never comes, and the node "still runs 30s after
# SIGTERM" (seen under load in push_log, mirror_snapshot, repl_partition:
# the tracer's stack was ThreadSuspender::SuspendThread, in waitpid for
# the main thread, which ran on).  gd_stop_pid resumes a paused process
# before the SIGTERM instead.  The signals it sends are recorded in order
# by a wrapper around bash's kill (which still sends them), then a real
# paused node is stopped.
#
# Then the SIGTERM aimed at each helper thread in turn.  kill(2) given a
# thread's id sends a process signal, but the kernel hands it to that
# thread when it does not block it; that is what happened in CI when the
# SIGCONT had just woken a paused node and the main thread was not yet
# running: the syncer's zmq_recv failed with EINTR, the syncer ended, and
# the main thread's stop message to it blocked for ever (node/daemon/thread.h).
. "$(dirname "$0")/lib.sh"

# stop_sent PID: the signals gd_stop_pid sends to PID, in order
stop_sent() {
	(
		kill() { echo "${1#-}" >>"$T_DIR/sent"; builtin kill "$@"; }
		: >"$T_DIR/sent"
		gd_stop_pid "$1" sleep 10 >/dev/null 2>&1
	)
	tr '\n' ' ' <"$T_DIR/sent"
}

t_section "gd_stop_pid: a running process"
sleep 300 >/dev/null 2>&1 &
P=$!
t_eq "SIGCONT first, then SIGTERM, nothing after it" "$(stop_sent "$P")" "CONT TERM "
t_check "it stopped" eval '! gd_alive $P'

t_section "gd_stop_pid: a paused process (SIGSTOP)"
sleep 300 >/dev/null 2>&1 &
P=$!
gd_wait_for 10 gd_alive "$P" sleep # exec'd: its name is sleep
kill -STOP "$P"
t_eq "resumed first, then SIGTERM, nothing after it" "$(stop_sent "$P")" "CONT TERM "
t_check "it stopped" eval '! gd_alive $P'

t_section "a real node, paused, then stopped (t_stop); the others by t_done"
t_cluster_up
t_pause portland || t_fatal "SIGSTOP portland"
t_stop portland

# thread_tid PID NAME: the id of PID's thread called NAME
thread_tid() {
	local t
	for t in /proc/"$1"/task/*; do
		[[ $(cat "$t/comm" 2>/dev/null) == "$2" ]] && echo "${t##*/}" && return 0
	done
	return 1
}

for th in gd-syncer gd-readers gd-gitrepl; do
	t_section "a SIGTERM that lands on the $th thread stops the node"
	t_start portland
	t_check "portland runs again" t_running portland
	pid=$(t_pid portland)
	tid=$(thread_tid "$pid" "$th")
	t_check "portland has a thread named $th" test -n "$tid"
	[[ -n $tid ]] || continue
	kill -TERM "$tid"
	t_check "portland stops within ${GD_TIMEOUT}s" \
		gd_wait_for "$GD_TIMEOUT" eval "! gd_alive $pid"
	if gd_alive "$pid"; then
		gd_stuck_report "$pid"
		kill -KILL "$pid"
	fi
	wait "$pid" 2>/dev/null
	t_eq "with status 0" "$(gd_grantd_exit_status "$T_DIR/portland")" 0
	rm -f "$T_DIR/portland/grantd.pid"
done
t_done
