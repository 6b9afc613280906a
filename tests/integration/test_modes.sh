#!/bin/bash
# Repository modes (SPEC 1): off needs nothing; opt-in enforces 2FA only on
# enrolled users; required needs every writer enrolled and holding a grant.
# Only writers may push, whatever the mode.  Real pushes over sshd.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user alice    # enrolled (HOTP)
t_user bob      # not enrolled
t_user carol    # not a writer
SECRET=$(gd_base32_secret)
t_expect 0 "enroll alice (HOTP, 6 digits)" t_ctl enroll alice --hotp --secret "$SECRET" --digits 6
for m in off opt-in required; do
	t_expect 0 "repo add r-$m --mode $m --writer alice --writer bob" \
		t_ctl repo add "r-$m" --mode "$m" --writer alice --writer bob
	t_clone 127.0.7.9 carol "r-$m" "$T_DIR/r-$m" || t_fatal "clone r-$m"
done

# push SRC USER REPO: a new commit to REPO from SRC as USER.
push() {
	t_commit "$T_DIR/$3" && t_push "$1" "$2" "$T_DIR/$3"
}
# pushed REPO: the site's main is the work tree's HEAD.
pushed() { [[ $(t_ref "$1") == "$(t_head "$T_DIR/$1")" ]]; }

t_section "unenrolled bob"
t_expect 0 "bob pushes to off" push 127.0.7.7 bob r-off
t_check "r-off main moved" pushed r-off
t_expect 0 "bob pushes to opt-in (not enrolled, so not enforced)" push 127.0.7.7 bob r-opt-in
t_check "r-opt-in main moved" pushed r-opt-in
t_expect nz "bob may not push to required" push 127.0.7.7 bob r-required
t_has "the refusal says how to enroll" "$ERR" "2fa enroll"
t_check "r-required main did not move" eval '! pushed r-required'
t_expect 0 "check bob 127.0.7.7 r-opt-in exits 0" t_ctl check bob 127.0.7.7 r-opt-in
t_expect 1 "check bob 127.0.7.7 r-required exits 1" t_ctl check bob 127.0.7.7 r-required

t_section "enrolled alice without a grant"
t_expect 0 "alice pushes to off" push 127.0.7.7 alice r-off
t_expect nz "alice may not push to opt-in without a grant" push 127.0.7.7 alice r-opt-in
t_has "the refusal says 2fa val" "$ERR" "2fa val"
t_expect nz "alice may not push to required without a grant" push 127.0.7.7 alice r-required
t_has "the refusal says 2fa val" "$ERR" "2fa val"

t_section "enrolled alice with a grant for 127.0.7.7"
t_expect 0 "2fa val <hotp 0> from 127.0.7.7" t_ssh 127.0.7.7 alice 2fa val "$(t_hotp "$SECRET" 0)"
t_expect 0 "alice pushes to opt-in from 127.0.7.7" push 127.0.7.7 alice r-opt-in
t_check "r-opt-in main moved" pushed r-opt-in
t_expect 0 "alice pushes to required from 127.0.7.7" push 127.0.7.7 alice r-required
t_check "r-required main moved" pushed r-required
t_expect nz "alice may not push to required from 127.0.7.8" push 127.0.7.8 alice r-required
t_expect 0 "alice pushes to off from 127.0.7.8" push 127.0.7.8 alice r-off

t_section "writers"
t_expect nz "carol (not a writer) may not push to off" push 127.0.7.7 carol r-off
t_check "r-off main did not move" eval '! pushed r-off'
t_expect 1 "check carol 127.0.7.7 r-off exits 1" t_ctl check carol 127.0.7.7 r-off
t_expect 0 "repo writers r-off alice carol" t_ctl repo writers r-off alice carol
t_expect 0 "carol pushes to off once a writer" push 127.0.7.7 carol r-off
t_expect nz "bob, no longer a writer, may not push to off" push 127.0.7.7 bob r-off

t_section "changing modes"
t_expect 0 "repo mode r-opt-in required" t_ctl repo mode r-opt-in required
t_expect nz "bob may no longer push to r-opt-in" push 127.0.7.7 bob r-opt-in
t_expect 0 "repo mode r-required off" t_ctl repo mode r-required off
t_expect 0 "bob pushes to r-required now off" push 127.0.7.7 bob r-required
t_expect 0 "repo list --json" t_ctl repo list --json
t_eq "repo list shows r-opt-in required" \
	"$(t_json '[r["mode"] for r in j if r["name"] == "r-opt-in"][0]' <<<"$OUT")" required
t_eq "repo list shows r-required off" \
	"$(t_json '[r["mode"] for r in j if r["name"] == "r-required"][0]' <<<"$OUT")" off

t_done
