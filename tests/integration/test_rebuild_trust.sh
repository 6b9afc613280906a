#!/bin/bash
# `grantctl rebuild --from SITE --trust-unsigned` (docs/security.md
# "Upgraded stores", docs/operations.md section 6b; node/peers/repl_xfer.c):
# records written by the last release (deploy/releases, built as
# test_upgrade.sh builds it) keep no signed operations.  The three sites
# make users, enrollments, grants and token marks on it, then all move to
# this build with peers' keys set and the attest job held off
# (GRANTD_TEST_FAULT_AT=no-attest, node/daemon/crashpoint.h), so those records stay
# without operations.  With `oplog_retention = 2s`, montreal, wiped,
# catches up by state transfer only:
#  - plain, it refuses every record without operations whose origin has a
#    key (replication.dropped.signature grows by the transfer's refused
#    count) and does not converge;
#  - `rebuild --from paloalto --trust-unsigned` takes them, counts each in
#    replication.unsigned_records_trusted (as many as the plain transfer
#    refused), and montreal converges to the digest it had.
. "$(dirname "$0")/lib.sh"

NEW_BIN=$GD_BIN
# the last release (REL_TAG, REL_COMMIT, build_release)
. "$(dirname "$0")/release_lib.sh"

OLD_BIN=$(build_release "$REL_COMMIT") || t_fatal "build $REL_TAG"

# each site runs $T_DIR/bin.SITE (release_lib.sh: release_link, start_site,
# gd_grantctl, sh_at)
use_release() { release_link "$@"; }
dropped() { t_sj "$1" "j['replication'].get('dropped', {}).get('$2', 0)"; }
trusted() { t_sj "$1" "j['replication']['unsigned_records_trusted']"; }

t_section "three sites on $REL_TAG ($OLD_BIN), oplog_retention = 2s"
# the old release knows no verifier_key (docs/upgrading.md)
GD_VERIFIER_KEYS=0 t_cluster_config lockout_failures=50 oplog_retention=2s
for s in "${T_SITES[@]}"; do use_release "$s" old; start_site "$s"; done
for s in "${T_SITES[@]}"; do
	gd_wait_for 20 gd_peers_connected "$T_DIR/$s" || t_fatal "$s hears both peers within 20 s"
done
declare -A AT=([ann]=paloalto [bob]=portland [cat]=montreal)
declare -A SRC=([ann]=127.0.21.1 [bob]=127.0.21.2 [cat]=127.0.21.3)
for u in ann bob cat; do
	s=${AT[$u]}
	t_suser "$s" "$u"
	sec=$(gd_base32_secret)
	t_expect 0 "$s: enroll $u --hotp" t_c "$s" enroll "$u" --hotp --secret "$sec" --digits 6
	t_expect 0 "$s: $u validates from ${SRC[$u]} (a grant and a mark)" \
		sh_at "$s" "${SRC[$u]}" "$u" 2fa val "$(t_hotp "$sec" 0)"
done
t_expect_converged "users, enrollments, grants and marks everywhere" 20
t_expect 0 "paloalto: repo add up --mode required --writer ann --writer bob --writer cat" \
	t_c paloalto repo add up --mode required --writer ann --writer bob --writer cat
t_expect_converged "the three sites on $REL_TAG agree" 20

t_section "all on this build, keys set, the attest job held off"
for s in "${T_SITES[@]}"; do
	t_stop "$s"
	use_release "$s" new
	set_verifier_keys "$s"
done
for s in "${T_SITES[@]}"; do GRANTD_TEST_FAULT_AT=no-attest start_site "$s"; done
t_expect_converged "the three sites agree on this build" 30
for s in "${T_SITES[@]}"; do
	t_check "$s's log says the attest job is held off" t_grep_log "$s" "point=no-attest"
	t_check "$s attested nothing" eval '! t_grep_log "$s" "records made before signing: done"'
done
D0=$(t_sdigest paloalto)
for u in ann bob cat; do
	t_expect 0 "paloalto: check $u ${SRC[$u]} up is allowed" t_c paloalto check "$u" "${SRC[$u]}" up
done

t_section "montreal wiped: its state transfer refuses the records without operations"
t_stop montreal
rm -rf "$T_DIR/montreal/data" "$T_DIR/montreal/repos"
GRANTD_TEST_FAULT_AT=no-attest start_site montreal
t_expect 0 "montreal: grantctl rebuild --from paloalto" t_c montreal rebuild --from paloalto
refused_line() { grep -m1 -o 'state transfer done peer=[a-z]* records=[0-9]* refused=[0-9]*' "$T_DIR/montreal/grantd.log"; }
t_expect_soon 0 30 "montreal: a state transfer done with records refused" refused_line
N=$(refused_line | sed 's/.*refused=//')
# what the three sites made on $REL_TAG: 3 users, 3 enrollments, 3 grants,
# 3 marks and 1 repository, each of an origin with a key (a mark: any key)
t_eq "montreal refused every record made on $REL_TAG ($(refused_line))" "$N" 13
# refusals of one reason are logged at most once a second (repl_stat.c):
# a relayed unsigned operation of montreal's old epoch may take the first
# slot, and the next transfer's refusal the next
t_expect_soon 0 10 "montreal's log names one: no signed operations with it" \
	t_grep_log montreal "no signed operations with it"
# (status is refreshed each tick: polled)
t_expect_soon 0 5 "montreal: replication.dropped.signature >= $N (a new node: from 0)" \
	eval '(( $(dropped montreal signature) >= N ))'
t_eq "montreal: replication.unsigned_records_trusted" "$(trusted montreal)" 0
t_check "montreal does not converge (5 s)" eval '! t_wait_converged 5'
t_expect 1 "montreal: check ann ${SRC[ann]} up is refused (paloalto's grant not taken)" \
	t_c montreal check ann "${SRC[ann]}" up

t_section "rebuild --from paloalto --trust-unsigned"
t_expect 0 "montreal: grantctl rebuild --from paloalto --trust-unsigned" \
	t_c montreal rebuild --from paloalto --trust-unsigned
t_has "says the records without operations are trusted" "$OUT" "without signed operations are trusted"
t_check "montreal's log: rebuild from paloalto trusting records without signed operations" \
	t_grep_log montreal "rebuild from paloalto trusting records without signed operations"
done_line() { grep -m1 -o 'rebuild from paloalto done: [0-9]* records' "$T_DIR/montreal/grantd.log"; }
t_expect_soon 0 30 "montreal: the trusting rebuild is done" done_line
T=$(done_line | awk '{print $5}')
t_eq "montreal trusted as many records as the plain transfer refused" "$T" "$N"
t_expect_soon 0 5 "montreal: replication.unsigned_records_trusted counts each ($T)" \
	eval '[[ $(trusted montreal) == "$T" ]]'
t_expect_converged "the rebuilt montreal converges" 30
t_eq "montreal's digest is the one before the wipe" "$(t_sdigest montreal)" "$D0"
for u in ann bob cat; do
	t_expect 0 "montreal: check $u ${SRC[$u]} up is allowed" t_c montreal check "$u" "${SRC[$u]}" up
done
t_eq "montreal: still counted once, after the transfers" "$(trusted montreal)" "$T"
t_done
