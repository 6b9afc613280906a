#!/bin/bash
# Secret hygiene (SPEC 2.6, 3.5): the node's key file must not be readable
# by group or others; the node makes no core dumps; `grantctl rekey
# NEWKEYFILE` re-seals every stored secret so the node's key can be
# rotated, after which the old key opens nothing.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user kim
KS=$(gd_base32_secret)
(umask 077; echo "$KS" >"$T_DIR/kim.secret")
t_expect 0 "enroll kim --hotp --secret-file" t_ctl enroll kim --hotp --secret-file "$T_DIR/kim.secret"
C=0
# val SRCIP: 2fa val with kim's next HOTP value.
val() { local t; t=$(t_hotp "$KS" "$C"); C=$((C + 1)); t_ssh "$1" kim 2fa val "$t"; }
t_expect 0 "kim: 2fa val" val 127.0.7.7

t_section "no core dumps"
PID=$(<"$T_SITE/grantd.pid")
t_eq "grantd's core size limit is 0 (soft and hard)" \
	"$(prlimit --pid "$PID" --core --output SOFT,HARD --noheadings | tr -s ' ' | sed 's/^ //')" "0 0"

# Dumpable: /proc/PID/* of a non-dumpable process belong to root, whatever
# its user, so run a second node as nobody and compare with a dumpable
# process of the same user (a positive control).
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
	NB=$T_DIR/nobody
	mkdir -p "$NB"
	chmod 711 "$T_DIR"
	gd_site_keygen "$NB" >/dev/null || t_fatal "keygen for the nobody node"
	gd_site_config "$NB" nobody "tcp://$T_ADDR:$((T_SSH_PORT + 3))" \
		"tcp://$T_ADDR:$((T_SSH_PORT + 4))" || t_fatal "config for the nobody node"
	chown -R 65534:65534 "$NB"
	(setsid setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$GD_BIN/grantd" --config "$NB/grantd.conf" </dev/null >>"$NB/grantd.log" 2>&1 &
		echo $! >"$T_DIR/nobody.pid")
	NPID=$(<"$T_DIR/nobody.pid")
	if gd_wait_for "$GD_TIMEOUT" eval 'gd_grantctl "$NB" status >/dev/null 2>&1'; then
		setpriv --reuid=65534 --regid=65534 --clear-groups sleep 60 &
		SPID=$!
		gd_wait_for 10 eval '[[ $(cat "/proc/$SPID/comm" 2>/dev/null) == sleep ]]'
		t_eq "a dumpable process of nobody owns its /proc/PID/environ (control)" \
			"$(stat -c %u "/proc/$SPID/environ")" 65534
		kill "$SPID"
		t_eq "grantd runs as nobody" "$(stat -c %u "/proc/$NPID")" 65534
		t_eq "but is not dumpable: its /proc/PID/environ belongs to root" \
			"$(stat -c %u "/proc/$NPID/environ")" 0
	else
		t_fail "grantd as nobody starts" "$(tail -5 "$NB/grantd.log")"
	fi
	kill -TERM "$NPID" 2>/dev/null
	gd_wait_for "$GD_TIMEOUT" eval '! kill -0 "$NPID" 2>/dev/null' ||
		t_fail "grantd as nobody stops on SIGTERM"
else
	t_fail "the dumpable check needs root and setpriv"
fi

t_section "a key file readable by others is refused, as sshd does"
t_check "grantd stops" gd_grantd_stop "$T_SITE"
chmod 644 "$T_SITE/node.key"
t_expect 2 "grantd -t with a 0644 key file exits 2" "$GD_BIN/grantd" --config "$T_SITE/grantd.conf" -t
t_has "naming the file" "$ERR" "$T_SITE/node.key"
t_has "and the fix" "$ERR" "chmod 600"
t_expect 2 "grantd with a 0644 key file does not start" timeout 60 "$GD_BIN/grantd" --config "$T_SITE/grantd.conf"
t_has "and says why" "$ERR" "readable by group or others"
chmod 640 "$T_SITE/node.key"
t_expect 2 "nor with 0640" "$GD_BIN/grantd" --config "$T_SITE/grantd.conf" -t
chmod 600 "$T_SITE/node.key"
t_expect 0 "grantd -t with mode 0600 is fine" "$GD_BIN/grantd" --config "$T_SITE/grantd.conf" -t
gd_grantd_start "$T_SITE" || t_fatal "grantd starts again"

t_section "grantctl rekey NEWKEYFILE"
OLDPUB=$(<"$T_SITE/node.pub")
t_expect 0 "grantctl keygen new.key" "$GD_BIN/grantctl" keygen "$T_SITE/new.key"
NEWPUB=$(awk '/public key:/ {print $NF}' <<<"$OUT")
chmod 644 "$T_SITE/new.key"
t_expect 2 "rekey refuses a key file readable by others" t_ctl rekey "$T_SITE/new.key"
t_has "saying chmod 600" "$ERR" "chmod 600"
chmod 600 "$T_SITE/new.key"
t_expect 2 "rekey to the current key is refused" t_ctl rekey "$T_SITE/node.key"
D0=$(t_digest)
t_expect 0 "grantctl rekey new.key" t_ctl rekey "$T_SITE/new.key"
t_has "it tells the next steps" "$OUT" "restart"
t_has "and the new public key" "$OUT" "$NEWPUB"
t_eq "the replicated state is unchanged (digest)" "$(t_digest)" "$D0"
t_expect 0 "kim: 2fa val still works on the running node" val 127.0.7.8
t_check "grantd stops" gd_grantd_stop "$T_SITE"
sed -i "s|^secret_key = .*|secret_key = $T_SITE/new.key|" "$T_SITE/grantd.conf"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts with the new key"
t_expect 0 "status" t_ctl status --json
t_expect 0 "kim: 2fa val works after the restart with the new key" val 127.0.7.9
t_hasnt "the new key is not the old one" "$NEWPUB" "$OLDPUB"
t_check "grantd stops" gd_grantd_stop "$T_SITE"
sed -i "s|^secret_key = .*|secret_key = $T_SITE/node.key|" "$T_SITE/grantd.conf"
# the digest is made again from the records at start: a key that opens
# none of them stops the node at once
t_start_refused "$T_SITE" "with the old key, grantd refuses to start"
t_check "the node logs that a sealed value does not open" \
	grep -q 'sealed value does not open cf=enroll' "$T_SITE/grantd.log"
sed -i "s|^secret_key = .*|secret_key = $T_SITE/new.key|" "$T_SITE/grantd.conf"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts with the new key again"
t_expect 0 "with the new key again, kim: 2fa val works" val 127.0.7.10

t_done
