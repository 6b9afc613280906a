#!/bin/bash
# grantd inside gitolite (SPEC 7, issue 10).  Three sites, each a gitolite
# account made for the test (Debian's gitolite3, its own home), an sshd
# that lets in only that account with the keys gitolite writes, and a
# grantd node running as that account beside it.  gitolite's LOCAL_CODE is
# the build tree's share/grantd/gitolite, laid out as `cmake --install`
# puts it; the rc gains LOCAL_CODE and '2fa' and nothing else.
#
# An admin pushes a gitolite-admin at paloalto: portland and montreal
# compile it (alice can log in, demo exists).  alice enrolls at portland,
# validates at montreal, pushes at paloalto from that IP (accepted; the
# push reaches every site) and from another (refused by VREF/2fa with the
# hint); the token is refused again elsewhere; bob (opt-in, not enrolled)
# pushes freely.  An admin push at montreal (a repository, a user) is in
# force at the other two.  Bad input through gitolite gets grant-shell's
# one-line errors and changes nothing.
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || { echo "# needs root (useradd, setpriv)"; exit 77; }
for tool in useradd userdel setpriv gitolite perl; do
	command -v "$tool" >/dev/null || { echo "# no $tool (apt-get install gitolite3)"; exit 77; }
done
LOCAL_CODE=$(cd "$GD_BIN/../share/grantd/gitolite" 2>/dev/null && pwd) ||
	t_fatal "the build tree has share/grantd/gitolite ($GD_BIN/../share/grantd/gitolite)"

# ---- the accounts ---------------------------------------------------------

declare -A U=() H=()
for s in "${T_SITES[@]}"; do
	U[$s]=gdgl${s:0:2}$$
	U[$s]=${U[$s]:0:31}
	H[$s]=$T_DIR/$s/home
done
t_gl_cleanup() {
	local s
	t_cleanup
	for s in "${T_SITES[@]}"; do
		pkill -KILL -u "${U[$s]}" 2>/dev/null
		userdel "${U[$s]}" 2>/dev/null
	done
}
trap t_gl_cleanup EXIT
chmod 755 "$T_DIR"
for s in "${T_SITES[@]}"; do
	# '*': no password, but not locked (sshd refuses a locked account
	# without PAM)
	useradd -M -d "${H[$s]}" -s /bin/sh -p '*' "${U[$s]}" ||
		t_fatal "useradd ${U[$s]}"
	install -d -o "${U[$s]}" -g "${U[$s]}" -m 755 "$T_DIR/$s" "${H[$s]}"
done

# as SITE CMD...: CMD as SITE's gitolite account, in a clean environment.
as() {
	local s=$1; shift
	(cd "${H[$s]}" && setpriv --reuid="${U[$s]}" --regid="${U[$s]}" --init-groups \
		env -i HOME="${H[$s]}" USER="${U[$s]}" LOGNAME="${U[$s]}" \
		PATH=/usr/local/bin:/usr/bin:/bin "$@")
}

t_section "gitolite at ${T_SITES[*]}: accounts ${U[*]}"
for k in admin alice bob carol; do
	gd_user_key "$T_KEYS/$k" || t_fatal "ssh-keygen for $k"
