#!/bin/bash
# grantctl repo add of a repository already there, repo rename, repo del
# (issue 22 point 4; docs/operations.md 4a) at three sites: a bare
# repository with two branches and a tag copied to paloalto is adopted, and
# the other two sites get the same refs and objects; renamed, every site
# has NEW with them (its directory renamed, nothing set aside) and no OLD;
# deleted, it is gone everywhere, its directory moved aside, nothing
# pending, and a new add of the name starts empty; a repository with a fork
# can be neither deleted nor renamed, and what is not a bare repository is
# not adopted; a site down during a rename and a delete catches up and
# renames too.
. "$(dirname "$0")/lib.sh"

t_cluster_up

# dir SITE REPO
dir() { echo "$(t_dir "$1")/repos/$2.git"; }
# ref SITE REPO REF: its target on SITE's disk ("" when absent)
ref() { git --git-dir="$(dir "$1" "$2")" rev-parse -q --verify "$3" 2>/dev/null; }
ref_is() { [[ $(ref "$1" "$2" "$3") == "$4" ]]; }
# refs SITE REPO: "name target" per ref, sorted
refs() { git --git-dir="$(dir "$1" "$2")" for-each-ref --format='%(refname) %(objectname)' 2>/dev/null; }
# gone SITE REPO: no REPO.git at SITE
gone() { [[ ! -e $(dir "$1" "$2") ]]; }
# aside SITE REPO: how many REPO.git.grantd-deleted-* at SITE
aside() { compgen -G "$(dir "$1" "$2").grantd-deleted-*" | wc -l; }
g() { gd_git 127.0.0.1 /dev/null "$@"; }
# commit DIR N
commit() {
	local i
	for ((i = 0; i < $2; i++)); do
		echo "$RANDOM $i $(date +%N)" >>"$1/f.txt"
		g -C "$1" add -A
		g -C "$1" commit -q -m "c $i"
	done
}

t_section "a bare repository with branches master and dev and a tag, copied to paloalto, adopted"
W=$T_DIR/w
rm -rf "$W"
g init -q -b master "$W"
commit "$W" 5
g -C "$W" tag -a v1 -m "version 1"
g -C "$W" checkout -q -b dev
commit "$W" 3
g -C "$W" checkout -q master
commit "$W" 2
M=$(git -C "$W" rev-parse refs/heads/master)
D=$(git -C "$W" rev-parse refs/heads/dev)
T=$(git -C "$W" rev-parse refs/tags/v1)
g clone -q --bare "$W" "$(dir paloalto old)" || t_fatal "bare copy at paloalto"
t_expect 0 "paloalto: repo add old (it is there)" t_c paloalto repo add old --mode off
t_has "the answer says it was adopted with its 3 refs" "$OUT" "adopted repository old (3 refs replicate)"
t_has "the answer notes its HEAD" "$OUT" "note: its HEAD is refs/heads/master here"
t_check "paloalto's log says so" t_grep_log paloalto "repository adopted repo=old refs=3 head=refs/heads/master"
for s in portland montreal; do
	t_expect_soon 0 20 "$s: master arrived" ref_is "$s" old refs/heads/master "$M"
	t_expect_soon 0 20 "$s: dev arrived" ref_is "$s" old refs/heads/dev "$D"
	t_expect_soon 0 20 "$s: the tag arrived" ref_is "$s" old refs/tags/v1 "$T"
done
t_expect_converged "the three sites agree" 20
WANT=$(refs paloalto old)
for s in "${T_SITES[@]}"; do
	t_eq "$s: the refs are paloalto's" "$(refs "$s" old)" "$WANT"
	t_expect 0 "$s: old passes git fsck --strict" \
		git --git-dir="$(dir "$s" old)" fsck --strict --no-progress
done

t_section "what is not a bare repository is not adopted"
mkdir -p "$(dir portland junk)"
t_expect 1 "portland: repo add junk (an empty directory there) is refused" t_c portland repo add junk
t_has "it says what to do" "$ERR" "move it away or choose another name"
t_run t_c portland repo list
t_hasnt "junk is not listed" "$OUT" "junk"
rmdir "$(dir portland junk)"

t_section "a push to the adopted repository at montreal replicates"
# -b master: montreal made old.git with HEAD main (HEAD does not replicate)
g clone -q -b master "$(dir montreal old)" "$T_DIR/wm" || t_fatal "clone from montreal"
commit "$T_DIR/wm" 2
t_expect 0 "push to montreal's old" g -C "$T_DIR/wm" push -q "$(dir montreal old)" HEAD:refs/heads/master
M=$(git -C "$T_DIR/wm" rev-parse HEAD)
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: master moved" ref_is "$s" old refs/heads/master "$M"
done
t_expect_converged "the three sites agree" 20

