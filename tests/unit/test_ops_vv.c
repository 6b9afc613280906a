/*
 * test_ops_vv.c: the version vector over many starts (node/state/ops.h,
 * retiring finished epochs; issue 8, item 7).
 *
 * Every start of a node makes a new epoch, so the vector (and every
 * heartbeat, which carries it whole) grew by one entry per start, for
 * good; past 4,096 entries every peer dropped the node's heartbeats.  These
 * tests open real stores (RocksDB, on tmpfs when there is one: 5,000
 * starts are 5,000 synced commits), restart one node's ops module 5,000
 * times with a write each time, let a peer apply the writes, and check
 * that both vectors stay bounded once the peer holds the finished epochs,
 * and that the sum per origin (status "applied") never changes.  A
 * separate file from test_ops.c so that it has its own time limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "store.h"

#define EPOCH      UINT64_C(0x00e90c0000000001)
#define HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))

struct node {
	char store_dir[128];
	char site[16];
	struct config cfg;
	struct store *s;
	struct ops *o;
	bool open;
};

struct fixture {
	char dir[64];
	struct node n[2];
};

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_vv sealing key 0123456789ab";

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_vv", LOG_LVL_WARN);
}

/* on tmpfs when there is one: 5,000 starts are 5,000 synced commits */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_vv", true) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 2; i++)
		if (f->n[i].open)
			fx_store_close(&f->n[i].s, &f->n[i].o);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

static struct node *node_open(struct fixture *f, int i)
{
	struct node *n = &f->n[i];
	char dir[sizeof(f->dir)];
	bool created = false;

	/* a copy: gcc -O2 sees f->dir and n->store_dir in one object and
	 * calls the snprintf an overlap (-Wrestrict) */
	memcpy(dir, f->dir, sizeof(dir));
	snprintf(n->store_dir, sizeof(n->store_dir), "%s/store%d", dir, i);
	snprintf(n->site, sizeof(n->site), "node%d", i);
	memset(&n->cfg, 0, sizeof(n->cfg));
	n->cfg.site = n->site;
	/* the fixture's, which outlives the node (was a local array) */
	n->cfg.repo_dir = f->dir;
	assert_int_equal(store_open(&n->s, &created, n->store_dir, seal_key),
	                 0);
	assert_int_equal(ops_open(&n->o, n->s, &n->cfg, created), 0);
	n->open = true;
	return n;
}

/* An operation adding user name. */
struct top {
	Grantd__V1__Op op;
	Grantd__V1__User user;
};

static Grantd__V1__Op *op_user(struct top *t,
                               const char *origin,
                               uint64_t seq,
                               uint64_t hlc,
                               const char *name)
{
	memset(t, 0, sizeof(*t));
	grantd__v1__op__init(&t->op);
	grantd__v1__user__init(&t->user);
	t->op.origin = (char *)origin;
	t->op.epoch = EPOCH, t->op.has_epoch = 1;
	t->op.seq = seq, t->op.has_seq = 1;
	t->op.hlc = hlc, t->op.has_hlc = hlc != 0;
	t->user.name = (char *)name;
	t->op.body_case = GRANTD__V1__OP__BODY_USER;
	t->op.user = &t->user;
	return &t->op;
}

static void apply1(struct node *n, const Grantd__V1__Op *op)
{
	struct store_batch *b;
	bool applied;

	store_batch_new(&b, n->s);
	assert_int_equal(ops_apply(n->o, b, op, &applied), 0);
	assert_true(applied);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
}

/* The sum of a node's vector entries of origin (what status "applied"
 * shows for it; retired entries are outside the vector). */
static uint64_t vv_sum(const struct node *n, const char *origin)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < ops_vv_count(n->o); i++)
		if (!strcmp(ops_vv_at(n->o, i)->origin, origin) &&
		    !ops_vv_at(n->o, i)->retired)
			sum += ops_vv_at(n->o, i)->seq;
	return sum;
}

/* held() for ops_vv_retire_own: the peer (a node) holds it. */
static bool
peer_holds(const char *origin, uint64_t epoch, uint64_t seq, void *payload)
{
	return ops_vv_get(((struct node *)payload)->o, NULL, origin, epoch) >=
	       seq;
}

