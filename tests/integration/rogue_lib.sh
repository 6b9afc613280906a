# rogue_lib.sh: a stand-in for montreal that lies about portland
# (tests/integration/repl_rogue.py forge, python3-zmq, montreal's own key
# pair), for test_repl_rogue_peer.sh and test_repl_rogue_xfer.sh.
# Sourced after lib.sh: starts the three sites (lockout_failures=50) with
# kim enrolled (HOTP secret KS) and the repository sec requiring 2FA with
# kim its writer; exits 77 without python3-zmq.

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
ROGUE=$T_HERE/repl_rogue.py
M=${T_SADDR[montreal]}
MPUB=tcp://$M:$T_PUB_PORT
MSYNC=tcp://$M:$T_SYNC_PORT
MKEY=$(t_dir montreal)/node.key

t_cluster_up lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add sec --mode required --writer kim" t_c paloalto repo add sec --mode required --writer kim

dropped() { t_sj "$1" "j['replication'].get('dropped', {}).get('$2', 0)"; }
# portland's current epoch (hex) and its last sequence number in it
vepoch() { t_sj portland 'j["epoch"]'; }
vseq() { t_sj portland 'next((e["seq"] for e in j["vector"] if e["origin"] == "portland" and e["epoch"] == j["epoch"]), 0)'; }
# t_rogue NAME ATTACK: start the stand-in for montreal (its node stopped)
t_rogue() {
	local ep seq
	t_stop montreal
	ep=$(vepoch) && seq=$(vseq) || t_fatal "portland's epoch and sequence number"
	"$PY" "$ROGUE" forge "$2" "$MPUB" "$MSYNC" "$MKEY" montreal portland \
		"$ep" "$seq" 60 >"$T_DIR/$1.out" 2>&1 &
	ROGUE_PID=$!
	gd_wait_for 10 grep -q '"start"' "$T_DIR/$1.out" ||
		t_fatal "the stand-in for montreal starts: $(<"$T_DIR/$1.out")"
}
t_rogue_end() {
	kill "$ROGUE_PID" 2>/dev/null
	wait "$ROGUE_PID" 2>/dev/null
	t_start montreal
}
# grew SITE REASON BEFORE: replication.dropped.REASON above BEFORE
grew() { (( $(dropped "$1" "$2") >= $3 + 1 )); }
# allowed_nowhere ADDR WHY: kim's push to sec from ADDR is refused everywhere
allowed_nowhere() {
	local s
	for s in paloalto portland montreal; do
		t_expect 1 "$s: check kim $1 sec is refused ($2)" t_c "$s" check kim "$1" sec
	done
}
