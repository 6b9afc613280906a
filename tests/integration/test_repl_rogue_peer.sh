#!/bin/bash
# A peer holding a valid key must not rewrite the others' history (issue 8,
# items 5-7).  montreal's node is stopped and a stand-in
# (tests/integration/repl_rogue.py forge, python3-zmq) binds its endpoints
# with montreal's key pair, then lies about portland:
#  (a) live: it publishes an operation in portland's name, with portland's
#      epoch and next sequence number (a grant of kim);
#  (b) snap: it makes paloalto take a state transfer from it, whose grants
#      hold a grant stamped near 2^64 and whose vector claims 2^62
#      operations of portland's current epoch; (b2) the vector alone
#      (a plausible record of portland's, unsigned or signed with
#      montreal's key: test_repl_rogue_xfer.sh);
#  (c) hugevv: its heartbeat holds more than 4,096 vector entries;
#  (d) range (review N5): asked for a range of its own, it answers with a
#      range of portland's (portland's epoch and next sequence number, a
#      grant of kim): refused and counted (replication.dropped.
#      range_unasked), portland's real operations still arrive;
#  (e) pushlog (review N2): it re-issues its own push log entry 2 with new
#      contents and an older stamp (a fork: both kept, `log verify` exits 1
#      naming both hashes, status and metrics count it), an entry stamped
#      before its predecessor (refused and counted), an entry whose prev is
#      no entry's hash and one that skips a number (log verify counts each
#      break: fork, wrong_prev, missing).
# Each lie is refused and counted by reason (status
# replication.dropped.<reason>, and counts.dropped), the node takes what
# fits of the huge heartbeat, and after each the cluster converges to the
# honest state: portland's later operations (a revocation among them) reach
# every site, and the forged grants are nowhere.
. "$(dirname "$0")/lib.sh"

# the stand-in, the three sites, kim and sec; dropped, grew, t_rogue ...
. "$(dirname "$0")/rogue_lib.sh"
t_expect_converged "the three sites agree" 10

t_section "(a) an operation in portland's name on montreal's live channel"
F0=$(dropped paloalto forged_origin)
D0=$(t_sj paloalto "j['counts']['dropped']")
t_rogue live live
t_expect_soon 0 10 "paloalto: replication.dropped.forged_origin grew" grew paloalto forged_origin "$F0"
t_check "paloalto: counts.dropped grew too" test "$(t_sj paloalto "j['counts']['dropped']")" -gt "$D0"
t_check "paloalto's log names the forgery" t_grep_log paloalto "origin is not the link's site"
t_expect 1 "paloalto: check kim 10.66.6.6 sec is refused (the forged grant was not taken)" \
	t_c paloalto check kim 10.66.6.6 sec
t_rogue_end
t_expect 0 "portland: user add honest1 (portland's next sequence number)" t_c portland user add honest1
t_expect_soon 0 10 "paloalto: has user honest1" t_has_user paloalto honest1
t_expect_converged "the three sites agree after the forged operation" 20
allowed_nowhere 10.66.6.6 "the forged grant"

t_section "(b) a state transfer with a record stamped near 2^64 and a forged vector"
t_expect 0 "portland: kim 2fa val <hotp 0> (a grant from 127.0.7.7)" t_sh portland 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect_converged "the three sites agree" 10
t_expect 0 "paloalto: check kim 127.0.7.7 sec is allowed" t_c paloalto check kim 127.0.7.7 sec
R0=$(dropped paloalto snapshot_record)
V0=$(dropped paloalto snapshot_vector)
t_rogue snap snap
t_expect_soon 0 15 "paloalto: replication.dropped.snapshot_record grew" grew paloalto snapshot_record "$R0"
t_check "paloalto's log says it took a state transfer from montreal" \
	t_grep_log paloalto "state transfer started peer=montreal"
t_expect 1 "paloalto: check kim 10.66.6.7 sec is refused (the record stamped near 2^64)" \
	t_c paloalto check kim 10.66.6.7 sec
