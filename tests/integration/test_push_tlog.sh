#!/bin/bash
# The transparency log's leaves (issue 21, docs/push-log.md "The
# transparency log's leaves"): paloalto and portland are frontends,
# montreal a mirror.  Once every frontend announces "push-tlog", each push
# gets a leaf of its origin's log: `git push` shows "remote: grantd: logged
# as SITE#INDEX" (0, 1 ... per origin), `grantctl log --json` the entry's
# leaf_index.  Pushes at both frontends; then every site, the mirror too,
# holds the same leaves and the same tree (size and root, recomputed from
# the leaves by `grantctl log verify --json`, which checks them against the
# stored hashes), the public digests agree, and the mirror holds the
# leaves but no push log entry (the salt and the client address live only
# there) and no client address anywhere in its directory.  The mirror,
# down during a push, catches up on the leaves it missed.  Clients come
# from 127.0.26.x.
. "$(dirname "$0")/lib.sh"

FRONTS=(paloalto portland)
MIRROR=montreal
IPA=127.0.26.5
IPB=127.0.26.6

t_section "paloalto, portland (frontends) and montreal (mirror)"
t_cluster_config
sed -i '/^\[node\]$/a role = mirror' "$(t_dir $MIRROR)/grantd.conf"
HTTP_PORT=$((T_SSH_PORT + 10000 + 8))
sed -i "/^\\[node\\]\$/a log_http = ${T_SADDR[$MIRROR]}:$HTTP_PORT" "$(t_dir $MIRROR)/grantd.conf"
for s in "${FRONTS[@]}"; do
	sed -i "/^\\[peer $MIRROR\\]\$/a role = mirror" "$(t_dir "$s")/grantd.conf"
done
for s in "${T_SITES[@]}"; do t_start "$s"; done
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s hears (or feeds) every peer" gd_peers_connected "$(t_dir "$s")"
done
for s in "${FRONTS[@]}"; do t_sshd "$s"; done

# tlog_on SITE: SITE's status says every frontend has push-tlog
tlog_on() {
	[[ $(t_sj "$1" "[f['everywhere'] for f in j['features'] if f['name'] == 'push-tlog'][0]") == true ]]
}
for s in "${FRONTS[@]}"; do
	t_expect_soon 0 10 "$s: every frontend announces push-tlog" tlog_on "$s"
done

# trees SITE: each origin's tree at SITE as "SITE:SIZE:ROOT" words, and
# whether log verify found them intact
trees() {
	t_c "$1" log verify --json |
		t_json "' '.join('%s:%d:%s' % (t['site'], t['size'], t['root']) for t in j['tlog']['trees']) + (' intact' if j['tlog']['intact'] else ' BROKEN')"
}
trees_are() { [[ $(trees "$1") == "$2" ]]; }
pub_of() {
	local j re='"digest_public"[[:space:]]*:[[:space:]]*"([0-9a-f]+)"'
	j=$(t_status "$1") && [[ $j =~ $re ]] && echo "${BASH_REMATCH[1]}"
}
pub_equal() {
	local a b c
	a=$(pub_of paloalto) && b=$(pub_of portland) && c=$(pub_of $MIRROR) &&
		[[ $a == "$b" && $b == "$c" ]]
}
fams() { t_c "$1" verify --json | t_json "' '.join('%s=%d' % (f['family'], f['records']) for f in j['families'])"; }
fam() { local kv; for kv in $1; do [[ ${kv%%=*} == "$2" ]] && { echo "${kv#*=}"; return; }; done; echo 0; }
push_from() {
	rm -rf "$1"
	gd_git "$2" /dev/null init -q -b main "$1"
	gd_git "$2" /dev/null -C "$1" remote add origin "$3"
}

t_section "bob (repositories mode off) pushes at paloalto and portland"
t_suser paloalto bob
t_expect 0 "repo add one --mode off --writer bob" t_c paloalto repo add one --mode off --writer bob
t_expect 0 "repo add two --mode off --writer bob" t_c paloalto repo add two --mode off --writer bob
t_wait_converged 10 "${FRONTS[@]}" || t_fail "the frontends agree" "$(t_states "${FRONTS[@]}")"
t_expect_soon 0 10 "portland has repository two" t_c portland check bob "$IPB" two
push_from "$T_DIR/wa" $IPA "ssh://root@${T_SADDR[paloalto]}:$T_SSH_PORT/one"
push_from "$T_DIR/wb" $IPB "ssh://root@${T_SADDR[portland]}:$T_SSH_PORT/two"
t_commit "$T_DIR/wa" || t_fatal "commit"
t_expect 0 "bob pushes one at paloalto" t_git $IPA bob -C "$T_DIR/wa" push origin HEAD:refs/heads/main
t_has "git shows where it was logged" "$ERR" "remote: grantd: logged as paloalto#0"
t_commit "$T_DIR/wa" || t_fatal "commit"
t_expect 0 "bob pushes one at paloalto again" t_git $IPA bob -C "$T_DIR/wa" push origin HEAD:refs/heads/main
t_has "the next leaf" "$ERR" "remote: grantd: logged as paloalto#1"
t_commit "$T_DIR/wb" || t_fatal "commit"
t_expect 0 "bob pushes two at portland" t_git $IPB bob -C "$T_DIR/wb" push origin HEAD:refs/heads/main
t_has "portland's own log, from 0" "$ERR" "remote: grantd: logged as portland#0"

