#!/bin/bash
# grant-log (issue 21 point 3, SPEC 9, grant-log(1)): checking a site's push
# log from its HTTP log alone.  tests/tools/tlog_gen writes a static log
# with the library the node uses (entries in the leaf text, C2SP tiles and
# entry bundles, a checkpoint signed by the origin's key and cosigned by
# two witnesses, all from fixed seeds); python3 -m http.server serves it.
# Every command on a good log, then a dishonest server: a checkpoint signed
# by another key, one cosignature missing, a tile with a flipped byte, an
# entry bundle with a changed entry, a log that grew (passes, state kept), a
# log rewritten (a fork: exit 1, both checkpoints kept), and a mirror that
# serves a branch tip that is not the logged one (tip: exit 1 naming it).
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[[ -x $GD_BIN/tlog_gen && -x $GD_BIN/grant-log ]] ||
	{ echo "FAIL: no tlog_gen or grant-log in $GD_BIN"; exit 1; }

W=$T_DIR/www # what the server serves
S=$T_DIR/state # grant-log's state directory
PORT=$T_SSH_PORT # free on T_ADDR (lib.sh), and no sshd here
URL=http://$T_ADDR:$PORT
KEPT=$S/logtest.example%2Fgrantd%2Fpaloalto
SRV_PID=

gl_cleanup() {
	[[ -n $SRV_PID ]] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
	t_cleanup
}
trap gl_cleanup EXIT

# gen N [tlog_gen options]: the log of paloalto with N entries, afresh
gen() {
	rm -rf "$W/log"
	"$GD_BIN/tlog_gen" "$W" paloalto "$@" || t_fatal "tlog_gen $*"
}
# gl ARGS: grant-log with the generated keys file
gl() { "$GD_BIN/grant-log" --keys "$W/keys" --state "$S" "$URL" paloalto "$@"; }
# tip_of REPO: the object id the generator logged last for REPO's ref
tip_of() { awk -v r="$1" '$1 == r { print $3 }' "$W/tips"; }
at_of() { awk -v r="$1" '$1 == r { print $4 }' "$W/tips"; }
# flip FILE OFFSET: one bit of FILE changed
flip() {
	python3 -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read()); b[o] ^= 1; open(p, "wb").write(b)' "$1" "$2"
}
served() { curl -sf -o /dev/null "$URL/log/paloalto/checkpoint"; }

mkdir -p "$W"
gen 300
python3 -m http.server --bind "$T_ADDR" "$PORT" --directory "$W" \
	>"$T_DIR/http.log" 2>&1 &
SRV_PID=$!
gd_wait_for "$GD_TIMEOUT" served || t_fatal "python3 -m http.server on $URL"

t_section "a good log"
t_expect 0 "checkpoint: the good log checks" gl checkpoint
t_has "it prints the origin" "$OUT" "origin logtest.example/grantd/paloalto"
t_has "and the size" "$OUT" "size 300"
t_has "and both witnesses" "$OUT" \
	"witnesses logtest.example/grantd/w1 logtest.example/grantd/w2"
t_has "and no previous checkpoint" "$OUT" "previous -"
t_check "the checkpoint is kept" cmp -s "$KEPT" "$W/log/paloalto/checkpoint"
t_expect 0 "checkpoint again: the same tree" gl checkpoint
t_has "now with the kept size" "$OUT" "previous 300"
t_expect 0 "verify: the tree and tiles recomputed from the entries" gl verify
t_has "it counts the entries and tiles" "$OUT" "verified 300 entries and 3 tiles"
t_expect 0 "prove 257 (in the second bundle)" gl prove 257
t_has "it prints the entry" "$OUT" $'origin paloalto\nindex 257\n'
t_expect 0 "prove 0" gl prove 0
t_expect 1 "prove 300: not in the tree" gl prove 300
t_one_line "one line says so" "$ERR"
t_expect 0 "tip of the logged object id: exit 0" \
	gl tip linux refs/heads/main "$(tip_of linux)"
t_has "it names the entry" "$OUT" "logged as paloalto#$(at_of linux)"
t_expect 0 "tip of linux.git, the id in capitals" \
	gl tip linux.git refs/heads/main "$(tip_of linux | tr a-f A-F)"
t_expect 1 "tip of a ref never logged" gl tip linux refs/heads/nothing "$(tip_of linux)"
t_has "it says so" "$ERR" "refs/heads/nothing in linux never logged"
t_expect 0 "keys on the command line, as grantctl log key prints them" \
	"$GD_BIN/grant-log" --key "$(<"$W/origin.vkey")" \
	--witness "$(<"$W/w1.vkey")" --witness "$(<"$W/w2.vkey")" \
	--state "$S" "$URL" paloalto checkpoint

t_section "usage"
t_expect 2 "no origin key" "$GD_BIN/grant-log" --state "$S" "$URL" paloalto checkpoint
t_one_line "one line" "$ERR"
t_expect 2 "--quorum 3 with two witnesses" "$GD_BIN/grant-log" --keys "$W/keys" \
	--quorum 3 --state "$S" "$URL" paloalto checkpoint
t_expect 2 "an unknown command" gl frobnicate
t_expect 2 "tip of a short ref name" gl tip linux main "$(tip_of linux)"
t_expect 2 "a witness that is no key" "$GD_BIN/grant-log" --keys "$W/keys" \
	--witness nonsense --state "$S" "$URL" paloalto checkpoint
