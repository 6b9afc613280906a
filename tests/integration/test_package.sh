#!/bin/bash
# The Debian package (SPEC 10, docs/packaging.md): deploy/package builds
# grantd_VERSION_ARCH.deb into this test's directory, lintian finds no
# error in it, `apt-get install ./grantd_*.deb` installs it, and the
# INSTALLED programs work: every one answers --version with the tree's
# version, `grantd -t` accepts an installed example configuration, and
# /usr/bin/grantd serves a loopback site that /usr/bin/grantctl asks for its
# status.  Then `apt-get remove` leaves no program in /usr/bin, and purge
# keeps the git account and /var/lib/grantd (the operator's).
#
# Root only (apt-get, the git account).  Other tests run the build tree's
# programs (GD_BIN), never /usr/bin, so installing beside them disturbs
# none; two runs of this test wait for each other (a lock).  A machine
# where grantd is installed already is left alone (skip).  Whatever
# happens, the exit trap purges the package and removes the account and
# directories that the package made and that were not there before.
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (apt-get install)"; exit 77; }
for tool in dpkg-buildpackage dh lintian apt-get; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
exec {P_LOCK}>/tmp/grantd-it.package.lock && flock -w 600 "$P_LOCK" ||
	{ echo "FAIL: another test_package holds /tmp/grantd-it.package.lock"; exit 1; }
if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' grantd 2>/dev/null) =~ ^.[^n] ]]; then
	echo "SKIP: the grantd package is installed on this machine; not touching it"
	exit 77
fi

PROGS=(grantd grantctl grant-shell grant-keys grant-keys-list grant-hook grant-log)
VERSION=$(sed -n 's/^project(grantd VERSION \([^ )]*\).*/\1/p' "$GD_ROOT/CMakeLists.txt")
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
APT=(apt-get -y -q -o DPkg::Lock::Timeout=120)
export DEBIAN_FRONTEND=noninteractive
# What the package may make and this test must take away again.
P_HAD_ACCOUNT=0 P_HAD_GROUP=0
getent passwd git >/dev/null && P_HAD_ACCOUNT=1
getent group git >/dev/null && P_HAD_GROUP=1
P_NEW_DIRS=()
for d in /var/lib/grantd /srv/git /etc/grantd; do
	[[ -e $d ]] || P_NEW_DIRS+=("$d")
done

# p_installed: dpkg knows grantd as more than "not installed" (installed,
# half-installed, or its config files left).
p_installed() {
	local st
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' grantd 2>/dev/null) || return 1
	[[ ${st:1:1} != n ]]
}

p_cleanup() {
	local d
	if p_installed; then
		"${APT[@]}" purge grantd >/dev/null 2>&1 ||
			dpkg --purge grantd >/dev/null 2>&1
	fi
	if ((!P_HAD_ACCOUNT)) && getent passwd git >/dev/null; then
		userdel git >/dev/null 2>&1
	fi
	if ((!P_HAD_GROUP)) && getent group git >/dev/null; then
		groupdel git >/dev/null 2>&1
	fi
	for d in "${P_NEW_DIRS[@]}"; do
		rm -rf "$d"
	done
	t_cleanup
}
trap p_cleanup EXIT

t_section "deploy/package: grantd_${VERSION}_$ARCH.deb"
t_check "the tree has a version ($VERSION)" test -n "$VERSION"
START=$(gd_now_ms)
GD_PACKAGE_JOBS=2 t_run "$GD_ROOT/deploy/package" "$T_DIR/deb"
SECS=$(( ($(gd_now_ms) - START) / 1000 ))
echo "# deploy/package took $SECS s"
[[ $RC == 0 ]] || t_fatal "deploy/package exits 0 (exit $RC: $(tail -n 30 <<<"$ERR"))"
DEB=$(tail -n 1 <<<"$OUT")
t_eq "its last line is the .deb's path" "$DEB" "$T_DIR/deb/grantd_${VERSION}_$ARCH.deb"
[[ -f $DEB ]] || t_fatal "the .deb exists ($DEB)"
t_run dpkg-deb -c "$DEB"
LIST=$OUT
for p in "${PROGS[@]}"; do
	t_has "the package holds /usr/bin/$p" "$LIST" " ./usr/bin/$p"
done
for f in lib/systemd/system/grantd.service usr/share/grantd/gitolite/commands/2fa \
	usr/share/grantd/gitolite/VREF/2fa usr/share/grantd/gitolite/hooks/common/post-receive \
	usr/share/doc/grantd/examples/paloalto.conf usr/share/man/man8/grantd.8.gz \
	usr/share/man/man5/grantd.conf.5.gz; do
	t_has "the package holds /$f" "$LIST" " ./$f"
