#!/bin/bash
# The push log (issue 12, SPEC 9, docs/push-log.md): pushes over ssh at two
# sites, each an entry (user, key fingerprint, client address, site, the
# factor that allowed it, each ref's old and new value) that replicates;
# `grantctl log` at the third site lists them, filtered by --repo, --user,
# --since, as --json, paged; `grantctl log verify` walks every chain (exit
# 0); then a site that rewrites an entry after hashing it (the test hook
# GRANTD_TEST_FAULT_AT=pushlog-tamper) is named by `log verify` elsewhere
# (exit 1: site, entry, what is wrong).  Between the two, a stand-in for
# montreal (repl_rogue.py heads) reports another entry 1 of portland than
# paloalto holds: paloalto's log verify names the peer and both hashes, and
# passes again once the real montreal reports its heads.  Last, paloalto
# loses the newest entry of each chain on its disk (GRANTD_TEST_FAULT_AT=
# pushlog-drop-tail): its log verify names the missing tails.  Clients come
# from 127.0.23.x.
. "$(dirname "$0")/lib.sh"

t_cluster_up
for s in paloalto portland; do t_sshd "$s"; done

IPA=127.0.23.5
IPB=127.0.23.6
fp() { ssh-keygen -lf "$1" | cut -d' ' -f2; }
# log SITE ARGS...: `grantctl log ARGS...` at SITE
log() { local s=$1; shift; t_c "$s" log "$@"; }
# entries SITE ARGS...: how many entries `grantctl log --json ARGS` lists
entries() { local s=$1; shift; t_c "$s" log --json "$@" | grep -c '^{'; }
# work DIR SRC KEY URL: a clone to push from
push_from() {
	local d=$1 src=$2 user=$3 url=$4
	rm -rf "$d"
	gd_git "$src" /dev/null init -q "$d"
	gd_git "$src" /dev/null -C "$d" remote add origin "$url"
}
commit() {
	echo "$RANDOM $(date +%N)" >>"$1/f.txt"
	gd_git 127.0.0.1 /dev/null -C "$1" add -A
	gd_git 127.0.0.1 /dev/null -C "$1" commit -q -m "c $RANDOM"
}
Z=0000000000000000000000000000000000000000

t_section "alice (enrolled, repository required) and bob (repository mode off)"
t_suser paloalto alice
t_suser paloalto bob
AS=$(gd_base32_secret)
t_expect 0 "enroll alice --hotp" t_c paloalto enroll alice --hotp --secret "$AS"
t_expect 0 "repo add logd --writer alice --writer bob" t_c paloalto repo add logd --writer alice --writer bob
t_expect 0 "repo add open --mode off --writer bob" t_c paloalto repo add open --mode off --writer bob
t_expect_converged "the three sites agree" 10
t_expect 0 "alice 2fa val at paloalto from $IPA" t_sssh paloalto "$IPA" alice 2fa val "$(t_hotp "$AS" 0)"
FPA=$(fp "$T_KEYS/alice.pub")
FPB=$(fp "$T_KEYS/bob.pub")

t_section "pushes: alice at paloalto, bob at portland"
push_from "$T_DIR/wa" "$IPA" alice "ssh://root@${T_SADDR[paloalto]}:$T_SSH_PORT/logd"
commit "$T_DIR/wa"
A1=$(t_head "$T_DIR/wa")
t_expect 0 "alice pushes logd at paloalto" t_git "$IPA" alice -C "$T_DIR/wa" push -q origin HEAD:refs/heads/main
push_from "$T_DIR/wb" "$IPB" bob "ssh://root@${T_SADDR[portland]}:$T_SSH_PORT/open"
commit "$T_DIR/wb"
B1=$(t_head "$T_DIR/wb")
t_expect_soon 0 10 "portland has repository open" t_c portland check bob "$IPB" open
t_expect 0 "bob pushes open at portland" t_git "$IPB" bob -C "$T_DIR/wb" push -q origin HEAD:refs/heads/main
t_expect_soon 0 15 "montreal lists both pushes" eval '[[ $(entries montreal) == 2 ]]'

