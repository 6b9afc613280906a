#!/bin/bash
# A mirror that starts behind the frontends' operation logs (docs/mirrors.md;
# SPEC 9): with `oplog_retention = 2s`, paloalto and portland enroll,
# validate, grant, revoke and push while montreal (role = mirror) has never
# run, and truncate their logs past all of it.  montreal then starts on an
# empty disk: it is given a state transfer whose secret families are sent
# empty, and ends with the frontends' public digest, the repository on its
# disk, and no enrollment, mark, grant, failure or revocation record.
. "$(dirname "$0")/lib.sh"

MIRROR=montreal
C1=127.0.22.8

t_log_since() {
	awk -v t="$2" -v x="$3" '$1 >= t && index($0, x) { f = 1 } END { exit !f }' \
		"$(t_dir "$1")/grantd.log"
}
iso_ms() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%3NZ; }
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
fam() { local kv; for kv in $1; do [[ ${kv%%=*} == "$2" ]] && { echo "${kv#*=}"; return; }; done; echo "?"; }
# both frontends hear each other (montreal is not running yet)
fronts_up() {
	t_sj paloalto "1/0 if not [p for p in j['peers'] if p['site'] == 'portland' and p['connected']] else 0" &&
		t_sj portland "1/0 if not [p for p in j['peers'] if p['site'] == 'paloalto' and p['connected']] else 0"
}

t_section "paloalto and portland (frontends, oplog_retention = 2s); montreal (mirror) not started"
t_cluster_config lockout_failures=50 oplog_retention=2s
sed -i '/^\[node\]$/a role = mirror' "$(t_dir $MIRROR)/grantd.conf"
for s in paloalto portland; do
	sed -i "/^\\[peer $MIRROR\\]\$/a role = mirror" "$(t_dir "$s")/grantd.conf"
	t_start "$s"
done
t_expect_soon 0 20 "the frontends hear each other" fronts_up

t_section "enrollments, vals, a revoke and a push at the frontends"
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS"
t_expect 0 "paloalto: repo add snap --writer kim --mode off" t_c paloalto repo add snap --writer kim --mode off
t_expect 0 "paloalto: kim 2fa val" t_sh paloalto $C1 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "portland: kim 2fa val from another address" t_sh portland 127.0.22.9 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "portland: grant revoke kim $C1" t_c portland grant revoke kim $C1
t_expect 0 "portland: grant revoke kim (all: a revocation record)" t_c portland grant revoke kim
t_expect 1 "paloalto: a bad token counts as a failure" t_sh paloalto $C1 kim 2fa val "$(t_bad_hotp "$KS" 0 30)"
W=$T_DIR/work
gd_git $C1 /dev/null init -q -b main "$W"
t_commit "$W"
t_commit "$W"
t_expect 0 "push to paloalto's snap.git" \
	gd_git $C1 /dev/null -C "$W" push -q "$(t_dir paloalto)/repos/snap.git" HEAD:refs/heads/main
TIP=$(t_head "$W")
M=$(gd_now_ms)
t_expect 0 "paloalto: user add last1" t_c paloalto user add last1
t_expect 0 "portland: user add last2" t_c portland user add last2
t_expect_converged "paloalto and portland agree" 10 paloalto portland
cut=$(iso_ms "$((M / 1000 + 2)).$(printf %03d $((M % 1000)))")
for s in paloalto portland; do
	t_expect_soon 0 15 "$s: its operation log is truncated past all of it" \
		t_log_since "$s" "$cut" "operation log truncated"
done

t_section "montreal starts on an empty disk: a filtered state transfer"
t_start $MIRROR
t_expect_soon 0 30 "the public digests of all three agree" pub_equal
t_check "montreal's log says the state transfer finished" t_grep_log $MIRROR "state transfer done"
t_expect_soon 0 20 "montreal: snap's main is the pushed tip on disk" \
	eval "[[ \$(git --git-dir=$(t_dir $MIRROR)/repos/snap.git rev-parse -q --verify refs/heads/main) == $TIP ]]"
MF=$(fams $MIRROR)
PF=$(fams paloalto)
for f in enroll marks grants fails revokes; do
	t_eq "montreal holds no $f record" "$(fam "$MF" $f)" 0
	t_check "control: paloalto holds $f records ($(fam "$PF" $f))" test "$(fam "$PF" $f)" -gt 0
done
t_eq "montreal holds the 3 users" "$(fam "$MF" users)" 3
t_check "montreal's log names no record it dropped" eval '! grep -q "state transfer record dropped" "$(t_dir $MIRROR)/grantd.log"'
# what montreal received, not only what it holds: the frontend sent each
# secret family empty (audit mutant 1d: sent full, the mirror's own filter
# would hide it from the checks above)
t_eq "montreal: replication.dropped.mirror_hidden is 0 (no hidden family arrived)" \
	"$(t_sj $MIRROR "j['replication'].get('dropped', {}).get('mirror_hidden', 0)")" 0
t_check "montreal's log has no \"hidden family sent to a mirror\"" \
	eval '! t_grep_log $MIRROR "hidden family sent to a mirror"'

t_section "then live: a val and a user at paloalto"
t_expect 0 "paloalto: kim 2fa val" t_sh paloalto $C1 kim 2fa val "$(t_hotp "$KS" 2)"
t_expect 0 "paloalto: user add after" t_c paloalto user add after
t_expect_soon 0 10 "montreal: has user after" t_has_user $MIRROR after
t_expect_soon 0 10 "the public digests agree" pub_equal
t_eq "montreal still holds no marks record" "$(fam "$(fams $MIRROR)" marks)" 0
t_check "montreal's log has no \"hidden operation sent to a mirror\"" \
	eval '! t_grep_log $MIRROR "hidden operation sent to a mirror"'

t_done