done
t_hasnt "no build-tree script in it (lib.sh)" "$LIST" "lib.sh"

t_section "lintian"
t_run lintian "$DEB"
t_hasnt "lintian prints no error (E:)" "$OUT" "E: "
grep -E '^[WI]: ' <<<"$OUT" | sed 's/^/#   /'

t_section "apt-get install ./$(basename "$DEB")"
t_expect 0 "apt-get install the package" "${APT[@]}" install "$DEB"
t_expect 0 "the git account exists" getent passwd git
t_eq "/var/lib/grantd belongs to git" "$(stat -c %U "/var/lib/grantd" 2>&1)" git
t_check "the unit is installed" test -f /lib/systemd/system/grantd.service
t_check "the unit runs /usr/bin/grantd" grep -qx 'ExecStart=/usr/bin/grantd --config ${GRANTD_CONFIG}' \
	/lib/systemd/system/grantd.service
t_check "the unit is not enabled by the package" \
	test ! -e /etc/systemd/system/multi-user.target.wants/grantd.service
t_check "gitolite's 2fa runs /usr/bin/grant-shell" \
	grep -qF "'/usr/bin/grant-shell'" /usr/share/grantd/gitolite/commands/2fa
t_check "the post-receive hook runs /usr/bin/grant-hook" \
	grep -qF "'/usr/bin/grant-hook'" /usr/share/grantd/gitolite/hooks/common/post-receive

t_section "the installed programs"
for p in "${PROGS[@]}"; do
	t_expect 0 "/usr/bin/$p --version" "/usr/bin/$p" --version
	t_eq "/usr/bin/$p --version prints the tree's version" "$OUT" "$p $VERSION"
done
# the installed example, its paths and addresses moved into this test's
# directory, its placeholders filled with real keys
EX=$T_DIR/example
mkdir -p "$EX/data" "$EX/repos" "$EX/run"
for s in paloalto portland montreal; do
	/usr/bin/grantctl keygen "$EX/$s.key" >"$EX/$s.out" || t_fatal "grantctl keygen $s"
done
PUB_PORTLAND=$(awk 'NF { w = $NF } END { print w }' "$EX/portland.out")
PUB_MONTREAL=$(awk 'NF { w = $NF } END { print w }' "$EX/montreal.out")
# a Z85 key may hold '&', which sed's replacement reads as the match
PUB_PORTLAND=${PUB_PORTLAND//'&'/'\&'}
PUB_MONTREAL=${PUB_MONTREAL//'&'/'\&'}
sed -e "s|/var/lib/grantd|$EX/data|; s|/srv/git|$EX/repos|; s|/run/grantd|$EX/run|" \
	-e "s|/etc/grantd/|$EX/|; s|192\.0\.2\.[0-9]*|$T_ADDR|" \
	-e "s|REPLACE-with-portland-public-key|$PUB_PORTLAND|" \
	-e "s|REPLACE-with-montreal-public-key|$PUB_MONTREAL|" \
	/usr/share/doc/grantd/examples/paloalto.conf >"$EX/grantd.conf"
t_expect 0 "/usr/bin/grantd -t accepts the installed example (paloalto.conf)" \
	/usr/bin/grantd -t --config "$EX/grantd.conf"
# the site: deploy/lib.sh's, run by the installed programs
GD_BIN=/usr/bin
t_config
gd_grantd_start "$T_SITE" || t_fatal "/usr/bin/grantd starts on $T_ADDR"
t_expect 0 "/usr/bin/grantctl status answers" /usr/bin/grantctl --config "$T_SITE/grantd.conf" status
t_has "status names the site" "$OUT" paloalto
t_check "the node is /usr/bin/grantd" gd_alive "$(<"$T_SITE/grantd.pid")" /usr/bin/grantd
t_expect 0 "the installed grantd stops on SIGTERM" gd_grantd_stop "$T_SITE"
t_eq "with exit status 0" "$(gd_grantd_exit_status "$T_SITE")" 0

t_section "apt-get remove, purge"
t_expect 0 "apt-get remove grantd" "${APT[@]}" remove grantd
for p in "${PROGS[@]}"; do
	t_check "no /usr/bin/$p left" test ! -e "/usr/bin/$p"
done
t_check "no unit left" test ! -e /lib/systemd/system/grantd.service
t_expect 0 "remove keeps the git account" getent passwd git
t_check "remove keeps /var/lib/grantd" test -d /var/lib/grantd
t_expect 0 "apt-get purge grantd" "${APT[@]}" purge grantd
t_check "nothing of the package is left in dpkg's database" eval '! p_installed'
t_check "purge keeps /var/lib/grantd (the operator's)" test -d /var/lib/grantd

t_done
