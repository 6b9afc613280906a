#!/bin/bash
# A peer's key rotation without a restart of the other sites (issue 22,
# point 4): paloalto's key is rotated as docs/operations.md ("Rotating a
# node's key") says, and portland and montreal take paloalto's new public
# key with SIGHUP (what `systemctl reload grantd` sends) instead of a
# restart.  Before, SIGHUP killed the node (no handler) and the key was
# read at start only.  Here:
#  - a reload of a file that does not parse logs FILE:LINE and the node
#    keeps serving on the keys it has (replication and token votes go on);
#  - after portland's reload its ZAP handler admits paloalto's new key and
#    no longer the old one (a client with the old key pair gets nothing),
#    and every socket of portland to paloalto is made again with the new
#    server key: replication's SUB and DEALER (the sites converge), the
#    vote DEALER (with montreal frozen, a token used at portland needs
#    paloalto's promise) and the repository DEALER (with montreal frozen,
#    a push at paloalto reaches portland from paloalto alone);
#  - montreal's reload also changes a setting that needs a restart and
#    adds a peer: both are logged by name and not applied; its DEALERs
#    are checked the same way, portland frozen;
#  - nobody but paloalto restarts (same pids), both directions heal, the
#    digests converge, and one TOTP token is accepted at one site only.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rotation_lib.sh"

PY=$(t_py) || PY=
t_cluster_up token_quorum=majority
PID_PL=$(t_pid portland)
PID_MT=$(t_pid montreal)

rotation_setup

# hup SITE: SIGHUP to SITE's node (what systemctl reload sends)
hup() { kill -HUP "$(t_pid "$1")"; }
# logged SITE N TEXT: SITE's log has TEXT at least N times
logged() { (($(grep -cF -- "$3" "$(t_dir "$1")/grantd.log") >= $2)); }
# same_pids: portland and montreal run the processes they started with
same_pids() {
	[[ $(t_pid portland) == "$PID_PL" && $(t_pid montreal) == "$PID_MT" ]] &&
		gd_alive "$PID_PL" && gd_alive "$PID_MT"
}
# old_key SITE WANT: a client with paloalto's old key pair, 3 s on SITE's
# publish endpoint, receives something (WANT "got": SITE's ZAP handler
# admits the key) or nothing (WANT "nothing")
old_key() {
	local out
	out=$("$PY" "$T_HERE/repl_rogue.py" peer "tcp://${T_SADDR[$1]}:$T_PUB_PORT" \
		"tcp://${T_SADDR[$1]}:$T_SYNC_PORT" "$(<"$(t_dir "$1")/node.pub")" \
		"$PA/node.key" 3)
	echo "$out"
	case $2 in
	got) [[ $out =~ \"sub_received\":\ [1-9] ]] ;;
	nothing) [[ $out == *'"sub_received": 0,'* ]] ;;
	esac
}

t_expect_soon 0 20 "paloalto votes by majority" votes paloalto
t_expect_soon 0 20 "portland votes by majority" votes portland

t_section "a reload of a file that does not parse: FILE:LINE logged, the node keeps serving"
PL_CONF=$(t_dir portland)/grantd.conf
cp "$PL_CONF" "$T_DIR/portland.conf.good"
t_expect 0 "portland: [peer paloalto] public_key pasted wrong" set_key portland "$OLD" "${OLD:0:20}"
LINE=$(grep -nxF "public_key = ${OLD:0:20}" "$PL_CONF" | cut -d: -f1)
t_expect 0 "portland: kill -HUP" hup portland
t_expect_soon 0 10 "portland logs the file and line it refused" \
	t_grep_log portland "reload failed: $PL_CONF:$LINE: bad public_key '${OLD:0:20}'"
t_check "... and that it keeps its configuration" \
	t_grep_log portland "the node keeps running on the configuration it has"
