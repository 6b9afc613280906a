#!/bin/bash
# Planes by role (issue 19 item 2, review N1; node/peers/planes.h): paloalto,
# portland and montreal are frontends voting by majority; seattle is a
# mirror paloalto is configured with (its key only: no node runs for it,
# this test speaks with its key).  Every kind of PeerMsg (read from
# grantd.proto) sent to paloalto's sync ROUTER from portland's key, from
# seattle's key and from an unknown key gets the answer of the planes
# table (read from node/peers/planes.h): taken, dropped and counted
# (replication.dropped.plane), or answered NOT_VOTER with nothing in it;
# the unknown key is refused by ZAP.  The review's attack, replayed: the
# mirror's key reads no user, enrollment id or mark from the vote plane,
# and a vote_req for next = 2^64-1 (from the mirror's key, and from a
# frontend's key) is not promised: kim's next token is still accepted.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
WALK=$T_HERE/planes_walk.py
SRC=${GD_SRC:-$T_HERE/../..}
MIRROR=seattle
MDIR=$T_DIR/$MIRROR
C1=127.0.31.7

t_section "paloalto, portland, montreal (frontends, token_quorum = majority); seattle a mirror of paloalto's"
t_cluster_config token_quorum=majority
gd_site_keygen "$MDIR" >/dev/null || t_fatal "grantctl keygen for $MIRROR"
gd_site_add_peer "$(t_dir paloalto)" $MIRROR "tcp://127.0.31.200:$T_PUB_PORT" \
	"tcp://127.0.31.200:$T_SYNC_PORT" "$(<"$MDIR/node.pub")"
sed -i "/^\\[peer $MIRROR\\]\$/a role = mirror" "$(t_dir paloalto)/grantd.conf"
for s in "${T_SITES[@]}"; do t_start "$s"; done
voters() {
	local s
	for s in "${T_SITES[@]}"; do
		[[ $(t_sj "$s" "j['quorum']['voter']") == true ]] || return 1
	done
}
t_expect_soon 0 30 "the three frontends vote" voters

t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect_soon 0 10 "paloalto: kim 2fa val <hotp 0> (portland promised too)" \
	t_sh paloalto $C1 kim 2fa val "$(t_hotp "$KS" 0)"

P=${T_SADDR[paloalto]}
SYNC=tcp://$P:$T_SYNC_PORT
PKEY=$(<"$(t_dir paloalto)/node.pub")
STATUS=("$GD_BIN/grantctl" --config "$(t_dir paloalto)/grantd.conf" status --json)

t_section "what the vote plane tells a frontend's key, and a mirror's"
t_expect 0 "portland's key: use_sync_req is answered" \
	"$PY" "$WALK" uses "$SYNC" "$PKEY" "$(t_dir portland)/node.key" portland
EID=$(printf '%s' "$OUT" | t_json '[u["enroll_id"] for u in j["uses"] if u["user"] == "kim"][0]')
[[ $EID =~ ^[0-9]+$ ]] || t_fatal "portland's key reads kim's enrollment id from paloalto (control)"
# N12: the id is random, not the stamp of its creation (HLC: ms << 16)
t_check "kim's enrollment id is not a stamp of the last day ($EID)" \
	eval '(( (EID >> 16) < $(gd_now_ms) - 86400000 || (EID >> 16) > $(gd_now_ms) + 86400000 ))'
t_expect 0 "montreal's key (a mirror): use_sync_req is answered" \
	"$PY" "$WALK" uses "$SYNC" "$PKEY" "$(t_dir $MIRROR)/node.key" $MIRROR
t_has "... voter = false, and no user, enrollment id or mark" "$OUT" '"voter": 0, "uses": []'
t_hasnt "... kim is not named" "$OUT" kim

t_section "every kind from each role's key gets the table's answer"
export PLANES_ENROLL_ID=$EID
for role in frontend mirror; do
	site=portland
	[[ $role == mirror ]] && site=$MIRROR
	t_expect 0 "every kind from $site's key ($role) on paloalto's sync socket" \
		"$PY" "$WALK" walk $role "$SYNC" "$PKEY" "$(t_dir $site)/node.key" $site "$SRC" "${STATUS[@]}"
	printf '%s\n' "$OUT" | sed 's/^/  /'
	t_eq "... $(printf '%s\n' "$OUT" | grep -c '"ok": true') kinds, all as the table says" \
		"$(printf '%s\n' "$OUT" | grep -c '"ok": false')" 0
	[[ $role == frontend ]] && FRONT_OUT=$OUT
done
t_has "portland's vote_req for next = 2^64-1 is answered BAD (5)" \
	"$(printf '%s\n' "$FRONT_OUT" | grep '"kind": "VOTE_REQ"')" '"seen": {"verdict": [5]}'
t_check "paloalto's log says why" t_grep_log paloalto "beyond reach"
t_check "paloalto's log names a refusal by role" t_grep_log paloalto "peer request refused peer=$MIRROR role=mirror"

t_section "an unknown key is refused by ZAP"
REF0=$(t_sj paloalto "j['counts']['refused_peers']")
t_expect 0 "every kind from a key nobody configured: nothing comes back in 1.5 s" \
	"$PY" "$WALK" unknown "$SYNC" "$PKEY" 1.5 "$SRC"
refused_grew() { (( $(t_sj paloalto "j['counts']['refused_peers']") > REF0 )); }
t_expect_soon 0 5 "paloalto: counts.refused_peers grew" refused_grew

t_section "nothing was promised: kim's next token is accepted"
t_expect 0 "paloalto: kim 2fa val <hotp 1>" t_sh paloalto $C1 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "portland: kim 2fa val <hotp 2>" t_sh portland $C1 kim 2fa val "$(t_hotp "$KS" 2)"
t_done
