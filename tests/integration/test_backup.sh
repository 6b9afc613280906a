#!/bin/bash
# grantctl backup DIR (SPEC 3.5): a consistent snapshot of the store and
# the repositories; a site restored from it (an old backup) and started
# with its peers catches up on everything done since, and the tokens used
# since are dead there too.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=64
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add bk --mode required --writer kim" t_c paloalto repo add bk --mode required --writer kim
t_expect 0 "paloalto: kim 2fa val <hotp 0>" t_sh paloalto 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect_converged "the three sites agree" 10
# the text status as the operator's trial asked for it (local quorum mode)
ST=$(t_c montreal status)
t_has "status: a syncing line, also when not syncing" "$ST" "syncing:  no"
t_check "status: the HLC with its wall-clock time" grep -qE '^hlc:      [0-9]+ \([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} UTC \+[0-9]+\)$' <<<"$ST"
t_has "status: dropped is named" "$ST" "dropped:  0 peer messages refused"
t_has "status: local quorum mode says so" "$ST" "quorum:   local (each site decides its tokens alone; no votes)"
t_hasnt "and shows no voter figure" "$ST" "voter="
W=$T_DIR/work
git init -q "$W"
commit() { echo "$1" >>"$W/f"; git -C "$W" add f; git -C "$W" -c user.name=t -c user.email=t@e commit -qm "$1"; }
push() { git -C "$W" push -q "$(t_dir paloalto)/repos/bk.git" HEAD:refs/heads/master; }
commit one
t_expect 0 "push a first commit to paloalto's bk" push
t_expect_soon 0 10 "montreal has it on disk" \
	eval "[[ \$(git --git-dir=$(t_dir montreal)/repos/bk.git rev-parse -q --verify master) == $(git -C "$W" rev-parse HEAD) ]]"

B=$T_DIR/backup
t_expect 0 "montreal: grantctl backup $B" t_c montreal backup "$B"
t_check "the backup holds a store checkpoint" test -e "$B/store/CURRENT"
t_check "the backup holds the repositories" test -d "$B/repos/bk.git"
# raw bytes, base32 or hex, in either case: none may be in the backup
t_expect 0 "no OTP secret in the clear in the backup (raw, base32, hex)" t_no_secret "$B" b32 "$KS"
t_expect 0 "nor in montreal's store (raw, base32, hex)" t_no_secret "$(t_dir montreal)/data" b32 "$KS"
t_expect 2 "montreal: backup into an existing directory is refused" t_c montreal backup "$B"
t_has "... saying it exists" "$ERR" "exists"
# a relative path is taken from grantctl's working directory; one whose
# parent does not exist is refused, naming it, and nothing is made
t_expect nz "montreal: backup to a relative path whose parent is missing is refused" \
	t_c montreal backup "no-such-dir.$$/backup"
t_has "... naming the path" "$ERR" "no-such-dir.$$/backup"
t_one_line "... in one line" "$ERR"
t_check "... and made nothing" test ! -e "no-such-dir.$$"
t_expect 2 "montreal: backup to an empty path is refused" t_c montreal backup ""

t_section "after the backup: more writes while montreal is lost"
t_expect 0 "portland: kim 2fa val <hotp 1> from 127.0.7.8" t_sh portland 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_suser portland tom
commit two
t_expect 0 "push a second commit to paloalto's bk" push
t_expect_converged "the three sites agree" 10
t_stop montreal
rm -rf "$(t_dir montreal)/data" "$(t_dir montreal)/repos"
cp -a "$B/store" "$(t_dir montreal)/data"
cp -a "$B/repos" "$(t_dir montreal)/repos"
t_start montreal
t_expect_converged "montreal, restored from the old backup, caught up" 20
t_expect 0 "montreal: has the grant made after the backup" t_c montreal check kim 127.0.7.8 bk
t_expect_soon 0 15 "montreal: bk's master is the commit pushed after the backup" \
	eval "[[ \$(git --git-dir=$(t_dir montreal)/repos/bk.git rev-parse -q --verify master) == $(git -C "$W" rev-parse HEAD) ]]"
t_expect 0 "montreal: bk passes git fsck --strict" git --git-dir="$(t_dir montreal)/repos/bk.git" fsck --strict --no-progress
t_expect_soon 1 10 "montreal: validating again" t_syncing montreal
t_expect 1 "montreal: <hotp 1> (used after the backup) is refused" t_sh montreal 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "montreal: <hotp 2> is accepted" t_sh montreal 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 2)"
t_expect_converged "all three agree" 10

t_done
