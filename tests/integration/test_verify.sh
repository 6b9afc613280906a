#!/bin/bash
# grantctl verify (SPEC 3.5; issue 8 item 14): the state digest recomputed
# from the records on disk, family by family, against the live one and the
# stored one; exit 0 when they agree.  (A digest that parted from its
# records is made in test_ops.c's test_verify, which writes a record behind
# the digest's back: exit 1 naming the family is checked there, on
# ops_verify.)  Every multi-site test runs it after each convergence
# (t_expect_converged) and t_done runs it at every running node.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user alice
t_user bob
t_expect 0 "repo add v --mode opt-in --writer alice" t_ctl repo add v --mode opt-in --writer alice
t_expect 0 "enroll alice (hotp)" t_ctl enroll alice --hotp --secret "$(gd_base32_secret)"

t_section "text"
t_expect 0 "grantctl verify exits 0" t_ctl verify
t_has "it names the site" "$OUT" "site:       paloalto"
digest=$(t_digest)
t_has "live is status's digest" "$OUT" "live:       $digest"
t_has "the stored digest is the same" "$OUT" "stored:     $digest"
t_has "the recomputed digest is the same" "$OUT" "recomputed: $digest"
t_has "users: two records" "$OUT" "family:     users    records=2"
t_has "repositories: one record" "$OUT" "family:     repos    records=1"
t_has "enrollments are covered" "$OUT" "family:     enroll   records=1"
t_hasnt "no family differs" "$OUT" "DIFFERS"

t_section "json"
t_expect 0 "grantctl verify --json exits 0" t_ctl verify --json
j=$OUT
t_eq "equal is true" "$(t_json "j['equal']" <<<"$j")" true
t_eq "recomputed == live == status digest" \
	"$(t_json "j['recomputed'] == j['live'] == j['stored'] == '$digest'" <<<"$j")" true
t_eq "twelve families, refs, revocations, address revocations, the push log and its transparency log's leaves among them" \
	"$(t_json "sorted(f['family'] for f in j['families'])" <<<"$j")" \
	'["addrrevokes", "enroll", "fails", "grants", "marks", "pushlog", "refs", "repos", "revokes", "tleaves", "unlock", "users"]'
t_eq "none differs" "$(t_json "j['differs']" <<<"$j")" '[]'
t_eq "each family's live share equals its recomputed one" \
	"$(t_json "all(f['live'] == f['recomputed'] and f['equal'] for f in j['families'])" <<<"$j")" true

t_section "after a restart"
gd_grantd_stop "$T_SITE" || t_fail "grantd stops"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts again"
t_expect 0 "grantctl verify exits 0 after a restart" t_ctl verify
t_eq "the digest is the same as before" "$(t_digest)" "$digest"
t_hasnt "the node found nothing to mend at start" "$(<"$T_SITE/grantd.log")" "did not match the records"

t_section "status, answered off the writer, shows a write at once"
# the reader thread answers status from what the writer published with
# the write's durable view, before the write's reply went out
for i in 1 2 3 4 5; do
	t_user "v$i"
	t_eq "status counts user v$i at once" \
		"$(t_ctl status --json | t_json 'j["counts"]["users"]')" $((2 + i))
	t_eq "status's digest is verify's live one" \
		"$(t_ctl verify --json | t_json "j['live'] == '$(t_digest)'")" true
done
t_expect 0 "grantctl status (text)" t_ctl status
t_has "text counts 7 users" "$OUT" "users:    7"

t_section "usage"
t_expect 0 "grantctl --help" t_ctl --help
t_has "--help names verify" "$OUT" "verify [--json]"
t_expect 2 "grantctl verify extra-arg is a usage error" t_ctl verify extra-arg
t_done