/* gone() for ops_vv_forget: the peer (a node) has retired it too. */
static bool
peer_retired(const char *origin, uint64_t epoch, uint64_t total, void *payload)
{
	const struct node *n = payload;
	for (size_t i = 0; i < ops_vv_count(n->o); i++)
		if (ops_vv_at(n->o, i)->epoch == epoch &&
		    !ops_vv_at(n->o, i)->retired &&
		    !strcmp(ops_vv_at(n->o, i)->origin, origin))
			return false;
	return ops_vv_get(((struct node *)payload)->o, NULL, origin,
	                  OPS_VV_RETIRED) >= total;
}

/* A node's vector as the entries its heartbeat carries. */
static size_t vv_entries(const struct node *n,
                         Grantd__V1__VvEntry *e,
                         Grantd__V1__VvEntry **pe,
                         size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < ops_vv_count(n->o) && k < max; i++, k++) {
		if (ops_vv_at(n->o, i)->retired) {
			k--;
			continue;
		}
		grantd__v1__vv_entry__init(&e[k]);
		e[k].origin = (char *)ops_vv_at(n->o, i)->origin;
		e[k].epoch = ops_vv_at(n->o, i)->epoch, e[k].has_epoch = 1;
		e[k].seq = ops_vv_at(n->o, i)->seq, e[k].has_seq = 1;
		pe[k] = &e[k];
	}
	return k;
}

/* Each start makes a new epoch (issue 8, item 7): a node restarted 5,000
 * times, writing once each time, keeps a bounded vector once its peer holds
 * the finished epochs, at both ends, and the sum per origin (status
 * "applied") is unchanged by retiring.  Without retirement the vector had
 * one entry per start, and past 4,096 every peer dropped the heartbeats. */
#define RESTARTS 5000
static void test_vv_bounded_over_restarts(void **state)
{
	struct fixture *f = *state;
	struct node *a = node_open(f, 0), *p = node_open(f, 1);
	Grantd__V1__VvEntry e[16], *pe[16];
	size_t most_a = 0, most_p = 0;
	struct top t;

	for (int i = 1; i <= RESTARTS; i++) {
		struct store_batch *b;
		char name[32];
		/* a restart: ops closed and opened again on the same store,
		 * and every 500th the store too */
		ops_destroy(&a->o);
		if (i % 500 == 0) {
			store_destroy(&a->s);
			assert_int_equal(store_open(&a->s, &(bool){false},
			                            a->store_dir, seal_key),
			                 0);
		}
		assert_int_equal(ops_open(&a->o, a->s, &a->cfg, false), 0);
		/* one write, which the peer applies */
		snprintf(name, sizeof(name), "u%d", i);
		store_batch_new(&b, a->s);
		op_user(&t, NULL, 0, 0, name);
		assert_int_equal(ops_local(a->o, b, &t.op), 0);
		assert_int_equal(ops_commit(a->o, b, false), 0);
		store_batch_free(&b);
		ops_outbox_clear(a->o);
		apply1(p, &t.op);
		/* a retires what p holds; p follows a's heartbeat */
		store_batch_new(&b, a->s);
		ops_vv_retire_own(a->o, b, peer_holds, p);
		assert_int_equal(ops_commit(a->o, b, false), 0);
		store_batch_free(&b);
		if (ops_vv_count(a->o) > 3)
			fail_msg("after %d starts %s's vector has %zu entries",
			         i, a->site, ops_vv_count(a->o));
		size_t n = vv_entries(a, e, pe, GD_ARRAY_SIZE(e));
		store_batch_new(&b, p->s);
		ops_vv_follow(p->o, b, a->site, pe, n);
		/* what a peer still relays of a retired epoch is known */
		for (size_t j = 0; j < ops_vv_count(p->o); j++)
			if (ops_vv_at(p->o, j)->retired)
				assert_int_equal(
				        ops_vv_get(p->o, NULL,
				                   ops_vv_at(p->o, j)->origin,
				                   ops_vv_at(p->o, j)->epoch),
				        ops_vv_at(p->o, j)->seq);
		ops_vv_forget(p->o, b, peer_retired, a);
		assert_int_equal(ops_commit(p->o, b, false), 0);
		store_batch_free(&b);
		store_batch_new(&b, a->s);
		ops_vv_forget(a->o, b, peer_retired, p);
		assert_int_equal(ops_commit(a->o, b, false), 0);
		store_batch_free(&b);
		if (ops_vv_count(p->o) > 3)
			fail_msg("after %d starts the peer's vector has %zu "
			         "entries",
			         i, ops_vv_count(p->o));
		most_a = ops_vv_count(a->o) > most_a ? ops_vv_count(a->o)
		                                     : most_a;
		most_p = ops_vv_count(p->o) > most_p ? ops_vv_count(p->o)
		                                     : most_p;
		assert_int_equal(vv_sum(a, a->site), i);
		assert_int_equal(vv_sum(p, a->site), i);
	}
	/* at most: the retired total, the current epoch, the one just
	 * finished */
	assert_in_range(most_a, 1, 3);
	assert_in_range(most_p, 1, 3);
	/* and the same after a reload from the store */
	assert_int_equal(ops_reload(a->o), 0);
	assert_int_equal(ops_reload(p->o), 0);
	assert_in_range(ops_vv_count(a->o), 1, 3);
	assert_in_range(ops_vv_count(p->o), 1, 3);
	assert_int_equal(vv_sum(a, a->site), RESTARTS);
	assert_int_equal(vv_sum(p, a->site), RESTARTS);
	/* the current epoch is never retired */
	assert_int_equal(ops_vv_get(p->o, NULL, a->site, ops_epoch(a->o)), 1);
}

