#!/bin/bash
# The strict token quorum's promises are durable before they count (issue
# 19 item 11; the mutation audit's mutants 2 and 2b), seen in the order of
# the system calls: kill -9 keeps the page cache, so no crash test
# (test_quorum_crash.sh) can see a promise answered or counted before its
# fsync.  strace holds the node and makes its fsyncs slow (-e inject=...:
# delay_enter), so that a wrong order cannot hide behind a fast disk, and
# fsync_order.py judges the log:
#  - a voter: the YES to a vote_req (any send on its sync ROUTER's
#    connections) leaves only after an fsync of the WAL that began after
#    the write of its promise (a CF_PROMISES record) and finished
#    (mutant 2: held_reply_done(h, true) in place of writer_hold fails it);
#  - the origin: it counts its own promise only once durable, so the mark
#    of the accepted use is written only after an fsync of the WAL that
#    began after the write of its own promise and finished (with one
#    voter down, so that its own promise is needed; mutant 2b:
#    self_hold_done(h, true) at once fails it).
# And the time a `2fa val` takes is at least the slowed fsync, which a
# promise counted early would not wait for.
. "$(dirname "$0")/lib.sh"

if ! command -v strace >/dev/null; then
	echo "skip: strace is needed (apt-get install strace)"
	exit 77
fi
SLOW_US=1500000 # each fsync of a slowed node waits 1.5 s

t_cluster_up token_quorum=majority token_quorum_timeout=10s lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
voter() { [[ $(t_sj "$1" 'j["quorum"]["voter"]') == true ]]; }
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 15 "$s: a voter" voter "$s"
done
t_expect_converged "the three sites agree" 15

# slow_trace SITE LOG: strace SITE's node into LOG, every fsync delayed
# SLOW_US (detached by t_strace_detach)
slow_trace() {
	local pid
	pid=$(<"$(t_dir "$1")/grantd.pid") || return 1
	(exec strace -f -qq -yy -s 256 -xx -e trace=$T_STRACE_CALLS \
		-e inject=fsync,fdatasync:delay_enter=$SLOW_US -o "$2" \
		-p "$pid" 2>"$2.err") &
	T_STRACE_PIDS+=($!)
	gd_wait_for 20 t_traced "$pid" || { cat "$2.err" >&2; return 1; }
}
# val SITE N: kim's HOTP token N at SITE, accepted; DT its time in ms
val() {
	local t0
	t0=$(gd_now_ms)
	t_sh "$1" 127.0.31.9 kim 2fa val "$(t_hotp "$KS" "$2")"
	local rc=$?
	DT=$(( $(gd_now_ms) - t0 ))
	return $rc
}

t_section "the voters' YES leaves after their promise's fsync (portland and montreal slowed)"
ORDER=$T_HERE/fsync_order.py
slow_trace portland "$T_DIR/portland.strace" || t_fatal "strace holds portland's node"
slow_trace montreal "$T_DIR/montreal.strace" || t_fatal "strace holds montreal's node"
t_expect 0 "paloalto: kim 2fa val <hotp 0>" val paloalto 0
t_check "... took at least one slowed fsync ($DT ms >= $((SLOW_US / 1000)))" \
	test "$DT" -ge $((SLOW_US / 1000))
# (exit 2 until the answer is in the log: it may leave after the val, the
# other voter's YES having made the majority)
for s in portland montreal; do
	t_expect_soon 0 15 "$s: its answer on the sync socket left after its promise's fsync" \
		python3 "$ORDER" voter "$T_DIR/$s.strace" "$T_SYNC_PORT" kim
	printf '#   %s\n' "$(python3 "$ORDER" voter "$T_DIR/$s.strace" "$T_SYNC_PORT" kim)"
done
t_strace_detach

t_section "the origin counts its own promise once durable (paloalto slowed, montreal down)"
# with montreal down, paloalto's own promise is one of the two it needs
t_stop montreal
slow_trace paloalto "$T_DIR/paloalto.strace" || t_fatal "strace holds paloalto's node"
t_expect 0 "paloalto: kim 2fa val <hotp 1>" val paloalto 1
t_check "... took at least one slowed fsync ($DT ms >= $((SLOW_US / 1000)))" \
	test "$DT" -ge $((SLOW_US / 1000))
t_expect_soon 0 15 "paloalto: the mark of the accepted use written after its own promise's fsync" \
	python3 "$ORDER" origin "$T_DIR/paloalto.strace" kim
printf '#   %s\n' "$OUT"
t_strace_detach
t_start montreal
t_expect_converged "the three sites agree" 20
t_done
