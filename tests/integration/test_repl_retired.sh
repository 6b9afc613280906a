#!/bin/bash
# An epoch retired at a site is never served by range again (ops.h
# ops_vv_lists, node/peers/repl_range.c).  Once every site holds an
# epoch, its origin retires it (its seq joins the origin's retired total)
# and the others follow.  A peer that then asks for it read a vector older
# than what it holds: a rebuilt site that took a state transfer sent
# after the retirement (the total holds the epoch) and asked by a
# heartbeat sent before it (the epoch listed) applied the epoch's
# operations once more beside the total, and counted them twice for good:
# "applied" apart from its peers' while the digests agreed, and the
# integration/upgrade test's rebuilt montreal never converged under load.
# Here montreal's key (its node stopped) asks for a retired epoch of
# portland's, from portland and from paloalto: both answer "retired", with
# no operation; a live epoch is served as before.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
ROGUE=$T_HERE/repl_rogue.py
MKEY=$(t_dir montreal)/node.key

t_cluster_up
t_suser portland ann
t_suser portland bob
E1=$(t_sj portland 'j["epoch"]')
t_expect_converged "the three sites agree" 10

t_section "portland restarts: its first epoch retires everywhere"
t_stop portland
t_start portland
E2=$(t_sj portland 'j["epoch"]')
t_check "portland has a new epoch" test "$E2" != "$E1"
t_suser portland cat
# listed SITE EPOCH: SITE's vector lists portland's EPOCH as a live stream
listed() {
	[[ $(t_sj "$1" "any(e['origin'] == 'portland' and e['epoch'] == '$2' and not e.get('retired') for e in j['vector'])") == true ]]
}
for s in "${T_SITES[@]}"; do
	t_expect_soon 1 20 "$s: portland's first epoch retired" listed "$s" "$E1"
	t_expect_soon 0 10 "$s: portland's new epoch listed" listed "$s" "$E2"
done
t_expect_converged "the three sites agree" 10

t_section "a range of the retired epoch is not served"
t_stop montreal
# ask SITE EPOCH: montreal's key asks SITE for portland's EPOCH from 1
ask() {
	"$PY" "$ROGUE" ask-range "tcp://${T_SADDR[$1]}:$T_SYNC_PORT" \
		"$(<"$(t_dir "$1")/node.pub")" "$MKEY" montreal portland "$2" 1 5
}
# reply SITE EPOCH: the reply's counts, "ops=N retired=B"
reply() {
	ask "$1" "$2" | t_json '"ops=%d retired=%s" % (j["ops"], j["retired"])'
}
for s in portland paloalto; do
	t_eq "$s: portland's retired epoch: no operation, retired" \
		"$(reply "$s" "$E1")" "ops=0 retired=True"
	t_eq "$s: portland's live epoch: its operation served" \
		"$(reply "$s" "$E2")" "ops=1 retired=False"
done
t_start montreal
t_expect_converged "the three sites agree" 20
t_done
