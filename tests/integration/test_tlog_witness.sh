#!/bin/bash
# The push log as a transparency log between three real frontends (issue
# 21 point 2, SPEC 9, node/peers/tlogwit.h): pushes at paloalto make its
# leaves; paloalto signs a checkpoint of its tree, portland and montreal
# cosign it after checking it against their own copy of the leaves; every
# site serves every origin's log over HTTP ([node] log_http, C2SP
# tlog-tiles), and grant-log, given only the sites' verifier keys, checks
# the checkpoint, its two cosignatures, the whole tree, the consistency of
# a later checkpoint with the one it kept, and that a branch's tip is the
# logged one, reading from any site.  Then a stand-in for paloalto with
# paloalto's own key publishes a checkpoint whose root is no tree's: both
# witnesses refuse it, keep it as proof and say so, and keep serving the
# honest checkpoint.  `grantctl log verify` at every site checks the kept
# checkpoint from its own store (signed by paloalto, both cosignatures,
# its root the leaves'), and at a witness that kept the forged one it
# exits 1 naming the fork proof.  Clients come from 127.0.27.x.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || t_fatal "python3 with the zmq module is needed"
ROGUE=$T_HERE/repl_rogue.py
IP=127.0.27.5
HTTP_PORT=$((T_SSH_PORT + 10000 + 9)) # each site on its own address

t_section "three frontends, each serving the log on its own address"
t_cluster_config
for s in "${T_SITES[@]}"; do
	sed -i "/^\\[node\\]\$/a log_http = ${T_SADDR[$s]}:$HTTP_PORT" "$(t_dir "$s")/grantd.conf"
done
for s in "${T_SITES[@]}"; do t_start "$s"; done
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s hears every peer" gd_peers_connected "$(t_dir "$s")"
done
t_sshd paloalto
declare -A VK
for s in "${T_SITES[@]}"; do
	VK[$s]=$(t_c "$s" log key) || t_fatal "grantctl log key at $s"
done
url() { echo "http://${T_SADDR[$1]}:$HTTP_PORT"; }
S=$T_DIR/state
glog() { # SITE-SERVING COMMAND...: grant-log of paloalto's log
	local at=$1; shift
	"$GD_BIN/grant-log" --key "${VK[paloalto]}" --witness "${VK[portland]}" \
		--witness "${VK[montreal]}" --quorum 2 --state "$S" "$(url "$at")" paloalto "$@"
}
# ckpt SITE ORIGIN FIELD: a field of ORIGIN's entry in SITE's status tlog
ckpt() { t_sj "$1" "[t.get('$3', 0) for t in j['tlog'] if t['origin'] == '$2'][0]"; }
ckpt_is() { [[ $(ckpt "$1" "$2" "$3" 2>/dev/null) == "$4" ]]; }

t_section "three pushes at paloalto: a checkpoint with two cosignatures"
t_suser paloalto bob
t_expect 0 "repo add one --mode off --writer bob" t_c paloalto repo add one --mode off --writer bob
rm -rf "$T_DIR/w"
gd_git $IP /dev/null init -q -b main "$T_DIR/w"
gd_git $IP /dev/null -C "$T_DIR/w" remote add origin "ssh://root@${T_SADDR[paloalto]}:$T_SSH_PORT/one"
for i in 0 1 2; do
	t_commit "$T_DIR/w" || t_fatal "commit"
	t_expect 0 "bob pushes one ($i)" t_git $IP bob -C "$T_DIR/w" push origin HEAD:refs/heads/main
	t_has "... logged as paloalto#$i" "$ERR" "remote: grantd: logged as paloalto#$i"
done
TIP=$(git -C "$T_DIR/w" rev-parse HEAD)
t_expect_soon 0 10 "paloalto: its checkpoint of 3 leaves" ckpt_is paloalto paloalto checkpoint 3
t_expect_soon 0 10 "paloalto: signed by itself and cosigned by both witnesses" ckpt_is paloalto paloalto signatures 3
for s in portland montreal; do
	t_expect_soon 0 10 "$s cosigned paloalto's tree of 3" ckpt_is "$s" paloalto cosigned 3
	t_expect_soon 0 10 "$s keeps paloalto's checkpoint with 3 signatures" ckpt_is "$s" paloalto signatures 3
done

t_section "grant-log checks paloalto's log from paloalto and from montreal"
t_expect 0 "grant-log checkpoint (paloalto serving)" glog paloalto checkpoint
t_has "... size 3" "$OUT" "3"
t_expect 0 "grant-log verify: the tree from every entry" glog paloalto verify
t_expect 0 "grant-log tip: main of one is the logged tip" glog paloalto tip one refs/heads/main "$TIP"
OTHER=$(git -C "$T_DIR/w" rev-parse HEAD~1)
t_expect 1 "grant-log tip: another commit is not" glog paloalto tip one refs/heads/main "$OTHER"
t_has "... naming the logged value" "$OUT$ERR" "$TIP"
t_expect 0 "grant-log checkpoint (montreal serving paloalto's log)" glog montreal checkpoint
t_expect 0 "grant-log prove 1 (montreal serving)" glog montreal prove 1
t_has "... the entry" "$OUT" "origin paloalto"
t_expect 1 "a checkpoint without paloalto's key is not taken" \
	"$GD_BIN/grant-log" --key "${VK[portland]}" --state "$T_DIR/state2" "$(url paloalto)" paloalto checkpoint

