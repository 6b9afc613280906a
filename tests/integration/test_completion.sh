#!/bin/bash
# Bash completion (deploy/bash-completion): grantctl's commands,
# subcommands and options come from its --help; `ssh HOST 2fa` completes
# exactly the subcommands grant-shell's `2fa help` lists; anything else
# after ssh goes to the completion ssh had before.  Both files run in plain
# bash (no bash-completion package needed); the install puts grantctl's
# where bash-completion loads it.
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
COMP=$SRC/deploy/bash-completion

# comp WORD...: COMPREPLY for the command line WORD... (the last word is
# the one being completed), sorted, one line.
comp() {
	local fn=$1; shift
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	"$fn"
	printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//'
}

t_section "grantctl"
t_check "the completion file exists" test -f "$COMP/grantctl"
# shellcheck source=/dev/null
. "$COMP/grantctl"
t_check "it registers _grantctl for grantctl" eval '[[ $(complete -p grantctl) == *"-F _grantctl grantctl"* ]]'
G=$GD_BIN/grantctl
want=$("$G" --help | sed -n 's/^  \([a-z][a-z0-9-]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//')
t_eq "grantctl TAB: every command of --help" "$(comp _grantctl "$G" "")" "$want"
t_has "and they include user, repo, status and import" "$want" "import"
t_eq "grantctl st TAB" "$(comp _grantctl "$G" st)" "status"
t_eq "grantctl --config F st TAB" "$(comp _grantctl "$G" --config /x st)" "status"
t_eq "grantctl user TAB" "$(comp _grantctl "$G" user "")" "add del key-del keys list"
t_eq "grantctl repo a TAB" "$(comp _grantctl "$G" repo a)" "add"
t_eq "grantctl import TAB" "$(comp _grantctl "$G" import "")" "gitolite-2fa gitolite-keydir"
t_eq "grantctl log TAB" "$(comp _grantctl "$G" log "")" "key verify"
opts=$(comp _grantctl "$G" enroll alice --)
for o in --totp --hotp --secret-file --secret --allow-short-secret --digits --counter --period; do
	t_has "grantctl enroll alice -- offers $o" " $opts " " $o "
done
t_has "grantctl repo add r -- offers --mode" "$(comp _grantctl "$G" repo add r --)" "--mode"
t_has "grantctl log -- offers --since" "$(comp _grantctl "$G" log --)" "--since"
mkdir -p "$T_DIR/kg-dir.d"
t_eq "grantctl keygen FILE completes paths" "$(comp _grantctl "$G" keygen "$T_DIR/kg-d")" "$T_DIR/kg-dir.d"

t_section "ssh HOST 2fa"
# a completion ssh had before: it must still get everything else
_fake_ssh() { COMPREPLY=(fake-host); }
complete -F _fake_ssh ssh
t_check "the completion file exists" test -f "$COMP/ssh-2fa"
# shellcheck source=/dev/null
. "$COMP/ssh-2fa"
t_config
twofa_help=$(SSH_CONNECTION="127.0.7.7 40000 127.0.0.1 22" SSH_ORIGINAL_COMMAND="2fa help" \
	"$GD_BIN/grant-shell" --config "$T_SITE/grantd.conf" alice)
want=$(sed -n 's/^  \([a-z][a-z0-9-]*\).*/\1/p' <<<"$twofa_help" | sort -u | tr '\n' ' ' | sed 's/ $//')
t_has "grant-shell's 2fa help lists val" " $want " " val "
t_eq "ssh HOST 2fa TAB: the subcommands of grant-shell's 2fa help" "$(comp _grantd_ssh_2fa ssh host 2fa "")" "$want"
t_eq "ssh git@HOST 2fa en TAB" "$(comp _grantd_ssh_2fa ssh git@host 2fa en)" "enroll"
t_eq "ssh -p 22 HOST 2fa val- TAB" "$(comp _grantd_ssh_2fa ssh -p 22 host 2fa val-)" "val-for-days val-session val-subnet"
t_eq "ssh HOST 2fa enroll TAB" "$(comp _grantd_ssh_2fa ssh host 2fa enroll "")" "totp yubikey"
t_eq "ssh HOST 2fa inval TAB" "$(comp _grantd_ssh_2fa ssh host 2fa inval "")" "all myip"
t_eq "ssh HOST 2fa inval all TAB" "$(comp _grantd_ssh_2fa ssh host 2fa inval all "")" "purge"
t_eq "ssh HOST 2fa val TAB (a token): nothing" "$(comp _grantd_ssh_2fa ssh host 2fa val "")" ""
t_eq "ssh ho TAB: ssh's own completion" "$(comp _grantd_ssh_2fa ssh ho)" "fake-host"

t_section "installed where bash-completion looks"
B=$(cd "$GD_BIN/.." && pwd)
if [[ -f $B/cmake_install.cmake ]]; then
	t_expect 0 "cmake --install into a scratch prefix" cmake --install "$B" --prefix "$T_DIR/inst"
	t_check "share/bash-completion/completions/grantctl" \
		cmp -s "$COMP/grantctl" "$T_DIR/inst/share/bash-completion/completions/grantctl"
	t_check "share/grantd/bash-completion/ssh-2fa" \
		cmp -s "$COMP/ssh-2fa" "$T_DIR/inst/share/grantd/bash-completion/ssh-2fa"
fi

t_done
