#!/bin/bash
# The strict token quorum (SPEC 9, issue 12): token_quorum = majority on
# three real nodes.  A HOTP token accepted at one site is refused at the
# others at once (their promises, not replication, stop it); the same token
# offered at several sites at the same moment is accepted at most once; with
# one site killed (-9) tokens are still accepted; with two down the last one
# refuses and says why and what still works; a site rebuilt from an empty
# disk does not vote until it holds the use records of the others, then
# does.
. "$(dirname "$0")/lib.sh"

t_cluster_up token_quorum=majority token_quorum_timeout=1s lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect_converged "the three sites agree" 10

voter() { [[ $(t_sj "$1" 'j["quorum"]["voter"]') == true ]]; }
t_section "status says majority; every site qualifies as a voter"
for s in "${T_SITES[@]}"; do
	t_eq "$s: quorum.mode" "$(t_sj "$s" 'j["quorum"]["mode"]')" majority
	t_eq "$s: quorum.majority" "$(t_sj "$s" 'j["quorum"]["majority"]')" 2
	t_expect_soon 0 15 "$s: a voter (the others' use records fetched)" voter "$s"
done
t_has "paloalto: the text status has a quorum line" "$(t_c paloalto status)" "quorum:   majority voter=yes"

t_section "a token accepted at one site is refused at the others"
t_expect 0 "paloalto: kim 2fa val <hotp 0>" t_sh paloalto 127.0.21.7 kim 2fa val "$(t_hotp "$KS" 0)"
for s in portland montreal; do
	t_run t_sh "$s" 127.0.21.8 kim 2fa val "$(t_hotp "$KS" 0)"
	t_eq "$s: <hotp 0> again refused" "$RC" 1
done
t_expect 1 "127.0.21.8 got no grant anywhere" t_sh portland 127.0.21.8 kim 2fa isval

t_section "the same token at the three sites at once: accepted at most once"
# fresh counters each round; all three offers start together
c=1
all_acc=0
for round in 1 2 3 4 5 6; do
	tok=$(t_hotp "$KS" "$c")
	pids=()
	i=0
	for s in "${T_SITES[@]}"; do
		i=$((i + 1))
		(t_sh "$s" "127.0.21.$((20 + round * 3 + i))" kim 2fa val "$tok" \
			>"$T_DIR/r$round.$s.out" 2>&1; echo $? >"$T_DIR/r$round.$s.rc") &
		pids+=($!)
	done
	wait "${pids[@]}"
	acc=0
	for s in "${T_SITES[@]}"; do
		[[ $(<"$T_DIR/r$round.$s.rc") == 0 ]] && acc=$((acc + 1))
	done
	t_check "round $round: <hotp $c> accepted at most once (accepted $acc)" eval '((acc <= 1))'
	all_acc=$((all_acc + acc))
	c=$((c + 1))
done
# the floor: a cluster refusing everything passes every check above (a
# round whose three sites each promised to itself first rightly accepts
# nothing, but not round after round)
t_check "the concurrent rounds accepted a token at all (accepted $all_acc)" eval '((all_acc >= 1))'
t_expect 0 "a later token is still accepted (paloalto, <hotp $c>)" \
	t_sh paloalto 127.0.21.60 kim 2fa val "$(t_hotp "$KS" "$c")"
c=$((c + 1))

t_section "montreal killed (-9): the other two still make a majority"
t_kill9 montreal
t_expect 0 "paloalto: <hotp $c> accepted with montreal down" \
	t_sh paloalto 127.0.21.61 kim 2fa val "$(t_hotp "$KS" "$c")"
t_expect 1 "portland: the same token refused" t_sh portland 127.0.21.62 kim 2fa val "$(t_hotp "$KS" "$c")"
c=$((c + 1))
t_expect 0 "portland: <hotp $c> accepted with montreal down" \
	t_sh portland 127.0.21.63 kim 2fa val "$(t_hotp "$KS" "$c")"
c=$((c + 1))

t_section "portland killed too: paloalto alone refuses, and says why"
t_kill9 portland
t_run t_sh paloalto 127.0.21.64 kim 2fa val "$(t_hotp "$KS" "$c")"
t_eq "paloalto: <hotp $c> refused with two sites down" "$RC" 1
t_has "... the message starts 'Token not accepted:'" "$ERR$OUT" "Token not accepted:"
t_has "... says how many sites answered" "$ERR$OUT" "only 1 of 3 sites answered, 2 needed"
t_has "... says what still works" "$ERR$OUT" "Existing grants keep working; pushes are not affected"
t_expect 1 "paloalto: 127.0.21.64 got no grant" t_sh paloalto 127.0.21.64 kim 2fa isval
t_expect 0 "paloalto: the grant of 127.0.21.61 keeps working" t_sh paloalto 127.0.21.61 kim 2fa isval
# status is published by the writer every 100 ms: poll it
refused_counted() { [[ $(t_sj paloalto 'j["quorum"]["refused"] > 0') == true ]]; }
t_expect_soon 0 5 "paloalto: refusals counted in status" refused_counted

t_section "montreal rebuilt from an empty disk: no vote until it holds the others' use records"
rm -rf "$(t_dir montreal)/data" && mkdir -p "$(t_dir montreal)/data"
t_start montreal
synced_one() { [[ $(t_sj montreal 'j["quorum"].get("use_sync_peers_done", 0)') == 1 ]]; }
t_expect_soon 0 15 "montreal fetched paloalto's use records" synced_one
t_eq "montreal: still not a voter with one of the two others" "$(t_sj montreal 'j["quorum"]["voter"]')" false
t_check "montreal: no qualification file" eval "[[ ! -e $(t_dir montreal)/data/grantd-voter ]]"
# a token refused for want of a majority stays promised where it was
# offered: the user goes on with the next one
c=$((c + 1))
t_run t_sh paloalto 127.0.21.65 kim 2fa val "$(t_hotp "$KS" "$c")"
t_eq "paloalto: <hotp $c> refused: montreal answers but does not vote" "$RC" 1
t_has "... and says so" "$ERR$OUT" "Token not accepted: only 1 of 3 sites answered"
c=$((c + 1))
t_expect_soon 1 15 "montreal caught up with paloalto (not syncing)" t_syncing montreal
t_run t_sh montreal 127.0.21.69 kim 2fa val "$(t_hotp "$KS" "$c")"
t_eq "montreal: <hotp $c> refused: its own promise is no vote yet" "$RC" 1
t_has "... and says so" "$ERR$OUT" "Token not accepted:"
c=$((c + 1))
t_start portland
t_expect_soon 0 20 "montreal votes once it holds portland's use records too" voter montreal
t_check "montreal: the qualification file is written" eval "[[ -e $(t_dir montreal)/data/grantd-voter ]]"
t_expect_converged "the three sites agree" 20
t_run t_sh montreal 127.0.21.66 kim 2fa val "$(t_hotp "$KS" $((c - 3)))"
t_eq "montreal: a token used before its disk was lost is refused" "$RC" 1
t_expect 0 "montreal: <hotp $c> accepted" t_sh montreal 127.0.21.67 kim 2fa val "$(t_hotp "$KS" "$c")"
for s in paloalto portland; do
	t_expect 1 "$s: the same token refused" t_sh "$s" 127.0.21.68 kim 2fa val "$(t_hotp "$KS" "$c")"
done
t_expect_converged "the three sites agree at the end" 20
t_done