t_section "two more pushes: the next checkpoint is consistent with the kept one"
for i in 3 4; do
	t_commit "$T_DIR/w" || t_fatal "commit"
	t_expect 0 "bob pushes one ($i)" t_git $IP bob -C "$T_DIR/w" push origin HEAD:refs/heads/main
done
t_expect_soon 0 10 "paloalto: checkpoint of 5, 3 signatures" \
	eval 'ckpt_is paloalto paloalto checkpoint 5 && ckpt_is paloalto paloalto signatures 3'
t_expect_soon 0 10 "portland keeps it with 3 signatures" \
	eval 'ckpt_is portland paloalto checkpoint 5 && ckpt_is portland paloalto signatures 3'
t_expect 0 "grant-log checkpoint (portland serving): consistent with size 3" glog portland checkpoint
t_expect 0 "grant-log tip of the new main" glog portland tip one refs/heads/main "$(git -C "$T_DIR/w" rev-parse HEAD)"

t_section "grantctl log verify checks the kept checkpoints at every site"
# the line of paloalto's kept checkpoint in SITE's log verify
kept_line() { t_c "$1" log verify | grep "^tlog paloalto: checkpoint "; }
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 10 "$s keeps paloalto's checkpoint of 5 with both cosignatures" \
		eval '[[ $(kept_line '"$s"') == "tlog paloalto: checkpoint size=5 signed ok, cosignatures 2/2, root matches"* ]]'
	t_expect 0 "$s: log verify" t_c "$s" log verify
	t_has "... the push log first" "$OUT" "push log: 5 entries from 1 site, all chains intact"
	t_has "... paloalto's checkpoint signed ok, 2/2 cosignatures, its root the leaves'" "$OUT" \
		"tlog paloalto: checkpoint size=5 signed ok, cosignatures 2/2, root matches"
done
t_has "a witness: its last cosigned consistent with it" "$OUT" \
	"tlog paloalto: checkpoint size=5 signed ok, cosignatures 2/2, root matches, last cosigned here consistent"
t_expect 0 "montreal: log verify --json" t_c montreal log verify --json
t_eq "... paloalto's checkpoint: size, signature, cosignatures, root, witness" \
	"$(t_json "[' '.join(str(c[k]) for k in ('size', 'signature', 'cosignatures', 'cosigners', 'root', 'witness')) for c in j['tlog']['checkpoints'] if c['site'] == 'paloalto'][0]" <<<"$OUT")" \
	"5 ok 2 2 matches consistent"
t_eq "... no proof, all checkpoints good" "$(t_json "[len(j['tlog']['proofs']), j['tlog']['checkpoints_ok']]" <<<"$OUT")" "[0, true]"

t_section "a stand-in for paloalto, with its key, signs a root that is no tree's"
t_stop paloalto
NAME=${VK[paloalto]%%+*}
"$PY" "$ROGUE" forge-ckpt "tcp://${T_SADDR[paloalto]}:$T_PUB_PORT" "$(t_dir paloalto)/node.key" \
	paloalto "$NAME" 5 30 >"$T_DIR/forge.out" 2>&1 &
FORGE=$!
for s in portland montreal; do
	t_expect_soon 0 15 "$s refuses it and keeps it as proof" eval '(( $(ckpt '"$s"' paloalto proofs) >= 1 ))'
	t_expect_soon 0 5 "$s's log says why" t_grep_log "$s" \
		"push log checkpoint refused origin=paloalto size=5: its root is not the root of the origin's leaves here"
	t_check "$s kept the honest checkpoint" ckpt_is "$s" paloalto signatures 3
done
kill "$FORGE" 2>/dev/null
wait "$FORGE" 2>/dev/null
for s in portland montreal; do
	t_expect 1 "$s: log verify fails on the kept fork proof" t_c "$s" log verify
	t_has "... naming it, with the root paloalto signed and the one here" "$OUT" \
		"tlog paloalto: fork proof size=5 signature ok, signed root $(printf forged | sha256sum | cut -c1-64), root here "
	t_has "... and saying why" "$ERR" "transparency log: fork proof of site paloalto kept (size 5)"
	t_has "... the honest checkpoint still good" "$OUT" \
		"tlog paloalto: checkpoint size=5 signed ok, cosignatures 2/2, root matches"
done
t_expect 1 "montreal: log verify --json" t_c montreal log verify --json
t_eq "... the proof: site, size, signature" \
	"$(t_json "' '.join(str(p[k]) for p in j['tlog']['proofs'] for k in ('site', 'size', 'signature'))" <<<"$OUT")" \
	"paloalto 5 ok"
t_expect 0 "grant-log checkpoint (montreal serving): still the honest one" glog montreal checkpoint
t_start paloalto
t_done
