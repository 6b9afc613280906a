#!/bin/bash
# A bad pack from a peer is refused and the ref does not move (issue 4:
# "A corrupt or truncated pack from a peer is refused and the ref does not
# move").  montreal's node is stopped and a Python stand-in with montreal's
# key pair (tests/integration/repl_rogue.py rogue-git) binds its publish
# and sync endpoints.  It publishes one ref record, as montreal, for a tip
# that only it has (a scratch repository no site ever saw), and answers the
# other sites' PackReq with, one mode at a time and one repository per
# mode so the cases stay apart:
#   corrupt      the real pack with bytes inverted in its middle
#   truncated    the real pack cut short, then last = true
#   unconnected  a valid pack of the commit alone (no tree, no parents)
#   smuggle      the real pack plus one extra commit object X whose tree
#                and parents are nowhere at the victim; then a second op
#                (seq 2) moving refs/heads/smuggled to X
#   good         the real pack (positive control: the test can fail)
# For each bad mode, paloalto and portland take the ref record, fetch from
# the stand-in, refuse the pack (their log says why, status counts it),
# ask again and refuse again; the ref stays absent and `git fsck` passes.
# With the smuggle pack the victims take the pack (its want checks out)
# and so hold X's object, but must not point refs/heads/smuggled at X
# (safe_tip: "tip not connected here"); the ref stays absent and
# everything the refs reach is whole.  Before that record comes, X's whole
# history is pushed to another repository, rogue-cross, at one victim and
# fetched by the other, which holds X in rogue-smuggle: a tip proved
# connected in rogue-cross is not connected in rogue-smuggle, so the ref
# there must still not move onto X.  When the stand-in then serves X's
# whole history, the ref does move to X (the check can pass).
# With the good pack both move the ref to the tip.  Then the real montreal
# comes back and the three sites converge.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
ROGUE=$T_HERE/repl_rogue.py
MODES=(corrupt truncated unconnected smuggle good)
VICTIMS=(paloalto portland)
REF=refs/heads/main

# gitdir SITE REPO
gitdir() { echo "$(t_dir "$1")/repos/$2.git"; }
# ref SITE REPO: the ref's target on SITE's disk ("" and status 1: absent)
ref() { git --git-dir="$(gitdir "$1" "$2")" rev-parse -q --verify "$REF" 2>/dev/null; }
ref_is() { [[ $(ref "$1" "$2") == "$3" ]]; }
# failed_lines SITE REPO: SITE's log lines saying a fetch of REPO from
# montreal was refused
failed_lines() { grep -F "pack fetch failed repo=$2 peer=montreal " "$(t_dir "$1")/grantd.log"; }
nfailed() { failed_lines "$1" "$2" | wc -l; }
failures() { t_sj "$1" "j['git']['fetch_failures']"; }

t_cluster_up

t_section "one repository per mode, made at paloalto"
for m in "${MODES[@]}" cross; do
	t_expect 0 "paloalto: repo add rogue-$m --mode off" t_c paloalto repo add "rogue-$m" --mode off
done
t_expect_converged "the three sites agree" 20
for s in "${T_SITES[@]}"; do
	for m in "${MODES[@]}" cross; do
		t_expect_soon 0 10 "$s: rogue-$m.git exists" test -d "$(gitdir "$s" "rogue-$m")/objects"
	done
done

t_section "a history no site has (scratch repository)"
SCRATCH=$T_DIR/scratch
gd_git 127.0.0.1 /dev/null init -q "$SCRATCH"
for i in $(seq 1 12); do
	mkdir -p "$SCRATCH/d$((i % 3))"
	head -c 6000 /dev/urandom | base64 >"$SCRATCH/d$((i % 3))/f$i.txt"
	echo "line $i" >>"$SCRATCH/log.txt"
	gd_git 127.0.0.1 /dev/null -C "$SCRATCH" add -A
	gd_git 127.0.0.1 /dev/null -C "$SCRATCH" commit -q -m "rogue $i"