t_section "every site holds the same leaves and trees"
t_expect_soon 0 15 "paloalto: two trees, intact" eval '[[ $(trees paloalto) == paloalto:2:*" "portland:1:*" intact" ]]'
WANT=$(trees paloalto)
for s in portland $MIRROR; do
	t_expect_soon 0 15 "$s: the same trees as paloalto ($WANT)" trees_are "$s" "$WANT"
done
t_expect_soon 0 10 "the public digests of all three sites agree" pub_equal
t_wait_converged 10 "${FRONTS[@]}" || t_fail "the frontends agree" "$(t_states "${FRONTS[@]}")"
t_expect 0 "montreal: log verify" t_c $MIRROR log verify
t_expect 0 "portland: log --json --repo one" t_c portland log --json --repo one
t_eq "each entry its leaf index and the salt of its address, newest first" \
	"$(python3 -c 'import json, sys; print(" ".join("%s:%d" % (j.get("leaf_index"), len(j.get("addr_salt", ""))) for j in map(json.loads, filter(str.strip, sys.stdin))))' <<<"$OUT")" "1:64 0:64"

t_section "the mirror: leaves, no entry, no address"
MF=$(fams $MIRROR)
t_eq "montreal holds the three leaves" "$(fam "$MF" tleaves)" 3
t_eq "montreal holds no push log entry (salt, address)" "$(fam "$MF" pushlog)" 0
t_eq "paloalto holds the three entries" "$(fam "$(fams paloalto)" pushlog)" 3
t_expect 1 "no client address in montreal's directory" grep -rqaF -e "$IPA" -e "$IPB" "$(t_dir $MIRROR)"

t_section "the mirror serves each frontend's checkpoint with its cosignature"
# (tlogwit.h: a mirror asks its frontends for the checkpoints they keep)
mckpt() { t_sj $MIRROR "[str(t.get('checkpoint', 0)) + '/' + str(t.get('signatures', 0)) for t in j['tlog'] if t['origin'] == '$1'][0]"; }
t_expect_soon 0 15 "montreal keeps paloalto's checkpoint of 2, signed and cosigned" eval '[[ $(mckpt paloalto) == 2/2 ]]'
t_expect_soon 0 15 "montreal keeps portland's checkpoint of 1, signed and cosigned" eval '[[ $(mckpt portland) == 1/2 ]]'
PA_VK=$(t_c paloalto log key) && PL_VK=$(t_c portland log key) || t_fatal "grantctl log key"
ONE_TIP=$(git -C "$T_DIR/wa" rev-parse HEAD)
t_expect 0 "grant-log checks paloalto's log at the mirror (portland's cosignature)" \
	"$GD_BIN/grant-log" --key "$PA_VK" --witness "$PL_VK" --quorum 1 --state "$T_DIR/gl" \
	"http://${T_SADDR[$MIRROR]}:$HTTP_PORT" paloalto checkpoint
t_expect 0 "grant-log: one's main at the mirror's log is the logged tip" \
	"$GD_BIN/grant-log" --key "$PA_VK" --witness "$PL_VK" --quorum 1 --state "$T_DIR/gl" \
	"http://${T_SADDR[$MIRROR]}:$HTTP_PORT" paloalto tip one refs/heads/main "$ONE_TIP"

t_section "montreal, down during a push, catches up on its leaf"
t_stop $MIRROR
t_commit "$T_DIR/wb" || t_fatal "commit"
t_expect 0 "bob pushes two at portland" t_git $IPB bob -C "$T_DIR/wb" push origin HEAD:refs/heads/main
t_has "portland's leaf 1" "$ERR" "remote: grantd: logged as portland#1"
t_start $MIRROR
t_expect_soon 0 20 "paloalto: portland's tree has 2 leaves" eval '[[ $(trees paloalto) == *" "portland:2:*" intact" ]]'
WANT=$(trees paloalto)
for s in portland $MIRROR; do
	t_expect_soon 0 20 "$s: the same trees as paloalto" trees_are "$s" "$WANT"
done
t_expect_soon 0 10 "the public digests agree again" pub_equal
t_done