t_section "grantctl log at montreal: who, from where, with which key, what allowed it"
t_expect 0 "grantctl log" log montreal
t_has "alice's entry" "$OUT" "site=paloalto n=1 repo=logd user=alice ip=$IPA key=$FPA kind=plain factor=grant"
t_has "alice's ref, old -> new" "$OUT" "refs/heads/main $Z -> $A1"
t_has "bob's entry" "$OUT" "site=portland n=1 repo=open user=bob ip=$IPB key=$FPB kind=plain factor=mode-off"
t_has "bob's ref, old -> new" "$OUT" "refs/heads/main $Z -> $B1"
t_eq "newest first: bob's push, then alice's" \
	"$(grep -o 'user=[a-z]*' <<<"$OUT" | tr '\n' ' ')" "user=bob user=alice "

t_section "filters"
t_expect 0 "log --repo logd" log montreal --repo logd
t_has "alice's push" "$OUT" "user=alice"
t_hasnt "not bob's" "$OUT" "user=bob"
t_expect 0 "log --user bob" log montreal --user bob
t_has "bob's push" "$OUT" "user=bob"
t_hasnt "not alice's" "$OUT" "user=alice"
t_expect 0 "log --repo logd.git --user bob (no such push)" log montreal --repo logd.git --user bob
t_eq "nothing" "$OUT" ""
t_expect 0 "log --since 1h" log montreal --since 1h
t_eq "both" "$(grep -c '^[0-9]' <<<"$OUT")" 2
t_expect 0 "log --since (tomorrow's date)" log montreal --since "$(date -u -d tomorrow +%F)"
t_eq "nothing" "$OUT" ""
t_expect 0 "log --since (a minute from now, unix seconds)" log montreal --since $(( $(date +%s) + 60 ))
t_eq "nothing" "$OUT" ""
t_expect 2 "log --since soon (not a time)" log montreal --since soon
t_has "says what a time is" "$ERR" "bad --since 'soon'"
t_expect 2 "log --user 'Bad User'" log montreal --user "Bad User"

t_section "--json"
t_expect 0 "log --json --user alice" log montreal --json --user alice
t_eq "one object" "$(grep -c '^{' <<<"$OUT")" 1
J=$(t_json "' '.join(map(str, [j['site'], j['n'], j['user'], j['key_fp'], j['key_kind'], j['client_ip'], j['factor'], j['repo'], j['refs'][0]['ref'], j['refs'][0]['old'], j['refs'][0]['new'], len(j['hash']), j['prev'] == '0' * 64]))" <<<"$OUT")
t_eq "its fields" "$J" "paloalto 1 alice $FPA plain $IPA grant logd refs/heads/main $Z $A1 64 True"

t_section "a second push at paloalto is entry 2, chained to entry 1"
commit "$T_DIR/wa"
A2=$(t_head "$T_DIR/wa")
t_expect 0 "alice pushes again" t_git "$IPA" alice -C "$T_DIR/wa" push -q origin HEAD:refs/heads/main
t_expect_soon 0 15 "montreal lists three pushes" eval '[[ $(entries montreal) == 3 ]]'
t_expect 0 "log --json --repo logd" log montreal --json --repo logd
t_eq "entry 2 first, its prev is entry 1's hash, old -> new" \
	"$(python3 -c '
import json, sys
e = [json.loads(l) for l in sys.stdin if l.strip()]
print(e[0]["n"], e[1]["n"], e[0]["prev"] == e[1]["hash"], e[0]["refs"][0]["old"], e[0]["refs"][0]["new"])' <<<"$OUT")" \
	"2 1 True $A1 $A2"
t_expect 0 "log --max 1 (pages of one, fetched to the end)" log montreal --max 1
t_eq "all three, newest first" "$(grep -o 'site=[a-z]* n=[0-9]*' <<<"$OUT" | tr '\n' ' ')" \
	"site=paloalto n=2 site=portland n=1 site=paloalto n=1 "

t_section "log verify at every site"
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: log verify" t_c "$s" log verify
	t_eq "$s: says so (first; the kept checkpoints follow)" "${OUT%%$'\n'*}" "push log: 3 entries from 2 sites, all chains intact"
done
for s in "${T_SITES[@]}"; do
	t_eq "$s: status counts.push_log" "$(t_sj "$s" "j['counts']['push_log']")" 3
done
t_expect 0 "log verify --json" t_c montreal log verify --json
t_eq "intact" "$(t_json "' '.join(map(str, [j['entries'], j['sites'], j['intact']]))" <<<"$OUT")" "3 2 True"

