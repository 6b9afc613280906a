#!/bin/bash
# A peer holding a valid key must not put records of another site into a
# state transfer (issue 21 point 4, docs/security.md "Signed operations",
# node/state/recops.h).  montreal's node is stopped and a stand-in
# (tests/integration/repl_rogue.py forge, python3-zmq) binds its endpoints
# with montreal's key pair; its heartbeat claims an operation of montreal's
# that its range answer says is truncated, so paloalto (and portland) take a
# state transfer from it, whose grants family holds a grant of kim that
# portland would have made: stamped now (so the stamp check passes, unlike
# test_repl_rogue_peer.sh's (b), stamped near 2^64), origin portland, and
#  (f) snap-bare: sent without operations (an empty RecordOps);
#  (g) snap-wrongkey: sent with a RecordOps holding the operation that makes
#      it, in portland's name, signed with montreal's own key.
# Each is refused and counted (replication.dropped.signature, never
# snapshot_record: the record itself checks), the grant is allowed nowhere,
# and once montreal's real node is back the three sites converge to the
# honest state (portland's later operations arrive everywhere).  With the
# signature rule taken out of repl_xfer.c (take_bare, take_signed) both
# grants were taken and reached all three sites: 12 checks failed.
. "$(dirname "$0")/lib.sh"

# the stand-in, the three sites, kim and sec; dropped, grew, t_rogue ...
. "$(dirname "$0")/rogue_lib.sh"
t_expect 0 "portland: kim 2fa val <hotp 0> (an honest grant from 127.0.7.10)" \
	t_sh portland 127.0.7.10 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect_converged "the three sites agree" 10
t_expect 0 "paloalto: check kim 127.0.7.10 sec is allowed (portland's grant)" t_c paloalto check kim 127.0.7.10 sec

# state transfers from montreal paloalto started so far
xfers() { grep -c "state transfer started peer=montreal" "$T_DIR/paloalto/grantd.log"; }
# xfer_case NAME ATTACK NET OPS HONEST WHY: the stand-in serves the grant of
# kim from NET with OPS operations; paloalto refuses it (WHY: its log's
# reason); then portland's honest user HONEST arrives everywhere.
xfer_case() {
	local name=$1 attack=$2 net=$3 ops=$4 honest=$5 why=$6 s0 r0 x0
	s0=$(dropped paloalto signature)
	r0=$(dropped paloalto snapshot_record)
	x0=$(xfers)
	t_rogue "$name" "$attack"
	t_expect_soon 0 15 "paloalto: replication.dropped.signature grew" grew paloalto signature "$s0"
	t_check "paloalto's log says it took a state transfer from montreal" \
		eval '(( $(xfers) > x0 ))'
	t_check "the stand-in served the grant from $net, origin portland, $ops operation(s)" \
		grep -q "\"sent\": {\"net\": \"$net\", \"ops\": $ops, \"origin\": \"portland\"}" "$T_DIR/$name.out"
	t_expect_soon 0 20 "paloalto's log names the record and why" \
		t_grep_log paloalto "state transfer record dropped peer=montreal cf=grants: origin=portland$why"
	t_eq "paloalto: snapshot_record did not grow (the record's stamp checks)" \
		"$(dropped paloalto snapshot_record)" "$r0"
	t_expect 1 "paloalto: check kim $net sec is refused (the forged grant was not taken)" \
		t_c paloalto check kim "$net" sec
	t_rogue_end
	t_expect 0 "portland: user add $honest (portland's next sequence number)" t_c portland user add "$honest"
	t_expect_soon 0 10 "paloalto: has user $honest" t_has_user paloalto "$honest"
	t_expect_converged "the three sites agree after $attack" 20
	allowed_nowhere "$net" "the grant of $attack"
	t_expect 0 "paloalto: check kim 127.0.7.10 sec is still allowed" t_c paloalto check kim 127.0.7.10 sec
}

t_section "(f) a state transfer with a plausible record of portland's, without operations"
xfer_case snapbare snap-bare 127.0.7.8 0 honest7 ": no signed operations with it"

t_section "(g) a state transfer with a record of portland's whose operation montreal signed"
xfer_case snapwrong snap-wrongkey 127.0.7.9 1 honest8 \
	" seq=$(( $(vseq) + 1 )): bad signature (origin portland)"
t_done
