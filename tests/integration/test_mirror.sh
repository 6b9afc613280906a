#!/bin/bash
# Read-only mirrors (SPEC 9, issue 12; docs/mirrors.md): paloalto and
# portland are frontends, montreal a mirror.  A user made, enrolled and
# validated at a frontend pushes there; the mirror gets the repository
# (objects and refs), serves a clone over ssh, refuses a push, `2fa val`
# and grantctl writes with a message naming the frontends, and holds
# nothing secret: no enrollment, token mark, grant or failure record (the
# node's own `grantctl verify --json` counts), and neither the
# enrollment secret nor its raw bytes anywhere in its directory.  A
# frontend's PUB refuses the mirror's key (its sync endpoint answers it);
# the mirror catches up after being down (filtered ranges); both sides
# show the mirror's lag in `status`.
. "$(dirname "$0")/lib.sh"

ROGUE=$T_HERE/repl_rogue.py
FRONTS=(paloalto portland)
MIRROR=montreal
# client source addresses: this helper's range
C1=127.0.22.7

t_section "paloalto, portland (frontends) and montreal (mirror)"
t_cluster_config
sed -i '/^\[node\]$/a role = mirror' "$(t_dir $MIRROR)/grantd.conf"
for s in "${FRONTS[@]}"; do
	sed -i "/^\\[peer $MIRROR\\]\$/a role = mirror" "$(t_dir "$s")/grantd.conf"
done
for s in "${T_SITES[@]}"; do t_start "$s"; done
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s hears (or feeds) every peer" gd_peers_connected "$(t_dir "$s")"
	t_sshd "$s"
done
t_eq "montreal says it is a mirror" "$(t_sj $MIRROR "j['role']")" mirror
t_eq "paloalto says it is a frontend" "$(t_sj paloalto "j['role']")" frontend
t_eq "paloalto lists montreal as a mirror peer" \
	"$(t_sj paloalto "[p['role'] for p in j['peers'] if p['site'] == 'montreal'][0]")" mirror

# pub_equal: the public digests of every site agree (a mirror's full
# digest differs: it lacks the secret families)
# (read with a bash regex: polled, and python per call is slow under ASan)
pub_of() {
	local j re='"digest_public"[[:space:]]*:[[:space:]]*"([0-9a-f]+)"'
	j=$(t_status "$1") && [[ $j =~ $re ]] && echo "${BASH_REMATCH[1]}"
}
pub_equal() {
	local a b c
	a=$(pub_of paloalto) && b=$(pub_of portland) && c=$(pub_of $MIRROR) &&
		[[ $a == "$b" && $b == "$c" ]]
}
# mref SITE REPO: the main ref on SITE's disk
mref() { git --git-dir="$(t_dir "$1")/repos/$2.git" rev-parse -q --verify refs/heads/main 2>/dev/null; }
mref_is() { [[ $(mref "$1" "$2") == "$3" ]]; }
# fams SITE: FAMILY=RECORDS lines, what SITE holds (grantctl verify --json)
fams() { t_c "$1" verify --json | t_json "' '.join('%s=%d' % (f['family'], f['records']) for f in j['families'])"; }
# fam COUNTS FAMILY: the records of FAMILY in a fams line
fam() { local kv; for kv in $1; do [[ ${kv%%=*} == "$2" ]] && { echo "${kv#*=}"; return; }; done; echo "?"; }

t_section "a user enrolled, validated and pushing at paloalto"
t_suser paloalto alice
AS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll alice --hotp" t_c paloalto enroll alice --hotp --secret "$AS"
t_expect 0 "paloalto: repo add proj --writer alice --mode required" \
	t_c paloalto repo add proj --writer alice --mode required
