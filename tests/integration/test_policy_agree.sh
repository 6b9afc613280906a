#!/bin/bash
# One policy across sites (issue 19, N8): the [policy] settings that only
# mean what they say when every site has the same (token_quorum, the
# lockout, the token windows, security_keys) travel in heartbeats.  Three
# majority-mode sites; montreal is restarted in local mode with another
# hotp_lookahead.  Every site that differs from a frontend peer logs it once
# (key and both values), shows it in `grantctl status` (text and --json
# "policy_mismatch") and in metrics, and refuses token validation with a
# one-line reason naming the mismatch (fail closed: a local site would
# accept tokens alone); a grant made before keeps working.  Once montreal
# is set alike again, tokens are accepted.
. "$(dirname "$0")/lib.sh"

T_METRICS_PORT=$((T_SSH_PORT + 10000))
for s in "${T_SITES[@]}"; do
	gd_port_free "${T_SADDR[$s]}" "$T_METRICS_PORT" ||
		t_fatal "metrics port ${T_SADDR[$s]}:$T_METRICS_PORT is free"
done
# metric SITE SAMPLE: the value of the sample line SAMPLE at SITE.
metric() {
	t_http body "http://$(t_metrics_addr "$1")/metrics" |
		awk -v s="$2" '$1 == s { print $2 }'
}
metric_is() { [[ $(metric "$1" "$2") == "$3" ]]; }
# mismatch SITE PEER: SITE's policy_mismatch for PEER, as "key:here:peer"
# words in key order.
mismatch() {
	t_sj "$1" "' '.join(d['key'] + ':' + d['here'] + ':' + d['peer'] for p in j['peers'] if p['site'] == '$2' for d in p['policy_mismatch'])"
}
mismatch_is() { [[ $(mismatch "$1" "$2" 2>/dev/null) == "$3" ]]; }
# set_montreal KEY VALUE: in montreal's [policy]
set_montreal() {
	local f=$T_DIR/montreal/grantd.conf
	if grep -q "^$1 = " "$f"; then
		sed -i "s/^$1 = .*/$1 = $2/" "$f"
	else
		sed -i "/^\[policy\]\$/a $1 = $2" "$f"
	fi
}

t_cluster_up token_quorum=majority hotp_lookahead=20 lockout_failures=64
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add pa --mode required --writer kim" t_c paloalto repo add pa --mode required --writer kim
t_expect_converged "the three sites agree" 15
for s in "${T_SITES[@]}"; do
	for p in "${T_SITES[@]}"; do
		[[ $p == "$s" ]] && continue
		t_expect_soon 0 5 "$s: no policy mismatch with $p" mismatch_is "$s" "$p" ""
	done
done
t_expect 0 "paloalto: kim validates from 127.0.9.1 (all alike)" \
	t_sh paloalto 127.0.9.1 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect_converged "all three agree" 15

t_section "montreal restarts in local mode, with hotp_lookahead = 30"
t_stop montreal
set_montreal token_quorum local
set_montreal hotp_lookahead 30
t_start montreal
for s in paloalto portland; do
	t_expect_soon 0 10 "$s: status --json names montreal's differences" \
		mismatch_is "$s" montreal "token_quorum:majority:local hotp_lookahead:20:30"
	t_check "$s: none with the other majority site" \
		mismatch_is "$s" "$([[ $s == paloalto ]] && echo portland || echo paloalto)" ""
done
for p in paloalto portland; do
	t_expect_soon 0 10 "montreal: status --json names $p's differences" \
		mismatch_is montreal "$p" "token_quorum:local:majority hotp_lookahead:30:20"
done
t_expect 0 "paloalto: grantctl status" t_c paloalto status
t_has "the text names the difference" "$OUT" "policy:   DIFFERS from peer montreal token_quorum here=majority peer=local"
t_has "and the other one" "$OUT" "policy:   DIFFERS from peer montreal hotp_lookahead here=20 peer=30"
t_expect_soon 0 5 "paloalto: metric grantd_peer_policy_mismatches{peer=\"montreal\"} is 2" \
	metric_is paloalto 'grantd_peer_policy_mismatches{peer="montreal"}' 2
t_check "paloalto: ... and 0 for portland" \
	metric_is paloalto 'grantd_peer_policy_mismatches{peer="portland"}' 0
t_check "montreal: 2 for paloalto" \
	metric_is montreal 'grantd_peer_policy_mismatches{peer="paloalto"}' 2

t_section "tokens are refused at every site; grants made before keep working"
C=1
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: kim's val is refused" t_sh "$s" 127.0.9.2 kim 2fa val "$(t_hotp "$KS" "$C")"
	C=$((C + 1))
	t_one_line "$s: with a one-line reason" "$OUT$ERR"
	t_has "$s: naming token_quorum" "$OUT$ERR" "token_quorum"
	t_has "$s: and montreal's or its peer's mode" "$OUT$ERR" \
		"$([[ $s == montreal ]] && echo "has token_quorum = local and the frontend peer" || echo "the frontend peer montreal has token_quorum = local")"
	t_expect 0 "$s: kim's grant from before still holds (isval)" t_sh "$s" 127.0.9.1 kim 2fa isval
	t_expect 0 "$s: and allows the push" t_c "$s" check kim 127.0.9.1 pa
done
# logged SITE: how many times SITE logged a token_quorum difference
logged() { grep -c "policy differs from a frontend peer.*key=token_quorum" "$T_DIR/$1/grantd.log"; }
t_eq "paloalto: logged the token_quorum difference once" "$(logged paloalto)" 1
t_eq "portland: logged it once" "$(logged portland)" 1
t_eq "montreal: logged it once per peer" "$(logged montreal)" 2
t_check "paloalto: the log names key and both values" t_grep_log paloalto \
	"policy differs from a frontend peer's peer=montreal key=hotp_lookahead here=20 peer_value=30"

t_section "montreal set alike again: tokens are accepted"
t_stop montreal
set_montreal token_quorum majority
set_montreal hotp_lookahead 20
t_start montreal
for s in paloalto portland; do
	t_expect_soon 0 10 "$s: no policy mismatch with montreal" mismatch_is "$s" montreal ""
	t_check "$s: logged that it agrees again" t_grep_log "$s" "policy agrees with the frontend peer's again peer=montreal"
done
t_expect_soon 0 10 "montreal: no policy mismatch with paloalto" mismatch_is montreal paloalto ""
t_expect_soon 1 10 "montreal: is not syncing" t_syncing montreal
t_expect 0 "paloalto: kim validates from 127.0.9.3" t_sh paloalto 127.0.9.3 kim 2fa val "$(t_hotp "$KS" "$C")"
t_done
