/*
 * test_ops_check.c: node/state/ops_check.c, the checks of an operation
 * from outside, one per body kind (its table of rows).
 *
 * Pure: no store.  For each body kind, a good operation passes; each
 * bound, one row of a table, is tried at its limit (passes) and one past
 * it (refused with the row's reason); and each row's other checks are
 * tried one by one.  The stamp is checked before any body, and a kind
 * with no row is refused as having no body.  test_ops.c keeps the older,
 * broader tables of names (sites, users, addresses).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ops.h"

#define OID0 "0000000000000000000000000000000000000000"
#define OID1 "1111111111111111111111111111111111111111"
#define KEY                                                                   \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHLAx+6EsJuGELLoK4oqtzjiFQlr/4K" \
	"ExvUYKBZ/LSGg k"

/* One operation of every kind, good, with room for the lists bounds are
 * tried on. */
struct all {
	Grantd__V1__Op op;
	Grantd__V1__User user;
	Grantd__V1__Enrollment enroll;
	Grantd__V1__Grant grant;
	Grantd__V1__Mark mark;
	Grantd__V1__Failures fail;
	Grantd__V1__Unlock unlock;
	Grantd__V1__Revocation revoke;
	Grantd__V1__AddrRevocation ar;
	Grantd__V1__Repo repo;
	Grantd__V1__RefUpdate refs;
	Grantd__V1__RefChange ch, *chp[OPS_MAX_REF_CHANGES + 1];
	Grantd__V1__PushLogEntry pl;
	char *keys[OPS_MAX_KEYS + 1];
	char *writers[4097];
	uint64_t at[OPS_MAX_FAILURES_KEPT + 1];
	uint8_t secret[129], hash[32];
};

static struct all a; /* large: not on the stack */

static Grantd__V1__Op *make(Grantd__V1__Op__BodyCase body)
{
	memset(&a, 0, sizeof(a));
	grantd__v1__op__init(&a.op);
	a.op.origin = "paloalto";
	a.op.epoch = 7, a.op.has_epoch = 1;
	a.op.seq = 1, a.op.has_seq = 1;
	a.op.hlc = 99, a.op.has_hlc = 1;
	a.op.body_case = body;
	switch (body) {
	case GRANTD__V1__OP__BODY_USER:
		grantd__v1__user__init(&a.user);
		a.user.name = "alice";
		for (size_t i = 0; i <= OPS_MAX_KEYS; i++)
			a.keys[i] = KEY;
		a.user.keys = a.keys, a.user.n_keys = 1;
		a.op.user = &a.user;
		break;
	case GRANTD__V1__OP__BODY_ENROLL:
		grantd__v1__enrollment__init(&a.enroll);
		a.enroll.user = "alice";
		a.enroll.kind = GRANTD__V1__OTP_KIND__OTP_TOTP;
		a.enroll.digits = 6, a.enroll.period = 30;
		a.enroll.secret.data = a.secret, a.enroll.secret.len = 20;
		a.op.enroll = &a.enroll;
		break;
	case GRANTD__V1__OP__BODY_GRANT:
		grantd__v1__grant__init(&a.grant);
		a.grant.user = "alice", a.grant.net = "192.0.2.0/24";
		a.grant.session = "", a.grant.site = "paloalto";
		a.op.grant = &a.grant;
		break;
	case GRANTD__V1__OP__BODY_MARK:
		grantd__v1__mark__init(&a.mark);
		a.mark.user = "alice";
		a.op.mark = &a.mark;
		break;
	case GRANTD__V1__OP__BODY_FAILURE:
		grantd__v1__failures__init(&a.fail);
		a.fail.user = "alice", a.fail.site = "paloalto";
		for (size_t i = 0; i <= OPS_MAX_FAILURES_KEPT; i++)
			a.at[i] = i + 1;
		a.fail.hlc = a.at, a.fail.n_hlc = 1;
		a.op.failure = &a.fail;
		break;
	case GRANTD__V1__OP__BODY_UNLOCK:
		grantd__v1__unlock__init(&a.unlock);
		a.unlock.user = "alice";
		a.op.unlock = &a.unlock;
		break;
	case GRANTD__V1__OP__BODY_REVOKE:
		grantd__v1__revocation__init(&a.revoke);
		a.revoke.user = "alice";
		a.op.revoke = &a.revoke;
		break;
	case GRANTD__V1__OP__BODY_ADDR_REVOKE:
		grantd__v1__addr_revocation__init(&a.ar);
		a.ar.user = "alice", a.ar.net = "192.0.2.7";
		a.op.addr_revoke = &a.ar;
		break;
	case GRANTD__V1__OP__BODY_REPO:
		grantd__v1__repo__init(&a.repo);
		a.repo.name = "pub/demo";
		a.repo.mode = GRANTD__V1__REPO_MODE__MODE_OFF;
		for (size_t i = 0; i < 4097; i++)
			a.writers[i] = "bob";
		a.repo.writers = a.writers, a.repo.n_writers = 1;
		a.op.repo = &a.repo;
		break;
	case GRANTD__V1__OP__BODY_REFS:
	case GRANTD__V1__OP__BODY_PUSH_LOG:
		grantd__v1__ref_change__init(&a.ch);
		a.ch.ref = "refs/heads/main", a.ch.old = OID0, a.ch.new_ = OID1;
		for (size_t i = 0; i <= OPS_MAX_REF_CHANGES; i++)
			a.chp[i] = &a.ch;
		grantd__v1__ref_update__init(&a.refs);
		a.refs.repo = "demo";
		a.refs.changes = a.chp, a.refs.n_changes = 1;
		a.op.refs = &a.refs;
		if (body == GRANTD__V1__OP__BODY_REFS)
			break;
		grantd__v1__push_log_entry__init(&a.pl);
		a.pl.origin = "paloalto", a.pl.n = 1;
		a.pl.hlc = 99, a.pl.has_hlc = 1;
		a.pl.repo = "demo";
		a.pl.prev.data = a.hash, a.pl.prev.len = 32;
		a.pl.hash.data = a.hash, a.pl.hash.len = 32;
		a.pl.changes = a.chp, a.pl.n_changes = 1;
		a.op.push_log = &a.pl;
		break;
	default:
		break;
	}
	return &a.op;
}