done
TIP=$(git -C "$SCRATCH" rev-parse HEAD)
NCOMMITS=$(git -C "$SCRATCH" rev-list --count HEAD)
# A side branch refs/heads/smuggled: two commits on top of TIP with new
# files, made with plumbing (main stays checked out).  Its tip X, its
# parent and their trees are in no pack of TIP.
SMUGGLED=refs/heads/smuggled
xparent=$TIP
for i in 1 2; do
	blob=$(head -c 6000 /dev/urandom | base64 | git -C "$SCRATCH" hash-object -w --stdin)
	GIT_INDEX_FILE=$T_DIR/scratch-side.index git -C "$SCRATCH" read-tree "$xparent^{tree}"
	GIT_INDEX_FILE=$T_DIR/scratch-side.index git -C "$SCRATCH" update-index --add \
		--cacheinfo "100644,$blob,smuggled-$i.txt"
	tree=$(GIT_INDEX_FILE=$T_DIR/scratch-side.index git -C "$SCRATCH" write-tree)
	xparent=$(gd_git 127.0.0.1 /dev/null -C "$SCRATCH" commit-tree "$tree" -p "$xparent" -m "smuggled $i")
done
X=$xparent
git -C "$SCRATCH" update-ref "$SMUGGLED" "$X"
t_eq "X ($X) is two commits past the tip" "$(git -C "$SCRATCH" rev-list --count "$TIP..$X")" 2
# has_tip SITE: one of SITE's repositories has the object TIP
has_tip() {
	local r
	for r in "$(t_dir "$1")"/repos/*.git; do
		git --git-dir="$r" cat-file -e "$TIP" 2>/dev/null && return 0
	done
	return 1
}
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s does not have the tip $TIP" has_tip "$s"
	t_expect 1 "$s does not have X $X" git --git-dir="$(gitdir "$s" rogue-smuggle)" cat-file -e "$X"
done

t_section "montreal stops; a stand-in with its key pair takes its endpoints"
t_stop montreal
M=${T_SADDR[montreal]}
ROGUE_PID=
# rogue_start MODE: the stand-in for MODE (repository rogue-MODE)
rogue_start() {
	: >"$T_DIR/rogue-$1.out"
	"$PY" "$ROGUE" rogue-git "$1" "tcp://$M:$T_PUB_PORT" "tcp://$M:$T_SYNC_PORT" \
		"$(t_dir montreal)/node.key" montreal "rogue-$1" "$REF" "$SCRATCH" 300 \
		>"$T_DIR/rogue-$1.out" 2>&1 &
	ROGUE_PID=$!
	gd_wait_for 10 grep -q '"event": "start"' "$T_DIR/rogue-$1.out" ||
		t_fatal "the stand-in ($1) starts: $(<"$T_DIR/rogue-$1.out")"
	t_ok "the stand-in ($1) runs: $(grep '"event": "start"' "$T_DIR/rogue-$1.out" | t_json '"pack %d bytes (full pack %d)" % (j["pack_bytes"], j["full_pack_bytes"])')"
}
rogue_stop() {
	[[ -n $ROGUE_PID ]] || return 0
	kill -TERM "$ROGUE_PID" 2>/dev/null
	wait "$ROGUE_PID" 2>/dev/null
	ROGUE_PID=
}
trap 'rogue_stop; t_cleanup' EXIT
# rogue_served MODE SITE: the stand-in streamed MODE's pack to SITE
rogue_served() { grep '"event": "stream"' "$T_DIR/rogue-$1.out" | grep -q "\"peer\": \"$2\""; }

# Each bad pack must be refused twice by each victim (a second request
# comes after a back-off of 250 ms, once every peer was asked): the second
# refusal means the ref was looked at again after the first one and still
# not moved.  A ref that moves ends the wait early (and fails below).
# refused_twice_or_moved SITE REPO
refused_twice_or_moved() { (( $(nfailed "$1" "$2") >= 2 )) || ref "$1" "$2" >/dev/null; }

# Why each mode must be refused: the libgit2 indexer's error for a pack
# whose bytes do not check (zlib or the trailer's checksum), for one that
# ends early, and the node's connectivity check for one that lacks objects.
declare -A WHY=(
	[corrupt]='(zlib|inflat|trailer|mismatch|delta|invalid|header|corrupt)'
	[truncated]='(missing trailer|is missing [0-9]+ objects|incomplete pack|trailer mismatch)'
	[unconnected]='pack does not connect the new tips'
)

for m in corrupt truncated unconnected; do
	R=rogue-$m
	t_section "mode $m: repository $R"
	declare -A F0=()
	for v in "${VICTIMS[@]}"; do F0[$v]=$(failures "$v"); done
	rogue_start "$m"
	for v in "${VICTIMS[@]}"; do
		t_expect_soon 0 30 "$v: refused montreal's $m pack twice (or moved the ref)" \
			refused_twice_or_moved "$v" "$R"
		t_check "$v: the stand-in streamed its $m pack to $v" rogue_served "$m" "$v"
		line=$(failed_lines "$v" "$R" | head -n 1)
		t_has "$v: the log says the pack fetch failed" "$line" "pack fetch failed repo=$R peer=montreal"
		# "... bytes=N: WHY": N > 0 (a pack came), WHY about the pack
		why=
		[[ ${line#*peer=montreal } =~ ^bytes=[1-9][0-9]*:\ (.*)$ ]] && why=${BASH_REMATCH[1]}
		if [[ -n $why && $why =~ ${WHY[$m]} && $why != *"timed out"* &&
			$why != *"peer says"* && $why != *"out of order"* ]]; then
			t_ok "$v: refused after receiving pack bytes, for the pack itself: ${line#*peer=montreal }"
		else
			t_fail "$v: the refusal names the pack's fault (want /${WHY[$m]}/ after bytes > 0)" "$line"
		fi
		t_check "$v: status git.fetch_failures grew by 2 or more (was ${F0[$v]})" \
			eval "(( \$(failures $v) >= ${F0[$v]} + 2 ))"
		t_expect 1 "$v: $REF of $R did not move (absent)" ref "$v" "$R"
		t_hasnt "$v: no 'ref moved' for $R in the log" "$(grep -F "ref moved repo=$R " "$(t_dir "$v")/grantd.log")" "ref moved"
		t_expect 0 "$v: git fsck --strict of $R passes" git --git-dir="$(gitdir "$v" "$R")" fsck --strict --no-progress
		# (a pack that does not connect is indexed in a quarantine that
		# is dropped, so not even its valid commit object stays)
		t_expect 1 "$v: no object of the bad pack was kept (the tip is not in $R)" \
			git --git-dir="$(gitdir "$v" "$R")" cat-file -e "$TIP"
	done
	rogue_stop
	t_check "the stand-in ($m) says what it did" grep -q '"event": "end"' "$T_DIR/rogue-$m.out"
	printf '# stand-in (%s): %s\n' "$m" "$(grep '"event": "end"' "$T_DIR/rogue-$m.out")"
done

t_section "mode smuggle: repository rogue-smuggle"
R=rogue-smuggle
# sref SITE: refs/heads/smuggled of rogue-smuggle on SITE's disk
sref() { git --git-dir="$(gitdir "$1" "$R")" rev-parse -q --verify "$SMUGGLED" 2>/dev/null; }
sref_is() { [[ $(sref "$1") == "$2" ]]; }
has_x() { git --git-dir="$(gitdir "$1" "$R")" cat-file -e "$X" 2>/dev/null; }
# nnotconn SITE: SITE's log lines refusing to point a ref of R at X
nnotconn() { grep -cF "tip not connected here repo=$R tip=$X:" "$(t_dir "$1")/grantd.log"; }
# rogue_refused_x SITE: the stand-in refused SITE a PackReq that wants X
rogue_refused_x() {
	grep '"event": "pack_err_sent"' "$T_DIR/rogue-smuggle.out" |
		grep "\"peer\": \"$1\"" | grep -qF "\"$X\""
}
rogue_start smuggle
t_eq "the stand-in's X is the side branch's tip" \
	"$(grep '"event": "start"' "$T_DIR/rogue-smuggle.out" | t_json 'j["smuggled"]')" "$X"
SVICTIMS=() # the victims that took the smuggle pack from the stand-in
for v in "${VICTIMS[@]}"; do
	t_expect_soon 0 30 "$v: $REF of $R moves to the tip (the wanted tip checks out)" \
		ref_is "$v" "$R" "$TIP"
	if rogue_served smuggle "$v"; then
		t_check "$v: the smuggled object X is in $R's object store" has_x "$v"
		SVICTIMS+=("$v")
	else
		# (a victim may take the tip from the other one: no X comes then)
		printf '# %s took the tip from a peer, not the stand-in\n' "$v"
	fi
done
t_check "the stand-in streamed the smuggle pack to a victim (${SVICTIMS[*]})" \
	test "${#SVICTIMS[@]}" -gt 0
t_check "X's object alone is not a whole history at ${SVICTIMS[0]}" \
	t_exits 128 git --git-dir="$(gitdir "${SVICTIMS[0]}" "$R")" rev-list --objects "$X"

t_section "mode smuggle, across repositories: X's history connected in rogue-cross only"
# A victim holding X (unconnected) in rogue-smuggle fetches X's whole
# history for another repository, rogue-cross, pushed at the other victim.
# That fetch proves X connected in rogue-cross, not in rogue-smuggle: the
# record below that moves rogue-smuggle's ref onto X must still wait for
# X to connect there (review-fa65238: verified tips keyed by repository).
CV=${SVICTIMS[0]}
CO=
for v in "${VICTIMS[@]}"; do [[ $v != "$CV" ]] && CO=$v; done
# cref SITE: refs/heads/smuggled of rogue-cross on SITE's disk
cref() { git --git-dir="$(gitdir "$1" rogue-cross)" rev-parse -q --verify "$SMUGGLED" 2>/dev/null; }
cref_is() { [[ $(cref "$1") == "$2" ]]; }
t_expect 0 "push X's whole history to $CO's rogue-cross (its hook records it)" \
	git -C "$SCRATCH" push -q "$(gitdir "$CO" rogue-cross)" "$X:$SMUGGLED"
t_expect_soon 0 30 "$CV: $SMUGGLED of rogue-cross moves to X (fetched: connected there)" \
	cref_is "$CV" "$X"
t_check "$CV: the log names the fetch of rogue-cross" t_grep_log "$CV" "pack fetched repo=rogue-cross peer="
t_expect 0 "$CV: git fsck --strict of rogue-cross passes" \
	git --git-dir="$(gitdir "$CV" rogue-cross)" fsck --strict --no-progress
t_check "$CV: X is still not a whole history in $R" \
	t_exits 128 git --git-dir="$(gitdir "$CV" "$R")" rev-list --objects "$X"

kill -USR1 "$ROGUE_PID"
t_expect_soon 0 10 "the stand-in publishes seq 2: $SMUGGLED -> X" \
	grep -q '"event": "phase", "ops": 2, "phase": 1' "$T_DIR/rogue-smuggle.out"
# Each victim holding X must look at the ref twice (a re-fetch of X in
# between, refused by the stand-in) and not move it; a victim without X
# just fetches it and is refused.  A ref that moves ends the wait early.
# refused_x_twice_or_moved SITE
refused_x_twice_or_moved() {
	sref "$1" >/dev/null && return 0
	if has_x "$1"; then (( $(nnotconn "$1") >= 2 )) && rogue_refused_x "$1"
	else rogue_refused_x "$1"; fi
}
for v in "${VICTIMS[@]}"; do
	t_expect_soon 0 30 "$v: looked at $SMUGGLED twice and asked for X again (or moved it)" \
		refused_x_twice_or_moved "$v"
	if has_x "$v"; then
		t_check "$v: the log says the tip is not connected here (and fetches it again)" \
			eval "(( \$(nnotconn $v) >= 2 ))"
	fi
	t_check "$v: the re-fetch names X (the stand-in refused a PackReq for it)" rogue_refused_x "$v"
	t_expect 1 "$v: $SMUGGLED of $R did not move onto X (absent)" sref "$v"
	t_hasnt "$v: no 'ref moved' for $SMUGGLED in the log" \
		"$(grep -F "ref moved repo=$R ref=$SMUGGLED " "$(t_dir "$v")/grantd.log")" "ref moved"
	t_expect 0 "$v: everything the refs of $R reach is here (rev-list --objects --all)" \
		git --git-dir="$(gitdir "$v" "$R")" rev-list --objects --all
	t_expect 0 "$v: git fsck --strict of $R passes" \
		git --git-dir="$(gitdir "$v" "$R")" fsck --strict --no-progress
	t_eq "$v: $REF of $R is still the tip" "$(ref "$v" "$R")" "$TIP"
done
t_section "mode smuggle, control: the stand-in now serves X's whole history"
kill -USR1 "$ROGUE_PID"
t_expect_soon 0 10 "the stand-in is in phase 2" \
	grep -q '"event": "phase", "ops": 2, "phase": 2' "$T_DIR/rogue-smuggle.out"
for v in "${VICTIMS[@]}"; do
	t_expect_soon 0 30 "$v: $SMUGGLED of $R moves to X" sref_is "$v" "$X"
	# (reconcile.c moves the ref, then logs it: the line may follow)
	t_expect_soon 0 5 "$v: the log names the move" t_grep_log "$v" "ref moved repo=$R ref=$SMUGGLED to=$X"
	t_expect 0 "$v: git fsck --strict of $R passes" \
		git --git-dir="$(gitdir "$v" "$R")" fsck --strict --no-progress
	t_eq "$v: $((NCOMMITS + 2)) commits reachable from $SMUGGLED" \
		"$(git --git-dir="$(gitdir "$v" "$R")" rev-list --count "$SMUGGLED")" "$((NCOMMITS + 2))"
done
served_x() { grep '"event": "stream"' "$T_DIR/rogue-smuggle.out" | grep '"phase": 2' | grep -qF "\"$X\""; }
t_check "the stand-in streamed X's whole history" served_x
rogue_stop
printf '# stand-in (smuggle): %s\n' "$(grep '"event": "end"' "$T_DIR/rogue-smuggle.out")"

t_section "mode good (positive control): repository rogue-good"
R=rogue-good
rogue_start good
for v in "${VICTIMS[@]}"; do
	t_expect_soon 0 30 "$v: $REF of $R moves to the stand-in's tip" ref_is "$v" "$R" "$TIP"
	# (from montreal, or from the other victim if montreal's link was
	# not up yet when it asked and the other one already had the tip)
	t_check "$v: the log names the fetch" t_grep_log "$v" "pack fetched repo=$R peer="
	t_expect 0 "$v: git fsck --strict of $R passes" git --git-dir="$(gitdir "$v" "$R")" fsck --strict --no-progress
	t_eq "$v: $NCOMMITS commits reachable" "$(git --git-dir="$(gitdir "$v" "$R")" rev-list --count "$REF")" "$NCOMMITS"
done
served_good() { rogue_served good paloalto || rogue_served good portland; }
fetched_good() {
	t_grep_log paloalto "pack fetched repo=$R peer=montreal" ||
		t_grep_log portland "pack fetched repo=$R peer=montreal"
}
t_check "the stand-in streamed the good pack (to paloalto or portland)" served_good
t_check "a victim took the good pack from montreal (the stand-in)" fetched_good
rogue_stop
printf '# stand-in (good): %s\n' "$(grep '"event": "end"' "$T_DIR/rogue-good.out")"

t_section "the bad refs never moved, and the real montreal comes back"
for v in "${VICTIMS[@]}"; do
	for m in corrupt truncated unconnected; do
		t_expect 1 "$v: $REF of rogue-$m is still absent" ref "$v" "rogue-$m"
	done
done
t_start montreal
t_expect_soon 0 30 "montreal: $REF of rogue-good is the tip (fetched from a peer)" ref_is montreal rogue-good "$TIP"
t_expect 0 "montreal: git fsck --strict of rogue-good passes" \
	git --git-dir="$(gitdir montreal rogue-good)" fsck --strict --no-progress
t_expect_soon 0 30 "montreal: $SMUGGLED of rogue-smuggle is X (fetched from a peer)" \
	eval "[[ \$(git --git-dir=$(gitdir montreal rogue-smuggle) rev-parse -q --verify $SMUGGLED) == $X ]]"
t_expect 0 "montreal: git fsck --strict of rogue-smuggle passes" \
	git --git-dir="$(gitdir montreal rogue-smuggle)" fsck --strict --no-progress
# the three bad refs' records stay, their objects never come: pending.
# Only once montreal has fetched what its peers do serve (above: under
# ASan on a loaded machine that took more than the 30 s this check had
# when it came first, and montreal still had a fourth ref pending).
T_PENDING=([paloalto]=3 [portland]=3 [montreal]=3)
t_expect_converged "the three sites agree" 30
for s in "${T_SITES[@]}"; do
	for m in corrupt truncated unconnected; do
		t_expect 1 "$s: $REF of rogue-$m is absent" ref "$s" "rogue-$m"
		t_expect 0 "$s: git fsck --strict of rogue-$m passes" \
			git --git-dir="$(gitdir "$s" "rogue-$m")" fsck --strict --no-progress
	done
done

t_done