t_check "portland still runs, the same process" same_pids
# the clients read the file too (grantctl, grant-shell): ask the others
t_expect_soon 0 5 "paloalto still hears portland (its ZAP admits paloalto's key)" hears paloalto portland
t_expect_soon 0 5 "montreal still hears portland" hears montreal portland
t_expect 0 "paloalto: user add ida" t_c paloalto user add ida
t_expect_converged "paloalto and montreal agree" 20 paloalto montreal
# the file put back, not read: what portland serves is what it kept
cp "$T_DIR/portland.conf.good" "$PL_CONF"
t_check "portland hears paloalto" hears portland paloalto
t_expect 0 "portland: hugo's val accepted (the others' votes, on the old keys)" \
	t_sh portland 127.0.7.5 hugo 2fa val "$(t_hotp "$HS" 0)"
t_expect_converged "the three sites agree" 20
t_expect 0 "portland: kill -HUP with the file as it was" hup portland
t_expect_soon 0 10 "portland: reload done, nothing to change" \
	t_grep_log portland "reload done keys_changed=0 not_applied=0"
if [[ -n $PY ]]; then
	t_expect 0 "portland admits paloalto's key (a client with its key pair is published to)" \
		old_key portland got
fi

t_section "paloalto's key rotated as docs/operations.md says"
out=$(t_c paloalto keygen "$PA/node-2.key") || t_fatal "grantctl keygen $PA/node-2.key"
NEW=$(awk 'NF { w = $NF } END { print w }' <<<"$out")
t_eq "keygen printed a new public key" "${#NEW}" 40
t_expect 0 "paloalto: grantctl rekey node-2.key" t_c paloalto rekey "$PA/node-2.key"
sed -i "s|^secret_key = .*|secret_key = $PA/node-2.key|" "$PA/grantd.conf"
t_expect 0 "grantd -t accepts the configuration" "$GD_BIN/grantd" -t --config "$PA/grantd.conf"
t_stop paloalto
t_start paloalto
t_expect_soon 0 20 "paloalto: portland refuses its key" peer_link paloalto portland key_refused
t_expect_soon 0 20 "paloalto: montreal refuses its key" peer_link paloalto montreal key_refused
t_expect_soon 0 10 "portland logs the refused key, and to reload" \
	t_grep_log portland "reason=unknown key key=$NEW refused="
t_check "... naming the section to set it in" t_grep_log portland \
	"set it as public_key of that peer's [peer NAME] section here and reload this node (systemctl reload grantd, or kill -HUP)"

t_section "portland takes paloalto's new key on SIGHUP"
t_expect 0 "portland: [peer paloalto] public_key set to the new key" set_key portland "$OLD" "$NEW" "$PA/node-2.key"
t_expect 0 "portland: kill -HUP" hup portland
t_expect_soon 0 10 "portland: reload: peer paloalto public key changed: relinked" \
	t_grep_log portland "reload: peer paloalto public key changed: relinked key=$NEW"
t_expect_soon 0 10 "portland: reload done" logged portland 1 "reload done keys_changed=1 not_applied=0"
t_expect_soon 0 20 "portland hears paloalto" hears portland paloalto
t_expect_soon 0 20 "paloalto hears portland again, without a restart" hears paloalto portland
t_expect_soon 0 10 "paloalto: its link to portland is up" peer_link paloalto portland up
t_expect_converged "paloalto and portland agree" 20 paloalto portland
t_check "paloalto: montreal still refuses its key" peer_link paloalto montreal key_refused
if [[ -n $PY ]]; then
	t_expect 0 "portland no longer admits paloalto's old key (its client gets nothing in 3 s)" \
		old_key portland nothing
	t_expect_soon 0 10 "portland logs the old key refused" \
		t_grep_log portland "reason=unknown key key=$OLD refused="
fi
t_expect_soon 0 20 "paloalto votes again" votes paloalto

t_section "portland's vote and repository DEALERs to paloalto have the new key (montreal frozen)"
t_pause montreal
W=$T_DIR/w
gd_git 127.0.0.1 /dev/null init -q "$W"
echo "$RANDOM" >"$W/f"
gd_git 127.0.0.1 /dev/null -C "$W" add -A
gd_git 127.0.0.1 /dev/null -C "$W" commit -q -m c
TIP=$(t_head "$W")
t_expect 0 "a push to r at paloalto" \
	gd_git 127.0.0.1 /dev/null -C "$W" push -q "$PA/repos/r.git" HEAD:refs/heads/master
