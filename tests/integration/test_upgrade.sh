#!/bin/bash
# A rolling upgrade from the last release to the tree (issue 22 item 3,
# SPEC 10, docs/upgrading.md): three sites run the last release of
# deploy/releases (its tag when the clone has tags, else the commit that
# file records); users, enrollments, grants, a repository and a push are
# made there; then each site in turn is stopped and started on this
# build with the same data directory while the others take vals, pushes
# and a revoke.  Checked: nothing is lost (the digests and the applied
# vectors converge after each step, the repository's branch is the same
# everywhere), a token used at a site of one release is refused at a site
# of the other, an upgraded site shows its old peers as "0.1.0 or older"
# in `grantctl status`, and the release-in-heartbeat feature is
# everywhere only once all three sites run this build.
#
# The old release is built once per commit and kept in
# $GD_RELEASE_CACHE (default /var/tmp)/grantd-release-COMMIT/build/bin
# (RelWithDebInfo, no tests, -j2: a few minutes the first time); later
# runs reuse it.  Remove the directory to build it again.
. "$(dirname "$0")/lib.sh"

NEW_BIN=$GD_BIN
NEW_RELEASE=$("$NEW_BIN/grantd" --version | awk '{print $2}')

# the last release (REL_TAG, REL_COMMIT, build_release)
. "$(dirname "$0")/release_lib.sh"

t_section "the last release, $REL_TAG ($REL_COMMIT)"
OLD_BIN=$(build_release "$REL_COMMIT") || t_fatal "build $REL_TAG"
t_ok "built (or found) $REL_TAG in $OLD_BIN"
t_run "$OLD_BIN/grantd" --version
t_check "the old grantd is not this build ($("$NEW_BIN/grantd" --version 2>&1))" \
	eval '[[ $OUT != "$("$NEW_BIN/grantd" --version 2>&1)" ]]'

declare -A REL=() NAME=()
use_release() { # SITE old|new (release_lib.sh's release_link)
	release_link "$1" "$2"
	REL[$1]=$2
	NAME[$1]=$([[ $2 == old ]] && echo "$REL_TAG" || echo "$NEW_RELEASE")
}
# peer_release SITE PEER: what SITE's status says PEER runs
peer_release() { t_sj "$1" "[p.get('release') for p in j['peers'] if p['site'] == '$2'][0]"; }
peer_release_is() { [[ $(peer_release "$1" "$2" 2>/dev/null) == "$3" ]]; }
# everywhere_is SITE true|false: release-in-heartbeat everywhere at SITE
everywhere_is() {
	[[ $(t_sj "$1" "[f['everywhere'] for f in j.get('features', []) if f['name'] == 'release-in-heartbeat'][0]" 2>/dev/null) == "$2" ]]
}

t_section "three sites on $REL_TAG"
# the old release knows no verifier_key (docs/upgrading.md: peers' keys
# are set once every site runs a release that signs)
GD_VERIFIER_KEYS=0 t_cluster_config
for s in "${T_SITES[@]}"; do use_release "$s" old; start_site "$s"; done
for s in "${T_SITES[@]}"; do
	gd_wait_for 20 gd_peers_connected "$T_DIR/$s" || t_fatal "$s hears both peers within 20 s"
done
t_expect_converged "the three sites on $REL_TAG agree" 20
# montreal's backup before any upgrade: what takes it back (section 4)
t_expect 0 "montreal: grantctl backup (on $REL_TAG)" "$T_DIR/bin.montreal/grantctl" \
	--config "$T_DIR/montreal/grantd.conf" backup "$T_DIR/montreal-pre"

# repository pushes (to the repository's path: the real post-receive hook)
work() { rm -rf "$1"; gd_git 127.0.0.1 /dev/null init -q "$1"; }
commit() {
	echo "$RANDOM $(date +%N)" >>"$1/f.txt"
	gd_git 127.0.0.1 /dev/null -C "$1" add -A &&
		gd_git 127.0.0.1 /dev/null -C "$1" commit -q -m "c $RANDOM"
}
push() { gd_git 127.0.0.1 /dev/null -C "$1" push -q "$(t_dir "$2")/repos/up.git" "HEAD:refs/heads/$3"; }
ref() { git --git-dir="$(t_dir "$1")/repos/up.git" rev-parse -q --verify "refs/heads/$2" 2>/dev/null; }
ref_is() { [[ $(ref "$1" "$2") == "$3" ]]; }
branch_everywhere() { # BRANCH TIP WHAT
	local s
	for s in "${T_SITES[@]}"; do
		t_expect_soon 0 20 "$s: $3" ref_is "$s" "$1" "$2"
	done
}

