#!/bin/bash
# The whole path of issue 2 through the real programs: sshd takes alice's
# key from grant-keys (AuthorizedKeysCommand), `2fa val <TOTP>` from
# 127.0.7.7 whitelists that address, a real `git push` is then accepted
# from 127.0.7.7 and refused from 127.0.7.8 with the "2fa val" hint, and
# clones work from anywhere.  `grantctl check` agrees with the pushes.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user alice
SECRET=$(gd_base32_secret)
t_expect 0 "grantctl enroll alice --totp --secret S" t_ctl enroll alice --totp --secret "$SECRET"
t_expect 0 "grantctl repo add demo --mode required --writer alice" \
	t_ctl repo add demo --mode required --writer alice
t_check "repo add created the bare repository $T_SITE/repos/demo.git" \
	test -f "$T_SITE/repos/demo.git/HEAD"

t_section "grant-keys gives sshd alice's forced-command line"
t_expect 0 "grant-keys --config F root" "$GD_BIN/grant-keys" --config "$T_SITE/grantd.conf" root
t_has "the line names grant-shell by absolute path" "$OUT" "command=\"$GD_BIN/grant-shell"
t_has "the line passes --config on" "$OUT" "--config $T_SITE/grantd.conf"
t_has "the line carries alice's key" "$OUT" "$(cut -d' ' -f2 "$T_KEYS/alice.pub")"

t_section "before any grant"
t_expect 0 "clone demo from 127.0.7.9 (reads are never guarded)" t_clone 127.0.7.9 alice demo "$T_DIR/w"
t_commit "$T_DIR/w"
t_expect nz "push from 127.0.7.7 refused before 2fa val" t_push 127.0.7.7 alice "$T_DIR/w"
t_has "the refusal tells how to fix it (2fa val)" "$ERR" "2fa val"
t_expect 1 "2fa isval from 127.0.7.7 exits 1" t_ssh 127.0.7.7 alice 2fa isval
t_eq "2fa isval prints False" "$OUT" False
t_expect 1 "grantctl check alice 127.0.7.7 demo exits 1 before val" t_ctl check alice 127.0.7.7 demo
t_check "grantctl check gives a reason" test -n "$OUT$ERR"

t_section "2fa val from 127.0.7.7"
t_totp_settle
t_expect 0 "ssh -b 127.0.7.7 ... 2fa val <oathtool --totp>" t_ssh 127.0.7.7 alice 2fa val "$(t_totp "$SECRET")"
t_expect 0 "2fa isval from 127.0.7.7 exits 0" t_ssh 127.0.7.7 alice 2fa isval
t_eq "2fa isval prints True" "$OUT" True
t_expect 1 "2fa isval from 127.0.7.8 exits 1" t_ssh 127.0.7.8 alice 2fa isval
t_eq "2fa isval from 127.0.7.8 prints False" "$OUT" False

t_section "push"
t_expect 0 "git push from 127.0.7.7 accepted" t_push 127.0.7.7 alice "$T_DIR/w"
t_eq "the site's demo.git main is the pushed commit" "$(t_ref demo)" "$(t_head "$T_DIR/w")"
before=$(t_ref demo)
t_commit "$T_DIR/w"
t_expect nz "git push from 127.0.7.8 refused" t_push 127.0.7.8 alice "$T_DIR/w"
t_has "the refusal says 2fa val" "$ERR" "2fa val"
t_eq "the refused push moved nothing" "$(t_ref demo)" "$before"
t_expect 0 "git push from 127.0.7.7 again (scp-like path with .git)" \
	env GIT_SSH_COMMAND="$(gd_git_ssh_command 127.0.7.7 "$T_KEYS/alice") -p $T_SSH_PORT" \
	git -C "$T_DIR/w" push -q "root@$T_ADDR:demo.git" HEAD:refs/heads/main
t_eq "main moved to the new commit" "$(t_ref demo)" "$(t_head "$T_DIR/w")"

t_section "clone from anywhere"
t_expect 0 "clone from 127.0.7.8 (no grant there)" t_clone 127.0.7.8 alice demo "$T_DIR/c8"
t_eq "the clone has the pushed commit" "$(t_head "$T_DIR/c8")" "$(t_head "$T_DIR/w")"
t_expect 0 "fetch from 127.0.9.9" t_git 127.0.9.9 alice -C "$T_DIR/c8" fetch -q origin

t_section "grantctl check USER IP REPO"
t_expect 0 "check alice 127.0.7.7 demo exits 0" t_ctl check alice 127.0.7.7 demo
t_has "and says so to the administrator" "$OUT" \
	"allowed: user alice may push to demo"
t_expect 0 "check alice ::ffff:127.0.7.7 demo exits 0 (v4-mapped is the v4 address)" \
	t_ctl check alice ::ffff:127.0.7.7 demo
t_expect 0 "check alice 127.0.7.7 demo.git exits 0 (NAME.git is NAME)" t_ctl check alice 127.0.7.7 demo.git
t_expect 1 "check alice 127.0.7.8 demo exits 1" t_ctl check alice 127.0.7.8 demo
t_expect 2 "check alice 127.0.7 demo exits 2 (bad IP)" t_ctl check alice 127.0.7 demo
t_expect 2 "check alice 127.0.7.7 ../demo exits 2 (bad repo name)" t_ctl check alice 127.0.7.7 ../demo
t_expect nz "check alice 127.0.7.7 nosuch exits non-zero (no such repo)" t_ctl check alice 127.0.7.7 nosuch
t_expect nz "check nobody 127.0.7.7 demo exits non-zero (no such user)" t_ctl check nobody 127.0.7.7 demo

t_section "revoke"
t_expect 0 "grantctl grant revoke alice 127.0.7.7" t_ctl grant revoke alice 127.0.7.7
t_expect 1 "check alice 127.0.7.7 demo exits 1 after revoke" t_ctl check alice 127.0.7.7 demo
t_commit "$T_DIR/w"
t_expect nz "push from 127.0.7.7 refused after revoke" t_push 127.0.7.7 alice "$T_DIR/w"

t_done
