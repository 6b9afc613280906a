#!/bin/bash
# The grant commands of grant-shell (SPEC 3.2) with kernel.org's syntax:
# val-for-days, val-subnet, val-session, list-val [all], inval IP|myip|all,
# help; and grantctl grant list/revoke.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user gus
GS=$(gd_base32_secret)
t_expect 0 "enroll gus --hotp" t_ctl enroll gus --hotp --secret "$GS" --digits 6
t_expect 0 "repo add g --mode required --writer gus" t_ctl repo add g --mode required --writer gus
t_clone 127.0.7.9 gus g "$T_DIR/w" || t_fatal "clone g"
# tok: the next HOTP value (the counter lives in a file: tok runs in $(...)).
echo 0 >"$T_DIR/counter"
tok() {
	local c
	c=$(<"$T_DIR/counter")
	echo $((c + 1)) >"$T_DIR/counter"
	t_hotp "$GS" "$c"
}
# expires_in_days JSON IP: days from now to the expiry of IP's grant in a
# `grant list --json` array (the column may be unix seconds or ISO 8601).
expires_in_days() {
	python3 -c '
import datetime, json, sys, time
rows = [r for r in json.loads(sys.argv[1]) if sys.argv[2] in json.dumps(r)]
v = [r[k] for r in rows for k in r if "expire" in k.lower()][0]
if isinstance(v, (int, float)) or str(v).isdigit():
    t = float(v); t = t / 1000 if t > 1e11 else t
else:
    t = datetime.datetime.fromisoformat(str(v).replace("Z", "+00:00").replace(" UTC", "+00:00"))
    t = (t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)).timestamp()
print(round((t - time.time()) / 86400, 1))' "$1" "$2"
}

t_section "help"
t_expect 0 "2fa help" t_ssh 127.0.7.7 gus 2fa help
for w in val val-for-days val-subnet val-session isval list-val inval unenroll; do
	t_has "2fa help mentions $w" "$OUT" "$w"
done
t_expect nz "an unknown 2fa command is refused" t_ssh 127.0.7.7 gus 2fa frobnicate
t_expect nz "a shell command is refused" t_ssh 127.0.7.7 gus ls /
t_check "with a usage line" test -n "$ERR"

t_section "list-val and inval need a whitelisted address"
t_expect 1 "2fa list-val from a non-whitelisted address exits 1" t_ssh 127.0.7.7 gus 2fa list-val
t_expect 1 "2fa inval all from a non-whitelisted address exits 1" t_ssh 127.0.7.7 gus 2fa inval all

t_section "val, val-for-days"
t_expect 0 "2fa val from 127.0.7.7" t_ssh 127.0.7.7 gus 2fa val "$(tok)"
t_expect 0 "2fa val-for-days 7 from 127.0.7.8" t_ssh 127.0.7.8 gus 2fa val-for-days 7 "$(tok)"
t_expect 0 "2fa list-val from 127.0.7.7" t_ssh 127.0.7.7 gus 2fa list-val
t_has "list-val shows 127.0.7.7" "$OUT" 127.0.7.7
t_has "list-val shows 127.0.7.8" "$OUT" 127.0.7.8
t_has "list-val names the granting site" "$OUT" paloalto
t_expect 0 "grant list --user gus --json" t_ctl grant list --user gus --json
t_eq "the val grant expires in 1 day (grant_default 24h)" "$(expires_in_days "$OUT" 127.0.7.7)" 1.0
t_eq "the val-for-days 7 grant expires in 7 days" "$(expires_in_days "$OUT" 127.0.7.8)" 7.0

t_section "inval"
t_expect 0 "2fa inval myip from 127.0.7.7" t_ssh 127.0.7.7 gus 2fa inval myip
t_expect 1 "127.0.7.7 is no longer whitelisted" t_ssh 127.0.7.7 gus 2fa isval
t_expect 0 "127.0.7.8 still is" t_ssh 127.0.7.8 gus 2fa isval
t_expect 0 "2fa list-val from 127.0.7.8" t_ssh 127.0.7.8 gus 2fa list-val
t_hasnt "list-val no longer shows 127.0.7.7" "$OUT" 127.0.7.7
t_expect 0 "2fa list-val all from 127.0.7.8" t_ssh 127.0.7.8 gus 2fa list-val all
t_has "list-val all still shows the expired 127.0.7.7" "$OUT" 127.0.7.7
t_expect 0 "2fa val from 127.0.7.9" t_ssh 127.0.7.9 gus 2fa val "$(tok)"
t_expect 0 "2fa inval 127.0.7.9 from 127.0.7.8" t_ssh 127.0.7.8 gus 2fa inval 127.0.7.9
t_expect 1 "127.0.7.9 is no longer whitelisted" t_ssh 127.0.7.9 gus 2fa isval

