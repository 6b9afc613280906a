#!/bin/bash
# kill -9 at the moments that matter (issue 8 item 15; SPEC 3.1 "safe to
# kill -9 at any moment"): during a repository's creation (at the site
# that made it and at a peer), during a pack's move into objects/pack, and
# during a peer batch.  The node kills itself at the named point through
# its test hook (GRANTD_TEST_CRASH_AT, node/daemon/crashpoint.h), so the moment is
# hit every run; afterwards it is restarted without the hook, and the
# three sites must converge, pass `grantctl verify` (each digest is its
# records' own) and git fsck, and every repository must be whole, its
# hook in place.  A repository that an older grantd left half-made (no
# hooks/, no HEAD) is completed at start.
. "$(dirname "$0")/lib.sh"

t_cluster_up

# ref SITE REPO [REF]: the ref's target on SITE's disk ("" when absent).
ref() { git --git-dir="$(t_dir "$1")/repos/$2.git" rev-parse -q --verify "${3:-refs/heads/master}" 2>/dev/null; }
ref_is() { [[ $(ref "$1" "$2" "$3") == "$4" ]]; }
# whole SITE REPO: a complete repository with the node's hook
whole() {
	local d
	d=$(t_dir "$1")/repos/$2.git
	[[ -f $d/HEAD && -d $d/objects && -d $d/refs ]] &&
		grep -q "grant-hook' --config" "$d/hooks/post-receive" &&
		[[ $(git --git-dir="$d" config --bool receive.fsckObjects) == true ]] &&
		[[ ! -e $d.grantd-new ]]
}
# start_repaired SITE: start SITE's node and wait for the end of its
# start-up pass over the repositories (main.c startup_repos, which makes
# whole what a crash left half-made): "node running" is logged after it,
# while `grantctl status` (which t_start waits for) answers before it.
start_repaired() {
	local log off
	log=$(t_dir "$1")/grantd.log
	off=$(stat -c %s "$log")
	t_start "$1"
	gd_wait_for 20 eval "tail -c +$((off + 1)) '$log' | grep -F 'node running site=$1' >/dev/null" ||
		t_fail "$1: its start-up pass ends within 20 s (node running)"
}
# crash_start SITE POINT: restart SITE's node with the hook armed at POINT
crash_start() {
	t_stop "$1"
	GRANTD_TEST_CRASH_AT=$2 t_start "$1"
	t_check "$1: the hook is armed (point=$2)" t_grep_log "$1" "test hook armed: the node kills itself at point=$2"
}
# crashed SITE POINT: SITE's node killed itself at POINT (SIGKILL)
crashed() {
	if gd_wait_for 30 eval "! t_running $1"; then
		t_ok "$1: the node died at point=$2"
	else
		t_fail "$1: the node still runs 30 s later (point=$2 not reached)"
		t_kill9 "$1"
	fi
	t_eq "$1: killed by SIGKILL (exit status 137)" "$(gd_grantd_exit_status "$(t_dir "$1")")" 137
	t_check "$1: its log names the point" t_grep_log "$1" "test hook: killed at point=$2"
}
fsck_all() {
	local s
	for s in "${T_SITES[@]}"; do
		t_expect 0 "$s: $1 passes git fsck --strict" \
			git --git-dir="$(t_dir "$s")/repos/$1.git" fsck --strict --no-progress
	done
}

t_section "a half-made repository (an older grantd killed inside git init) is completed at start"
t_expect 0 "repo add old --mode off" t_c paloalto repo add old --mode off
t_expect_converged "the three sites agree" 10
t_stop montreal
rm -rf "$(t_dir montreal)/repos/old.git/hooks" "$(t_dir montreal)/repos/old.git/HEAD"
start_repaired montreal
t_check "montreal: old.git is whole again, with its hook" whole montreal old
t_check "montreal's log says it repaired it" t_grep_log montreal "repaired a half-made repository repo=old"

t_section "kill -9 during repository creation, at the site that makes it"
crash_start paloalto repo-init
t_c paloalto repo add r1 --mode off >"$T_DIR/r1.out" 2>&1 &
add_pid=$!
crashed paloalto repo-init
t_check "paloalto: r1 is not in place, only its leftover beside it" \
	eval "[[ ! -e '$(t_dir paloalto)/repos/r1.git' && -d '$(t_dir paloalto)/repos/r1.git.grantd-new' ]]"
start_repaired paloalto
t_check "paloalto: r1.git made whole at start" whole paloalto r1
wait "$add_pid"
t_check "the caller was not told the repository was added (exit $?)" \
	eval "! grep -q 'added repository' '$T_DIR/r1.out'"
t_expect_converged "the three sites agree" 20
for s in portland montreal; do
	t_check "$s: r1.git is whole" whole "$s" r1
done

t_section "kill -9 during repository creation, at a peer"
crash_start portland repo-init
t_expect 0 "paloalto: repo add r2 --mode off" t_c paloalto repo add r2 --mode off
crashed portland repo-init
t_start portland
t_expect_converged "the three sites agree" 20
for s in "${T_SITES[@]}"; do
	t_check "$s: r2.git is whole" whole "$s" r2
done

t_section "kill -9 during a peer batch (applied, not written)"
crash_start montreal peer-batch
t_suser paloalto pb
crashed montreal peer-batch
t_start montreal
t_expect_converged "the three sites agree" 20
t_check "montreal has pb" t_has_user montreal pb

t_section "kill -9 during a pack's move into objects/pack"
W=$T_DIR/w
gd_git 127.0.0.1 /dev/null init -q "$W"
for i in 1 2 3; do
	echo "$i $RANDOM" >>"$W/f.txt"
	gd_git 127.0.0.1 /dev/null -C "$W" add -A
	gd_git 127.0.0.1 /dev/null -C "$W" commit -q -m "c$i"
done
TIP=$(t_head "$W")
crash_start montreal pack-move
t_expect 0 "push r2 master to paloalto" \
	gd_git 127.0.0.1 /dev/null -C "$W" push -q "$(t_dir paloalto)/repos/r2.git" HEAD:refs/heads/master
crashed montreal pack-move
t_check "montreal: master not moved before the crash" eval "! ref_is montreal r2 refs/heads/master $TIP"
t_start montreal
t_expect_soon 0 20 "montreal: r2 master arrives after the restart" ref_is montreal r2 refs/heads/master "$TIP"
t_expect_converged "the three sites agree" 20
fsck_all r2
t_check "montreal: no quarantine left in r2.git" \
	eval "! ls -d '$(t_dir montreal)/repos/r2.git/'grantd-incoming-* 2>/dev/null"
for s in "${T_SITES[@]}"; do
	t_eq "$s: r2 master" "$(ref "$s" r2)" "$TIP"
done
t_done