t_expect_soon 0 20 "portland: r's master and its objects came from paloalto" ref_is portland "$TIP"
t_expect 0 "portland: hugo's val accepted by the majority of portland and paloalto" \
	t_sh portland 127.0.7.6 hugo 2fa val "$(t_hotp "$HS" 1)"
t_resume montreal

t_section "montreal takes the new key on SIGHUP; what needs a restart is logged"
MT_CONF=$(t_dir montreal)/grantd.conf
t_expect 0 "montreal: [peer paloalto] public_key set to the new key" set_key montreal "$OLD" "$NEW" "$PA/node-2.key"
sed -i 's/^log_level = info$/log_level = debug/' "$MT_CONF"
out=$(t_c montreal keygen "$T_DIR/seattle.key") || t_fatal "grantctl keygen seattle.key"
gd_site_add_peer "$(t_dir montreal)" seattle "tcp://$T_NET.9:$T_PUB_PORT" \
	"tcp://$T_NET.9:$T_SYNC_PORT" "$(awk 'NF { w = $NF } END { print w }' <<<"$out")"
t_expect 0 "montreal: kill -HUP" hup montreal
t_expect_soon 0 10 "montreal: reload: peer paloalto public key changed: relinked" \
	t_grep_log montreal "reload: peer paloalto public key changed: relinked key=$NEW"
t_expect_soon 0 10 "montreal: reload done, two changes not applied" \
	t_grep_log montreal "reload done keys_changed=1 not_applied=2"
t_check "montreal: log_level named, for the next restart" \
	t_grep_log montreal "reload: [node] log_level changed: takes effect at the next restart"
t_check "montreal: the new peer named, not added" \
	t_grep_log montreal "reload: [peer seattle] added: a reload never adds or removes a peer"
t_expect_soon 0 20 "paloalto hears montreal again, without a restart" hears paloalto montreal
t_expect_soon 0 20 "montreal hears paloalto" hears montreal paloalto
t_expect_soon 0 10 "paloalto: its link to montreal is up" peer_link paloalto montreal up
t_expect_converged "the three sites agree" 20
t_check "montreal: r's master arrived" ref_is montreal "$TIP"

t_section "montreal's vote and repository DEALERs to paloalto have the new key (portland frozen)"
t_pause portland
echo "$RANDOM" >>"$W/f"
gd_git 127.0.0.1 /dev/null -C "$W" commit -q -a -m c2
TIP2=$(t_head "$W")
t_expect 0 "a second push to r at paloalto" \
	gd_git 127.0.0.1 /dev/null -C "$W" push -q "$PA/repos/r.git" HEAD:refs/heads/master
t_expect_soon 0 20 "montreal: r's master and its objects came from paloalto" ref_is montreal "$TIP2"
t_expect 0 "montreal: hugo's val accepted by the majority of montreal and paloalto" \
	t_sh montreal 127.0.7.6 hugo 2fa val "$(t_hotp "$HS" 2)"
t_resume portland
t_expect_converged "the three sites agree" 20

t_section "one TOTP token, offered at every site"
t_totp_settle
TOK=$(t_totp "$TS")
t_expect 0 "montreal: tina's token accepted" t_sh montreal 127.0.7.7 tina 2fa val "$TOK"
t_expect 1 "paloalto: the same token refused" t_sh paloalto 127.0.7.8 tina 2fa val "$TOK"
t_expect 1 "portland: the same token refused" t_sh portland 127.0.7.9 tina 2fa val "$TOK"
t_expect_converged "the three sites agree" 10

t_section "nobody but paloalto restarted"
t_check "portland and montreal run the processes they started with" same_pids
t_check "portland started once" test "$(grep -c 'node running site=portland' "$(t_dir portland)/grantd.log")" = 1
t_check "montreal started once" test "$(grep -c 'node running site=montreal' "$(t_dir montreal)/grantd.log")" = 1

t_done
