/*
 * test_repl_range.c: node/peers/repl_range.c, range repair, through
 * repl_int.h.
 *
 * Two nodes (paloalto, portland), each on a real RocksDB store in a temp
 * directory, linked by real CURVE sockets over ipc (fixture.h's fx_node);
 * the operations are real ones paloalto made and published.  Replies are
 * fed to portland's repl_range_apply() the way handle_peer does, some of
 * them made up:
 *  - the positive control: portland catches up with paloalto by itself;
 *  - a gap inside the reply asked for: what comes before it is applied,
 *    the rest is not, and the range is asked again from the gap; the
 *    real answer then fills it;
 *  - replies that answer another request (another start, another
 *    origin) and an operation of another stream inside the asked range
 *    are refused and counted (range_unasked); a second answer to a range
 *    already answered is ignored, not counted;
 *  - a log truncated by retention: paloalto answers "truncated" and
 *    portland falls back to a state transfer, which brings it level.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "repl_int.h"
#include "writer.h"

#define WAIT_MS 20000

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_repl_range", LOG_LVL_ERROR);
}

/* Both stores and writers; the links later (fx_node_link), so that a test can
 * make operations before portland is there. */
static int setup(void **state)
{
	struct fx_pair *f;
	int rc = fx_pair_open(&f, "test_repl_range", CONFIG_ROLE_FRONTEND,
	                      FX_PAIR_UNLINKED);

	*state = f;
	return rc;
}

static uint64_t epoch_of(struct fx_node *n)
{
	return ops_epoch(n->o);
}

/* How much of paloalto's stream node n holds. */
static uint64_t held(struct fx_node *n, struct fx_pair *f)
{
	return ops_vv_get(n->o, NULL, "paloalto", epoch_of(&f->a));
}

static void make_ops(struct fx_node *n, int k)
{
	assert_int_equal(fx_node_grants(n, k, WAIT_MS), 0);
}

/* The i-th operation n published (0-based), packed, into out. */
static void published_op(struct fx_node *n, int i, ProtobufCBinaryData *out)
{
	size_t off = 0;

	for (;;) {
		assert_true(off + 4 <= n->published.len);
		const uint8_t *p = (const uint8_t *)n->published.p + off;
		size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 |
		             (size_t)p[2] << 8 | p[3];
		if (i-- == 0) {
			*out = (ProtobufCBinaryData){len, (uint8_t *)p + 4};
			return;
		}
		off += 4 + len;
	}
}

/* What repl_handle does after a round: the batch to the store. */
static void commit(struct fx_node *n)
{
	uint64_t t;

	assert_int_equal(writer_commit(n->w, &t), 0);
}

typedef bool (*cond_fn)(struct fx_pair *f);

/* Run both nodes' loops until cond holds (or fail after WAIT_MS). */
static void run_until(struct fx_pair *f, cond_fn cond, const char *what)
{
	struct fx_node *both[] = {&f->a, &f->b};

	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     fx_nodes_round(both, 2, 5))
		if (cond(f))
			return;
	fail_msg("never: %s", what);
}

static bool b_heard_a(struct fx_pair *f)
{
	return f->b.repl->peers[0].hb && !repl_syncing(f->b.repl);
}

static bool b_level(struct fx_pair *f)
{
	return held(&f->b, f) == held(&f->a, f) && held(&f->a, f) > 0;
}

/* Link portland (paloalto is linked already) and wait until it hears
 * paloalto. */
static void link_b(struct fx_pair *f)
{
	assert_int_equal(fx_node_link(&f->b), 0);
	run_until(f, b_heard_a, "portland hears paloalto");
}

static void link_both(struct fx_pair *f)
{
	assert_int_equal(fx_node_link(&f->a), 0);
	link_b(f);
}

/* Ask peer p (paloalto at portland) for the range from `from`, as
 * repl_range_tick does, once the DEALER takes it.  Only paloalto's loop
 * runs meanwhile (its ZAP, its answers): portland takes nothing yet, its
 * SUB keeps the live operations. */
static void ask(struct fx_pair *f, uint64_t from)
{
	struct repl_peer *p = &f->b.repl->peers[0];
	struct fx_node *one[] = {&f->a};

	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !p->range_inflight && clock_mono_ms() < end;
	     fx_nodes_round(one, 1, 5))
		repl_range_request_from(f->b.repl, p, "paloalto",
		                        epoch_of(&f->a), from, clock_mono_ms());
	assert_true(p->range_inflight);
	assert_int_equal(p->range_from, from);
}

/* A range reply of paloalto's stream. */
static Grantd__V1__RangeRep reply(struct fx_pair *f,
                                  const char *origin,
                                  uint64_t from,
                                  ProtobufCBinaryData *ops,
                                  size_t n)
{
	Grantd__V1__RangeRep rr = GRANTD__V1__RANGE_REP__INIT;

	rr.origin = (char *)origin;
	rr.epoch = epoch_of(&f->a), rr.has_epoch = 1;
	rr.from = from, rr.has_from = 1;
	rr.ops = ops;
	rr.n_ops = n;
	return rr;
}

