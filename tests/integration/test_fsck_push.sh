#!/bin/bash
# Hosted repositories check what is pushed to them (issue 8 item 11): the
# node sets receive.fsckObjects in every repository it makes, and in every
# one it finds at start, so git-receive-pack refuses a malformed object at
# the push (libgit2's indexer, which takes packs from peers, checks only
# hashes and the pack's shape: what is refused here is never served to
# them).  Through the real path: sshd, grant-shell, git-receive-pack.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user alice
t_expect 0 "grantctl repo add fs --mode off --writer alice" \
	t_ctl repo add fs --mode off --writer alice
t_eq "fs.git has receive.fsckObjects = true" \
	"$(git --git-dir="$T_SITE/repos/fs.git" config --bool receive.fsckObjects)" true

t_section "a well-formed push goes in"
t_expect 0 "clone fs" t_clone 127.0.7.7 alice fs "$T_DIR/w"
t_commit "$T_DIR/w"
t_expect 0 "push a good commit" t_push 127.0.7.7 alice "$T_DIR/w"
good=$(t_head "$T_DIR/w")
t_eq "main is the good commit" "$(t_ref fs)" "$good"

t_section "a commit with a malformed author line is refused"
tree=$(git -C "$T_DIR/w" rev-parse "HEAD^{tree}")
bad=$(printf 'tree %s\nparent %s\nauthor Mallory <m@example.org> yesterday +0000\ncommitter Mallory <m@example.org> 1700000000 +0000\n\nmalformed\n' \
	"$tree" "$good" | git -C "$T_DIR/w" hash-object -t commit --literally -w --stdin)
t_check "the malformed commit was made ($bad)" test -n "$bad"
t_expect nz "push of the malformed commit is refused" \
	t_git 127.0.7.7 alice -C "$T_DIR/w" push origin "$bad:refs/heads/main"
t_has "git-receive-pack names the fsck error" "$ERR" "badDate"
t_eq "main did not move" "$(t_ref fs)" "$good"
t_check "the malformed commit is not in fs.git" \
	eval "! git --git-dir='$T_SITE/repos/fs.git' cat-file -e '$bad' 2>/dev/null"

t_section "a repository from before (no receive.fsckObjects) gets it at start"
git --git-dir="$T_SITE/repos/fs.git" config receive.fsckObjects false
gd_grantd_stop "$T_SITE" || t_fail "grantd stops"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts again"
t_eq "fs.git has receive.fsckObjects = true again" \
	"$(git --git-dir="$T_SITE/repos/fs.git" config --bool receive.fsckObjects)" true
t_expect nz "the malformed push is still refused" \
	t_git 127.0.7.7 alice -C "$T_DIR/w" push origin "$bad:refs/heads/main"
t_eq "main did not move" "$(t_ref fs)" "$good"
t_done
