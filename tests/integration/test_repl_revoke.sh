#!/bin/bash
# An admin revoke beats a grant still in flight (SPEC 2.4, 3.5; issue 8
# item 4): paloalto is cut off from its peers by a real network partition
# (iptables rules on its publish and sync ports), a user validates there,
# and an operator at portland, who cannot see that grant yet, revokes the
# user's address (`grantctl grant revoke NAME IP`) or all of another user's
# grants (`revoke NAME all`).  The revocation is later in HLC order, so
# once the partition heals the grant is void at every site.  An address
# revoke voids every grant whose net contains the address, a subnet grant
# (val-subnet) and a session grant (val-session) included, also from
# `2fa inval IP` (issue 19, N6).
. "$(dirname "$0")/lib.sh"

command -v iptables >/dev/null || {
	echo "SKIP: no iptables (apt-get install iptables)"
	exit 77
}
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root for iptables"; exit 77; }

# Every rule this test added, as the arguments that made it: removed by
# t_heal and, whatever happens, on exit.
T_RULES=()
t_heal() {
	local r
	for r in "${T_RULES[@]}"; do
		# shellcheck disable=SC2086
		iptables -D INPUT $r 2>/dev/null
	done
	T_RULES=()
}
trap 't_heal; t_cleanup' EXIT

# t_cut SITE: drop every packet to or from SITE's publish and sync ports
# (both directions of every established connection, PITFALLS.md).
t_cut() {
	local a=${T_SADDR[$1]} p r
	for p in "$T_PUB_PORT" "$T_SYNC_PORT"; do
		for r in "-i lo -p tcp -d $a --dport $p -j DROP" \
			"-i lo -p tcp -s $a --sport $p -j DROP"; do
			# shellcheck disable=SC2086
			iptables -I INPUT $r || return 1
			T_RULES+=("$r")
		done
	done
}

# t_hears SITE PEER: SITE's status says PEER is connected (true/false).
t_hears() {
	t_sj "$1" "[p['connected'] for p in j['peers'] if p['site'] == '$2'][0]"
}
t_deaf() { [[ $(t_hears "$1" "$2" 2>/dev/null) == false ]]; }

# t_shc SITE SSH_CONNECTION USER COMMAND...: grant-shell at SITE over the
# SSH connection given whole (the same session at every site).
t_shc() {
	local s=$1 conn=$2 user=$3; shift 3
	SSH_CONNECTION="$conn" SSH_ORIGINAL_COMMAND="$*" \
		"$GD_BIN/grant-shell" --config "$T_DIR/$s/grantd.conf" "$user" </dev/null
}
# t_all_void SITE USER PREFIX: SITE lists grants of USER whose address
# starts with PREFIX, and none of them is live (else prints the list).
t_all_void() {
	local j
	j=$(t_c "$1" grant list --user "$2" --json) || return 1
	t_json "[g for g in j if g['ip'].startswith('$3')]" <<<"$j" | t_json \
		'len(j) > 0 and all(g["state"] != "live" for g in j)' |
		grep -qx true && return 0
	echo "$j"
	return 1
}
# session connections of mo and ned (SSH_CONNECTION as sshd sets it)
MO_CONN="127.0.9.5 40500 ${T_SADDR[paloalto]} 22"
NED_CONN="127.0.10.5 40501 ${T_SADDR[paloalto]} 22"

t_cluster_up lockout_failures=64
t_suser portland kim
t_suser portland lou
t_suser portland mo
t_suser portland ned
KS=$(gd_base32_secret)
LS=$(gd_base32_secret)
MS=$(gd_base32_secret)
NS=$(gd_base32_secret)
t_expect 0 "portland: enroll kim --hotp" t_c portland enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "portland: enroll lou --hotp" t_c portland enroll lou --hotp --secret "$LS" --digits 6
t_expect 0 "portland: enroll mo --hotp" t_c portland enroll mo --hotp --secret "$MS" --digits 6
t_expect 0 "portland: enroll ned --hotp" t_c portland enroll ned --hotp --secret "$NS" --digits 6
t_expect 0 "portland: repo add rv --mode required --writer kim lou mo ned" \
	t_c portland repo add rv --mode required --writer kim --writer lou \
	--writer mo --writer ned
t_expect_converged "the three sites agree" 15

t_section "paloalto is cut off"
t_check "iptables rules on paloalto's ports $T_PUB_PORT and $T_SYNC_PORT" t_cut paloalto
for s in portland montreal; do
	gd_wait_for 15 t_deaf "$s" paloalto &&
		t_ok "$s no longer hears paloalto" ||
		t_fail "$s no longer hears paloalto" "$(t_states)"
done

t_section "grants at the cut-off site, revocations at portland"
t_expect 0 "paloalto: kim validates from 127.0.9.1" \
	t_sh paloalto 127.0.9.1 kim 2fa val-for-days 30 "$(t_hotp "$KS" 0)"
t_expect 0 "paloalto: lou validates from 127.0.9.2" \
	t_sh paloalto 127.0.9.2 lou 2fa val-for-days 30 "$(t_hotp "$LS" 0)"