static void passes(const Grantd__V1__Op *op)
{
	struct buf err = BUF_INIT;

	if (ops_check(op, &err) != 0)
		fail_msg("ops_check refused body=%d: %s", op->body_case,
		         buf_str(&err));
	buf_free(&err);
}

static void refused(const Grantd__V1__Op *op, const char *why)
{
	struct buf err = BUF_INIT;

	assert_int_equal(ops_check(op, &err), GD_EPROTO);
	assert_string_equal(buf_str(&err), why);
	buf_free(&err);
}

static const Grantd__V1__Op__BodyCase kinds[] = {
        GRANTD__V1__OP__BODY_USER,     GRANTD__V1__OP__BODY_ENROLL,
        GRANTD__V1__OP__BODY_GRANT,    GRANTD__V1__OP__BODY_MARK,
        GRANTD__V1__OP__BODY_FAILURE,  GRANTD__V1__OP__BODY_UNLOCK,
        GRANTD__V1__OP__BODY_REVOKE,   GRANTD__V1__OP__BODY_ADDR_REVOKE,
        GRANTD__V1__OP__BODY_REPO,     GRANTD__V1__OP__BODY_REFS,
        GRANTD__V1__OP__BODY_PUSH_LOG,
};

/* Every kind has a row, its good operation passes, and its user (where it
 * has one) is checked by its row. */
static void test_every_kind(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		passes(make(kinds[i]));
	refused(make(GRANTD__V1__OP__BODY__NOT_SET), "no body");
	make(GRANTD__V1__OP__BODY_USER)->user->name = "Alice";
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_ENROLL)->enroll->user = NULL;
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_GRANT)->grant->user = "al ice";
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_MARK)->mark->user = "";
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_UNLOCK)->unlock->user = "-x";
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_REVOKE)->revoke->user = NULL;
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_ADDR_REVOKE)->addr_revoke->user = "A";
	refused(&a.op, "bad user name");
	make(GRANTD__V1__OP__BODY_FAILURE)->failure->user = "A";
	refused(&a.op, "bad failure record");
}

