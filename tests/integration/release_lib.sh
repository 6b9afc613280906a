# release_lib.sh: the last release's binaries, for the tests that start
# from a store it made (test_upgrade.sh, test_rebuild_trust.sh).  Sourced
# after lib.sh.  Sets REL_TAG and REL_COMMIT (deploy/releases' last line,
# the commit taken from the tag when there is one) and defines
# build_release, release_link, start_site, gd_grantctl, sh_at and
# set_verifier_keys; exits 77 when that commit is not in the repository.

release_line() { grep -v '^#' "$GD_ROOT/deploy/releases" | awk 'NF >= 2' | tail -n 1; }
read -r REL_TAG REL_COMMIT _ < <(release_line)
[[ -n ${REL_TAG-} ]] || t_fatal "deploy/releases names a release"
if c=$(git -C "$GD_ROOT" rev-parse -q --verify "$REL_TAG^{commit}" 2>/dev/null); then
	REL_COMMIT=$c
fi
git -C "$GD_ROOT" cat-file -e "$REL_COMMIT^{commit}" 2>/dev/null || {
	echo "SKIP: $REL_TAG ($REL_COMMIT) is not in the repository at $GD_ROOT (a shallow clone? git fetch --unshallow)"
	exit 77
}

# build_release COMMIT: print the bin directory of COMMIT's build, building
# it into the cache first when it is not there (into a directory of its
# own, renamed into place, so two runs at once do not mix).
build_release() {
	local c=$1 cache dir
	cache=${GD_RELEASE_CACHE:-/var/tmp}/grantd-release-$c
	if [[ ! -x $cache/build/bin/grantd ]]; then
		dir=$(mktemp -d "$cache.XXXXXX") || return 1
		mkdir "$dir/src" &&
			git -C "$GD_ROOT" archive "$c" | tar -x -C "$dir/src" &&
			cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
				-DGRANTD_TESTS=OFF >"$dir/build.log" 2>&1 &&
			cmake --build "$dir/build" -j2 >>"$dir/build.log" 2>&1 || {
			tail -n 30 "$dir/build.log" >&2
			rm -rf "$dir"
			return 1
		}
		mv -T "$dir" "$cache" 2>/dev/null || rm -rf "$dir"
	fi
	echo "$cache/build/bin"
}

# Each site runs the programs of $T_DIR/bin.SITE, a link to the old
# (OLD_BIN) or the new (NEW_BIN) bin directory: an upgrade moves the link
# (what a package upgrade does to /usr/bin), then restarts the node.
# release_link SITE old|new
release_link() { ln -sfn "$([[ $2 == old ]] && echo "$OLD_BIN" || echo "$NEW_BIN")" "$T_DIR/bin.$1"; }
start_site() { GD_BIN=$T_DIR/bin.$1 t_start "$1"; }
# grantctl of the site's own release: the control sockets' framing changed
# (issue 23) and a grantctl speaks only its own release's, as a package
# install replaces both (docs/upgrading.md)
gd_grantctl() {
	local dir=$1; shift
	local bin=$T_DIR/bin.${dir##*/}
	[[ -e $bin ]] || bin=$GD_BIN
	"$bin/grantctl" --config "$dir/grantd.conf" "$@"
}
# sh_at SITE SRCIP USER CMD...: grant-shell of SITE's release
sh_at() { local s=$1; shift; GD_BIN=$T_DIR/bin.$s t_sh "$s" "$@"; }
# set_verifier_keys SITE: SITE's config gets each other site's verifier
# key (`grantctl log key` of this build), as docs/upgrading.md has an
# operator do once every site signs; the node reads it at its next start.
set_verifier_keys() {
	local s=$1 p vk
	for p in "${T_SITES[@]}"; do
		[[ $p == "$s" ]] && continue
		vk=$("$NEW_BIN/grantctl" log key --key-file "$T_DIR/$p/node.key" --site "$p") ||
			t_fatal "grantctl log key for $p"
		sed -i "/^\[peer $p\]\$/a verifier_key = $vk" "$T_DIR/$s/grantd.conf"
	done
}
