#!/bin/bash
# grantd as an unprivileged service account whose HOME it cannot read
# (issue 8 item 12): HOME=/root (0700, root's) inherited, as a unit
# without User's home or a `su` without -l leaves it.  Hosted repositories
# must not depend on that account's git configuration: libgit2 used to
# fail every repository ("failed to stat '/root/.gitconfig'").  The node
# reads no global, XDG or system configuration, so `grantctl repo add`
# works and the repository is whole, hook and receive.fsckObjects
# included.  Needs root (useradd); the account is removed at exit.
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || { echo "# needs root (useradd, setpriv)"; exit 77; }
for tool in useradd userdel setpriv; do
	command -v "$tool" >/dev/null || { echo "# no $tool"; exit 77; }
done

# The account: a fresh system user, removed by the cleanup whatever
# happens.
T_USER=gdit$$
T_USER=${T_USER:0:31}
useradd --system --no-create-home --home-dir /nonexistent \
	--shell /usr/sbin/nologin "$T_USER" || t_fatal "useradd $T_USER"
t_user_cleanup() {
	t_cleanup
	userdel "$T_USER" 2>/dev/null
}
trap t_user_cleanup EXIT

# HOME: a directory the account cannot read, root's own, as /root is.
NOHOME=/root
if [[ $(stat -c '%U %a' /root 2>/dev/null) != "root 700" ]]; then
	NOHOME=$T_DIR/roothome
	mkdir -m 0700 "$NOHOME"
	echo '[include] path = x' >"$NOHOME/.gitconfig"
fi
t_check "HOME=$NOHOME is unreadable for $T_USER" \
	eval "! setpriv --reuid=$T_USER --regid=$T_USER --clear-groups test -r '$NOHOME'"

# grantd through a wrapper that drops to the account with that HOME; the
# other programs are the real ones (grant-hook is found beside the real
# grantd through /proc/self/exe).
t_wrap_grantd "$T_DIR/bin" "exec setpriv --reuid=$T_USER --regid=$T_USER --clear-groups \\
	env HOME=$NOHOME \"\$REAL\" \"\$@\"" || t_fatal "the grantd wrapper"

t_section "grantd runs as $T_USER with HOME=$NOHOME"
chmod 755 "$T_DIR"
t_config
chown -R "$T_USER:$T_USER" "$T_SITE"
GD_BIN=$T_DIR/bin gd_grantd_start "$T_SITE" || t_fatal "grantd starts as $T_USER"
pid=$(<"$T_SITE/grantd.pid")
t_eq "the node runs as $T_USER" "$(stat -c %U "/proc/$pid")" "$T_USER"
t_has "the node's HOME is $NOHOME" "$(tr '\0' '\n' <"/proc/$pid/environ")" "HOME=$NOHOME"

t_section "repositories do not depend on the account's git configuration"
t_expect 0 "grantctl repo add svc --mode off" t_ctl repo add svc --mode off
t_check "svc.git exists" test -f "$T_SITE/repos/svc.git/HEAD"
t_eq "svc.git belongs to $T_USER" "$(stat -c %U "$T_SITE/repos/svc.git")" "$T_USER"
t_check "svc.git has the post-receive hook" \
	grep -q "grant-hook' --config" "$T_SITE/repos/svc.git/hooks/post-receive"
t_eq "svc.git has receive.fsckObjects = true" \
	"$(git --git-dir="$T_SITE/repos/svc.git" config --bool receive.fsckObjects)" true
t_expect 0 "grantctl repo add svc-fork --fork-of svc" t_ctl repo add svc-fork --fork-of svc
t_check "the fork exists with its hook" \
	grep -q "grant-hook' --config" "$T_SITE/repos/svc-fork.git/hooks/post-receive"
if grep -qF "failed to stat" "$T_SITE/grantd.log"; then
	t_fail "no libgit2 error in the log" "$(grep -F "failed to stat" "$T_SITE/grantd.log")"
else
	t_ok "no libgit2 error in the log"
fi

t_section "a push as the account: the hook reaches the node"
W=$T_DIR/work
git init -q "$W"
git -C "$W" -c user.name=t -c user.email=t@e commit -q --allow-empty -m one
chown -R "$T_USER:$T_USER" "$W"
t_expect 0 "push to svc.git as $T_USER (HOME=$NOHOME)" \
	setpriv --reuid="$T_USER" --regid="$T_USER" --clear-groups \
	env HOME="$NOHOME" GIT_CONFIG_NOSYSTEM=1 \
	git -C "$W" push -q "$T_SITE/repos/svc.git" HEAD:refs/heads/main
t_check "the node recorded the push" \
	gd_wait_for 10 grep -q "push recorded repo=svc" "$T_SITE/grantd.log"
t_done