/* The stamp is checked first, whatever the body. */
static void test_stamp_first(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		make(kinds[i])->origin = "Palo Alto";
		refused(&a.op, "bad origin");
		make(kinds[i])->seq = 0;
		refused(&a.op, "missing stamp");
		make(kinds[i])->has_hlc = 0;
		refused(&a.op, "missing stamp");
	}
	make(GRANTD__V1__OP__BODY__NOT_SET)->origin = NULL;
	refused(&a.op, "bad origin");
	make(GRANTD__V1__OP__BODY_USER)->epoch = 0;
	a.user.name = "Alice"; /* the body is bad too: the stamp is named */
	refused(&a.op, "missing stamp");
}

/* ---- bounds ------------------------------------------------------------ */

/* Setters of one bounded field of the operation make() just built. */
static void set_keys(size_t n)
{
	a.user.n_keys = n;
}

static void set_secret(size_t n)
{
	a.enroll.secret.len = n;
}

static void set_scratch(size_t n)
{
	a.enroll.n_scratch = n;
}

static void set_period(size_t n)
{
	a.enroll.period = (uint32_t)n;
}

static void set_session(size_t n)
{
	static char s[258];

	memset(s, 'x', n);
	s[n] = '\0';
	a.grant.session = s;
}

static void set_attempts(size_t n)
{
	a.fail.n_hlc = n;
}

static void set_writers(size_t n)
{
	a.repo.n_writers = n;
}

static void set_ref_changes(size_t n)
{
	a.refs.n_changes = n;
}

static void set_log_changes(size_t n)
{
	a.pl.n_changes = n;
}

/* One bound: in a fresh make(body), set(limit) passes and set(limit + 1)
 * is refused with why. */
static const struct bound {
	const char *what;
	Grantd__V1__Op__BodyCase body;
	void (*set)(size_t n);
	size_t limit;
	const char *why;
} bounds[] = {
        {"keys", GRANTD__V1__OP__BODY_USER, set_keys, OPS_MAX_KEYS,
         "too many keys"},
        {"secret", GRANTD__V1__OP__BODY_ENROLL, set_secret, 128,
         "enrollment out of bounds"},
        {"scratch codes", GRANTD__V1__OP__BODY_ENROLL, set_scratch, 16,
         "enrollment out of bounds"},
        {"period", GRANTD__V1__OP__BODY_ENROLL, set_period, 300,
         "bad enrollment settings"},
        {"session", GRANTD__V1__OP__BODY_GRANT, set_session, 256,
         "grant out of bounds"},
        {"attempts", GRANTD__V1__OP__BODY_FAILURE, set_attempts,
         OPS_MAX_FAILURES_KEPT, "bad failure record"},
        {"writers", GRANTD__V1__OP__BODY_REPO, set_writers, 4096,
         "too many writers"},
        {"ref changes", GRANTD__V1__OP__BODY_REFS, set_ref_changes,
         OPS_MAX_REF_CHANGES, "ref update out of bounds"},
        {"push log changes", GRANTD__V1__OP__BODY_PUSH_LOG, set_log_changes,
         OPS_MAX_REF_CHANGES, "push log entry out of bounds"},
};

static void test_bounds(void **state)
{
	(void)state;
	for (size_t i = 0; i < GD_ARRAY_SIZE(bounds); i++) {
		const struct bound *b = &bounds[i];
		struct buf err = BUF_INIT;
		make(b->body);
		b->set(b->limit);
		if (ops_check(&a.op, &err) != 0)
			fail_msg("%s at its limit %zu refused: %s", b->what,
			         b->limit, buf_str(&err));
		b->set(b->limit + 1);
		buf_reset(&err);
		if (ops_check(&a.op, &err) != GD_EPROTO ||
		    strcmp(buf_str(&err), b->why))
			fail_msg("%s past its limit %zu: \"%s\", not \"%s\"",
			         b->what, b->limit, buf_str(&err), b->why);
		buf_free(&err);
	}
}

/* What else each row checks besides its bounds. */
static void test_user_enroll_shapes(void **state)
{
	(void)state;
	make(GRANTD__V1__OP__BODY_USER)->user->keys[0] = "ssh-ed25519";
	refused(&a.op, "bad ssh key");

	make(GRANTD__V1__OP__BODY_ENROLL)->enroll->digits = 7;
	refused(&a.op, "bad enrollment settings");
	a.enroll.digits = 8, a.enroll.period = 10;
	passes(&a.op);
	a.enroll.period = 301, a.enroll.deleted = 1; /* a deletion carries
	                                              * no settings */
	passes(&a.op);
	a.enroll.deleted = 0, a.enroll.period = 300, a.enroll.secret.len = 0;
	refused(&a.op, "bad enrollment settings");
}