static void test_catch_up(void **state)
{
	struct fx_pair *f = *state;

	assert_int_equal(fx_node_link(&f->a), 0);
	make_ops(&f->a, 5); /* before portland is there: ranges only */
	link_b(f);
	run_until(f, b_level, "portland level with paloalto");
	assert_int_equal(held(&f->b, f), 5);
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 0);
}

static void test_gap_in_reply(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p;
	ProtobufCBinaryData ops[2];

	link_both(f);
	make_ops(&f->a, 3); /* seq 1..3, in portland's SUB, not taken yet */
	p = &f->b.repl->peers[0];
	ask(f, 1);
	published_op(&f->a, 0, &ops[0]);
	published_op(&f->a, 2, &ops[1]); /* 2 is missing */
	Grantd__V1__RangeRep rr = reply(f, "paloalto", 1, ops, 2);
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	commit(&f->b);
	/* 1 applied, 3 not: the range is asked again from the gap */
	assert_int_equal(held(&f->b, f), 1);
	assert_true(p->range_inflight);
	assert_string_equal(p->range_origin, "paloalto");
	assert_int_equal(p->range_from, 2);
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 0);
	/* the real answers (and the live operations) fill it */
	run_until(f, b_level, "portland level with paloalto");
	assert_int_equal(held(&f->b, f), 3);
}

static void test_reply_to_another_request(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p;
	ProtobufCBinaryData ops[2], forged;
	uint8_t buf[4096];

	link_both(f);
	make_ops(&f->a, 2);
	p = &f->b.repl->peers[0];
	ask(f, 1);
	published_op(&f->a, 0, &ops[0]);
	published_op(&f->a, 1, &ops[1]);

	/* another start than asked: refused, nothing taken, still asked */
	Grantd__V1__RangeRep rr = reply(f, "paloalto", 2, &ops[1], 1);
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 1);
	assert_true(p->range_inflight);
	assert_int_equal(p->range_from, 1);
	/* another origin than asked */
	rr = reply(f, "seattle", 1, ops, 2);
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 2);
	/* a reply that does not say where it starts */
	rr = reply(f, "paloalto", 1, ops, 2);
	rr.has_from = 0;
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 3);
	commit(&f->b);
	assert_int_equal(held(&f->b, f), 0);

	/* the range asked, but its operation of another epoch: that one
	 * is refused, the question is answered */
	Grantd__V1__Op *op =
	        grantd__v1__op__unpack(NULL, ops[0].len, ops[0].data);
	assert_non_null(op);
	op->epoch ^= 1;
	forged.len = grantd__v1__op__pack(op, buf);
	forged.data = buf;
	grantd__v1__op__free_unpacked(op, NULL);
	rr = reply(f, "paloalto", 1, &forged, 1);
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 4);
	assert_false(p->range_inflight);
	commit(&f->b);
	assert_int_equal(held(&f->b, f), 0);
	/* a second answer to the range answered: ignored, not counted */
	rr = reply(f, "paloalto", 1, ops, 2);
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 4);
	commit(&f->b);
	assert_int_equal(held(&f->b, f), 0);

	/* the reply asked for is taken */
	ask(f, 1);
	rr = reply(f, "paloalto", 1, ops, 2);
	repl_range_apply(f->b.repl, p, &rr, clock_mono_ms());
	commit(&f->b);
	assert_int_equal(held(&f->b, f), 2);
	assert_int_equal(f->b.repl->drops[DROP_RANGE_UNASKED], 4);
}

static bool b_transferring(struct fx_pair *f)
{
	return f->b.repl->xfer.p != NULL;
}

static void test_truncated_log(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p;

	assert_int_equal(fx_node_link(&f->a), 0);
	make_ops(&f->a, 4);
	/* retention took the whole log */
	assert_int_equal(
	        ops_truncate_log(f->a.o, clock_wall_ms() + 60000, TRUNCATE_MAX),
	        4);
	assert_int_equal(fx_node_link(&f->b), 0);
	p = &f->b.repl->peers[0];
	/* portland asks for a range; the answer says truncated: a state
	 * transfer from paloalto */
	run_until(f, b_transferring, "a state transfer starts");
	assert_ptr_equal(f->b.repl->xfer.p, p);
	run_until(f, b_level, "portland level with paloalto");
	assert_null(f->b.repl->xfer.p);
	assert_int_equal(held(&f->b, f), 4);
	assert_memory_equal(ops_digest(f->b.o), ops_digest(f->a.o), DIGEST_LEN);
	assert_int_equal(f->b.repl->drops[DROP_SNAP_RECORD], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_catch_up, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_gap_in_reply, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_reply_to_another_request,
	                                        setup, fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_truncated_log, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
