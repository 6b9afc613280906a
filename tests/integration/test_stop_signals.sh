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
t_done
