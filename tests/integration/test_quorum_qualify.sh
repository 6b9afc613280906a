#!/bin/bash
# Who may vote in the strict token quorum (issue 19 items 4 and 5, review
# N3 and N7; docs/replication.md section 8):
#  - N3: a store that lost its qualification counts a peer toward its use
#    sync only when that peer answers as a qualified voter.  portland and
#    montreal both lose grantd-voter (as a restore does): each says it is
#    not a voter, and neither counts the other, so neither votes; once
#    montreal is whole again, portland qualifies from it and paloalto.
#  - N7: qualification is bound to the store's promise history.  A copy of
#    portland's data_dir (cp -a while stopped, as a VM snapshot is) is put
#    back after portland promised more: its promise counter is behind what
#    paloalto saw, so it drops grantd-voter and does not vote until it has
#    the use records of both others again (montreal is down meanwhile).
. "$(dirname "$0")/lib.sh"

C1=127.0.31.21
t_cluster_up token_quorum=majority token_quorum_timeout=2s lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
voter() { [[ $(t_sj "$1" 'j["quorum"]["voter"]') == true ]]; }
not_voter() { [[ $(t_sj "$1" 'j["quorum"]["voter"]') == false ]]; }
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 15 "$s: a voter" voter "$s"
done
c=0
# each val at every site: every site promises (and is seen promising)
for s in paloalto portland montreal paloalto portland montreal; do
	t_expect 0 "$s: kim 2fa val <hotp $c>" t_sh "$s" $C1 kim 2fa val "$(t_hotp "$KS" "$c")"
	c=$((c + 1))
done
votes() { t_sj "$1" 'j["quorum"]["votes"]'; }
t_check "every site counted its promises (paloalto $(votes paloalto), portland $(votes portland), montreal $(votes montreal))" \
	eval '(( $(votes portland) > 0 && $(votes montreal) > 0 ))'

t_section "N3: portland and montreal both lose grantd-voter: neither counts the other"
t_stop portland
t_stop montreal
cp "$(t_dir montreal)/data/grantd-voter" "$T_DIR/montreal-voter" || t_fatal "keep montreal's grantd-voter"
rm -f "$(t_dir portland)/data/grantd-voter" "$(t_dir montreal)/data/grantd-voter"
t_start portland
t_start montreal
refused_count() { t_grep_log "$1" "use records of peer=$2 not counted: it is not a voter"; }
t_expect_soon 0 20 "portland: montreal's use records not counted (it says it is not a voter)" \
	refused_count portland montreal
t_expect_soon 0 20 "montreal: portland's not counted either" refused_count montreal portland
t_check "portland is not a voter" not_voter portland
t_check "montreal is not a voter" not_voter montreal
t_check "portland has no grantd-voter" eval "[[ ! -e $(t_dir portland)/data/grantd-voter ]]"
t_run t_sh paloalto $C1 kim 2fa val "$(t_hotp "$KS" "$c")"
t_eq "paloalto: <hotp $c> refused: no other site votes" "$RC" 1
c=$((c + 1))
t_section "montreal whole again (its own grantd-voter back): portland qualifies from it"
t_stop montreal
cp "$T_DIR/montreal-voter" "$(t_dir montreal)/data/grantd-voter"
t_start montreal
t_expect_soon 0 20 "montreal: a voter again" voter montreal
t_expect_soon 0 20 "portland: a voter, from paloalto's and montreal's use records" voter portland
t_expect 0 "portland: kim 2fa val <hotp $c>" t_sh portland $C1 kim 2fa val "$(t_hotp "$KS" "$c")"
c=$((c + 1))

t_section "N7: a copy of portland's data_dir, put back after it promised more, does not vote"
t_stop portland
rm -rf "$T_DIR/portland-copy"
cp -a "$(t_dir portland)/data" "$T_DIR/portland-copy" || t_fatal "cp -a portland's data_dir"
t_start portland
t_expect_soon 0 20 "portland: a voter" voter portland
V0=$(votes portland)
for s in paloalto montreal paloalto; do
	t_expect 0 "$s: kim 2fa val <hotp $c>" t_sh "$s" $C1 kim 2fa val "$(t_hotp "$KS" "$c")"
	c=$((c + 1))
done
more() { (( $(votes portland) > V0 )); }
t_expect_soon 0 10 "portland promised more since the copy ($V0 -> $(votes portland))" more
t_stop portland
t_stop montreal
rm -rf "$(t_dir portland)/data"
cp -a "$T_DIR/portland-copy" "$(t_dir portland)/data" || t_fatal "put the copy back"
t_check "the copy holds grantd-voter (the copy was a voter)" eval "[[ -e $(t_dir portland)/data/grantd-voter ]]"
t_start portland
behind() { t_grep_log portland "not voting: peer=paloalto saw this store make"; }
t_expect_soon 0 20 "portland: paloalto says the copy's promise counter is behind" behind
t_check "portland is not a voter" not_voter portland
t_check "portland dropped grantd-voter" eval "[[ ! -e $(t_dir portland)/data/grantd-voter ]]"
t_run t_sh paloalto $C1 kim 2fa val "$(t_hotp "$KS" "$c")"
t_eq "paloalto: <hotp $c> refused: the copy does not vote (montreal down)" "$RC" 1
c=$((c + 1))
t_section "montreal back: portland qualifies again, above what its peers saw"
t_start montreal
t_expect_soon 0 20 "portland: a voter again" voter portland
t_check "portland's counter is at least what paloalto saw" \
	eval '(( $(votes portland) >= V0 ))'
t_expect 0 "portland: kim 2fa val <hotp $c>" t_sh portland $C1 kim 2fa val "$(t_hotp "$KS" "$c")"
c=$((c + 1))
t_expect_converged "the three sites agree" 20
t_done