t_expect 0 "alice 2fa val at paloalto" t_sssh paloalto $C1 alice 2fa val "$(t_hotp "$AS" 0)"
W=$T_DIR/work
gd_git $C1 /dev/null init -q -b main "$W"
for i in 1 2 3; do t_commit "$W" || t_fatal "commit $i"; done
gd_git $C1 /dev/null -C "$W" remote add origin "ssh://root@${T_SADDR[paloalto]}:$T_SSH_PORT/proj"
t_expect 0 "alice pushes 3 commits to paloalto over ssh" \
	t_git $C1 alice -C "$W" push -q origin HEAD:refs/heads/main
TIP=$(t_head "$W")
t_expect_soon 0 15 "montreal: proj's main is the pushed tip on disk" mref_is $MIRROR proj "$TIP"
t_expect 0 "montreal: proj passes git fsck --strict" \
	git --git-dir="$(t_dir $MIRROR)/repos/proj.git" fsck --strict --no-progress
t_expect_soon 0 10 "the public digests of all three sites agree" pub_equal
t_wait_converged 10 "${FRONTS[@]}" || t_fail "the frontends agree" "$(t_states "${FRONTS[@]}")"

t_section "montreal serves clones and fetches"
rm -rf "$T_DIR/clone"
t_expect 0 "clone proj from montreal over ssh" \
	t_git $C1 alice clone -q "ssh://root@${T_SADDR[$MIRROR]}:$T_SSH_PORT/proj" "$T_DIR/clone"
t_eq "the clone has the pushed tip" "$(git -C "$T_DIR/clone" rev-parse origin/main 2>/dev/null)" "$TIP"

t_section "montreal refuses what only a frontend does, naming the frontends"
t_commit "$T_DIR/clone"
t_run t_git $C1 alice -C "$T_DIR/clone" push -q origin HEAD:refs/heads/main
t_check "a push to montreal fails (exit $RC)" test "$RC" -ne 0
t_has "... saying it is a read-only mirror" "$ERR" "read-only mirror"
t_has "... and naming the frontends" "$ERR" "push to one of: paloalto, portland"
t_eq "montreal's main did not move" "$(mref $MIRROR proj)" "$TIP"
t_run t_sssh $MIRROR $C1 alice 2fa val "$(t_hotp "$AS" 1)"
t_eq "2fa val at montreal is refused (exit 1)" "$RC" 1
t_has "... saying it is a read-only mirror" "$ERR" "read-only mirror"
t_has "... and naming the frontends" "$ERR" "one of: paloalto, portland"
t_run t_sssh $MIRROR $C1 alice 2fa isval
t_eq "2fa isval at montreal is refused (exit 1)" "$RC" 1
t_has "... with the same message" "$ERR" "read-only mirror"
t_run t_c $MIRROR user add bob --key "$T_KEYS/alice.pub"
t_eq "grantctl user add at montreal is refused (exit 1)" "$RC" 1
t_has "... naming the frontends" "$ERR" "paloalto, portland"
t_run t_c $MIRROR check alice $C1 proj
t_eq "grantctl check at montreal is refused (exit 1)" "$RC" 1
# the token montreal refused is still good at a frontend: it was never used
t_expect 0 "the refused token still validates at portland" \
	t_sssh portland $C1 alice 2fa val "$(t_hotp "$AS" 1)"

t_section "nothing secret on montreal's disk"
t_expect_soon 0 10 "the public digests still agree" pub_equal
MF=$(fams $MIRROR)
PF=$(fams paloalto)
for f in enroll marks grants fails unlock revokes; do
	t_eq "montreal holds no $f record" "$(fam "$MF" $f)" 0
done
for f in users repos refs; do
	t_check "montreal holds $f records ($(fam "$MF" $f))" test "$(fam "$MF" $f)" -gt 0
done
# the control: the frontends do hold them, so the counts above can fail
for f in enroll marks grants; do
	t_check "paloalto holds $f records ($(fam "$PF" $f))" test "$(fam "$PF" $f)" -gt 0
