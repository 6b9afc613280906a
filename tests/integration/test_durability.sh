#!/bin/bash
# fsync before the answer (SPEC 2.1, 2.2), seen in the order of the system
# calls: a kill -9 keeps the page cache, so no crash test notices a missing
# fsync (test_crash.sh passes with the WAL fsync removed).  strace records
# the real node's writes, fsyncs and socket sends; fsync_order.py judges:
#  - the writer: every answer with status 0 to a request that wrote the
#    write-ahead log leaves after an fsync of that log that began after the
#    write (user add, repo add, enroll, 2fa val, revoke);
#  - a peer applying a batch fsyncs its log after writing it;
#  - grant-hook with the node down: the spool file is fsynced, renamed,
#    and its directory fsynced before the hook exits 0.
. "$(dirname "$0")/lib.sh"

if ! command -v strace >/dev/null; then
	echo "skip: strace is needed (apt-get install strace)"
	exit 77
fi

t_cluster_up lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "enroll kim --hotp at paloalto" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect_converged "the three sites agree" 15

t_section "the writer answers after the fsync; a peer fsyncs what it applied"
PT=$T_DIR/paloalto.strace
QT=$T_DIR/portland.strace
t_strace_attach "$(t_dir paloalto)" "$PT" || t_fatal "strace holds paloalto's node"
t_strace_attach "$(t_dir portland)" "$QT" || t_fatal "strace holds portland's node"
t_suser paloalto ann
t_expect 0 "repo add dur --mode required --writer kim" t_c paloalto repo add dur --mode required --writer kim
t_expect 0 "kim: 2fa val <hotp 0> from 127.0.7.7" t_sh paloalto 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 1 "kim: <hotp 0> again refused (an answer that acknowledges nothing)" \
	t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "kim: 2fa val <hotp 1> from 127.0.7.8" t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "check kim 127.0.7.7 dur (a read)" t_c paloalto check kim 127.0.7.7 dur
t_expect 0 "grant revoke kim 127.0.7.8" t_c paloalto grant revoke kim 127.0.7.8
t_expect 0 "enroll ann --totp" t_c paloalto enroll ann --totp --secret "$(gd_base32_secret)"
t_expect_converged "the three sites agree" 15
t_expect_soon 0 15 "portland fsynced the write-ahead log after every write of a peer batch" \
	t_fsync_order peer "$QT"
t_strace_detach
t_expect 0 "paloalto: each of the 6 acknowledged writes answered after its fsync" \
	t_fsync_order replies "$PT" 6
[[ $RC == 0 ]] && printf '#   %s\n' "$OUT"

t_section "grant-hook with the node down: spool file and directory fsynced"
t_stop paloalto
R=$(t_dir paloalto)/repos/dur.git
tree=$(git --git-dir="$R" hash-object -w -t tree /dev/null) || t_fatal "an empty tree in dur.git"
c=$(git --git-dir="$R" -c user.name=t -c user.email=t@e commit-tree "$tree" -m one) ||
	t_fatal "a commit in dur.git"
HT=$T_DIR/hook.strace
hook() {
	(cd "$R" && printf '%s %s refs/heads/main\n' "$(printf '0%.0s' {1..40})" "$c" |
		ASAN_OPTIONS=detect_leaks=0 t_strace -o "$HT" "$GD_BIN/grant-hook" --config "$(t_dir paloalto)/grantd.conf")
}
t_expect 0 "grant-hook exits 0 with the node down" hook
t_check "the update waits in grantd-spool/" eval 'ls "$R"/grantd-spool/*.refs >/dev/null 2>&1'
t_expect 0 "the spool file is fsynced before its rename, the directory after it, both before the exit" \
	t_fsync_order spool "$HT"
[[ $RC == 0 ]] && printf '#   %s\n' "$OUT"
t_start paloalto
t_expect_soon 0 15 "the spool is emptied once the node is back" \
	eval '! ls "$R"/grantd-spool/*.refs >/dev/null 2>&1'
t_expect_converged "the three sites agree" 15

t_done