for u in ann bob cat dan; do
	t_suser paloalto "$u"
done
AS=$(gd_base32_secret) BS=$(gd_base32_secret) CS=$(gd_base32_secret) DS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll ann --hotp" t_c paloalto enroll ann --hotp --secret "$AS" --digits 6
t_expect 0 "portland: enroll bob --hotp" t_c portland enroll bob --hotp --secret "$BS" --digits 6
t_expect 0 "montreal: enroll cat --hotp" t_c montreal enroll cat --hotp --secret "$CS" --digits 6
t_expect 0 "paloalto: enroll dan --hotp" t_c paloalto enroll dan --hotp --secret "$DS" --digits 6
t_expect 0 "paloalto: repo add up" t_c paloalto repo add up --mode off
t_expect_converged "users, enrollments, repository everywhere" 20
t_expect 0 "paloalto: ann validates (token 0)" sh_at paloalto 127.0.20.1 ann 2fa val "$(t_hotp "$AS" 0)"
t_expect 0 "portland: bob validates for 30 days (token 0)" \
	sh_at portland 127.0.20.2 bob 2fa val-for-days 30 "$(t_hotp "$BS" 0)"
t_expect 0 "montreal: dan validates (token 0)" sh_at montreal 127.0.20.4 dan 2fa val "$(t_hotp "$DS" 0)"
work "$T_DIR/w"
commit "$T_DIR/w"
t_expect 0 "push main at paloalto" push "$T_DIR/w" paloalto main
branch_everywhere main "$(t_head "$T_DIR/w")" "main arrived"
t_expect_converged "the three sites on $REL_TAG agree" 20

# HOTP counters: the next unused token of each user
declare -A NEXT=([ann]=1 [bob]=1 [cat]=0 [dan]=1)
declare -A SEC=([ann]=$AS [bob]=$BS [cat]=$CS [dan]=$DS)
declare -A SRC=([ann]=127.0.20.1 [bob]=127.0.20.2 [cat]=127.0.20.3 [dan]=127.0.20.4)
tok() { t_hotp "${SEC[$1]}" "${NEXT[$1]}"; }

# bob_void SITE: SITE lists bob's grants, none of them live
bob_void() {
	t_c "$1" grant list --user bob --json |
		t_json 'len(j) > 0 and all(g["state"] != "live" for g in j)' | grep -qx true
}

