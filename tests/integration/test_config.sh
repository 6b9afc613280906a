#!/bin/bash
# Configuration (SPEC 4): unknown keys, bad values, duplicate site names,
# duplicate peer keys (or a peer with the node's own key) and unreadable
# key files are start-up errors naming FILE:LINE:, `grantd -t`
# checks a config and exits (0 good, 2 bad).  Clients exit 3 when the node
# cannot be reached and fail closed.
. "$(dirname "$0")/lib.sh"

t_config
CONF=$T_SITE/grantd.conf

t_section "a good config"
t_expect 0 "grantd -t --config F exits 0" "$GD_BIN/grantd" -t --config "$CONF"

# broken NAME SED-EXPR...: a copy of the good config edited by sed.
broken() {
	local f=$T_DIR/$1.conf; shift
	sed -e '' "$@" "$CONF" >"$f"
	echo "$f"
}
# line_of FILE REGEX: the line number of the first match.
line_of() { grep -n -m1 -E "$2" "$1" | cut -d: -f1; }

# bad_config DESC FILE LINE [LINE2]: grantd -t and grantd both exit 2 naming
# FILE:LINE: (or FILE:LINE2:).
bad_config() {
	local desc=$1 f=$2 line=$3 line2=${4:-$3}
	t_expect 2 "$desc: grantd -t exits 2" "$GD_BIN/grantd" -t --config "$f"
	if [[ $ERR == *"$f:$line2:"* ]]; then
		t_ok "$desc: the error names $(basename "$f"):$line2:"
	else
		t_has "$desc: the error names $(basename "$f"):$line:" "$ERR" "$f:$line:"
	fi
	t_one_line "$desc: one-line error" "$ERR"
	t_expect 2 "$desc: grantd (not -t) exits 2 too" timeout 20 "$GD_BIN/grantd" --config "$f"
}

t_section "bad configs"
f=$(broken unknown-node -e '/^site = /a colour = blue')
bad_config "unknown key in [node]" "$f" "$(line_of "$f" '^colour')"
f=$(broken unknown-policy -e '/^\[policy\]/a frobs = 3')
bad_config "unknown key in [policy]" "$f" "$(line_of "$f" '^frobs')"
f=$(broken bad-duration -e 's/^grant_default = .*/grant_default = 24 hours/')
bad_config "bad duration" "$f" "$(line_of "$f" '^grant_default')"
f=$(broken bad-int -e 's/^lockout_failures = .*/lockout_failures = many/')
bad_config "bad integer" "$f" "$(line_of "$f" '^lockout_failures')"
f=$(broken bad-site -e 's/^site = .*/site = Palo Alto/')
bad_config "bad site name" "$f" "$(line_of "$f" '^site')"
f=$(broken bad-endpoint -e 's|^publish = .*|publish = 127.0.0.1:7401|')
bad_config "bad endpoint" "$f" "$(line_of "$f" '^publish')"
f=$(broken unknown-section -e '$a [colours]' -e '$a red = 1')
# inih calls the handler at the section's first key: accept either line.
bad_config "unknown section" "$f" "$(line_of "$f" '^\[colours\]')" "$(line_of "$f" '^red = 1')"
f=$(broken dup-key -e '/^site = /a site = portland')
bad_config "duplicate key" "$f" "$(line_of "$f" '^site = portland')"
f=$(broken bad-syntax -e '/^\[policy\]/a this is not ini')
bad_config "syntax error" "$f" "$(line_of "$f" '^this is not')"
f=$(broken missing-key -e 's|^secret_key = .*|secret_key = /nonexistent/grantd.key|')
bad_config "unreadable secret_key file" "$f" "$(line_of "$f" '^secret_key')"

