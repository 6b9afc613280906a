#!/bin/bash
# No acknowledged write lost (SPEC 2.2) and safe kill -9 (SPEC 3.1): grantd is
# killed with SIGKILL right after a `2fa val` answered; after the restart the
# grant is there, the token is still dead, and the state digest is the
# same.  While the node is down, clients fail closed.
. "$(dirname "$0")/lib.sh"

t_site_up lockout_failures=50   # replays below count as failures
t_user kim
KS=$(gd_base32_secret)
t_expect 0 "enroll kim --hotp" t_ctl enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "repo add crash --mode required --writer kim" t_ctl repo add crash --mode required --writer kim
t_clone 127.0.7.9 kim crash "$T_DIR/w" || t_fatal "clone crash"

t_section "first val, then kill -9"
t_expect 0 "kim: 2fa val <hotp 0> from 127.0.7.7" t_ssh 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
d1=$(t_digest)
t_check "status --json gives a digest" test -n "$d1"
pid=$(<"$T_SITE/grantd.pid")
gd_grantd_kill9 "$T_SITE"
t_check "grantd (pid $pid) is gone" t_gone "$pid"

t_section "while the node is down"
t_expect 3 "grantctl status exits 3 (node unreachable)" t_ctl status
t_expect 3 "grant-shell 2fa val exits 3 while the node is down" \
	t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_has "and says it is a server problem" "$ERR" "server problem"
t_expect 3 "grant-shell git-receive-pack exits 3 while the node is down" \
	t_sh paloalto 127.0.7.7 kim "git-receive-pack 'crash'"
t_has "and says it is a server problem" "$ERR" "server problem"
# through sshd: grant-keys cannot list the keys, so sshd lets no one in
t_expect 255 "2fa val through sshd: ssh is refused while the node is down" \
	t_ssh 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_has "ssh says permission denied" "$ERR" "Permission denied"
t_commit "$T_DIR/w"
t_expect 128 "a push fails closed while the node is down (git: cannot read from remote)" \
	t_push 127.0.7.7 kim "$T_DIR/w"
t_has "git says permission denied" "$ERR" "Permission denied"
t_check "and moved nothing" eval '[[ -z $(t_ref crash) ]]'

t_section "restart"
gd_grantd_start "$T_SITE" || t_fatal "grantd restarts after kill -9"
t_eq "the digest is the one before the crash" "$(t_digest)" "$d1"
t_expect 0 "kim: the grant for 127.0.7.7 is still there (isval)" t_ssh 127.0.7.7 kim 2fa isval
t_expect 0 "check kim 127.0.7.7 crash exits 0" t_ctl check kim 127.0.7.7 crash
t_expect 1 "kim: <hotp 0> is still dead" t_ssh 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "a push from 127.0.7.7 is accepted" t_push 127.0.7.7 kim "$T_DIR/w"

t_section "second val, kill -9 at once"
t_expect 0 "kim: 2fa val <hotp 1> from 127.0.7.8" t_ssh 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
gd_grantd_kill9 "$T_SITE"
gd_grantd_start "$T_SITE" || t_fatal "grantd restarts after the second kill -9"
t_expect 0 "kim: the grant for 127.0.7.8 survived" t_ssh 127.0.7.8 kim 2fa isval
t_expect 0 "kim: the grant for 127.0.7.7 survived" t_ssh 127.0.7.7 kim 2fa isval
t_expect 1 "kim: <hotp 1> is still dead" t_ssh 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "grant list --user kim --json" t_ctl grant list --user kim --json
t_has "grant list has 127.0.7.7" "$OUT" 127.0.7.7
t_has "grant list has 127.0.7.8" "$OUT" 127.0.7.8

t_section "kill -9 under load"
# Vals in flight while the node is killed: whatever was answered 0 must be
# there after the restart.
pids=()
for c in 2 3 4 5 6 7; do
	ip=127.0.8.$c
	( t_ssh "$ip" kim 2fa val "$(t_hotp "$KS" "$c")" >/dev/null 2>&1 && echo "$ip" >>"$T_DIR/answered" ) &
	pids+=($!)
done
t_check "at least one val answered before the kill" gd_wait_for 20 test -s "$T_DIR/answered"
gd_grantd_kill9 "$T_SITE"
wait "${pids[@]}"   # not a bare wait: grantd and sshd are children too
gd_grantd_start "$T_SITE" || t_fatal "grantd restarts after the third kill -9"
n=0
while read -r ip; do
	t_expect 0 "kim: the answered grant for $ip survived" t_ssh "$ip" kim 2fa isval
	n=$((n + 1))
done <"$T_DIR/answered"
t_check "the answered vals were checked after the restart ($n of 6)" test "$n" -ge 1

t_done
