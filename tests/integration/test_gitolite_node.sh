#!/bin/bash
# The node beside gitolite, without gitolite (issue 10; SPEC 7;
# notes: gitolite-design.md sections 4-6): three sites with [gitolite]
# home set, whose repositories are made by hand as gitolite makes them
# (HEAD master, our LOCAL_CODE post-receive linked in, which runs
# grant-hook with $GRANTD_CONFIG), and a stand-in for the gitolite command
# that notes its arguments and environment.  Checked:
#  - every node runs `PROGRAM grantd-admin-sync` once at start, with the
#    environment built for gitolite (HOME the gitolite home, a fixed PATH,
#    none of the node's GIT_CONFIG_GLOBAL), and again after a restart;
#  - the first push through grant-hook to a repository without a record
#    registers it (mode off) and replicates it; no node writes a hook;
#  - a repository missing at a site is not made there; its refs come in
#    once the directory appears (gitolite made it);
#  - a name grantd refuses (gitolite allows '@') gets one clear line from
#    grant-hook and no record;
#  - a push to gitolite-admin's master at one site moves master at the
#    others (not a fast-forward: each site's admin history was its own)
#    and makes them run the program for that commit; the pushing site's
#    node runs nothing (gitolite's post-update compiled there); another
#    branch of gitolite-admin makes nobody run it.
# The real gitolite (3 sites, sshd, VREFs) is test_gitolite.sh.
. "$(dirname "$0")/lib.sh"

LC=$T_DIR/lc   # the LOCAL_CODE stand-in: its post-receive only
PROG=$T_DIR/bin/gitolite
mkdir -p "$LC/hooks/common" "$T_DIR/bin" || t_fatal "mkdir $LC"
printf '#!/bin/sh\nexec %q\n' "$GD_BIN/grant-hook" >"$LC/hooks/common/post-receive"
# `gitolite grantd-admin-sync`, as far as the node can tell: one line per
# run in $HOME/syncs; some output, as gitolite's compile has
cat >"$PROG" <<'EOF'
#!/bin/sh
repos=$(sed -n 's/^repo_dir = //p' "$GRANTD_CONFIG")
master=$(git --git-dir="$repos/gitolite-admin.git" rev-parse -q --verify refs/heads/master)
echo "run args=$* home=$HOME pwd=$(pwd) path=$PATH user=$USER logname=$LOGNAME gcg=${GIT_CONFIG_GLOBAL-unset} conf=$GRANTD_CONFIG master=$master" >>"$HOME/syncs"
echo "Initialized empty Git repository in $repos/stand-in.git/"
EOF
chmod 755 "$LC/hooks/common/post-receive" "$PROG" || t_fatal "chmod"