t_section "renamed at montreal: every site renames its directory"
WANT=$(refs paloalto old)
t_expect 0 "montreal: repo rename old new" t_c montreal repo rename old new
t_has "the answer" "$OUT" "renamed repository old to new (3 refs)"
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: new.git has master" ref_is "$s" new refs/heads/master "$M"
	t_expect_soon 0 20 "$s: old.git is gone" gone "$s" old
	t_eq "$s: new has old's refs" "$(refs "$s" new)" "$WANT"
	t_eq "$s: nothing set aside (renamed, not deleted)" "$(aside "$s" old)" 0
	t_check "$s: its log says renamed" t_grep_log "$s" "repository renamed repo=old to=new"
	t_expect 0 "$s: new passes git fsck --strict" \
		git --git-dir="$(dir "$s" new)" fsck --strict --no-progress
done
t_expect_converged "the three sites agree" 20
t_run t_c paloalto repo list
t_has "repo list shows new" "$OUT" "new "
t_hasnt "repo list shows no old" "$OUT" "old "
t_expect 1 "a second rename of old is refused" t_c paloalto repo rename old other
t_has "it names what is missing" "$ERR" "no such repository 'old'"

t_section "a push to the renamed repository at portland replicates"
commit "$T_DIR/wm" 1
t_expect 0 "push to portland's new" g -C "$T_DIR/wm" push -q "$(dir portland new)" HEAD:refs/heads/master
M=$(git -C "$T_DIR/wm" rev-parse HEAD)
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: new's master moved" ref_is "$s" new refs/heads/master "$M"
done

t_section "deleted at portland: gone everywhere, moved aside, nothing pending"
t_expect 0 "portland: repo del new" t_c portland repo del new
t_has "the answer" "$OUT" "deleted repository new (3 refs dropped)"
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: new.git is gone" gone "$s" new
	t_eq "$s: one new.git.grantd-deleted-* left" "$(aside "$s" new)" 1
	t_check "$s: its log names it" t_grep_log "$s" "repository deleted repo=new: its directory moved aside to dir="
done
t_expect_converged "the three sites agree" 20
for s in "${T_SITES[@]}"; do
	t_eq "$s: no ref pending" "$(t_sj "$s" "j['git']['pending_refs']")" 0
done
t_run t_c montreal repo list
t_hasnt "repo list shows no new" "$OUT" "new "

t_section "added again: a new, empty repository"
t_expect 0 "montreal: repo add new" t_c montreal repo add new --mode off
t_has "added, not adopted" "$OUT" "added repository new"
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: new.git is there" test -d "$(dir "$s" new)"
	t_eq "$s: it has no ref" "$(refs "$s" new)" ""
done
t_expect_converged "the three sites agree" 20

t_section "a repository with a fork can be neither deleted nor renamed"
t_expect 0 "repo add base" t_c paloalto repo add base --mode off
t_expect 0 "repo add fk --fork-of base" t_c paloalto repo add fk --fork-of base --mode off
t_expect_converged "the three sites agree" 20
t_expect 1 "paloalto: repo del base is refused" t_c paloalto repo del base
t_has "it names the fork" "$ERR" "alternates: fk"
t_expect 1 "portland: repo rename base b2 is refused" t_c portland repo rename base b2
t_has "it names the fork" "$ERR" "alternates: fk"
t_expect 1 "paloalto: repo rename fk new (new exists) is refused" t_c paloalto repo rename fk new
t_has "it says so" "$ERR" "repository 'new' already exists"
t_expect_converged "the three sites agree" 20
for s in "${T_SITES[@]}"; do
	t_check "$s: base.git is still there" test -d "$(dir "$s" base)"
done

t_section "portland is down during a rename and a delete, then catches up"
t_expect 0 "push to paloalto's new" g -C "$T_DIR/wm" push -q "$(dir paloalto new)" HEAD:refs/heads/master
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: new's master arrived" ref_is "$s" new refs/heads/master "$M"
done
t_stop portland
t_expect 0 "paloalto: repo rename new newer" t_c paloalto repo rename new newer
t_expect 0 "paloalto: repo del fk" t_c paloalto repo del fk
t_start portland
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: newer has master" ref_is "$s" newer refs/heads/master "$M"
	t_expect_soon 0 20 "$s: new.git is gone" gone "$s" new
	t_eq "$s: only the earlier new.git.grantd-deleted-* is left" "$(aside "$s" new)" 1
	t_expect_soon 0 20 "$s: fk.git is gone" gone "$s" fk
	t_eq "$s: one fk.git.grantd-deleted-* left" "$(aside "$s" fk)" 1
done
t_check "portland's log says it renamed new" t_grep_log portland "repository renamed repo=new to=newer"
t_expect_converged "the three sites agree" 20
t_expect 0 "portland: newer passes git fsck --strict" \
	git --git-dir="$(dir portland newer)" fsck --strict --no-progress

t_done