done
t_eq "montreal's status counts no grant" "$(t_sj $MIRROR "j['counts']['grants']")" 0
# What montreal holds is counted above; what it RECEIVES is checked here
# (each filter alone: a frontend's feed sends hidden operations as their
# stamp, mops_build; a state transfer sends hidden families empty; the
# mirror drops and counts whatever comes anyway).  (A grep for the secret
# in montreal's files used to stand here: it could not fail, the records
# being sealed and compressed.)
no_hidden_received() {
	t_eq "montreal: replication.dropped.mirror_hidden is 0 ($1)" \
		"$(t_sj $MIRROR "j['replication'].get('dropped', {}).get('mirror_hidden', 0)")" 0
	t_check "montreal's log has no \"hidden operation sent to a mirror\" ($1)" \
		eval '! t_grep_log $MIRROR "hidden operation sent to a mirror"'
	t_check "montreal's log has no \"hidden family sent to a mirror\" ($1)" \
		eval '! t_grep_log $MIRROR "hidden family sent to a mirror"'
}
no_hidden_received "after an enrollment, validations and a push"

t_section "a frontend's PUB refuses the mirror's key; its sync endpoint answers"
if [[ -n $(t_py) ]]; then
	PALO_PUB=$(<"$(t_dir paloalto)/node.pub")
	t_expect 0 "with montreal's key: nothing on paloalto's PUB, an answer on sync" \
		"$(t_py)" "$ROGUE" mirror "tcp://${T_SADDR[paloalto]}:$T_PUB_PORT" \
		"tcp://${T_SADDR[paloalto]}:$T_SYNC_PORT" "$PALO_PUB" \
		"$(t_dir $MIRROR)/node.key" montreal 1.5
	t_check "paloalto logs the refusal" t_grep_log paloalto "reason=a mirror on publish"
	t_expect 0 "control: with portland's key the same PUB does answer" \
		"$(t_py)" "$ROGUE" peer "tcp://${T_SADDR[paloalto]}:$T_PUB_PORT" \
		"tcp://${T_SADDR[paloalto]}:$T_SYNC_PORT" "$PALO_PUB" \
		"$(t_dir portland)/node.key" 5
else
	t_fail "python3-zmq is needed for the PUB check"
fi

t_section "montreal down while portland takes a val and a push; it catches up"
t_stop $MIRROR
t_expect 0 "alice 2fa val at portland" t_sssh portland $C1 alice 2fa val "$(t_hotp "$AS" 2)"
gd_git $C1 /dev/null -C "$W" remote set-url origin "ssh://root@${T_SADDR[portland]}:$T_SSH_PORT/proj"
gd_git $C1 /dev/null -C "$W" pull -q --rebase=false origin main 2>/dev/null
t_commit "$W"
t_expect 0 "alice pushes to portland" t_git $C1 alice -C "$W" push -q origin HEAD:refs/heads/main
TIP2=$(t_head "$W")
t_expect_soon 0 10 "paloalto shows montreal NOT connected" \
	t_sj paloalto "1/0 if [p for p in j['peers'] if p['site'] == 'montreal' and p['connected']] else 0"
t_start $MIRROR
t_expect_soon 0 20 "montreal caught up: proj's main is portland's push" mref_is $MIRROR proj "$TIP2"
t_expect_soon 0 10 "the public digests agree again" pub_equal
MF=$(fams $MIRROR)
for f in enroll marks grants fails; do
	t_eq "montreal still holds no $f record" "$(fam "$MF" $f)" 0
done

t_section "the mirror's lag in status"
lag0() {
	t_sj $MIRROR "1/0 if sorted((m['site'], m['fed'], m['ops']) for m in j['mirror_lag']) != [('paloalto', True, 0), ('portland', True, 0)] else 0"
}
t_expect_soon 0 10 "montreal: mirror_lag lists both frontends, fed, 0 ops behind" lag0
t_expect_soon 0 10 "paloalto: montreal connected, 0 ops behind, equal public digest" \
	t_sj paloalto "1/0 if not [p for p in j['peers'] if p['site'] == 'montreal' and p['connected'] and p['lag_ops'] == 0 and p['digest_public_equal']] else 0"