/* Following is exact: a peer whose retired total does not match ours plus
 * what it stopped listing (it lost history, or we lack retired history)
 * retires nothing. */
static void test_vv_follow_exact(void **state)
{
	struct fixture *f = *state;
	struct node *p = node_open(f, 1);
	Grantd__V1__VvEntry e[2], *pe[2] = {&e[0], &e[1]};
	struct top t;

	/* p holds sitea's epochs EPOCH (seq 2) and EPOCH+1 (seq 1) */
	apply1(p, op_user(&t, "sitea", 1, HLC(10, 0), "u1"));
	apply1(p, op_user(&t, "sitea", 2, HLC(11, 0), "u2"));
	t.op.epoch = EPOCH + 1, t.op.seq = 1;
	apply1(p, &t.op);
	grantd__v1__vv_entry__init(&e[0]);
	grantd__v1__vv_entry__init(&e[1]);
	e[0].origin = "sitea", e[0].epoch = OPS_VV_RETIRED, e[0].seq = 1;
	e[1].origin = "sitea", e[1].epoch = EPOCH + 1, e[1].seq = 1;
	struct store_batch *b;
	store_batch_new(&b, p->s);
	/* sitea says it retired 1, but p's unlisted epoch holds 2 */
	assert_int_equal(ops_vv_follow(p->o, b, "sitea", pe, 2), 0);
	assert_int_equal(ops_vv_get(p->o, NULL, "sitea", EPOCH), 2);
	/* retired 2: EPOCH goes */
	e[0].seq = 2;
	assert_int_equal(ops_vv_follow(p->o, b, "sitea", pe, 2), 1);
	/* out of the vector, but its operations are still known */
	assert_int_equal(vv_sum(p, "sitea"), 3);
	assert_int_equal(ops_vv_get(p->o, NULL, "sitea", EPOCH), 2);
	assert_int_equal(ops_vv_get(p->o, NULL, "sitea", OPS_VV_RETIRED), 2);
	assert_int_equal(ops_vv_get(p->o, NULL, "sitea", EPOCH + 1), 1);
	/* again: nothing more */
	assert_int_equal(ops_vv_follow(p->o, b, "sitea", pe, 2), 0);
	/* a site never retires this node's own epochs for it */
	assert_int_equal(ops_vv_follow(p->o, b, p->site, pe, 2), 0);
	assert_int_equal(ops_commit(p->o, b, true), 0);
	store_batch_free(&b);
	assert_int_equal(ops_reload(p->o), 0);
	assert_int_equal(vv_sum(p, "sitea"), 3);
}

/* montreal's epochs in the wipe tests: E1 (seq 4) retired at montreal,
 * E2 (seq 1) its current one */
#define E1 EPOCH
#define E2 (EPOCH + 1)

/* montreal's own vector after it retired E1, and a peer's (paloalto's)
 * that has not followed the retirement yet */
struct wipe_vvs {
	Grantd__V1__VvEntry m[2], *pm[2], l[2], *pl[2];
};