t_has "it names it" "$ERR" "'nonsense'"
t_expect 3 "nothing served there: exit 3" \
	"$GD_BIN/grant-log" --keys "$W/keys" --state "$S" "$URL" tokyo checkpoint
t_has "it names the URL" "$ERR" "$URL/log/tokyo/checkpoint: HTTP status 404"

t_section "a checkpoint signed by another key"
gen 300 --signer other
t_expect 1 "checkpoint: refused" gl checkpoint
t_has "not signed by the origin's key" "$ERR" "not signed by its key"
t_one_line "one line" "$ERR"
t_expect 1 "verify: refused too" gl verify
t_expect 1 "no key named as the origin: refused" "$GD_BIN/grant-log" \
	--key "$(<"$W/w1.vkey")" --state "$S" "$URL" paloalto checkpoint
t_has "it names the origin" "$ERR" "no origin key named 'logtest.example/grantd/paloalto'"

t_section "a cosignature missing"
gen 300 --cosigners 1
t_expect 1 "quorum 2 with one cosignature: refused" gl checkpoint
t_has "it counts them" "$ERR" "cosigned by 1 witness, quorum 2"
t_one_line "one line" "$ERR"
t_expect 0 "--quorum 1: accepted" "$GD_BIN/grant-log" --keys "$W/keys" \
	--quorum 1 --state "$S" "$URL" paloalto checkpoint

t_section "a tile with a flipped byte"
gen 300
cp "$W/log/paloalto/tile/0/000" "$T_DIR/tile0"
flip "$W/log/paloalto/tile/0/000" 100
t_expect 1 "prove 5: the tiles do not match" gl prove 5
t_has "it says so" "$ERR" "do not match the checkpoint"
t_expect 1 "verify: refused" gl verify
t_has "it names the tile" "$ERR" "$URL/log/paloalto/tile/0/000 does not match the tree of the entries"
t_one_line "one line" "$ERR"
cp "$T_DIR/tile0" "$W/log/paloalto/tile/0/000"
t_expect 0 "the tile restored: verify passes" gl verify

t_section "an entry bundle with a changed entry"
python3 -c 'import sys
p = sys.argv[1]; b = open(p, "rb").read()
old = b"index 7\ntime 1760000007000\nrepo linux\n"
assert old in b
open(p, "wb").write(b.replace(old, b"index 7\ntime 1760000007000\nrepo linuz\n"))' \
	"$W/log/paloalto/tile/entries/000" || t_fatal "change entry 7"
t_expect 1 "verify: refused" gl verify
t_has "the entries do not hash to the root" "$ERR" "do not hash to its checkpoint's root"
t_has "it names the bundle" "$ERR" "$URL/log/paloalto/tile/entries/000"
t_expect 1 "prove 7: refused" gl prove 7
t_has "it names the entry" "$ERR" "entry 7 in $URL/log/paloalto/tile/entries/000 is not the one"
t_expect 0 "prove 8: its neighbour still proves" gl prove 8

t_section "a log that grew consistently"
gen 700
t_expect 0 "checkpoint: consistent with the kept one" gl checkpoint
t_has "size 700" "$OUT" "size 700"
t_has "proved from 300" "$OUT" "previous 300"
t_check "the kept checkpoint is the new one" cmp -s "$KEPT" "$W/log/paloalto/checkpoint"
t_expect 0 "verify the grown log" gl verify
t_has "700 entries" "$OUT" "verified 700 entries"

t_section "a log rewritten: a fork"
cp "$KEPT" "$T_DIR/kept700"
gen 800 --variant 1 --from 500
t_expect 1 "checkpoint: not consistent" gl checkpoint
t_has "it is a fork" "$ERR" "fork: checkpoint of 'logtest.example/grantd/paloalto' size 800"
t_has "naming the kept one" "$ERR" "kept size 700"
t_one_line "one line" "$ERR"
t_check "the kept checkpoint stays" cmp -s "$KEPT" "$T_DIR/kept700"
FORK=$(ls "$S" | grep -F '.fork-800-')
t_check "the served one is kept beside it" cmp -s "$S/$FORK" "$W/log/paloalto/checkpoint"
t_has "the error names both files" "$ERR" "$KEPT and $S/$FORK"
t_expect 1 "and the next run fails too" gl tip linux refs/heads/main "$(tip_of linux)"
t_has "on the fork" "$ERR" "fork"
gen 700 --variant 1 --from 500
t_expect 1 "the same size, another root: a fork" gl checkpoint

t_section "a mirror serving a branch tip that is not the logged one"
gen 700
t_expect 0 "the honest log checks again" gl checkpoint
logged=$(tip_of linux)
mirror=$(printf 'mirror tip' | sha1sum | cut -c1-40)
t_expect 0 "tip of the logged object id: 0" gl tip linux refs/heads/main "$logged"
t_expect 1 "tip of the mirror's object id: 1" gl tip linux refs/heads/main "$mirror"
t_has "naming the logged one and its entry" "$ERR" \
	"refs/heads/main in linux is $logged in the log (paloalto#$(at_of linux)), not $mirror"
t_one_line "one line" "$ERR"
t_expect 0 "the other repository's ref" gl tip git refs/heads/next "$(tip_of git)"

t_done