t_section "log verify holds the peers' heads against this site's entries"
phead() { t_c paloalto log verify --json | t_json "j['peer_heads']"; }
t_expect_soon 0 10 "paloalto held its peers' heads (portland's, montreal's) against its entries" \
	eval '(( $(phead) >= 2 ))'
if PY=$(t_py); then
	PH1=$(t_c paloalto log --json --user bob | t_json "j['hash']")
	FAKE=$(printf 'ab%.0s' {1..32})
	t_stop montreal
	"$PY" "$T_HERE/repl_rogue.py" heads "tcp://${T_SADDR[montreal]}:$T_PUB_PORT" \
		"$(t_dir montreal)/node.key" montreal portland 1 "$FAKE" 60 >"$T_DIR/heads.out" 2>&1 &
	HEADS_PID=$!
	t_expect_soon 1 10 "paloalto: log verify fails once montreal reports another entry 1 of portland" \
		t_c paloalto log verify
	t_expect 1 "paloalto: log verify" t_c paloalto log verify
	t_has "names the site, entry, peer and both hashes" "$ERR" \
		"push log: chain of site portland broken at entry 1: a peer holds another entry there (peer montreal); hashes $PH1 and $FAKE"
	t_expect 1 "log verify --json" t_c paloalto log verify --json
	t_eq "the break" "$(t_json "' '.join(map(str, [j['break']['site'], j['break']['n'], j['break']['peer'], j['break']['hashes'][1]]))" <<<"$OUT")" \
		"portland 1 montreal $FAKE"
	kill "$HEADS_PID" 2>/dev/null
	wait "$HEADS_PID" 2>/dev/null
	t_start montreal
	t_expect_soon 0 15 "the real montreal's heads replace the lie: paloalto's log verify passes" \
		t_c paloalto log verify
else
	t_fail "python3-zmq is needed for the peer heads check"
fi

t_section "portland rewrites an entry after hashing it (test hook)"
t_stop portland
GRANTD_TEST_FAULT_AT=pushlog-tamper t_start portland
t_expect_soon 0 20 "portland hears its peers again" gd_peers_connected "$(t_dir portland)"
commit "$T_DIR/wb"
t_expect_soon 1 15 "portland answers and is not catching up" t_syncing portland
t_expect 0 "bob pushes at portland" t_git "$IPB" bob -C "$T_DIR/wb" push -q origin HEAD:refs/heads/main
t_expect_soon 0 15 "montreal has the rewritten entry" eval '[[ $(entries montreal --user mallory) == 1 ]]'
t_expect 1 "montreal: log verify" t_c montreal log verify
t_has "names the site, the entry and what is wrong" "$ERR" \
	"push log: chain of site portland broken at entry 2: its hash does not match its contents (rewritten)"
t_expect 1 "paloalto: log verify" t_c paloalto log verify
t_has "the same break" "$ERR" "site portland broken at entry 2"
t_expect 1 "log verify --json" t_c montreal log verify --json
t_eq "the break" "$(t_json "' '.join(map(str, [j['intact'], j['break']['site'], j['break']['n']]))" <<<"$OUT")" "False portland 2"
t_expect 0 "the log still lists it" log montreal --repo open
t_has "as stored" "$OUT" "site=portland n=2 repo=open user=mallory"
t_stop portland
t_start portland

t_section "paloalto loses the newest entry of every chain on its disk (test hook)"
t_stop paloalto
GRANTD_TEST_FAULT_AT=pushlog-drop-tail t_start paloalto
t_check "paloalto's log says what the hook removed" \
	t_grep_log paloalto "test fault pushlog-drop-tail: push log entry removed origin=paloalto n=2"
t_expect 1 "paloalto: log verify" t_c paloalto log verify
t_has "names the first origin's missing tail" "$ERR" \
	"push log: chain of site paloalto broken at entry 2: it and the entries after it are missing (this site had recorded them)"
t_expect 1 "paloalto: log verify --json" t_c paloalto log verify --json
t_eq "a missing tail for each origin, no other break" \
	"$(t_json "' '.join(map(str, [j['break']['site'], j['break']['n'], sorted(j['breaks'].items())]))" <<<"$OUT")" \
	"paloalto 2 [('tail_missing', 2)]"
t_expect 1 "montreal: log verify (its break is portland's rewritten entry, not paloalto's tail)" t_c montreal log verify
t_hasnt "montreal's chains of paloalto are whole" "$ERR" "site paloalto"
t_stop paloalto
t_start paloalto

t_done