static void wipe_vvs(struct wipe_vvs *v)
{
	for (int i = 0; i < 2; i++) {
		grantd__v1__vv_entry__init(&v->m[i]);
		grantd__v1__vv_entry__init(&v->l[i]);
		v->m[i].origin = v->l[i].origin = "montreal";
		v->pm[i] = &v->m[i], v->pl[i] = &v->l[i];
	}
	v->m[0].epoch = OPS_VV_RETIRED, v->m[0].seq = 4;
	v->m[1].epoch = E2, v->m[1].seq = 1;
	v->l[0].epoch = E1, v->l[0].seq = 4;
	v->l[1].epoch = E2, v->l[1].seq = 1;
}

/* montreal's operations seq from..to of epoch, applied at n */
static void
apply_range(struct node *n, uint64_t epoch, uint64_t from, uint64_t to)
{
	struct top t;
	char name[16];

	for (uint64_t s = from; s <= to; s++) {
		snprintf(name, sizeof(name), "m%llx.%llu",
		         (unsigned long long)(epoch & 0xff),
		         (unsigned long long)s);
		op_user(&t, "montreal", s, HLC(100 + s, epoch & 0xff), name);
		t.op.epoch = epoch;
		apply1(n, &t.op);
	}
}

/* A wiped site (issue 19, item 1: git_sites after portland's rebuild,
 * "montreal listed itself at 4 while its peers listed montreal at 8",
 * digests equal).  It fetched montreal's finished epoch E1 by ranges from
 * paloalto, which had not yet followed montreal's retirement of E1, and
 * then took a state transfer from montreal, whose vector carries E1 only
 * inside its retired total: E1 was counted twice, for good (montreal
 * retires an epoch once).  The transfer's raise retires E1 as already
 * counted. */
static void test_vv_wiped_range_then_transfer(void **state)
{
	struct fixture *f = *state;
	struct node *w = node_open(f, 1);
	struct wipe_vvs v;
	struct store_batch *b;

	wipe_vvs(&v);
	apply_range(w, E1, 1, 4); /* from paloalto */
	apply_range(w, E2, 1, 1);
	store_batch_new(&b, w->s);
	/* the transfer from montreal: its vector is its own */
	int k = ops_vv_raise_retired(w->o, b, "montreal", 4, v.pm, 2, v.pm, 2);
	assert_int_equal(ops_vv_follow(w->o, b, "montreal", v.pm, 2), 0);
	assert_int_equal(ops_commit(w->o, b, true), 0);
	store_batch_free(&b);
	/* applied: 4 retired + 1, as at montreal */
	assert_int_equal(vv_sum(w, "montreal"), 5);
	assert_int_equal(k, 1);
	/* E1's operations are still known (a relay is not applied twice) */
	assert_int_equal(ops_vv_get(w->o, NULL, "montreal", E1), 4);
	assert_int_equal(ops_reload(w->o), 0);
	assert_int_equal(vv_sum(w, "montreal"), 5);
}

/* The other order: the state transfer first, then paloalto's heartbeat
 * still lists E1; fetching it would count it twice (ops_vv_covered says
 * not to).  A restored montreal that lists E1 again gets it fetched. */
static void test_vv_wiped_transfer_then_range(void **state)
{
	struct fixture *f = *state;
	struct node *w = node_open(f, 1);
	struct wipe_vvs v;
	struct store_batch *b;

	wipe_vvs(&v);
	store_batch_new(&b, w->s);
	assert_int_equal(
	        ops_vv_raise_retired(w->o, b, "montreal", 4, v.pm, 2, v.pm, 2),
	        0);
	assert_int_equal(ops_commit(w->o, b, true), 0);
	store_batch_free(&b);
	apply_range(w, E2, 1, 1);
	/* what repl's peer_ahead does with paloalto's vector */
	for (size_t i = 0; i < 2; i++) {
		uint64_t have =
		        ops_vv_get(w->o, NULL, "montreal", v.l[i].epoch);
		if (v.l[i].seq > have &&
		    !ops_vv_covered(w->o, "montreal", v.l[i].epoch, v.pm, 2))
			apply_range(w, v.l[i].epoch, have + 1, v.l[i].seq);
	}
	assert_int_equal(vv_sum(w, "montreal"), 5);
	/* never for our own epochs, nor one the origin lists */
	assert_false(ops_vv_covered(w->o, w->site, E1, v.pm, 2));
	assert_false(ops_vv_covered(w->o, "montreal", E1, v.pl, 2));
	/* nor before any total: nothing is inside it */
	assert_false(ops_vv_covered(w->o, "sitea", E1, v.pm, 2));
}