t_rogue_end
t_expect 0 "portland: grant revoke kim all (an honest later revocation)" t_c portland grant revoke kim all
t_expect 0 "portland: user add honest2" t_c portland user add honest2
t_expect_soon 0 10 "paloalto: has user honest2 (portland's later operations arrive)" t_has_user paloalto honest2
t_expect_converged "the three sites agree after the forged snapshot" 20
allowed_nowhere 127.0.7.7 "revoked at portland after the forged snapshot"
allowed_nowhere 10.66.6.7 "the record stamped near 2^64"

t_section "(b2) a state transfer whose vector alone is forged"
V1=$(dropped paloalto snapshot_vector)
t_rogue snapvv snap-vv
t_expect_soon 0 15 "paloalto: replication.dropped.snapshot_vector grew" grew paloalto snapshot_vector "$V1"
t_check "paloalto's log says the state transfer from montreal finished" \
	t_grep_log paloalto "state transfer done peer=montreal"
huge() { t_sj paloalto '[e["seq"] for e in j["vector"] if e["origin"] == "portland" and e["seq"] >= 2**40]'; }
t_eq "paloalto: no vector entry of portland was raised to the claim" "$(huge)" "[]"
t_rogue_end
t_expect 0 "portland: user add honest3" t_c portland user add honest3
t_expect_soon 0 10 "paloalto: has user honest3" t_has_user paloalto honest3
t_expect_converged "the three sites agree after the forged vector" 20

t_section "(c) a heartbeat with more than 4,096 vector entries"
H0=$(dropped paloalto heartbeat_vector)
t_rogue hugevv hugevv
t_expect_soon 0 10 "paloalto: replication.dropped.heartbeat_vector grew" grew paloalto heartbeat_vector "$H0"
t_check "paloalto's log says the heartbeat was cut" t_grep_log paloalto "heartbeat vector cut"
asked() { grep -q '"event": "range_req".*"origin": "montreal"' "$T_DIR/hugevv.out"; }
t_expect_soon 0 10 "paloalto took what fits: it asked the stand-in for the range its first entry announces" asked
t_rogue_end
t_expect 0 "portland: user add honest4" t_c portland user add honest4
t_expect_soon 0 10 "paloalto: has user honest4" t_has_user paloalto honest4
t_expect_converged "the three sites agree after the huge heartbeat" 20

t_section "(d) a range reply that answers no range asked: another origin's operations"
U0=$(dropped paloalto range_unasked)
t_rogue range range
t_expect_soon 0 15 "paloalto: replication.dropped.range_unasked grew" grew paloalto range_unasked "$U0"
t_check "the stand-in was asked for montreal's range and answered with portland's" \
	grep -q '"answered": "portland".*"origin": "montreal"' "$T_DIR/range.out"
t_check "paloalto's log names the reply" t_grep_log paloalto "range reply dropped peer=montreal origin=portland"
t_expect 1 "paloalto: check kim 10.66.6.8 sec is refused (the forged grant was not taken)" \
	t_c paloalto check kim 10.66.6.8 sec
t_rogue_end
t_expect 0 "portland: user add honest5 (portland's next sequence number)" t_c portland user add honest5
t_expect_soon 0 10 "paloalto: has user honest5" t_has_user paloalto honest5
t_expect_converged "the three sites agree after the unasked range" 20
allowed_nowhere 10.66.6.8 "the grant of the unasked range"

t_section "(d2) a relayed range: an operation of portland's never made by portland"
# montreal's heartbeat claims portland's next operation; once portland's
# own feed has not brought it, paloalto asks montreal for portland's range
# (as it may when a site holds what another sent), and the stand-in answers
# with a grant of kim in portland's name, in turn unsigned and signed with
# montreal's own key.  Without signatures this was taken.
S0=$(dropped paloalto signature)
t_rogue relay relay
t_expect_soon 0 15 "paloalto: replication.dropped.signature grew by two or more" \
	eval '(( $(dropped paloalto signature) >= S0 + 2 ))'
