# bench/lib.sh: what the bench/ drivers (bench/run, run-repl, run-git,
# run-scale, run-quorum, run-ckpt) share:
# building the node and the bench programs in a build directory of their
# own, checking that the sites go on a real disk, the header line that
# says what was measured, and the WAN delays between three sites (a delay
# proxy, its round trip measured).  Sites and nodes are made with
# deploy/lib.sh.
#
# Source it from bash after setting BENCH_PROG (the driver's name, for
# messages).  Environment, read by both drivers:
#   GRANTD_BENCH_BUILD  build directory (default /var/tmp/grantd-bench-build;
#                       the drivers share it, and a lock serialises builds;
#                       one configured from another tree is refused)
#   GRANTD_BENCH_REV    build the node of this git revision (e.g. HEAD)
#                       instead of the work tree, with this work tree's
#                       bench/: for a stable figure while the tree is edited
#   GRANTD_BENCH_DIR    parent of the temporary sites (default /var/tmp;
#                       must not be tmpfs, so fsync is real)
#   GRANTD_BENCH_KEEP=1 keep the site directories and the nodes' logs
# The build is RelWithDebInfo (-O2 -g), so perf can name functions.
#
# shellcheck shell=bash
# shellcheck disable=SC2034 # bench_bin, bench_rev are for the drivers

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_PROG=${BENCH_PROG:-bench}
BENCH_PARENT=${GRANTD_BENCH_DIR:-/var/tmp}
bench_rev=
bench_bin=

bench_say() { printf '%s: %s\n' "$BENCH_PROG" "$*" >&2; }

# bench_build TARGET...: configure (once) and build TARGETs; sets bench_bin
# (the directory of the programs) and bench_rev (the revision built, empty
# for the work tree).  Returns 2 on failure, having said why.
bench_build() {
	local src=$BENCH_ROOT
	local build=${GRANTD_BENCH_BUILD:-/var/tmp/grantd-bench-build}
	if [[ -n ${GRANTD_BENCH_REV:-} ]]; then
		bench_rev=$(git -C "$BENCH_ROOT" rev-parse --short \
			"$GRANTD_BENCH_REV") ||
			{ bench_say "no revision '$GRANTD_BENCH_REV'"; return 2; }
		src=/var/tmp/grantd-bench-$bench_rev
		build=$src/build
		if [[ ! -f $src/CMakeLists.txt ]]; then
			mkdir -p "$src"
			git -C "$BENCH_ROOT" archive "$bench_rev" | tar -x -C "$src"
		fi
		rm -rf "$src/bench"
		cp -r "$BENCH_ROOT/bench" "$src/bench"
	fi
	# a build directory configured from another tree would build that
	# tree's node, silently
	local home
	home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' \
		"$build/CMakeCache.txt" 2>/dev/null || true)
	if [[ -n $home && $home != "$src" ]]; then
		bench_say "$build was configured from $home, not $src:" \
			"set GRANTD_BENCH_BUILD to a build directory of this tree"
		return 2
	fi
	mkdir -p "$build"
	# Its own build directory: bench/ is only part of the tree when
	# GRANTD_TESTS=ON, and a developer's build/ is left as it is.  Two
	# drivers started at once take turns.
	(
		flock 9
		[[ -f $build/CMakeCache.txt ]] ||
			bench_say "configuring $build"
		# every time: a target added since the last configure is
		# unknown to the generated Makefiles until cmake runs again
		cmake -S "$src" -B "$build" -DGRANTD_TESTS=ON \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
			{ bench_say "cmake configure failed"; exit 2; }
		cmake --build "$build" -j"$(nproc)" --target "$@" \
			>"$build/bench-build.log" 2>&1 ||
			{ tail -n 30 "$build/bench-build.log" >&2
			  bench_say "build failed"; exit 2; }
	) 9>"$build/.bench-build.lock" || return 2
	bench_bin=$build/bin
}