/* A rebuilt site and its own earlier epoch (the upgrade test's rebuilt
 * montreal, under load): its E1 (seq 4) was retired by paloalto, which
 * followed the retirement, and not yet by portland.  The rebuilt site
 * took paloalto's state transfer (total 4, E1 unlisted), then saw
 * portland's heartbeat list E1: fetching it counted E1 twice, for good
 * (no vector of its own origin to ask: ops_vv_covered never answers for
 * our own epochs).  The totals show it: ours is portland's plus E1's. */
static void test_vv_rebuilt_own_epoch(void **state)
{
	struct fixture *f = *state;
	struct node *w = node_open(f, 1);
	Grantd__V1__VvEntry e[3], *pe[3] = {&e[0], &e[1], &e[2]};
	struct store_batch *b;

	for (int i = 0; i < 3; i++) {
		grantd__v1__vv_entry__init(&e[i]);
		e[i].origin = w->site;
	}
	/* portland: nothing retired of ours, E1 listed */
	e[0].epoch = OPS_VV_RETIRED, e[0].seq = 0;
	e[1].epoch = E1, e[1].seq = 4;
	/* nothing of ours in a total yet: E1 is to fetch */
	assert_false(ops_vv_inside_total(w->o, w->site, E1, pe, 2));
	store_batch_new(&b, w->s);
	/* paloalto's transfer: its vector holds E1 in its total */
	ops_vv_raise(w->o, b, w->site, OPS_VV_RETIRED, 4);
	assert_int_equal(ops_commit(w->o, b, true), 0);
	store_batch_free(&b);
	assert_true(ops_vv_inside_total(w->o, w->site, E1, pe, 2));
	/* the totals must match exactly: portland listing one more epoch
	 * we lack (E2, seq 2) leaves both to fetch */
	e[2].epoch = E2, e[2].seq = 2;
	assert_false(ops_vv_inside_total(w->o, w->site, E1, pe, 3));
	/* nor an epoch portland does not list, nor the total itself */
	assert_false(ops_vv_inside_total(w->o, w->site, E2, pe, 2));
	assert_false(ops_vv_inside_total(w->o, w->site, OPS_VV_RETIRED, pe, 2));
	/* portland followed: its total is ours, nothing listed is inside */
	e[0].seq = 4;
	assert_false(ops_vv_inside_total(w->o, w->site, E1, pe, 2));
	assert_int_equal(vv_sum(w, w->site), 4);
}

/* The same count by chance: montreal retired E1 (seq 4), we followed,
 * portland has not (it lists E1); montreal, now down, also made E2
 * (seq 4), which portland holds and we lack.  Our total is portland's
 * plus 4, as if E2 were in it, but those 4 are E1's, which we know as
 * retired: E2 is to fetch (it was skipped, for as long as montreal
 * stayed down, before the retired ones were counted). */
static void test_vv_inside_total_not_by_chance(void **state)
{
	struct fixture *f = *state;
	struct node *w = node_open(f, 1);
	Grantd__V1__VvEntry e[3], *pe[3] = {&e[0], &e[1], &e[2]};
	Grantd__V1__VvEntry m, *pm[1] = {&m};
	struct store_batch *b;

	apply_range(w, E1, 1, 4);
	grantd__v1__vv_entry__init(&m);
	m.origin = "montreal", m.epoch = OPS_VV_RETIRED, m.seq = 4;
	store_batch_new(&b, w->s);
	assert_int_equal(ops_vv_follow(w->o, b, "montreal", pm, 1), 1);
	assert_int_equal(ops_commit(w->o, b, true), 0);
	store_batch_free(&b);
	for (int i = 0; i < 3; i++) {
		grantd__v1__vv_entry__init(&e[i]);
		e[i].origin = "montreal";
	}
	e[0].epoch = OPS_VV_RETIRED, e[0].seq = 0;
	e[1].epoch = E1, e[1].seq = 4;
	e[2].epoch = E2, e[2].seq = 4;
	assert_false(ops_vv_inside_total(w->o, "montreal", E2, pe, 3));
	/* without E2, portland's E1 is what our total holds more */
	assert_false(ops_vv_inside_total(w->o, "montreal", E1, pe, 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_vv_bounded_over_restarts,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_vv_follow_exact, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(
	                test_vv_wiped_range_then_transfer, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_vv_wiped_transfer_then_range, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_vv_rebuilt_own_epoch,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_vv_inside_total_not_by_chance, setup, teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