t_eq "montreal is not sent the frontends' full digests (secret families)" \
	"$(t_sj $MIRROR "[p['site'] for p in j['peers'] if 'digest' in p]")" "[]"
t_eq "control: portland is sent paloalto's" \
	"$(t_sj portland "[p['site'] for p in j['peers'] if 'digest' in p]")" '["paloalto"]'
t_run t_c $MIRROR status
t_has "montreal's text status names its role" "$OUT" "role:     mirror"
t_has "... and its lag behind paloalto" "$OUT" "mirror:   of paloalto fed lag_ops=0"
t_run t_c paloalto status
t_has "paloalto's text status marks the mirror peer" "$OUT" "role=mirror"
# a frozen frontend: the mirror's lag behind it grows in status
t_pause portland
t_expect 0 "alice 2fa val at paloalto (portland frozen)" \
	t_sssh paloalto $C1 alice 2fa val "$(t_hotp "$AS" 3)"
t_expect_soon 0 10 "montreal: no longer fed by frozen portland" \
	t_sj $MIRROR "1/0 if [m for m in j['mirror_lag'] if m['site'] == 'portland' and m['fed']] else 0"
t_resume portland
t_expect_soon 0 10 "montreal: fed by portland again, level" lag0
no_hidden_received "after its catch-up"

t_section "a frontend's live feed carrying another origin's operation (audit mutant 10b)"
# A stand-in for portland (its node stopped, tests/integration/repl_rogue.py
# forge mirror-feed) answers montreal's mirror_sub with a live mirror_ops
# holding an operation of paloalto at paloalto's next sequence number.
if PY=$(t_py); then
	PEP=$(t_sj paloalto 'j["epoch"]')
	PSEQ=$(t_sj paloalto 'next((e["seq"] for e in j["vector"] if e["origin"] == "paloalto" and e["epoch"] == j["epoch"]), 0)')
	F0=$(t_sj $MIRROR "j['replication'].get('dropped', {}).get('forged_origin', 0)")
	t_stop portland
	"$PY" "$ROGUE" forge mirror-feed "tcp://${T_SADDR[portland]}:$T_PUB_PORT" \
		"tcp://${T_SADDR[portland]}:$T_SYNC_PORT" "$(t_dir portland)/node.key" portland \
		paloalto "$PEP" "$PSEQ" 60 >"$T_DIR/feed.out" 2>&1 &
	FEED_PID=$!
	t_expect_soon 0 15 "the stand-in answered montreal's mirror_sub" \
		grep -q '"event": "mirror_sub"' "$T_DIR/feed.out"
	forged_grew() { (( $(t_sj $MIRROR "j['replication'].get('dropped', {}).get('forged_origin', 0)") > F0 )); }
	t_expect_soon 0 10 "montreal: replication.dropped.forged_origin grew" forged_grew
	t_check "montreal's log names the forgery" t_grep_log $MIRROR "mirror operation dropped peer=portland origin=paloalto"
	t_check "montreal has no user forged-feed" eval '! t_has_user $MIRROR forged-feed'
	kill "$FEED_PID" 2>/dev/null
	wait "$FEED_PID" 2>/dev/null
	t_start portland
	t_expect 0 "paloalto: user add honest-feed (paloalto's next sequence number)" t_c paloalto user add honest-feed
	t_expect_soon 0 15 "montreal has user honest-feed (paloalto's real operation)" t_has_user $MIRROR honest-feed
	t_expect_soon 0 15 "the public digests agree again" pub_equal
	t_check "montreal still has no user forged-feed" eval '! t_has_user $MIRROR forged-feed'
else
	t_fail "python3-zmq is needed for the forged feed check"
fi

t_done