# glrepo SITE NAME [HISTORY]: a bare repository as gitolite makes it (HEAD
# master, the LOCAL_CODE post-receive linked in); with HISTORY, a first
# commit of its own in master, made before the hook is there (as
# `gitolite setup` makes each site's gitolite-admin).
glrepo() {
	local g w
	g=$(t_dir "$1")/repos/$2.git
	git init -q --bare --initial-branch=master "$g" && rm -f "$g"/hooks/*.sample || return 1
	if [[ -n ${3:-} ]]; then
		w=$T_DIR/init-$1-$2
		gd_git 127.0.0.1 /dev/null init -q "$w" &&
			echo "$1 $2" >"$w/f.txt" &&
			gd_git 127.0.0.1 /dev/null -C "$w" add -A &&
			gd_git 127.0.0.1 /dev/null -C "$w" commit -q -m "$1's own $2" &&
			gd_git 127.0.0.1 /dev/null -C "$w" push -q "$g" HEAD:refs/heads/master || return 1
	fi
	ln -s "$LC/hooks/common/post-receive" "$g/hooks/post-receive"
}
# hook_ours SITE NAME: the repository's post-receive is still our link
hook_ours() {
	[[ $(readlink "$(t_dir "$1")/repos/$2.git/hooks/post-receive") == "$LC/hooks/common/post-receive" ]]
}
# ref SITE REPO [REF]: the ref's target on SITE's disk ("" when absent)
ref() { git --git-dir="$(t_dir "$1")/repos/$2.git" rev-parse -q --verify "${3:-refs/heads/master}" 2>/dev/null; }
ref_is() { [[ $(ref "$1" "$2" "$3") == "$4" ]]; }
# work DIR: a scratch work tree; commit DIR: a commit with fresh content
work() { rm -rf "$1"; gd_git 127.0.0.1 /dev/null init -q "$1"; }
commit() {
	echo "$RANDOM $(date +%N)" >>"$1/f.txt"
	gd_git 127.0.0.1 /dev/null -C "$1" add -A &&
		gd_git 127.0.0.1 /dev/null -C "$1" commit -q -m "c $RANDOM"
}
# push DIR SITE REPO REFSPEC...: push to SITE's repository path, its hook
# finding the node as gitolite's do (GRANTD_CONFIG, set by sshd or the rc)
push() {
	local d=$1 s=$2 r=$3; shift 3
	GRANTD_CONFIG=$(t_dir "$s")/grantd.conf \
		gd_git 127.0.0.1 /dev/null -C "$d" push -q "$(t_dir "$s")/repos/$r.git" "$@"
}
# runs SITE: how many times SITE's node ran the program
runs() { grep -c '^run ' "$(t_dir "$1")/home/syncs" 2>/dev/null || true; }
runs_is() { [[ $(runs "$1") == "$2" ]]; }
last_run() { grep '^run ' "$(t_dir "$1")/home/syncs" | tail -n 1; }
# registered SITE REPO: SITE's record of REPO, mode off
registered() {
	t_c "$1" repo list --json | t_json "1/0 if not [r for r in j if r['name'] == '$2' and r['mode'] == 'off'] else 1" >/dev/null
}
syncs_is() { [[ $(t_sj "$1" "j['git'].get('gitolite_syncs')") == "$2" ]]; }

t_section "sites ${T_SITES[*]} beside a gitolite stand-in ($T_DIR)"
t_cluster_config
for s in "${T_SITES[@]}"; do
	d=$(t_dir "$s")
	mkdir -p "$d/home" || t_fatal "mkdir $d/home"
	printf '\n[gitolite]\nhome = %s\nprogram = %s\n' "$d/home" "$PROG" >>"$d/grantd.conf"
	glrepo "$s" gitolite-admin history || t_fatal "$s: gitolite-admin.git"
	glrepo "$s" demo || t_fatal "$s: demo.git"
done
for s in "${T_SITES[@]}"; do t_start "$s"; done
for s in "${T_SITES[@]}"; do
	gd_wait_for 20 gd_peers_connected "$(t_dir "$s")" || t_fatal "$s hears both peers within 20 s"
done
t_wait_converged 20 || t_fatal "the three sites agree (digests) within 20 s"

t_section "every node compiles gitolite-admin once at start, in gitolite's environment"
for s in "${T_SITES[@]}"; do
	d=$(t_dir "$s")
	t_expect_soon 0 10 "$s: ran the program once" runs_is "$s" 1
	line=$(last_run "$s")
	t_has "$s: as 'PROGRAM grantd-admin-sync'" "$line" "run args=grantd-admin-sync home="
	t_has "$s: HOME and cwd are the gitolite home" "$line" "home=$d/home pwd=$d/home "
	t_has "$s: PATH is fixed" "$line" " path=/usr/local/bin:/usr/bin:/bin "
	t_has "$s: USER and LOGNAME are the node's user" "$line" "user=$(id -un) logname=$(id -un) "
	t_has "$s: not the node's GIT_CONFIG_GLOBAL" "$line" " gcg=unset "
	t_has "$s: GRANTD_CONFIG is the node's config" "$line" " conf=$d/grantd.conf "
	t_expect_soon 0 10 "$s: status --json counts it (git.gitolite_syncs)" syncs_is "$s" 1
	t_eq "$s: no sync error" "$(t_sj "$s" "j['git']['gitolite_last_error']")" ""
	t_check "$s: the log says so" t_grep_log "$s" "gitolite admin synced commit=$(ref "$s" gitolite-admin) ms="
	t_check "$s: ... with the program's output" t_grep_log "$s" "gitolite admin sync: Initialized empty Git repository in $d/repos/stand-in.git/"
	t_check "$s: demo's post-receive is gitolite's link still" hook_ours "$s" demo
done
t_run t_c portland status
t_has "status (text) shows the syncs" "$OUT" "gitolite: admin_syncs=1 failures=0"

t_section "the first push to demo registers it, mode off, and replicates it"
work "$T_DIR/wd"; commit "$T_DIR/wd"
t_expect 0 "push demo's master at paloalto (grant-hook)" push "$T_DIR/wd" paloalto demo HEAD:refs/heads/master
D1=$(git -C "$T_DIR/wd" rev-parse HEAD)
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 10 "$s: demo is registered, mode off" registered "$s" demo
	t_expect_soon 0 15 "$s: demo's master arrived" ref_is "$s" demo refs/heads/master "$D1"
	t_check "$s: no node wrote demo's hook" hook_ours "$s" demo
done
t_check "paloalto's log says so" t_grep_log paloalto "repository registered repo=demo mode=off"
commit "$T_DIR/wd"
t_expect 0 "a second push to demo at portland" push "$T_DIR/wd" portland demo HEAD:refs/heads/master
D2=$(git -C "$T_DIR/wd" rev-parse HEAD)
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 15 "$s: demo's master moved on" ref_is "$s" demo refs/heads/master "$D2"
done
t_expect_converged "the three sites agree" 10

t_section "a repository whose name grantd refuses (gitolite allows '@')"
glrepo paloalto 'odd@name' || t_fatal "paloalto: odd@name.git"
t_run push "$T_DIR/wd" paloalto 'odd@name' HEAD:refs/heads/master
t_eq "the push itself succeeds (post-receive cannot refuse it)" "$RC" 0
t_has "grant-hook says in one line why it is not replicated" "$ERR" \
	"remote: grant-hook: repository 'odd@name.git' is not replicated: grantd names are parts of"
t_eq "... and nothing else" "$(grep -c . <<<"$ERR")" 1
t_expect 0 "paloalto: repo list" t_c paloalto repo list
t_hasnt "no record of it" "$OUT" odd

t_section "a repository gitolite has not made at a site yet"
glrepo paloalto late || t_fatal "paloalto: late.git"
work "$T_DIR/wl"; commit "$T_DIR/wl"
t_expect 0 "push late's master at paloalto" push "$T_DIR/wl" paloalto late HEAD:refs/heads/master
L1=$(git -C "$T_DIR/wl" rev-parse HEAD)
t_expect_soon 0 10 "montreal has late's record" registered montreal late
# late's ref waits where gitolite has not made late.git (montreal: never)
T_PENDING=([portland]=1 [montreal]=1)
t_expect_converged "the three sites agree" 10
for s in portland montreal; do
	t_check "$s: no node made late.git" test ! -e "$(t_dir "$s")/repos/late.git"
	t_check "$s: and logged no error for it" eval "! grep -E 'error: .*repo=late' '$(t_dir "$s")/grantd.log'"
done
t_eq "portland: late's ref waits (pending_refs)" "$(t_sj portland "int(j['git']['pending_refs'] >= 1)")" 1
glrepo portland late || t_fatal "portland: late.git"
t_expect_soon 0 15 "portland: late's master arrived once gitolite made the repository" \
	ref_is portland late refs/heads/master "$L1"
t_check "portland: late's post-receive is gitolite's link" hook_ours portland late
t_check "montreal: still no late.git" test ! -e "$(t_dir montreal)/repos/late.git"
T_PENDING=([montreal]=1)

t_section "a push to gitolite-admin's master at paloalto is compiled at the other sites"
A0=$(ref paloalto gitolite-admin)
git clone -q "$(t_dir paloalto)/repos/gitolite-admin.git" "$T_DIR/wa" 2>/dev/null || t_fatal "clone gitolite-admin"
commit "$T_DIR/wa"
t_expect 0 "push gitolite-admin's master at paloalto" push "$T_DIR/wa" paloalto gitolite-admin HEAD:refs/heads/master
A1=$(git -C "$T_DIR/wa" rev-parse HEAD)
t_check "a fast-forward at paloalto" git -C "$T_DIR/wa" merge-base --is-ancestor "$A0" "$A1"
for s in portland montreal; do
	t_expect_soon 0 15 "$s: gitolite-admin's master is paloalto's (its own history replaced)" \
		ref_is "$s" gitolite-admin refs/heads/master "$A1"
	t_expect_soon 0 10 "$s: the program ran again" runs_is "$s" 2
	t_has "$s: ... for that commit, as grantd-admin-sync" "$(last_run "$s")" "args=grantd-admin-sync home=$(t_dir "$s")/home "
	t_has "$s: ... which it saw checked in" "$(last_run "$s")" " master=$A1"
	t_expect_soon 0 10 "$s: counted in status" syncs_is "$s" 2
	t_check "$s: the log names the commit" t_grep_log "$s" "gitolite admin synced commit=$A1 ms="
	t_check "$s: gitolite-admin's post-receive is gitolite's link" hook_ours "$s" gitolite-admin
done
t_expect_soon 0 10 "gitolite-admin is registered everywhere" registered montreal gitolite-admin
t_eq "paloalto: its node ran nothing more (gitolite compiled the push there)" "$(runs paloalto)" 1

t_section "another branch of gitolite-admin is not compiled"
t_expect 0 "push gitolite-admin's side branch at montreal" push "$T_DIR/wa" montreal gitolite-admin HEAD:refs/heads/side
for s in paloalto portland; do
	t_expect_soon 0 15 "$s: side arrived" ref_is "$s" gitolite-admin refs/heads/side "$A1"
done
commit "$T_DIR/wa"
t_expect 0 "push gitolite-admin's master at montreal" push "$T_DIR/wa" montreal gitolite-admin HEAD:refs/heads/master
A2=$(git -C "$T_DIR/wa" rev-parse HEAD)
for s in paloalto portland; do
	t_expect_soon 0 15 "$s: gitolite-admin's master moved on" ref_is "$s" gitolite-admin refs/heads/master "$A2"
	t_expect_soon 0 10 "$s: compiled for it" t_grep_log "$s" "gitolite admin synced commit=$A2 ms="
done
t_eq "portland: ran for master's moves only (start, A1, A2)" "$(runs portland)" 3
t_eq "paloalto: ran for master's move only (start, A2)" "$(runs paloalto)" 2
t_eq "montreal: its node ran nothing for its own pushes" "$(runs montreal)" 2

t_section "a restart compiles once more (a move a crash left uncompiled)"
t_kill9 portland
t_start portland
t_expect_soon 0 10 "portland: ran the program at start" runs_is portland 4
t_has "portland: for the newest commit" "$(last_run portland)" " master=$A2"
t_expect_converged "the three sites agree" 15

t_done