# Peers: a duplicate site name, and a peer named like this node.
PEERKEY=$(gd_site_keygen "$T_DIR/peer-a") || t_fatal "grantctl keygen for a peer"
PEERKEY2=$(gd_site_keygen "$T_DIR/peer-b") || t_fatal "grantctl keygen for a second peer"
OWNKEY=$(cat "$T_SITE/node.pub")
f=$(broken dup-peer)
printf '\n[peer portland]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = %s\n' "$PEERKEY" >>"$f"
printf '\n[peer portland]\npublish = tcp://127.0.0.3:7401\nsync = tcp://127.0.0.3:7402\npublic_key = %s\n' "$PEERKEY" >>"$f"
t_expect 2 "duplicate peer site name: grantd -t exits 2" "$GD_BIN/grantd" -t --config "$f"
t_has "duplicate peer site name: the error names the file" "$ERR" "$f:"
t_has "duplicate peer site name: and says so" "$ERR" "duplicate"
f=$(broken self-peer)
printf '\n[peer paloalto]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = %s\n' "$PEERKEY" >>"$f"
t_expect 2 "a peer with this node's site name: grantd -t exits 2" "$GD_BIN/grantd" -t --config "$f"
t_has "a peer with this node's site name: the error names the file" "$ERR" "$f:"
f=$(broken short-key)
printf '\n[peer portland]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = tooshort\n' >>"$f"
bad_config "a public_key that is not 40 Z85 characters" "$f" "$(line_of "$f" '^public_key = tooshort')"
f=$(broken good-peer)
printf '\n[peer portland]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = %s\n' "$PEERKEY" >>"$f"
t_expect 0 "a config with a well-formed peer: grantd -t exits 0" "$GD_BIN/grantd" -t --config "$f"
printf '\n[peer montreal]\npublish = tcp://127.0.0.3:7401\nsync = tcp://127.0.0.3:7402\npublic_key = %s\n' "$PEERKEY2" >>"$f"
t_expect 0 "two peers, two keys: grantd -t exits 0" "$GD_BIN/grantd" -t --config "$f"

# One key, one machine (issue 19, N14): two peers with one key, or a peer
# with this node's own key, would count one machine twice.
f=$(broken dup-peer-key)
printf '\n[peer portland]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = %s\n' "$PEERKEY" >>"$f"
printf '\n[peer montreal]\npublish = tcp://127.0.0.3:7401\nsync = tcp://127.0.0.3:7402\npublic_key = %s\n' "$PEERKEY" >>"$f"
bad_config "two peers with one public_key" "$f" "$(grep -n -F "public_key = $PEERKEY" "$f" | tail -1 | cut -d: -f1)"
t_has "two peers with one public_key: names the other peer" "$ERR" "[peer portland]"
f=$(broken own-key-peer)
printf '\n[peer portland]\npublish = tcp://127.0.0.2:7401\nsync = tcp://127.0.0.2:7402\npublic_key = %s\n' "$OWNKEY" >>"$f"
bad_config "a peer with this node's own public_key" "$f" "$(grep -n -F "public_key = $OWNKEY" "$f" | cut -d: -f1)"
t_has "a peer with this node's own public_key: says so" "$ERR" "this node's own public_key"

t_section "the shipped examples parse (deploy/examples)"
EX=$(cd "$(dirname "$0")/../../deploy/examples" && pwd)
for ex in "$EX"/*.conf; do
	n=0
	f=$T_DIR/example-$(basename "$ex")
	while IFS= read -r line; do
		case $line in
		"public_key = REPLACE"*)
			n=$((n + 1))
			line="public_key = $(gd_site_keygen "$T_DIR/exkey$n")" ;;
		"secret_key = "*) line="secret_key = $T_SITE/node.key" ;;
		"data_dir = "*) line="data_dir = $T_DIR/exdata" ;;
		"repo_dir = "*) line="repo_dir = $T_DIR/exrepos" ;;
		*_socket\ =\ *) line="${line%% =*} = $T_DIR/exrun/${line##*/}" ;;
		esac
		printf '%s\n' "$line"
	done <"$ex" >"$f"
	t_expect 0 "$(basename "$ex") (peer keys and paths filled in): grantd -t exits 0" \
		"$GD_BIN/grantd" -t --config "$f"
done

t_section "no config"
t_expect 2 "grantd -t --config /nonexistent exits 2" "$GD_BIN/grantd" -t --config /nonexistent/grantd.conf
t_has "the error names the file" "$ERR" /nonexistent/grantd.conf
t_expect 2 "grantctl --config /nonexistent status exits 2" "$GD_BIN/grantctl" --config /nonexistent/grantd.conf status
t_expect 2 "grantd with an unknown option exits 2" "$GD_BIN/grantd" --frobnicate

t_section "node not running"
t_expect 3 "grantctl status exits 3 when the node is down" t_ctl status
t_has "and says the node cannot be reached" "${ERR,,}" "node"
t_expect 3 "grantctl user list exits 3 when the node is down" t_ctl user list
export SSH_CONNECTION="127.0.7.7 40000 127.0.0.1 22"
t_expect 3 "grant-shell 2fa isval exits 3 when the node is down" \
	env SSH_ORIGINAL_COMMAND="2fa isval" "$GD_BIN/grant-shell" --config "$CONF" alice
