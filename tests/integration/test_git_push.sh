#!/bin/bash
# Repository replication (SPEC 5 Git; issue 4): a push over ssh to one site
# reaches the two others as objects and refs on disk (fetched as a thin
# pack from a peer, indexed by libgit2, checked for connectivity, the ref
# moved by compare-and-swap); tags, deletions and non-fast-forward updates
# replicate as what they are; clones from every site have the history.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=50
for s in "${T_SITES[@]}"; do t_sshd "$s"; done

t_section "a user with a grant pushes 200 commits to paloalto over ssh"
t_suser paloalto alice
AS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll alice --hotp" t_c paloalto enroll alice --hotp --secret "$AS"
t_expect 0 "paloalto: repo add big --writer alice" t_c paloalto repo add big --writer alice
t_expect_converged "the three sites agree" 10
t_expect 0 "alice 2fa val from 127.0.7.7" t_sssh paloalto 127.0.7.7 alice 2fa val "$(t_hotp "$AS" 0)"
t_expect_soon 0 10 "montreal honours the grant too" t_c montreal check alice 127.0.7.7 big

W=$T_DIR/work
gd_git 127.0.7.7 /dev/null init -q "$W"
for i in $(seq 1 200); do
	mkdir -p "$W/d$((i % 7))"
	echo "line $i $RANDOM" >>"$W/d$((i % 7))/f$((i % 13)).txt"
	gd_git 127.0.7.7 /dev/null -C "$W" add -A
	gd_git 127.0.7.7 /dev/null -C "$W" commit -q -m "commit $i"
done
gd_git 127.0.7.7 /dev/null -C "$W" remote add origin "ssh://root@${T_SADDR[paloalto]}:$T_SSH_PORT/big"
tip=$(t_head "$W")
t_expect 0 "git push of 200 commits to paloalto over ssh" \
	t_git 127.0.7.7 alice -C "$W" push -q origin HEAD:refs/heads/master
for s in portland montreal; do
	t_expect_soon 0 15 "$s: master is the pushed tip on disk" \
		eval "[[ \$(git --git-dir=$(t_dir "$s")/repos/big.git rev-parse -q --verify refs/heads/master) == $tip ]]"
	t_expect 0 "$s: git fsck --strict passes" git --git-dir="$(t_dir "$s")/repos/big.git" fsck --strict --no-progress
	t_eq "$s: 200 commits reachable" \
		"$(git --git-dir="$(t_dir "$s")/repos/big.git" rev-list --count master)" 200
	t_check "$s: the log names the fetch" t_grep_log "$s" "pack fetched repo=big"
done
# status is the writer's copy of the actor's counters, rendered every
# 100 ms: the peers may have the tip before it shows the pack (a fresh
# clone's run: "got '0'" right after "pack served" in the log)
served() { [[ $(t_sj paloalto "int(j['git']['packs_served'] >= 1)") == 1 ]]; }
t_expect_soon 0 5 "paloalto served at least one pack (status)" served

t_section "clones from every site have the history"
for s in "${T_SITES[@]}"; do
	rm -rf "$T_DIR/clone-$s"
	t_expect 0 "clone big from $s over ssh" \
		t_git 127.0.7.7 alice clone -q "ssh://root@${T_SADDR[$s]}:$T_SSH_PORT/big" "$T_DIR/clone-$s"
	t_eq "$s's clone has the pushed tip" "$(git -C "$T_DIR/clone-$s" rev-parse origin/master)" "$tip"
done

t_section "a tag, a branch, a deletion and a forced (non-fast-forward) push"
gd_git 127.0.7.7 /dev/null -C "$W" tag -a v1 -m "release 1"
gd_git 127.0.7.7 /dev/null -C "$W" branch topic HEAD~5
t_expect 0 "push tag v1 and branch topic" t_git 127.0.7.7 alice -C "$W" push -q origin v1 topic
tag=$(git -C "$W" rev-parse v1)
for s in portland montreal; do
	t_expect_soon 0 10 "$s: tag v1 (the annotated tag object) arrived" \
		eval "[[ \$(git --git-dir=$(t_dir "$s")/repos/big.git rev-parse -q --verify refs/tags/v1) == $tag ]]"
	t_expect_soon 0 10 "$s: branch topic arrived" \
		eval "git --git-dir=$(t_dir "$s")/repos/big.git rev-parse -q --verify refs/heads/topic"
done
t_expect 0 "delete topic at paloalto" t_git 127.0.7.7 alice -C "$W" push -q origin :topic
gd_git 127.0.7.7 /dev/null -C "$W" reset -q --hard HEAD~3
echo rewritten >"$W/new.txt"
gd_git 127.0.7.7 /dev/null -C "$W" add -A
gd_git 127.0.7.7 /dev/null -C "$W" commit -q -m rewritten
forced=$(t_head "$W")
t_expect 0 "force-push a rewritten master" t_git 127.0.7.7 alice -C "$W" push -q -f origin HEAD:refs/heads/master
for s in portland montreal; do
	t_expect_soon 1 10 "$s: topic is deleted" \
		git --git-dir="$(t_dir "$s")/repos/big.git" rev-parse -q --verify refs/heads/topic
	t_expect_soon 0 10 "$s: master is the rewritten tip (not a fast-forward)" \
		eval "[[ \$(git --git-dir=$(t_dir "$s")/repos/big.git rev-parse -q --verify refs/heads/master) == $forced ]]"
	t_eq "$s: no conflict reported (one writer)" "$(t_sj "$s" "len(j['conflicts'])")" 0
done
t_expect_converged "the three sites agree" 10

t_done
