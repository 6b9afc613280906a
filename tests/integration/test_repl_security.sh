#!/bin/bash
# Only peers get in (SPEC 2.5; issue 3).  ZeroMQ clients written in Python
# (tests/integration/repl_rogue.py, python3-zmq) connect to a node's
# publish and sync endpoints:
#  - with a CURVE key the node does not know: nothing comes back, nothing
#    changes, and the refusal is counted (counts.refused_peers);
#  - in plain text (no CURVE): nothing comes back, nothing changes;
#  - with a configured peer's key pair (positive control: that one is
#    answered), random and crafted bad frames on the sync ROUTER change
#    nothing, are counted in counts.dropped, and the node keeps running.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
ROGUE=$T_HERE/repl_rogue.py
SEED=${GD_SEED:-$RANDOM}

t_cluster_up lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add sec --mode required --writer kim" t_c paloalto repo add sec --mode required --writer kim
t_expect 0 "portland: kim 2fa val <hotp 0>" t_sh portland 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect_converged "the three sites agree" 10

P=${T_SADDR[paloalto]}
PUB=tcp://$P:$T_PUB_PORT
SYNC=tcp://$P:$T_SYNC_PORT
PKEY=$(<"$(t_dir paloalto)/node.pub")
D0=$(t_sdigest paloalto)
count() { t_sj paloalto "j['counts']['$1']"; }
REF0=$(count refused_peers)
DROP0=$(count dropped)

t_section "an unknown CURVE key gets nothing"
t_expect 0 "a SUB and a DEALER with an unknown key receive nothing in 1.5 s" \
	"$PY" "$ROGUE" unknown-key "$PUB" "$SYNC" "$PKEY" 1.5
t_has "... (what the client saw)" "$OUT" '"sub_received": 0, "dealer_received": 0'
refused_grew() { (( $(count refused_peers) >= REF0 + 2 )); }
t_expect_soon 0 5 "paloalto: counts.refused_peers grew by 2 or more (publish and sync)" refused_grew
t_check "paloalto's log names the refusal" t_grep_log paloalto "peer refused"
t_eq "paloalto's digest is unchanged" "$(t_sdigest paloalto)" "$D0"

t_section "a plain-text client gets nothing"
t_expect 0 "a plain SUB and DEALER receive nothing in 1.5 s" "$PY" "$ROGUE" plain "$PUB" "$SYNC" 1.5
t_has "... (what the client saw)" "$OUT" '"sub_received": 0, "dealer_received": 0'
t_eq "paloalto's digest is unchanged" "$(t_sdigest paloalto)" "$D0"
t_eq "nothing was taken as a message (counts.dropped unchanged)" "$(count dropped)" "$DROP0"

t_section "positive control: portland's key pair is answered"
t_expect 0 "a SUB and a DEALER with portland's key pair hear heartbeats and a vector" \
	"$PY" "$ROGUE" peer "$PUB" "$SYNC" "$PKEY" "$(t_dir portland)/node.key" 10
t_eq "paloalto's digest is unchanged" "$(t_sdigest paloalto)" "$D0"

t_section "garbage from a peer's key pair is dropped and counted (seed $SEED)"
DROP1=$(count dropped)
t_expect 0 "400 random and 22 crafted bad messages to paloalto's sync endpoint: none answered" \
	"$PY" "$ROGUE" garbage "$SYNC" "$PKEY" "$(t_dir portland)/node.key" 400 "$SEED"
SENT=$(printf '%s' "$OUT" | t_json 'j["sent"]' 2>/dev/null)
[[ $SENT =~ ^[0-9]+$ ]] || t_fatal "the garbage client says how many messages it sent"
dropped_all() { (( $(count dropped) >= DROP1 + SENT )); }
t_expect_soon 0 10 "paloalto: counts.dropped grew by all $SENT messages" dropped_all
t_check "paloalto's grantd still runs" t_running paloalto
t_expect 0 "paloalto: status answers" t_c paloalto status
t_eq "paloalto's digest is unchanged" "$(t_sdigest paloalto)" "$D0"
t_check "paloalto's log says why messages were dropped" t_grep_log paloalto "peer message dropped"

t_section "a stand-in for montreal publishing bad operations changes nothing"
# montreal's node is stopped and a Python PUB with montreal's key pair binds
# its publish endpoint: paloalto and portland reconnect to it and take its
# frames as montreal's.  Every one must be dropped and counted, including
# a well-formed operation from an origin that is not a configured site.
t_stop montreal
D1=$(t_sdigest paloalto)
DROP2=$(count dropped)
"$PY" "$ROGUE" fake-pub "tcp://${T_SADDR[montreal]}:$T_PUB_PORT" "$(t_dir montreal)/node.key" \
	montreal "$SEED" 60 >"$T_DIR/fake.out" 2>&1 &
FAKE=$!
gd_wait_for 10 grep -q per_round "$T_DIR/fake.out" || t_fatal "the stand-in publisher starts: $(<"$T_DIR/fake.out")"
PER=$(t_json 'j["per_round"]' <"$T_DIR/fake.out")
# two rounds counted: at least one whole round was read
rounds_dropped() { (( $(count dropped) >= DROP2 + 2 * PER )); }
t_expect_soon 0 15 "paloalto: counts.dropped grew by two rounds of $PER bad frames" rounds_dropped
kill "$FAKE" 2>/dev/null
wait "$FAKE" 2>/dev/null
t_check "paloalto's grantd still runs" t_running paloalto
t_eq "paloalto's digest is unchanged" "$(t_sdigest paloalto)" "$D1"
t_sj paloalto 'sorted(j["applied"])' >"$T_DIR/applied"
t_hasnt "paloalto applied nothing from origin 'nosuchsite'" "$(<"$T_DIR/applied")" nosuchsite
t_hasnt "paloalto has no user mallory" "$(t_c paloalto user list)" mallory
t_eq "portland's digest is unchanged" "$(t_sdigest portland)" "$D1"
t_start montreal

t_section "replication still works"
t_expect 0 "portland: user add after" t_c portland user add after
t_expect_soon 0 5 "paloalto: has user after" t_has_user paloalto after
t_expect 1 "paloalto: <hotp 0> (used at portland) refused" t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "paloalto: <hotp 1> accepted" t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect_converged "the three sites agree" 10
for s in portland montreal; do
	t_eq "$s: counts.refused_peers is 0 (only paloalto was probed)" "$(t_sj "$s" "j['counts']['refused_peers']")" 0
done
t_done
