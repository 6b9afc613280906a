#!/bin/bash
# grant-hook (SPEC 3.3; issue 4, first part): every hosted repository runs
# it as post-receive; it hands the push's ref updates to the node, which
# replicates them as one operation (every site then holds the same ref
# state, which the digest covers). When the node is down the update is
# kept in the repository's grantd-spool/ and sent when the node returns;
# the push itself is never refused.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=64
t_expect 0 "paloalto: repo add hk --mode off" t_c paloalto repo add hk --mode off
t_expect_converged "the three sites agree" 10
for s in "${T_SITES[@]}"; do
	t_check "$s: hk.git has the post-receive hook" \
		grep -q "grant-hook' --config" "$(t_dir "$s")/repos/hk.git/hooks/post-receive"
done

W=$T_DIR/work
git init -q "$W"
commit() { echo "$1" >"$W/f"; git -C "$W" add f; git -C "$W" -c user.name=t -c user.email=t@e commit -qm "$1"; }
push() { git -C "$W" push -q "$(t_dir paloalto)/repos/hk.git" "$@"; }
refs_at() { t_sj "$1" "j['counts']['refs']"; }

t_section "a push is recorded and replicated as ref state"
commit one
t_expect 0 "push master to paloalto's hk.git" push HEAD:refs/heads/master
commit two
t_expect 0 "push a tag too" push HEAD:refs/tags/v1
t_expect_converged "the three sites agree" 10
for s in "${T_SITES[@]}"; do
	t_eq "$s: two refs known" "$(refs_at "$s")" 2
done
t_check "paloalto's log names the push" \
	grep -q "push recorded repo=hk" "$(t_dir paloalto)/grantd.log"

t_section "the node down: the hook keeps the update, the node sends it on return"
t_stop paloalto
commit three
t_expect 0 "push while paloalto's node is down (never refused)" push HEAD:refs/heads/master
t_check "the update waits in grantd-spool/" \
	eval 'ls "$(t_dir paloalto)"/repos/hk.git/grantd-spool/*.refs >/dev/null 2>&1'
before=$(t_sdigest portland)
t_start paloalto
t_expect_soon 0 15 "the spool is emptied" \
	eval '! ls "$(t_dir paloalto)"/repos/hk.git/grantd-spool/*.refs >/dev/null 2>&1'
t_expect_converged "the three sites agree" 15
t_check "the update reached portland (its digest moved)" \
	eval '[[ $(t_sdigest portland) != "$before" ]]'

t_section "bad input on the hook's stdin changes nothing"
d=$(t_sdigest paloalto)
hook_in() { # LINE: run paloalto's grant-hook by hand in hk.git
	(cd "$(t_dir paloalto)/repos/hk.git" &&
		printf '%s\n' "$1" | "$GD_BIN/grant-hook" --config "$(t_dir paloalto)/grantd.conf")
}
# (post-receive runs once the refs moved: its exit status fails no push)
t_expect 2 "grant-hook given 'not a ref line' (exit 2: input error)" hook_in "not a ref line"
t_has "... and says what was wrong" "$ERR" "bad ref update line 1"
t_check "... and kept nothing" eval '! ls "$(t_dir paloalto)"/repos/hk.git/grantd-spool/*.refs >/dev/null 2>&1'
t_expect 0 "grant-hook given a ref under refs/grantd/ (ours: not replicated)" \
	hook_in "$(printf '0%.0s' {1..40}) $(git -C "$W" rev-parse HEAD) refs/grantd/x"
t_eq "digest unchanged" "$(t_sdigest paloalto)" "$d"

t_done
