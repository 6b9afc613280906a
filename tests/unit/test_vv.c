/*
 * test_vv.c: the version vector over many starts (node/ops.h, retiring
 * finished epochs; issue 8, item 7).
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

#define EPOCH UINT64_C(0x00e90c0000000001)
#define HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))

struct node {
	char store_dir[128];
	char site[16];
	struct config cfg;
	struct store *s;
	struct ops o;
	bool open;
};

struct fixture {
	char dir[64];
	struct node n[2];
};

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] = "test_vv sealing key 0123456789ab";

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

static Grantd__V1__Op *op_user(struct top *t, const char *origin,
			       uint64_t seq, uint64_t hlc, const char *name)
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
	assert_int_equal(ops_apply(&n->o, b, op, &applied), 0);
	assert_true(applied);
	assert_int_equal(ops_commit(&n->o, b, false), 0);
	store_batch_free(&b);
}

/* The sum of a node's vector entries of origin (what status "applied"
 * shows for it; retired entries are outside the vector). */
static uint64_t vv_sum(const struct node *n, const char *origin)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < n->o.nvv; i++)
		if (!strcmp(n->o.vv[i].origin, origin) && !n->o.vv[i].retired)
			sum += n->o.vv[i].seq;
	return sum;
}

/* held() for ops_vv_retire_own: the peer (a node) holds it. */
static bool peer_holds(const char *origin, uint64_t epoch, uint64_t seq,
		       void *payload)
{
	return ops_vv_get(&((struct node *)payload)->o, NULL, origin, epoch) >=
	       seq;
}

/* gone() for ops_vv_forget: the peer (a node) has retired it too. */
static bool peer_retired(const char *origin, uint64_t epoch, uint64_t total,
			 void *payload)
{
	const struct node *n = payload;
	for (size_t i = 0; i < n->o.nvv; i++)
		if (n->o.vv[i].epoch == epoch && !n->o.vv[i].retired &&
		    !strcmp(n->o.vv[i].origin, origin))
			return false;
	return ops_vv_get(&((struct node *)payload)->o, NULL, origin,
			  OPS_VV_RETIRED) >= total;
}