t_has "and says it is a server problem" "$ERR" "server problem"
t_hasnt "without naming the node's socket" "$ERR" "$T_DIR"
t_expect 3 "grant-shell git-receive-pack fails closed (exit 3) when the node is down" \
	env SSH_ORIGINAL_COMMAND="git-receive-pack 'demo'" "$GD_BIN/grant-shell" --config "$CONF" alice
t_has "and says it is a server problem" "$ERR" "server problem"
t_expect 3 "grant-keys fails (exit 3) when the node is down (sshd then lets no one in)" \
	"$GD_BIN/grant-keys" --config "$CONF" root
t_eq "and prints no key line" "$OUT" ""
t_has "and says it is a server problem" "$ERR" "server problem"
t_expect 3 "GRANTD_CONFIG is used without --config" env GRANTD_CONFIG="$CONF" "$GD_BIN/grantctl" status

# grant-keys says why (operator trial, 11): sshd shows the user only
# "Permission denied (publickey)", so the path and errno's text must be in
# grant-keys' own message (stderr and syslog).
FP=SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
t_expect 3 "grant-keys FP, node down: exit 3" "$GD_BIN/grant-keys" --config "$CONF" git "$FP"
t_has "names the keys socket" "$ERR" "$T_SITE/run/keys.sock"
t_has "with errno's text" "$ERR" "No such file or directory"
t_expect 2 "grant-keys with a config path that does not exist: exit 2" \
	"$GD_BIN/grant-keys" --config "$T_DIR/grantd.cnf" git "$FP"
t_has "names the path and why" "$ERR" "$T_DIR/grantd.cnf: No such file or directory"
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
	mkdir -m 0700 "$T_DIR/private"
	cp "$CONF" "$T_DIR/private/grantd.conf"
	t_expect 2 "grant-keys as nobody, config it may not read: exit 2" \
		setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$GD_BIN/grant-keys" --config "$T_DIR/private/grantd.conf" git "$FP"
	t_has "says Permission denied" "$ERR" "Permission denied"
fi

t_section "the node with the good config"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts with the good config"
t_expect 0 "grantctl status" t_ctl status
t_expect 0 "GRANTD_CONFIG is used without --config" env GRANTD_CONFIG="$CONF" "$GD_BIN/grantctl" status
t_expect 2 "grantd -t on a config whose node runs still checks and exits 2 on a bad file" \
	"$GD_BIN/grantd" -t --config "$T_DIR/unknown-node.conf"
t_expect 0 "grantctl status --json" t_ctl status --json
JSON=$OUT
t_eq "status --json: site" "$(t_json 'j["site"]' <<<"$JSON")" paloalto
t_check "status --json: digest is hex" eval '[[ $(t_json "j[\"digest\"]" <<<"$JSON") =~ ^[0-9a-f]{16,}$ ]]'
for k in users grants repos dropped; do
	t_check "status --json: counts.$k is a number" \
		eval '[[ $(t_json "j[\"counts\"][\"$k\"]" <<<"$JSON") =~ ^[0-9]+$ ]]'
done
t_eq "status --json: applied is an object" "$(t_json 'type(j["applied"]).__name__' <<<"$JSON")" dict
t_eq "status --json: peers is a list" "$(t_json 'type(j["peers"]).__name__' <<<"$JSON")" list
t_expect 0 "status (text) names the site" t_ctl status
t_has "status (text) names the site" "$OUT" paloalto
t_user ursula
t_expect 0 "repo add r1" t_ctl repo add r1
t_expect 0 "grantctl status --json" t_ctl status --json
t_eq "counts.users is 1" "$(t_json 'j["counts"]["users"]' <<<"$OUT")" 1
t_eq "counts.repos is 1" "$(t_json 'j["counts"]["repos"]' <<<"$OUT")" 1
t_check "the digest moved" eval '[[ $(t_json "j[\"digest\"]" <<<"$OUT") != $(t_json "j[\"digest\"]" <<<"$JSON") ]]'
t_expect 0 "user list --json" t_ctl user list --json
t_eq "user list --json names ursula" "$(t_json '[u["name"] for u in j]' <<<"$OUT")" '["ursula"]'

t_done
