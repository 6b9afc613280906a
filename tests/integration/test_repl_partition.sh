#!/bin/bash
# Revocation during a partition (SPEC 2.4; issue 3): a grant made at one
# site that has not reached another when that other site revokes all of the
# user's grants loses when it arrives, because the revocation is later in
# HLC order. The same for unenroll, and for inval of one address.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=64
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add pp --mode required --writer kim" t_c paloalto repo add pp --mode required --writer kim
t_expect_converged "the three sites agree" 10
C=0
val() { # SITE IP
	local tok
	tok=$(t_hotp "$KS" "$C"); C=$((C + 1))
	t_sh "$1" "$2" kim 2fa val-for-days 30 "$tok"
}
# A partition without touching the network: paloalto is down while
# portland grants; then portland and montreal are frozen (SIGSTOP: their
# CURVE handshakes cannot complete) and paloalto comes back alone, so it
# cannot learn of the grant until they are resumed.
partitioned_grant() { # IP
	t_stop paloalto
	t_expect 0 "portland: val-for-days 30 from $1 while paloalto is away" val portland "$1"
	t_expect_soon 0 5 "montreal: the grant for $1 arrived" t_c montreal check kim "$1" pp
	t_pause portland || t_fatal "SIGSTOP portland"
	t_pause montreal || t_fatal "SIGSTOP montreal"
	t_start paloalto
	t_expect 1 "paloalto: knows nothing of the grant for $1" t_c paloalto check kim "$1" pp
	# with no peer heard, it validates again after its grace period
	t_expect_soon 1 15 "paloalto: stops waiting for its silent peers" t_syncing paloalto
}
heal() {
	t_resume portland || t_fatal "SIGCONT portland"
	t_resume montreal || t_fatal "SIGCONT montreal"
	t_expect_converged "the partition healed: all three agree" 15
}

t_section "revoke all at the cut-off site beats the grant it had not seen"
partitioned_grant 127.0.9.1
t_expect 0 "paloalto: grant revoke kim all" t_c paloalto grant revoke kim all
heal
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: the earlier grant for 127.0.9.1 is void" t_c "$s" check kim 127.0.9.1 pp
done
t_expect 0 "portland: a new val after the revocation counts" val portland 127.0.9.9
t_expect_converged "all three agree" 10
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: the later grant for 127.0.9.9 holds" t_c "$s" check kim 127.0.9.9 pp
done

t_section "inval of one address at the cut-off site beats the grant for it"
partitioned_grant 127.0.9.2
tok=$(t_hotp "$KS" "$C"); C=$((C + 1))
t_expect 0 "paloalto: kim validates from 127.0.9.3 (to be whitelisted there)" t_sh paloalto 127.0.9.3 kim 2fa val "$tok"
t_expect 1 "paloalto: inval 127.0.9.2 (not known here yet)" t_sh paloalto 127.0.9.3 kim 2fa inval 127.0.9.2
heal
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: the grant for 127.0.9.2 is void" t_c "$s" check kim 127.0.9.2 pp
	t_expect 0 "$s: the grant for 127.0.9.3 holds" t_c "$s" check kim 127.0.9.3 pp
done

t_section "unenroll at the cut-off site beats the grant it had not seen"
partitioned_grant 127.0.9.4
t_expect 0 "paloalto: grantctl unenroll kim" t_c paloalto unenroll kim
heal
t_expect 0 "paloalto: enroll kim again" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6 --counter "$C"
t_expect_converged "all three agree" 10
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: the grant from before the unenroll stays void" t_c "$s" check kim 127.0.9.4 pp
done

t_section "one key added to two users at once: it logs in as nobody (issue 19, N10)"
gd_user_key "$T_KEYS/shared" || t_fatal "ssh-keygen for shared"
SFP=$(ssh-keygen -lf "$T_KEYS/shared.pub" | cut -d' ' -f2)
gk() { "$GD_BIN/grant-keys" --config "$T_DIR/$1/grantd.conf" root "${@:2}"; }
t_stop paloalto
t_expect 0 "portland: user add zoe --key shared.pub" t_c portland user add zoe --key "$T_KEYS/shared.pub"
t_expect_soon 0 5 "montreal: zoe arrived" t_has_user montreal zoe
t_expect 2 "montreal: user add aaron --key shared.pub is refused (zoe holds it)" \
	t_c montreal user add aaron --key "$T_KEYS/shared.pub"
t_pause portland || t_fatal "SIGSTOP portland"
t_pause montreal || t_fatal "SIGSTOP montreal"
t_start paloalto
t_expect 0 "paloalto: user add aaron --key shared.pub (zoe unknown here)" \
	t_c paloalto user add aaron --key "$T_KEYS/shared.pub"
heal
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: grant-keys root FP(shared)" gk "$s" "$SFP"
	t_eq "$s: prints nothing (two owners)" "$OUT" ""
	t_expect 0 "$s: grant-keys root (every key)" gk "$s"
	t_hasnt "$s: no line for the shared key" "$OUT" "$(cut -d' ' -f2 "$T_KEYS/shared.pub")"
	t_check "$s: logged" t_grep_log "$s" "ssh key held by two users is refused to both fp=$SFP"
done
t_expect 0 "portland: user del aaron" t_c portland user del aaron
t_expect_converged "all three agree" 10
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: grant-keys root FP(shared)" gk "$s" "$SFP"
	t_has "$s: zoe's line" "$OUT" "grantd.conf zoe\""
done

t_done