STEP=0
# upgrade SITE: the others take vals, a push (and, at the first step, a
# revoke) while SITE is down; then SITE starts on this build.
upgrade() {
	local up=$1 s o1 o2 used
	STEP=$((STEP + 1))
	t_section "step $STEP: $up moves to $NEW_RELEASE while the others serve"
	t_stop "$up"
	use_release "$up" new
	o1='' o2=''
	for s in "${T_SITES[@]}"; do
		[[ $s == "$up" ]] && continue
		[[ -z $o1 ]] && o1=$s || o2=$s
	done
	t_expect 0 "$o1 (${NAME[$o1]}): ann validates" sh_at "$o1" "${SRC[ann]}" ann 2fa val "$(tok ann)"
	NEXT[ann]=$((NEXT[ann] + 1))
	t_expect 0 "$o2 (${NAME[$o2]}): cat validates" sh_at "$o2" "${SRC[cat]}" cat 2fa val "$(tok cat)"
	NEXT[cat]=$((NEXT[cat] + 1))
	commit "$T_DIR/w"
	t_expect 0 "push main at $o2 (${NAME[$o2]})" push "$T_DIR/w" "$o2" main
	cat_used=$(t_hotp "${SEC[cat]}" $((NEXT[cat] - 1)))
	if ((STEP == 1)); then
		t_expect 0 "$o1: grant revoke bob all" t_c "$o1" grant revoke bob all
	fi
	# and while it starts (and catches up): a push and a val elsewhere (to
	# a branch of its own: main may be moving at o1 by replication, and a
	# push racing that is refused whatever the releases)
	commit "$T_DIR/w"
	push "$T_DIR/w" "$o1" "during-$STEP" >"$T_DIR/push.out" 2>&1 &
	pp=$!
	sh_at "$o2" "${SRC[ann]}" ann 2fa val "$(tok ann)" >"$T_DIR/val.out" 2>&1 &
	vp=$!
	NEXT[ann]=$((NEXT[ann] + 1))
	start_site "$up"
	wait "$pp" && t_ok "push during-$STEP at $o1 during $up's start" ||
		t_fail "push during-$STEP at $o1 during $up's start" "$(<"$T_DIR/push.out")"
	wait "$vp" && t_ok "$o2: ann validates during $up's start" ||
		t_fail "$o2: ann validates during $up's start" "$(<"$T_DIR/val.out")"
	t_expect_converged "after step $STEP: the three sites agree" 30
	branch_everywhere main "$(git -C "$T_DIR/w" rev-parse HEAD~1)" "main is the last push to it"
	branch_everywhere "during-$STEP" "$(t_head "$T_DIR/w")" "during-$STEP arrived"
	for s in "${T_SITES[@]}"; do
		t_check "$s: bob's grants are all revoked" bob_void "$s"
	done

	# a token used at a site of one release is refused at the other's
	t_expect 1 "$up ($NEW_RELEASE): cat's token used at $o2 (${NAME[$o2]}) while $up was down is refused" \
		sh_at "$up" 127.0.20.9 cat 2fa val "$cat_used"
	t_expect 0 "$up ($NEW_RELEASE): dan validates" sh_at "$up" "${SRC[dan]}" dan 2fa val "$(tok dan)"
	used=$(tok dan)
	NEXT[dan]=$((NEXT[dan] + 1))
	t_expect_converged "dan's token use everywhere" 20
	for s in "$o1" "$o2"; do
		t_expect 1 "$s (${NAME[$s]}): dan's token used at $up is refused" \
			sh_at "$s" 127.0.20.9 dan 2fa val "$used"
	done
	t_expect 0 "$o1 (${NAME[$o1]}): ann validates" sh_at "$o1" "${SRC[ann]}" ann 2fa val "$(tok ann)"
	used=$(tok ann)
	NEXT[ann]=$((NEXT[ann] + 1))
	t_expect_converged "ann's token use everywhere" 20
	t_expect 1 "$up ($NEW_RELEASE): ann's token used at $o1 (${NAME[$o1]}) is refused" \
		sh_at "$up" 127.0.20.9 ann 2fa val "$used"

	# what the upgraded sites say of their peers
	for s in "${T_SITES[@]}"; do
		[[ ${REL[$s]} == new ]] || continue
		for o in "${T_SITES[@]}"; do
			[[ $o == "$s" ]] && continue
			want=$([[ ${REL[$o]} == new ]] && echo "$NEW_RELEASE" || echo "0.1.0 or older")
			t_expect_soon 0 10 "$s: status shows $o as $want" peer_release_is "$s" "$o" "$want"
		done
		want=$([[ ${REL[$o1]} == new && ${REL[$o2]} == new ]] && echo true || echo false)
		t_expect_soon 0 10 "$s: release-in-heartbeat everywhere is $want" everywhere_is "$s" "$want"
	done
}

upgrade portland
t_run t_c portland status
t_has "portland's status (text) names its release" "$OUT" "release:  $NEW_RELEASE store_format=2"
t_has "... and paloalto as 0.1.0 or older" "$OUT" "release:  peer paloalto 0.1.0 or older"
t_has "... and the feature as not everywhere" "$OUT" "feature:  release-in-heartbeat NOT everywhere"
t_check "portland's log says its store was stamped" grep -q "made by grantd 0.1.0" "$T_DIR/portland/grantd.log"
upgrade montreal
upgrade paloalto
t_run t_c paloalto status
t_has "paloalto's status (text): the feature is everywhere" "$OUT" "feature:  release-in-heartbeat everywhere"
t_has "... montreal's release and features" "$OUT" "release:  peer montreal $NEW_RELEASE features=release-in-heartbeat"