/* A node's vector as the entries its heartbeat carries. */
static size_t vv_entries(const struct node *n, Grantd__V1__VvEntry *e,
			 Grantd__V1__VvEntry **pe, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n->o.nvv && k < max; i++, k++) {
		if (n->o.vv[i].retired) {
			k--;
			continue;
		}
		grantd__v1__vv_entry__init(&e[k]);
		e[k].origin = (char *)n->o.vv[i].origin;
		e[k].epoch = n->o.vv[i].epoch, e[k].has_epoch = 1;
		e[k].seq = n->o.vv[i].seq, e[k].has_seq = 1;
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
		ops_close(&a->o);
		if (i % 500 == 0) {
			store_destroy(&a->s);
			assert_int_equal(store_open(&a->s, &(bool){ false },
						    a->store_dir, seal_key), 0);
		}
		assert_int_equal(ops_open(&a->o, a->s, &a->cfg, false), 0);
		/* one write, which the peer applies */
		snprintf(name, sizeof(name), "u%d", i);
		store_batch_new(&b, a->s);
		op_user(&t, NULL, 0, 0, name);
		assert_int_equal(ops_local(&a->o, b, &t.op), 0);
		assert_int_equal(ops_commit(&a->o, b, false), 0);
		store_batch_free(&b);
		ops_outbox_clear(&a->o);
		apply1(p, &t.op);
		/* a retires what p holds; p follows a's heartbeat */
		store_batch_new(&b, a->s);
		ops_vv_retire_own(&a->o, b, peer_holds, p);
		assert_int_equal(ops_commit(&a->o, b, false), 0);
		store_batch_free(&b);
		if (a->o.nvv > 3)
			fail_msg("after %d starts %s's vector has %zu entries",
				 i, a->site, a->o.nvv);
		size_t n = vv_entries(a, e, pe, GD_ARRAY_SIZE(e));
		store_batch_new(&b, p->s);
		ops_vv_follow(&p->o, b, a->site, pe, n);
		/* what a peer still relays of a retired epoch is known */
		for (size_t j = 0; j < p->o.nvv; j++)
			if (p->o.vv[j].retired)
				assert_int_equal(ops_vv_get(&p->o, NULL,
							    p->o.vv[j].origin,
							    p->o.vv[j].epoch),
						 p->o.vv[j].seq);
		ops_vv_forget(&p->o, b, peer_retired, a);
		assert_int_equal(ops_commit(&p->o, b, false), 0);
		store_batch_free(&b);
		store_batch_new(&b, a->s);
		ops_vv_forget(&a->o, b, peer_retired, p);
		assert_int_equal(ops_commit(&a->o, b, false), 0);
		store_batch_free(&b);
		if (p->o.nvv > 3)
			fail_msg("after %d starts the peer's vector has %zu "
				 "entries", i, p->o.nvv);
		most_a = a->o.nvv > most_a ? a->o.nvv : most_a;
		most_p = p->o.nvv > most_p ? p->o.nvv : most_p;
		assert_int_equal(vv_sum(a, a->site), i);
		assert_int_equal(vv_sum(p, a->site), i);
	}
	/* at most: the retired total, the current epoch, the one just
	 * finished */
	assert_in_range(most_a, 1, 3);
	assert_in_range(most_p, 1, 3);
	/* and the same after a reload from the store */
	assert_int_equal(ops_reload(&a->o), 0);
	assert_int_equal(ops_reload(&p->o), 0);
	assert_in_range(a->o.nvv, 1, 3);
	assert_in_range(p->o.nvv, 1, 3);
	assert_int_equal(vv_sum(a, a->site), RESTARTS);
	assert_int_equal(vv_sum(p, a->site), RESTARTS);
	/* the current epoch is never retired */
	assert_int_equal(ops_vv_get(&p->o, NULL, a->site, a->o.epoch), 1);
}

/* Following is exact: a peer whose retired total does not match ours plus
 * what it stopped listing (it lost history, or we lack retired history)
 * retires nothing. */
static void test_vv_follow_exact(void **state)
{
	struct fixture *f = *state;
	struct node *p = node_open(f, 1);
	Grantd__V1__VvEntry e[2], *pe[2] = { &e[0], &e[1] };
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
	assert_int_equal(ops_vv_follow(&p->o, b, "sitea", pe, 2), 0);
	assert_int_equal(ops_vv_get(&p->o, NULL, "sitea", EPOCH), 2);
	/* retired 2: EPOCH goes */
	e[0].seq = 2;
	assert_int_equal(ops_vv_follow(&p->o, b, "sitea", pe, 2), 1);
	/* out of the vector, but its operations are still known */
	assert_int_equal(vv_sum(p, "sitea"), 3);
	assert_int_equal(ops_vv_get(&p->o, NULL, "sitea", EPOCH), 2);
	assert_int_equal(ops_vv_get(&p->o, NULL, "sitea", OPS_VV_RETIRED), 2);
	assert_int_equal(ops_vv_get(&p->o, NULL, "sitea", EPOCH + 1), 1);
	/* again: nothing more */
	assert_int_equal(ops_vv_follow(&p->o, b, "sitea", pe, 2), 0);
	/* a site never retires this node's own epochs for it */
	assert_int_equal(ops_vv_follow(&p->o, b, p->site, pe, 2), 0);
	assert_int_equal(ops_commit(&p->o, b, true), 0);
	store_batch_free(&b);
	assert_int_equal(ops_reload(&p->o), 0);
	assert_int_equal(vv_sum(p, "sitea"), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_vv_bounded_over_restarts,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_vv_follow_exact, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