done
for s in "${T_SITES[@]}"; do
	t_check "$s: ${U[$s]} can run the LOCAL_CODE 2fa command and grant-shell" \
		as "$s" test -x "$LOCAL_CODE/commands/2fa" -a -x "$GD_BIN/grant-shell"
	install -o "${U[$s]}" -m 644 "$T_KEYS/admin.pub" "${H[$s]}/admin.pub"
	t_expect 0 "$s: gitolite setup -pk admin.pub" as "$s" gitolite setup -pk admin.pub
	# the whole gitolite-side set-up (docs/gitolite.md): LOCAL_CODE and
	# '2fa' in ENABLE, then setup again to link the hooks
	t_expect 0 "$s: LOCAL_CODE and '2fa' in .gitolite.rc" as "$s" env LC="$LOCAL_CODE" \
		perl -0pi -e 's/^(%RC = \(\n)/$1    LOCAL_CODE => "$ENV{LC}",\n/m;
			s/^(\s*ENABLE => \[\n)/$1            "2fa",\n/m' "${H[$s]}/.gitolite.rc"
	t_eq "$s: gitolite sees LOCAL_CODE" "$(as "$s" gitolite query-rc LOCAL_CODE)" "$LOCAL_CODE"
	t_expect 0 "$s: gitolite setup (links the hooks)" as "$s" gitolite setup
done

# ---- the nodes: as the accounts, repo_dir = gitolite's repositories -------

# grantd as the account that owns the config's directory, HOME its home
t_wrap_grantd "$T_DIR/bin" '[[ $1 == --config ]] || { echo "grantd (test wrapper): want --config FILE" >&2; exit 2; }
d=$(dirname "$2")
u=$(stat -c %U "$d")
exec setpriv --reuid="$u" --regid="$u" --init-groups \
	env HOME="$d/home" USER="$u" LOGNAME="$u" "$REAL" "$@"' || t_fatal "the grantd wrapper"

t_section "grantd at each site as its gitolite account, on $T_NET.{1,2,3}"
t_cluster_config "repo_dir=${H[paloalto]}/repositories"
for s in "${T_SITES[@]}"; do
	sed -i "s|^repo_dir = .*|repo_dir = ${H[$s]}/repositories|" "$T_DIR/$s/grantd.conf"
	printf '\n[gitolite]\nhome = %s\n' "${H[$s]}" >>"$T_DIR/$s/grantd.conf"
	chown -R "${U[$s]}:${U[$s]}" "$T_DIR/$s"
	GD_BIN=$T_DIR/bin t_start "$s"
done
for s in "${T_SITES[@]}"; do
	gd_wait_for 20 gd_peers_connected "$T_DIR/$s" || t_fatal "$s hears both peers"
	t_eq "$s: the node runs as ${U[$s]}" "$(stat -c %U "/proc/$(t_pid "$s")")" "${U[$s]}"
	gd_sshd_start "$T_DIR/$s" "${T_SADDR[$s]}" "$T_SSH_PORT" "${U[$s]}" ||
		t_fatal "sshd for $s (gitolite account ${U[$s]})"
done
t_expect_converged "the three sites agree" 20

# glssh SITE SRCIP KEY COMMAND...: ssh to SITE's gitolite account.
glssh() {
	local s=$1 src=$2 key=$3; shift 3
	# shellcheck disable=SC2046
	ssh $(gd_ssh_opts "$src" "$T_KEYS/$key") -p "$T_SSH_PORT" \
		"${U[$s]}@${T_SADDR[$s]}" "$@" </dev/null
}
# glurl SITE REPO
glurl() { echo "ssh://${U[$1]}@${T_SADDR[$1]}:$T_SSH_PORT/$2"; }
# glref SITE REPO [REF]: the ref's target on SITE's disk
glref() {
	git -c safe.directory='*' --git-dir="${H[$1]}/repositories/$2.git" \
		rev-parse -q --verify "${3:-refs/heads/master}" 2>/dev/null
}
glref_is() { [[ $(glref "$1" "$2" "$3") == "$4" ]]; }
# lists SITE KEY REPO: gitolite's info for KEY at SITE lists REPO
lists() { glssh "$1" 127.0.7.5 "$2" info 2>/dev/null | grep -qE "[[:space:]]$3\$"; }
# commit DIR MSG
commit() {
	echo "$2 $RANDOM" >>"$1/f.txt"
	gd_git 127.0.0.1 /dev/null -C "$1" add -A &&
		gd_git 127.0.0.1 /dev/null -C "$1" commit -q -m "$2"
}

t_expect 0 "paloalto: the admin's gitolite info" glssh paloalto 127.0.7.5 admin info

# ---- the admin repository, pushed at paloalto -----------------------------

t_section "an admin push at paloalto is in force at every site"
A=$T_DIR/admin
t_expect 0 "the admin clones gitolite-admin at paloalto" \
	gd_git 127.0.7.5 "$T_KEYS/admin" clone -q "$(glurl paloalto gitolite-admin)" "$A"
cp "$T_KEYS/alice.pub" "$T_KEYS/bob.pub" "$A/keydir/"
cat >"$A/conf/gitolite.conf" <<'EOF'
repo gitolite-admin
    RW+     =   admin

repo testing
    RW+     =   @all

repo demo
    RW+                 =   alice bob
    -   VREF/2fa        =   alice
    -   VREF/2fa/optin  =   @all
EOF
gd_git 127.0.0.1 /dev/null -C "$A" add -A
gd_git 127.0.0.1 /dev/null -C "$A" commit -q -m "alice, bob and demo"
t_expect 0 "the admin pushes it at paloalto" \
	gd_git 127.0.7.5 "$T_KEYS/admin" -C "$A" push -q origin HEAD:master
ADM=$(t_head "$A")
for s in portland montreal; do
	t_expect_soon 0 20 "$s: gitolite-admin's master is the admin's commit" \
		glref_is "$s" gitolite-admin refs/heads/master "$ADM"
	t_expect_soon 0 30 "$s: alice can log in and sees demo (gitolite compiled)" \
		lists "$s" alice demo
	t_check "$s: demo.git exists" test -f "${H[$s]}/repositories/demo.git/HEAD"
	t_check "$s: the node ran gitolite's compile" \
		t_grep_log "$s" "gitolite admin synced"
done

# ---- alice: enroll at portland, val at montreal, push at paloalto ---------

t_section "alice enrolls at portland, validates at montreal, pushes at paloalto"
t_run glssh portland 127.0.7.7 alice 2fa enroll totp
t_eq "portland: 2fa enroll totp through gitolite" "$RC" 0
SECRET=$(grep -oE 'Secret \(base32\): [A-Z2-7]+' <<<"$OUT" | sed 's/.*: //')
t_check "the enrollment printed its secret" test -n "$SECRET"
t_check "portland: the node made alice's user record" t_has_user portland alice
t_check "the secret is in no log (gitolite's, the node's)" \
	t_no_secret "${H[portland]}/.gitolite/logs" b32 "$SECRET"
t_check "the secret is not in portland's grantd.log" eval '! grep -qiF "$SECRET" "$T_DIR/portland/grantd.log"'
t_totp_settle
TOK=$(t_totp "$SECRET")
t_expect 0 "montreal: alice 2fa val <totp> from 127.0.7.7" glssh montreal 127.0.7.7 alice 2fa val "$TOK"
t_expect_soon 0 10 "paloalto: alice's grant for 127.0.7.7 arrived (2fa isval)" \
	glssh paloalto 127.0.7.7 alice 2fa isval

# push_demo WHO SITE SRCIP: WHO clones demo at SITE, commits and pushes
# from SRCIP (accepted), and the push reaches every site; the work tree
# is $T_DIR/WHO.
push_demo() {
	local who=$1 site=$2 src=$3 w=$T_DIR/$1 s tip
	t_expect 0 "$who clones demo at $site" \
		gd_git "$src" "$T_KEYS/$who" clone -q "$(glurl "$site" demo)" "$w"
	commit "$w" "$who one"
	t_expect 0 "$who pushes demo at $site from $src" \
		gd_git "$src" "$T_KEYS/$who" -C "$w" push -q origin HEAD:master
	tip=$(t_head "$w")
	for s in "${T_SITES[@]}"; do
		t_expect_soon 0 20 "$s: demo's master is $who's push" \
			glref_is "$s" demo refs/heads/master "$tip"
	done
}

push_demo alice paloalto 127.0.7.7
W=$T_DIR/alice
D1=$(t_head "$W")

commit "$W" "alice two"
t_run gd_git 127.0.7.8 "$T_KEYS/alice" -C "$W" push -q origin HEAD:master
t_check "alice's push from 127.0.7.8 (not validated) is refused" eval '[[ $RC != 0 ]]'
t_has "gitolite's denial names VREF/2fa" "$ERR" "DENIED by VREF/2fa"
t_has "the refusal carries grant-shell's hint" "$ERR" "2fa val"
t_check "paloalto: demo's master did not move" glref_is paloalto demo refs/heads/master "$D1"

t_expect 1 "portland: the same token again is refused (replay)" \
	glssh portland 127.0.7.9 alice 2fa val "$TOK"
t_expect 1 "portland: 127.0.7.9 got no grant from it" glssh portland 127.0.7.9 alice 2fa isval

t_section "bob: not enrolled, opt-in: pushes freely"
push_demo bob montreal 127.0.7.8

# ---- an admin push at montreal ---------------------------------------------

t_section "an admin push at montreal (a repository, a user) is in force at every site"
cp "$T_KEYS/carol.pub" "$A/keydir/"
printf '\nrepo demo3\n    RW+     =   carol\n' >>"$A/conf/gitolite.conf"
gd_git 127.0.0.1 /dev/null -C "$A" add -A
gd_git 127.0.0.1 /dev/null -C "$A" commit -q -m "carol and demo3"
t_expect 0 "the admin pushes it at montreal" \
	gd_git 127.0.7.5 "$T_KEYS/admin" -C "$A" push -q "$(glurl montreal gitolite-admin)" HEAD:master
for s in paloalto portland; do
	t_expect_soon 0 30 "$s: carol can log in and sees demo3" lists "$s" carol demo3
	t_check "$s: demo3.git exists" test -f "${H[$s]}/repositories/demo3.git/HEAD"
done

# ---- bad input --------------------------------------------------------------

t_section "bad input through gitolite: grant-shell's one-line errors, nothing changes"
t_expect_converged "the three sites agree before" 20
before=$(t_sdigest paloalto)
for cmd in "val abc" "val-for-days 99 123456" "val-subnet /4 123456" \
	"enroll foo" "nosuch"; do
	t_run glssh paloalto 127.0.7.7 alice 2fa $cmd
	gl_rc=$RC gl_err=$ERR gl_out=$OUT
	t_run t_sh paloalto 127.0.7.7 alice "2fa $cmd"
	t_eq "2fa $cmd: the exit status of grant-shell's own ($RC)" "$gl_rc" "$RC"
	t_eq "2fa $cmd: grant-shell's own error" "$gl_err$gl_out" "$ERR$OUT"
	t_one_line "2fa $cmd: one line" "$gl_err$gl_out"
done
t_run glssh paloalto 127.0.7.7 alice "2fa val '1;2'"
t_check "a token with a quote and ';' is stopped by gitolite" eval '[[ $RC != 0 ]]'
t_has "gitolite says so" "$ERR" "suspicious characters"
t_expect_converged "the three sites agree after" 20
t_eq "the digest is unchanged" "$(t_sdigest paloalto)" "$before"

t_section "the nodes' logs"
t_check "paloalto: the hook recorded alice's push" t_grep_log paloalto "push recorded repo=demo"
t_check "montreal: the hook recorded the admin's push" t_grep_log montreal "push recorded repo=gitolite-admin"
t_done