t_expect 0 "paloalto: check kim 127.0.9.1 rv is allowed there" t_c paloalto check kim 127.0.9.1 rv
t_expect 1 "portland: has not heard of kim's grant" t_c portland check kim 127.0.9.1 rv
t_expect 1 "portland: has not heard of lou's grant" t_c portland check lou 127.0.9.2 rv
t_expect 0 "portland: grant revoke kim 127.0.9.1 (no such grant known here)" \
	t_c portland grant revoke kim 127.0.9.1
t_has "it says the revocation also covers grants not yet arrived" "$OUT" "not arrived"
t_expect 0 "portland: grant revoke lou all (no grant known here)" \
	t_c portland grant revoke lou all
t_has "it says the revocation also covers grants not yet arrived" "$OUT" "not arrived"
t_expect 0 "montreal: grant revoke kim 127.0.9.7 (never granted anywhere)" \
	t_c montreal grant revoke kim 127.0.9.7
t_expect 2 "portland: grant revoke kim not-an-ip is bad input" t_c portland grant revoke kim not-an-ip

t_section "subnet and session grants at the cut-off site, address revokes at portland"
t_expect 0 "paloalto: mo val-subnet /24 from 127.0.9.5" \
	t_shc paloalto "$MO_CONN" mo 2fa val-subnet /24 "$(t_hotp "$MS" 0)"
t_expect 0 "paloalto: mo val-session from 127.0.9.5" \
	t_shc paloalto "$MO_CONN" mo 2fa val-session "$(t_hotp "$MS" 1)"
t_expect 0 "paloalto: ned val-session from 127.0.10.5" \
	t_shc paloalto "$NED_CONN" ned 2fa val-session "$(t_hotp "$NS" 0)"
t_expect 0 "paloalto: mo's session is valid there" t_shc paloalto "$MO_CONN" mo 2fa isval
t_expect 0 "paloalto: ned's session is valid there" t_shc paloalto "$NED_CONN" ned 2fa isval
t_expect 1 "portland: has not heard of mo's grants" t_shc portland "$MO_CONN" mo 2fa isval
t_expect 0 "portland: grant revoke mo 127.0.9.5 (no grant known here)" \
	t_c portland grant revoke mo 127.0.9.5
t_expect 0 "portland: ned validates from 127.0.10.6" \
	t_sh portland 127.0.10.6 ned 2fa val "$(t_hotp "$NS" 1)"
t_expect 1 "portland: ned's 2fa inval 127.0.10.5 (not known here)" \
	t_sh portland 127.0.10.6 ned 2fa inval 127.0.10.5
t_has "it says it did not find it" "$OUT$ERR" "Did not find 127.0.10.5"

t_section "the partition heals"
t_heal
t_expect_converged "all three agree after the heal" 60
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: kim's earlier grant for 127.0.9.1 is void" t_c "$s" check kim 127.0.9.1 rv
	t_expect 1 "$s: lou's earlier grant for 127.0.9.2 is void" t_c "$s" check lou 127.0.9.2 rv
	t_check "$s: mo's subnet and session grants arrived, all void" t_all_void "$s" mo 127.0.9.
	t_expect 1 "$s: 2fa isval in mo's session from 127.0.9.5 is False" \
		t_shc "$s" "$MO_CONN" mo 2fa isval
	t_has "$s: it says False" "$OUT" False
	t_expect 1 "$s: 2fa isval from 127.0.9.77 (mo's /24) is False" \
		t_sh "$s" 127.0.9.77 mo 2fa isval
	t_expect 1 "$s: mo may not push from 127.0.9.5" t_c "$s" check mo 127.0.9.5 rv
	t_check "$s: ned's session grant arrived, void" t_all_void "$s" ned 127.0.10.5
	t_expect 1 "$s: 2fa isval in ned's session from 127.0.10.5 is False" \
		t_shc "$s" "$NED_CONN" ned 2fa isval
	t_expect 0 "$s: ned's later grant for 127.0.10.6 holds" \
		t_sh "$s" 127.0.10.6 ned 2fa isval
done

t_section "a grant after the revocation counts"
t_expect 0 "paloalto: kim validates again from 127.0.9.1" \
	t_sh paloalto 127.0.9.1 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "paloalto: lou validates again from 127.0.9.2" \
	t_sh paloalto 127.0.9.2 lou 2fa val "$(t_hotp "$LS" 1)"
t_expect_converged "all three agree" 15
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: kim's new grant for 127.0.9.1 holds" t_c "$s" check kim 127.0.9.1 rv
	t_expect 0 "$s: lou's new grant for 127.0.9.2 holds" t_c "$s" check lou 127.0.9.2 rv
done
t_expect 0 "paloalto: mo validates again in the same session" \
	t_shc paloalto "$MO_CONN" mo 2fa val-session "$(t_hotp "$MS" 2)"
t_expect_converged "all three agree" 15
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: mo's new session grant holds" t_shc "$s" "$MO_CONN" mo 2fa isval
done
t_no_rules() { ! iptables -S INPUT | grep -qE -- "--(d|s)port ($T_PUB_PORT|$T_SYNC_PORT)( |\$)"; }
t_check "no iptables rule of this test is left" t_no_rules
t_done