t_section "val-subnet"
t_expect 0 "2fa val-subnet /24 from 127.0.9.9" t_ssh 127.0.9.9 gus 2fa val-subnet /24 "$(tok)"
t_expect 0 "127.0.9.200 (same /24) is whitelisted" t_ssh 127.0.9.200 gus 2fa isval
t_expect 1 "127.0.10.1 (another /24) is not" t_ssh 127.0.10.1 gus 2fa isval
t_commit "$T_DIR/w"
t_expect 0 "a push from 127.0.9.77 (same /24) is accepted" t_push 127.0.9.77 gus "$T_DIR/w"
t_expect 0 "grant list --user gus --json" t_ctl grant list --user gus --json
t_has "the subnet grant is listed as 127.0.9.0/24" "$OUT" 127.0.9.0/24
t_eq "the subnet grant expires in 8 hours" "$(expires_in_days "$OUT" 127.0.9.0/24)" 0.3

t_section "val-session (ControlMaster)"
t_ctl_master 127.0.11.1 gus "$T_DIR/cm" || t_fatal "start an ssh ControlMaster"
t_expect 0 "2fa val-session over the master connection" \
	ssh -S "$T_DIR/cm" -o BatchMode=yes x 2fa val-session "$(tok)"
t_commit "$T_DIR/w"
t_expect 0 "a push over the same connection is accepted" \
	env GIT_SSH_COMMAND="ssh -S $T_DIR/cm -o BatchMode=yes" \
	git -C "$T_DIR/w" push -q "ssh://root@$T_ADDR:$T_SSH_PORT/g" HEAD:refs/heads/main
t_eq "main moved" "$(t_ref g)" "$(t_head "$T_DIR/w")"
t_commit "$T_DIR/w"
t_expect nz "a push over a new connection from the same address is refused" \
	t_push 127.0.11.1 gus "$T_DIR/w"
t_has "with the 2fa val hint" "$ERR" "2fa val"

t_section "val-session is keyed on the whole SSH_CONNECTION and XDG_SESSION_ID"
# gsh CONNECTION [XDG] COMMAND...: grant-shell as sshd runs it for gus.
gsh() {
	local conn=$1 xdg=$2; shift 2
	env ${xdg:+XDG_SESSION_ID=$xdg} SSH_CONNECTION="$conn" SSH_ORIGINAL_COMMAND="$*" \
		"$GD_BIN/grant-shell" --config "$T_SITE/grantd.conf" gus </dev/null
}
C0="127.0.12.1 40001 $T_ADDR 22"
t_expect 0 "2fa val-session on connection '$C0'" gsh "$C0" "" 2fa val-session "$(tok)"
t_expect 0 "the same connection is allowed" gsh "$C0" "" 2fa isval
t_expect 1 "another client port is refused" gsh "127.0.12.1 40002 $T_ADDR 22" "" 2fa isval
t_expect 1 "another server port is refused" gsh "127.0.12.1 40001 $T_ADDR 2222" "" 2fa isval
t_expect 1 "another server address is refused" gsh "127.0.12.1 40001 127.0.0.2 22" "" 2fa isval
t_expect 1 "a logind session the grant did not name is refused" gsh "$C0" 7 2fa isval
t_expect 0 "2fa val-session on '$C0' in logind session 7" gsh "$C0" 7 2fa val-session "$(tok)"
t_expect 0 "the same connection and session are allowed" gsh "$C0" 7 2fa isval
t_expect 1 "the same connection in logind session 8 is refused" gsh "$C0" 8 2fa isval
t_expect 0 "grant list --user gus --json" t_ctl grant list --user gus --json
t_has "the grant names the whole connection" "$OUT" "127.0.12.1 40001 $T_ADDR 22"

t_section "inval all, grantctl grant revoke"
t_expect 0 "2fa inval all from 127.0.7.8" t_ssh 127.0.7.8 gus 2fa inval all
t_expect 1 "127.0.7.8 is no longer whitelisted" t_ssh 127.0.7.8 gus 2fa isval
t_expect 1 "127.0.9.200 is no longer whitelisted" t_ssh 127.0.9.200 gus 2fa isval
t_expect 0 "2fa val from 127.0.7.7" t_ssh 127.0.7.7 gus 2fa val "$(tok)"
t_expect 0 "2fa inval all purge" t_ssh 127.0.7.7 gus 2fa inval all purge
t_expect 0 "2fa val from 127.0.7.7" t_ssh 127.0.7.7 gus 2fa val "$(tok)"
t_expect 0 "2fa list-val all" t_ssh 127.0.7.7 gus 2fa list-val all
t_hasnt "purge forgot the expired 127.0.7.8" "$OUT" 127.0.7.8
t_expect 0 "grantctl grant revoke gus all" t_ctl grant revoke gus all
t_expect 1 "127.0.7.7 is no longer whitelisted" t_ssh 127.0.7.7 gus 2fa isval
t_expect 0 "grantctl grant list --json" t_ctl grant list --json
# The list may keep revoked and expired grants, told apart by a state column.
t_eq "no live grant left" "$(t_json 'len([r for r in j if "gus" in json.dumps(r) and r.get("state", "live") not in ("revoked", "expired")])' <<<"$OUT")" 0 ||
	echo "$OUT" | sed 's/^/       | /'

t_done