static void test_grant_failure_shapes(void **state)
{
	(void)state;
	make(GRANTD__V1__OP__BODY_GRANT)->grant->net = "192.0.2.300";
	refused(&a.op, "bad grant address");
	a.grant.net = NULL;
	refused(&a.op, "bad grant address");

	make(GRANTD__V1__OP__BODY_FAILURE);
	a.fail.n_hlc = 2, a.at[1] = 0; /* an attempt without a stamp */
	refused(&a.op, "bad failure record");
	a.at[1] = 2, a.fail.site = "Palo";
	refused(&a.op, "bad failure record");
}

static void test_addr_repo_shapes(void **state)
{
	(void)state;
	make(GRANTD__V1__OP__BODY_ADDR_REVOKE)->addr_revoke->net =
	        "2001:db8::1";
	passes(&a.op);
	a.ar.net = "2001:DB8::1"; /* another spelling of one address */
	refused(&a.op, "bad revoked address");
	a.ar.net = "nowhere";
	refused(&a.op, "bad revoked address");

	make(GRANTD__V1__OP__BODY_REPO)->repo->writers[0] = "Bob";
	refused(&a.op, "bad writer name");
	a.writers[0] = "bob", a.repo.mode = (Grantd__V1__RepoMode)9;
	refused(&a.op, "bad repository mode");
	a.repo.mode = GRANTD__V1__REPO_MODE__MODE_REQUIRED;
	a.repo.fork_of = "pub//x";
	refused(&a.op, "bad fork parent");
	a.repo.fork_of = "", a.repo.name = "../etc";
	refused(&a.op, "bad repository name");
}

static void test_refs_pushlog_shapes(void **state)
{
	(void)state;
	make(GRANTD__V1__OP__BODY_REFS)->refs->n_changes = 0;
	refused(&a.op, "ref update out of bounds");
	a.refs.n_changes = 1, a.ch.ref = "refs/grantd/conflicts/x";
	refused(&a.op, "bad ref name");
	a.ch.ref = "refs/heads/main", a.ch.new_ = "1111";
	refused(&a.op, "bad object id");

	make(GRANTD__V1__OP__BODY_PUSH_LOG)->push_log->origin = "other";
	refused(&a.op, "push log entry of another origin");
	a.pl.origin = "paloalto", a.pl.hlc = 98;
	refused(&a.op, "push log entry without number or stamp");
	a.pl.hlc = 99, a.pl.hash.len = 31;
	refused(&a.op, "push log entry without its hashes");
	a.pl.hash.len = 32, a.pl.client_ip = "not an address";
	refused(&a.op, "bad client address");
}

static void test_names(void **state)
{
	(void)state;
	assert_true(ops_oid_ok(OID1));
	assert_false(ops_oid_ok(NULL));
	assert_false(ops_oid_ok("111111111111111111111111111111111111111A"));
	assert_false(ops_oid_ok(OID1 "1"));
	assert_true(ops_ref_name_ok("refs/heads/main"));
	assert_true(ops_ref_name_ok("refs/tags/v1.0"));
	static const char *const bad[] = {
	        NULL,
	        "HEAD",
	        "refs/",
	        "refs/grantd/x",
	        "refs/heads/",
	        "refs/heads/a.",
	        "refs/heads/a..b",
	        "refs/heads//a",
	        "refs/heads/.a",
	        "refs/heads/a@{1}",
	        "refs/heads/a.lock",
	        "refs/heads/a b",
	        "refs/heads/a~1",
	        "refs/heads/a:b",
	        "refs/heads/a\\b",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ops_ref_name_ok(bad[i]))
			fail_msg("ref name passed: %s", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_every_kind),
	        cmocka_unit_test(test_stamp_first),
	        cmocka_unit_test(test_bounds),
	        cmocka_unit_test(test_user_enroll_shapes),
	        cmocka_unit_test(test_grant_failure_shapes),
	        cmocka_unit_test(test_addr_repo_shapes),
	        cmocka_unit_test(test_refs_pushlog_shapes),
	        cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