t_section "a site taken back to $REL_TAG turns the feature off"
# The store is of format 2 now (the transparency log's families): the old
# release cannot open it, and the way back is the backup taken before
# the upgrade (docs/upgrading.md section 4), caught up from the peers.
# A push now that every site logs (push-tlog everywhere) makes a leaf (the
# push during paloalto's start above may or may not have made one, as the
# feature reached portland before or after it).  $REL_TAG knows no leaves:
# the restored montreal drops the leaves' operations (its replication
# still works: the push's ref arrives), and once it runs this build again
# it may hold them or not, as its vector went past them or not, so its
# digest is only checked after it is wiped and rebuilt from a peer (the
# next section; docs/upgrading.md section 4 tells an operator so).
# the leaves SITE holds (grantctl verify's count of the family)
leaves_at() { t_c "$1" verify | awk '$2 == "tleaves" {sub("records=", "", $3); print $3}'; }
L0=$(leaves_at portland)
t_expect 0 "push logged at paloalto (push-tlog everywhere)" push "$T_DIR/w" paloalto logged
t_expect_soon 0 10 "portland holds one leaf more" test "$(leaves_at portland)" -gt "${L0:-0}"
t_stop montreal
use_release montreal old
GD_BIN=$T_DIR/bin.montreal t_start_refused "$T_DIR/montreal" "montreal: $REL_TAG does not open a store of format 2"
rm -rf "$T_DIR/montreal/data" "$T_DIR/montreal/repos"
cp -a "$T_DIR/montreal-pre/store" "$T_DIR/montreal/data"
cp -a "$T_DIR/montreal-pre/repos" "$T_DIR/montreal/repos"
start_site montreal
t_expect_soon 0 10 "paloalto: montreal is 0.1.0 or older again" peer_release_is paloalto montreal "0.1.0 or older"
t_expect_soon 0 10 "paloalto: release-in-heartbeat is not everywhere" everywhere_is paloalto false
branch_everywhere logged "$(t_head "$T_DIR/w")" "the logged push arrived"
t_stop montreal
use_release montreal new
start_site montreal
t_expect_soon 0 10 "paloalto: everywhere again" everywhere_is paloalto true
t_expect_converged "paloalto and portland agree" 20 paloalto portland

t_section "keys set; montreal wiped and rebuilt from its peers"
# Records made by $REL_TAG keep no signed operations: each site re-issued
# its own (and every token mark) as signed operations once every frontend
# ran this build (node/state/attest.h); montreal again on the store of its
# backup, whose copies of the others' records, taken by $REL_TAG, keep no
# operations (so it is the one wiped: docs/upgrading.md).  Without that, a
# site rebuilt once peers' keys are set refuses each such record and never
# converges (issue 21).
# status attest.state (docs/replication.md): done, now or at an earlier start
attest_done() { [[ $(t_sj "$1" 'j["attest"]["state"]') == done ]]; }
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: attested its records made before signing" \
		t_grep_log "$s" "records made before signing: done"
	t_expect_soon 0 10 "$s: status says attest done" attest_done "$s"
done
# montreal stays apart until it is wiped (below)
t_expect_converged "paloalto and portland agree" 20 paloalto portland
# docs/upgrading.md: peers' keys are set once every site signs
for s in "${T_SITES[@]}"; do
	set_verifier_keys "$s"
	t_stop "$s"
	start_site "$s"
done
t_expect_converged "paloalto and portland agree, keys set" 30 paloalto portland
# docs/operations.md, "a lost site": an empty data_dir and repo_dir, the
# node started, then rebuild --from a healthy site
D0=$(t_sdigest paloalto)
t_stop montreal
rm -rf "$T_DIR/montreal/data" "$T_DIR/montreal/repos"
start_site montreal
t_expect 0 "montreal: grantctl rebuild --from paloalto" t_c montreal rebuild --from paloalto
t_expect_converged "the rebuilt montreal converges" 60
t_eq "montreal's digest is the one before the wipe" "$(t_sdigest montreal)" "$D0"
t_eq "montreal: no record dropped for its signature" \
	"$(t_sj montreal "j['replication'].get('dropped', {}).get('signature', 0)")" 0
# the push log's entries re-issued by their origins: the same entries, no fork
for s in "${T_SITES[@]}"; do
	t_eq "$s: no push log fork" "$(t_sj "$s" "j['counts']['push_log_forks']")" 0
done
t_check "montreal: no record refused without its signed operations" \
	eval '! grep -q "no signed operations with it" "$T_DIR/montreal/grantd.log"'
t_expect_soon 0 30 "montreal: main is back" ref_is montreal main "$(git -C "$T_DIR/w" rev-parse HEAD~1)"
t_expect 1 "montreal: ann's last used token is still refused" \
	sh_at montreal 127.0.20.9 ann 2fa val "$(t_hotp "$AS" $((NEXT[ann] - 1)))"

t_done
