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
#   good         the real pack (positive control: the test can fail)
# For each bad mode, paloalto and portland take the ref record, fetch from
# the stand-in, refuse the pack (their log says why, status counts it),
# ask again and refuse again; the ref stays absent and `git fsck` passes.
# With the good pack both move the ref to the tip.  Then the real montreal
# comes back and the three sites converge.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
ROGUE=$T_HERE/repl_rogue.py
MODES=(corrupt truncated unconnected good)
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
for m in "${MODES[@]}"; do
	t_expect 0 "paloalto: repo add rogue-$m --mode off" t_c paloalto repo add "rogue-$m" --mode off
done
t_expect_converged "the three sites agree" 20
for s in "${T_SITES[@]}"; do
	for m in "${MODES[@]}"; do
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
		if [[ $m != unconnected ]]; then
			# (an unconnected pack is whole: its commit stays, dangling)
			t_expect 1 "$v: no object of the bad pack was kept (the tip is not in $R)" \
				git --git-dir="$(gitdir "$v" "$R")" cat-file -e "$TIP"
		fi
	done
	rogue_stop
	t_check "the stand-in ($m) says what it did" grep -q '"event": "end"' "$T_DIR/rogue-$m.out"
	printf '# stand-in (%s): %s\n' "$m" "$(grep '"event": "end"' "$T_DIR/rogue-$m.out")"
done

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
t_expect_converged "the three sites agree" 30
t_expect_soon 0 30 "montreal: $REF of rogue-good is the tip (fetched from a peer)" ref_is montreal rogue-good "$TIP"
t_expect 0 "montreal: git fsck --strict of rogue-good passes" \
	git --git-dir="$(gitdir montreal rogue-good)" fsck --strict --no-progress
for s in "${T_SITES[@]}"; do
	for m in corrupt truncated unconnected; do
		t_expect 1 "$s: $REF of rogue-$m is absent" ref "$s" "rogue-$m"
		t_expect 0 "$s: git fsck --strict of rogue-$m passes" \
			git --git-dir="$(gitdir "$s" "rogue-$m")" fsck --strict --no-progress
	done
done

t_done