# bench_check_disk: the parent of the sites is on a real disk.
bench_check_disk() {
	local fstype
	fstype=$(stat -f -c %T "$BENCH_PARENT") ||
		{ bench_say "no directory $BENCH_PARENT"; return 2; }
	if [[ $fstype == tmpfs || $fstype == ramfs ]]; then
		bench_say "$BENCH_PARENT is $fstype: fsync would cost nothing;" \
			"set GRANTD_BENCH_DIR"
		return 2
	fi
}

# bench_header TITLE DIR: the first line of the figures: when, which node,
# which build, how many cores, the file system of DIR, the load.
bench_header() {
	local head
	head=$(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null ||
		echo -)
	local node="work tree on $head"
	[[ -n $bench_rev ]] && node="commit $bench_rev"
	echo "$1: $(date -u '+%Y-%m-%d %H:%M:%SZ')" \
		"node=$node" \
		"build=RelWithDebInfo cores=$(nproc)" \
		"data_dir_fs=$(stat -f -c %T "$2")" \
		"loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
}

# bench_sites TOP PUBLISH_PORT SYNC_PORT [KEY=VALUE...] -- SITE=ADDR...:
# the configuration of each SITE in TOP/SITE (deploy/lib.sh's
# gd_site_config, given the KEY=VALUEs), publishing on ADDR:PUBLISH_PORT
# and syncing on ADDR:SYNC_PORT, with every other SITE as its peer
# (gd_site_add_peer).  Returns 1, having said why, on failure.
bench_sites() {
	local top=$1 pub=$2 sync=$3 kv=() s p
	shift 3
	while (($#)) && [[ $1 != -- ]]; do kv+=("$1"); shift; done
	(($#)) && shift
	local -A at=()
	local names=()
	for s in "$@"; do
		at[${s%%=*}]=${s#*=}
		names+=("${s%%=*}")
	done
	for s in "${names[@]}"; do
		gd_site_config "$top/$s" "$s" "tcp://${at[$s]}:$pub" \
			"tcp://${at[$s]}:$sync" "${kv[@]}" || return 1
	done
	for s in "${names[@]}"; do
		for p in "${names[@]}"; do
			[[ $p == "$s" ]] && continue
			gd_site_add_peer "$top/$s" "$p" "tcp://${at[$p]}:$pub" \
				"tcp://${at[$p]}:$sync" "$(<"$top/$p/node.pub")" ||
				return 1
		done
	done
}

# ---- a ref at the peers (bench/run-e2e) ----------------------------------
# bench_refwait_start DEADLINE_S GITDIR...: start the poller, one python
# process for the whole run (a coprocess, so that no interpreter starts
# inside a timed window; it waits on its input between requests), and
# wait until it is ready; 2, having said why, when it did not start.
# bench_refwait T0 REF TIP: read REF in every GITDIR every 1 ms (the loose
# ref file, else packed-refs; a ref file is replaced by rename, so a read
# sees the old or the new value) until all name TIP, or DEADLINE_S pass.
# Sets bench_refwait_ms to "ALL_MS MS...": the milliseconds from T0 (an
# $EPOCHREALTIME taken before the call, such as a push's return) until
# the last GITDIR named TIP, then each GITDIR's, in order (-1: not within
# the deadline; a GITDIR that named TIP at the first read gets the time of
# that read).  Returns 1 when one did not.  Not in a subshell: the
# coprocess's descriptors are the calling shell's.
# bench_refwait_stop: end the poller (for a cleanup trap).
bench_refwait_ms=
BENCH_RW_PY='
import os, sys, time
deadline, dirs = float(sys.argv[1]), sys.argv[2:]

def read_ref(gitdir, ref):
    try:
        with open(os.path.join(gitdir, ref), "rb") as f:
            v = f.read().strip()
        if v and not v.startswith(b"ref:"):
            return v.decode()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        pass
    try:
        with open(os.path.join(gitdir, "packed-refs"), "rb") as f:
            for line in f:
                p = line.split()
                if len(p) == 2 and p[1].decode() == ref:
                    return p[0].decode()
    except FileNotFoundError:
        pass
    return None

print("ready", flush=True)
for line in sys.stdin:
    t0, ref, tip = line.split()
    t0, start, done = float(t0), time.monotonic(), {}
    while True:
        for d in dirs:
            if d not in done and read_ref(d, ref) == tip:
                done[d] = time.time()
        if len(done) == len(dirs) or time.monotonic() - start > deadline:
            break
        time.sleep(0.001)
    ms = lambda t: "%.1f" % ((t - t0) * 1000)
    each = [ms(done[d]) if d in done else "-1" for d in dirs]
    last = ms(max(done.values())) if len(done) == len(dirs) else "-1"
    print(last, *each, flush=True)
'
bench_refwait_start() {
	local line=
	coproc BENCH_RW { exec python3 -c "$BENCH_RW_PY" "$@"; }
	if ! read -r -t 60 line <&"${BENCH_RW[0]}" || [[ $line != ready ]]; then
		bench_say "the ref poller did not start"
		return 2
	fi
}
bench_refwait() {
	[[ -n ${BENCH_RW_PID:-} && -n ${BENCH_RW[1]:-} ]] ||
		{ bench_say "the ref poller is not running"; return 1; }
	printf '%s %s %s\n' "$1" "$2" "$3" >&"${BENCH_RW[1]}"
	read -r bench_refwait_ms <&"${BENCH_RW[0]}" ||
		{ bench_say "the ref poller died"; return 1; }
	[[ $bench_refwait_ms != -1* ]]
}
bench_refwait_stop() {
	[[ -n ${BENCH_RW_PID:-} ]] || return 0
	local pid=$BENCH_RW_PID fd=${BENCH_RW[1]:-}
	[[ -n $fd ]] && exec {fd}>&-
	wait "$pid" 2>/dev/null || true
}

# SPEC 6's rows, each with the bench that measures it (none: no bench
# does).  bench_not_measured KEY...: the bench measured the rows KEY...;
# print "not measured" for every other row, so a reader never takes
# silence for a pass.
declare -A BENCH_SPEC6_ROW=(
	[val]="2fa val at the node: p99 under 5 ms; >=15,000/s sustained with fsync"
	[check]="push check at the node: p99 under 200 us; >=50,000/s; with vals at once, val p99 still under 5 ms"
	[visible]="grant visible at every peer after the origin answers: p99 under 10 ms on loopback"
	[visible_offered]="grant visible at every peer: under 5 ms at 1,000 vals/s offered (open loop)"
	[push]="push replicated (ref moved at every peer): under 1.5x git fetch for 10,000 commits, under 0.6x for 1 commit"
	[catchup]="catch-up after a site returns: >=100,000 missed operations/s"
	[forks]="100 forks of one repository: under 1.1x the disk of one"
	[memory]="node memory with 100,000 users and 1,000,000 grants: under 200 MB RSS"
	[keys]="grant-keys USER FINGERPRINT with 100,000 users: p99 under 2 ms, process start included"
	[quorum]="2fa val with token_quorum = majority: p99 under one round trip to the nearest majority + 5 ms"
)
declare -A BENCH_SPEC6_BY=(
	[val]=bench/run [check]=bench/run [visible]=bench/run-repl
	[visible_offered]=bench/run-repl [push]=bench/run-git
	[catchup]=bench/run-repl [forks]=bench/run-git [memory]=bench/run-scale
	[keys]=bench/run-scale [quorum]=bench/run-quorum
)
BENCH_SPEC6_ORDER=(val check visible visible_offered push catchup forks memory keys quorum)
bench_not_measured() {
	local k m by
	for k in "${BENCH_SPEC6_ORDER[@]}"; do
		for m in "$@"; do [[ $m == "$k" ]] && continue 2; done
		by=${BENCH_SPEC6_BY[$k]}
		if [[ -n $by ]]; then
			by="measured by $by, not by $BENCH_PROG"
		else
			by="no bench measures it"
		fi
		echo "not measured: ${BENCH_SPEC6_ROW[$k]} (SPEC 6; $by)"
	done
}

# ---- WAN delays between the three sites (bench/run-quorum, run-ckpt) -------
# `tc qdisc ... netem` needs the kernel's sch_netem, which the machines this
# was written on lack, and netem on lo would delay every loopback user of
# the machine; so the delays come from a userspace TCP delay proxy
# (bench/delay_proxy.py) between the sites: each site's [peer] publish and
# sync endpoints name a proxy address of that (site, peer) pair, which
# forwards every byte after half the round trip, each way (CurveZMQ stays
# end to end).  The round trips, in ms, are the measured Palo Alto,
# Portland and Montreal distances (either order).
declare -A BENCH_WAN_RTT=([paloalto,portland]=20 [portland,paloalto]=20
	[paloalto,montreal]=72 [montreal,paloalto]=72
	[portland,montreal]=78 [montreal,portland]=78)
BENCH_WAN_SITES=(paloalto portland montreal)
BENCH_WAN_SAY="userspace TCP delay proxy (bench/delay_proxy.py) between the sites, RTT paloalto-portland 20 ms, paloalto-montreal 72 ms, portland-montreal 78 ms"
bench_proxy=

# bench_wan_nearest SITE: the round trip (ms) to SITE's nearest other site.
bench_wan_nearest() {
	local s=$1 p best=
	for p in "${BENCH_WAN_SITES[@]}"; do
		[[ $p == "$s" ]] && continue
		[[ -z $best || ${BENCH_WAN_RTT[$s,$p]} -lt $best ]] &&
			best=${BENCH_WAN_RTT[$s,$p]}
	done
	echo "$best"
}

# bench_wan_spec LISTEN TARGET RTT_MS: the delay proxy's argument for a path
# LISTEN -> TARGET (ADDR:PORT each) of round trip RTT_MS.
bench_wan_spec() {
	echo "$1=$2:$(awk "BEGIN { print $3 / 2 }")"
}

# bench_netem_probe: "available", or why not; probed on the loopback device
# of a network namespace of its own, never on the machine's lo (which other
# programs use).
bench_netem_probe() {
	local ns=gdqnetem$$ err
	err=$(ip netns add "$ns" 2>&1) ||
		{ echo "not probed (no network namespace: $err)"; return; }
	if err=$(ip netns exec "$ns" tc qdisc add dev lo root netem delay 1ms 2>&1); then
		echo available
	else
		echo "unavailable (tc qdisc add dev lo root netem, in a namespace: $err)"
	fi
	ip netns del "$ns" 2>/dev/null || true
}

# bench_proxy_start DIR SPEC...: start the delay proxy with SPECs
# (bench_wan_spec), its log in DIR/proxy.log, and wait until every address
# listens; its pid in bench_proxy (bench_proxy_stop).  Returns 2, having
# said why, when it did not start.
bench_proxy_start() {
	local dir=$1 line=
	shift
	mkfifo "$dir/proxy.ready"
	(exec python3 "$BENCH_ROOT/bench/delay_proxy.py" "$@" \
		>"$dir/proxy.ready" 2>"$dir/proxy.log") &
	bench_proxy=$!
	if ! read -r -t 30 line <"$dir/proxy.ready" || [[ $line != ready ]]; then
		bench_say "the delay proxy did not start:"
		cat "$dir/proxy.log" >&2
		return 2
	fi
}

# bench_proxy_stop: stop the delay proxy, if one runs (for a cleanup trap).
bench_proxy_stop() {
	[[ -n $bench_proxy ]] || return 0
	kill -TERM "$bench_proxy" 2>/dev/null || true
	wait "$bench_proxy" 2>/dev/null || true
	bench_proxy=
}

# bench_rtt_probe ECHO PROXY: the round trip of the path PROXY -> ECHO
# through the delay proxy, measured now (bench/rtt_probe.py, 200 round
# trips): its line ("p50_ms=... p99_ms=... max_ms=... n=200") on stdout.
# Returns 2, having said why, when it could not be measured.
bench_rtt_probe() {
	python3 "$BENCH_ROOT/bench/rtt_probe.py" "$1" "$2" 200 ||
		{ bench_say "the proxy's round trip could not be measured"; return 2; }
}

# bench_p50 LINE: the p50_ms of a bench_rtt_probe line.
bench_p50() {
	sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<<"$1"
}