t_check "the stand-in was asked for portland's range, answered both ways" \
	eval 'grep -q "\"relayed\": \"portland\".*\"signed_by_site\": true" "$T_DIR/relay.out" &&
		grep -q "\"relayed\": \"portland\".*\"signed_by_site\": false" "$T_DIR/relay.out"'
# (one line per reason a second: each kind is named within a few)
t_expect_soon 0 20 "paloalto's log names the unsigned one" \
	t_grep_log paloalto "peer operation dropped peer=montreal origin=portland seq=$(( $(vseq) + 1 )): unsigned (origin portland)"
t_expect_soon 0 20 "paloalto's log names the one montreal signed" \
	t_grep_log paloalto "seq=$(( $(vseq) + 1 )): bad signature (origin portland)"
t_expect 1 "paloalto: check kim 10.66.6.9 sec is refused (the relayed grant was not taken)" \
	t_c paloalto check kim 10.66.6.9 sec
t_rogue_end
t_expect 0 "portland: user add honest6 (portland's next sequence number)" t_c portland user add honest6
t_expect_soon 0 10 "paloalto: has user honest6" t_has_user paloalto honest6
t_expect_converged "the three sites agree after the relayed range" 20
allowed_nowhere 10.66.6.9 "the relayed grant"

t_section "(e) montreal's push log, re-issued with an older stamp and new contents"
t_expect 0 "paloalto: log verify (nothing logged yet)" t_c paloalto log verify
t_rogue pushlog pushlog
H2=$(head -1 "$T_DIR/pushlog.out" | t_json "j['hash2']") || t_fatal "the stand-in's hashes"
H2B=$(head -1 "$T_DIR/pushlog.out" | t_json "j['hash2b']")
mentries() {
	t_c paloalto log --json | python3 -c '
import json, sys
print(sum(json.loads(l)["site"] == "montreal" for l in sys.stdin if l.strip()))'
}
t_expect_soon 0 15 "paloalto holds five of montreal's entries (1, both 2s, a 3, 5)" eval '[[ $(mentries) == 5 ]]'
t_expect_soon 0 10 "paloalto applied the stand-in's six operations" \
	eval '[[ $(t_sj paloalto "max(e[\"seq\"] for e in j[\"vector\"] if e[\"origin\"] == \"montreal\")") == 6 ]]'
t_expect 1 "paloalto: log verify" t_c paloalto log verify
t_has "names the fork: site, entry and both hashes" "$ERR" \
	"push log: chain of site montreal broken at entry 2: two different entries have its number (a fork); hashes $H2B and $H2"
t_expect 1 "paloalto: log verify --json" t_c paloalto log verify --json
t_eq "the first break, and every break by kind" \
	"$(t_json "' '.join(map(str, [j['intact'], j['forks'], j['break']['n'], j['break']['hashes'] == ['$H2B', '$H2'], sorted(j['breaks'].items())]))" <<<"$OUT")" \
	"False 1 2 True [('fork', 1), ('missing', 1), ('wrong_prev', 1)]"
t_expect 0 "paloalto: log --json (both entries 2 listed, one marked fork)" t_c paloalto log --json
t_eq "entry 2 twice: mallory's (the earlier, in place) and the first (kept as a fork)" \
	"$(python3 -c '
import json, sys
e = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted((x["user"], x.get("fork", False)) for x in e if x["site"] == "montreal" and x["n"] == 2))' <<<"$OUT")" \
	"[('alice', True), ('mallory', False)]"
t_eq "paloalto: status counts.push_log_forks" "$(t_sj paloalto "j['counts']['push_log_forks']")" 1
t_check "paloalto: status counts.push_log_refused >= 1" \
	test "$(t_sj paloalto "j['counts']['push_log_refused']")" -ge 1
t_check "paloalto's log names the entry stamped before its predecessor" \
	t_grep_log paloalto "push log entry refused origin=montreal n=3"
t_check "paloalto's log names the fork and both hashes" \
	t_grep_log paloalto "push log fork origin=montreal n=2 hash=$H2B hash=$H2"
t_rogue_end
t_done
