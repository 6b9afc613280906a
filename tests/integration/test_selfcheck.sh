#!/bin/bash
# grantd -t checks what a start would meet, not only the syntax (operator
# trial, 6 and 8): data_dir, repo_dir and the sockets' directories exist
# or can be made, and are writable by the account the node runs as; the key
# file is readable by it; root-owned files left by a start as root are
# named with the chown that mends them; a start as root over another
# account's files is refused.  As root, -t checks as the owner of the
# node's files.  Needs root for the account part (useradd).
. "$(dirname "$0")/lib.sh"

t_config
CONF=$T_SITE/grantd.conf

t_section "a good config"
t_expect 0 "grantd -t exits 0" "$GD_BIN/grantd" -t --config "$CONF"
t_has "and says configuration ok" "$OUT" "configuration ok"

# variant NAME SED-EXPR...: a copy of the config edited by sed.
variant() {
	local f=$T_DIR/$1.conf; shift
	sed -e '' "$@" "$CONF" >"$f"
	echo "$f"
}

t_section "paths a start could not use"
f=$(variant nodata -e "s|^data_dir = .*|data_dir = $T_DIR/no/such/data|")
t_expect 2 "data_dir whose parent is missing: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "names data_dir and the fix" "$ERR" "data_dir $T_DIR/no/such/data does not exist"
t_has "with install -d" "$ERR" "install -d -o"
f=$(variant reldata -e "s|^data_dir = .*|data_dir = var/lib/grantd|")
t_expect 2 "a relative data_dir: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "says relative" "$ERR" "relative path"
f=$(variant norepo -e "s|^repo_dir = .*|repo_dir = $T_DIR/no/such/repos|")
t_expect 2 "repo_dir whose parent is missing: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "names repo_dir" "$ERR" "repo_dir $T_DIR/no/such/repos"
f=$(variant nosock -e "s|^user_socket = .*|user_socket = $T_DIR/no/such/user.sock|")
t_expect 2 "a socket directory that cannot be made: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "names the socket's directory" "$ERR" "the directory of user_socket"
long=$T_DIR/$(printf 'd%.0s' {1..120})/user.sock
f=$(variant longsock -e "s|^user_socket = .*|user_socket = $long|")
t_expect 2 "a socket path over the unix limit: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "says so" "$ERR" "the limit of a unix socket's path"
: >"$T_DIR/notasocket"
f=$(variant filesock -e "s|^admin_socket = .*|admin_socket = $T_DIR/notasocket|")
t_expect 2 "a socket path that is a file: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "says so" "$ERR" "is not a socket"
f=$(variant sameport -e "s|^sync = .*|sync = tcp://$T_ADDR:$T_PUB_PORT|")
t_expect 2 "sync on publish's endpoint: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "says so" "$ERR" "publish and sync are the same endpoint"

f=$(variant badz85)
printf '\n[peer portland]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = %s\n' \
	'~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~' >>"$f"
t_expect 2 "a peer key of 40 characters that is not Z85: exit 2" "$GD_BIN/grantd" -t --config "$f"
t_has "names the peer" "$ERR" "[peer portland] public_key is not a Z85 key"

t_section "as the service account"
[[ $(id -u) == 0 ]] || { echo "# not root: the account checks are skipped"; t_done; }
command -v useradd >/dev/null || { echo "# no useradd"; t_done; }
T_USER=gdsc$$
T_USER=${T_USER:0:31}
useradd --system --no-create-home --home-dir /nonexistent \
	--shell /usr/sbin/nologin "$T_USER" || t_fatal "useradd $T_USER"
t_user_cleanup() {
	t_cleanup
	userdel "$T_USER" 2>/dev/null
}
trap t_user_cleanup EXIT
chmod 755 "$T_DIR"
chown -R "$T_USER:$T_USER" "$T_SITE"
t_expect 0 "root's -t over $T_USER's files: exit 0" "$GD_BIN/grantd" -t --config "$CONF"
t_has "it checks as $T_USER" "$ERR" "checking as $T_USER"

chown root:root "$T_SITE/node.key"
t_expect 2 "a key file $T_USER cannot read: exit 2" "$GD_BIN/grantd" -t --config "$CONF"
t_has "names secret_key and the reason" "$ERR" "cannot read key file: Permission denied"
chown "$T_USER:" "$T_SITE/node.key"

chown root:root "$T_SITE/data"
t_expect 2 "a data_dir $T_USER may not write: exit 2" "$GD_BIN/grantd" -t --config "$CONF"
t_has "names it with the chown" "$ERR" "data_dir $T_SITE/data: $T_USER may not write it"
chown "$T_USER:" "$T_SITE/data"

# a socket directory root owns the parent of (/run/grantd before systemd's
# RuntimeDirectory= made it): root's check warns, the account's refuses
mkdir -m 0755 "$T_DIR/rootrun"
f=$(variant rootrun -e "s|^user_socket = .*|user_socket = $T_DIR/rootrun/grantd/user.sock|")
chmod 644 "$f"
t_expect 0 "root's -t: a socket directory $T_USER cannot make is a warning" "$GD_BIN/grantd" -t --config "$f"
t_has "naming systemd's RuntimeDirectory=" "$ERR" "warning: the directory of user_socket $T_DIR/rootrun/grantd does not exist"
t_has "and the fix" "$ERR" "RuntimeDirectory="
if command -v setpriv >/dev/null; then
	t_expect 2 "the same -t as $T_USER (ExecStartPre): exit 2" \
		setpriv --reuid="$T_USER" --regid="$T_USER" --clear-groups "$GD_BIN/grantd" -t --config "$f"
fi

t_section "a start as root over $T_USER's files"
t_expect 2 "grantd as root refuses to start" timeout 20 "$GD_BIN/grantd" --config "$CONF"
t_has "and says what to run" "$ERR" "runuser -u $T_USER -- grantd --config $CONF"
t_check "it left no file in data_dir" test -z "$(ls -A "$T_SITE/data")"
# what such a start used to leave: root's LOCK in the account's data_dir
: >"$T_SITE/data/LOCK"
t_expect 2 "-t finds root's file in data_dir" "$GD_BIN/grantd" -t --config "$CONF"
t_has "with the fix" "$ERR" "belongs to root, not to $T_USER"
t_has "chown -R" "$ERR" "run: chown -R $T_USER: $T_SITE/data"

t_done
