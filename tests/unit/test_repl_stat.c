/*
 * test_repl_stat.c: node/peers/repl_stat.c, replication statistics,
 * through repl_int.h.
 *
 * Two frontends (paloalto, portland) on real RocksDB stores in temp
 * directories, linked by real CURVE sockets over ipc (fixture.h's
 * fx_pair):
 *  - refusals are counted by reason and in the total, and repl_metrics
 *    names every reason;
 *  - a latency sample is taken only once its batch is durable (the
 *    syncer passed its ticket), never for a batch that failed to commit,
 *    and the percentiles follow the samples, split by stage (the wire,
 *    the apply, the write, the fsync);
 *  - a catch-up episode runs from the first tick behind to the first
 *    level one, with the operations applied meanwhile;
 *  - a peer's status: heard (connected until CONNECTED_MS of silence),
 *    its release and digest, and what it is ahead of us by.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <zmq.h>

#include "clock.h"
#include "digest.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "repl_int.h"
#include "version.h"

#define WAIT_MS 20000

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_repl_stat", LOG_LVL_ERROR);
}

static int setup(void **state)
{
	struct fx_pair *f;
	int rc = fx_pair_open(&f, "test_repl_stat", CONFIG_ROLE_FRONTEND,
	                      FX_PAIR_LINKED);

	*state = f;
	return rc;
}

/* name in object section of r's repl_metrics. */
static double metric(struct repl *r, const char *section, const char *name)
{
	cJSON *obj = cJSON_CreateObject();
	const cJSON *n;
	double v;

	repl_metrics(r, obj);
	n = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, section), name);
	if (!cJSON_IsNumber(n))
		fail_msg("no %s.%s in repl_metrics", section, name);
	v = n->valuedouble;
	cJSON_Delete(obj);
	return v;
}

static void test_refusals_by_reason(void **state)
{
	struct fx_pair *f = *state;
	struct repl *r = f->a.repl;
	static const char *const names[] = {
	        "forged_origin",    "snapshot_record", "snapshot_vector",
	        "heartbeat_vector", "plane",           "range_unasked",
	        "mirror_hidden",    "signature"};
	uint64_t total = repl_dropped_total(r);

	for (size_t i = 0; i < GD_ARRAY_SIZE(names); i++)
		assert_true(metric(r, "dropped", names[i]) == 0);
	repl_stat_refuse(r, DROP_PLANE, 2, "test refusal n=%d", 2);
	repl_stat_refuse(r, DROP_HB_VECTOR, 1, "test refusal n=%d", 1);
	/* within the second: counted, not logged again */
	repl_stat_refuse(r, DROP_HB_VECTOR, 3, "test refusal n=%d", 3);
	assert_int_equal(r->drops[DROP_PLANE], 2);
	assert_int_equal(r->drops[DROP_HB_VECTOR], 4);
	assert_int_equal(r->drops[DROP_FORGED_ORIGIN], 0);
	assert_int_equal(repl_dropped_total(r), total + 6);
	assert_true(metric(r, "dropped", "plane") == 2);
	assert_true(metric(r, "dropped", "heartbeat_vector") == 4);
	assert_true(metric(r, "dropped", "range_unasked") == 0);
}

/* latency_us.stages.<stage>.<name> in r's repl_metrics. */
static double stage_metric(struct repl *r, const char *stage, const char *name)
{
	cJSON *obj = cJSON_CreateObject();
	const cJSON *n;
	double v;

	repl_metrics(r, obj);
	n = cJSON_GetObjectItem(
	        cJSON_GetObjectItem(
	                cJSON_GetObjectItem(
	                        cJSON_GetObjectItem(obj, "latency_us"),
	                        "stages"),
	                stage),
	        name);
	if (!cJSON_IsNumber(n))
		fail_msg("no latency_us.stages.%s.%s in repl_metrics", stage,
		         name);
	v = n->valuedouble;
	cJSON_Delete(obj);
	return v;
}

/* An operation published us_ago µs ago and received wire_us after. */
static void applied_at(struct repl *r, uint64_t us_ago, uint32_t wire_us)
{
	uint64_t now_us = clock_wall_us();
	struct lat_stamp at = {.sent = (uint32_t)(now_us - us_ago),
	                       .recv = (uint32_t)(now_us - us_ago + wire_us)};

	repl_applied(r, &at);
}

static void test_latency_when_durable(void **state)
{
	struct fx_pair *f = *state;
	struct repl *r = f->a.repl;

	assert_true(metric(r, "latency_us", "count") == 0);
	/* three operations published 2, 3 and 4 ms ago, received 1 ms
	 * after that, in batch 5 */
	for (int i = 1; i <= 3; i++)
		applied_at(r, 1000 * (uint64_t)(i + 1), 1000);
	repl_stat_committed(r, 0, 5);
	repl_synced(r, 4); /* not durable yet */
	assert_true(metric(r, "latency_us", "count") == 0);
	repl_synced(r, 5);
	assert_true(metric(r, "latency_us", "count") == 3);
	double p50 = metric(r, "latency_us", "p50");
	double max = metric(r, "latency_us", "max");
	assert_true(p50 >= 3000 && p50 < 3000 + 10e6);
	assert_true(max >= 4000 && max >= p50);
	/* where they waited: 1 ms on the wire each, the rest (received 1,
	 * 2 and 3 ms before now) to be applied, then written and durable */
	assert_true(stage_metric(r, "wire", "p50") == 1000);
	assert_true(stage_metric(r, "wire", "p99") == 1000);
	assert_true(stage_metric(r, "apply", "p50") >= 2000);
	assert_true(stage_metric(r, "apply", "p99") >= 3000);
	double rest = stage_metric(r, "write", "p50") +
	              stage_metric(r, "durable", "p50");
	assert_true(rest < p50); /* each sample's stages sum to it */
	/* a batch that failed to commit: its samples go with it */
	applied_at(r, 0, 0);
	applied_at(r, 0, 0);
	repl_stat_committed(r, GD_EIO, 6);
	repl_synced(r, 6);
	assert_true(metric(r, "latency_us", "count") == 3);
	/* an operation without a publish time is no sample */
	repl_applied(r, NULL);
	repl_stat_committed(r, 0, 7);
	repl_synced(r, 7);
	assert_true(metric(r, "latency_us", "count") == 3);
}

static void test_catchup_episode(void **state)
{
	struct fx_pair *f = *state;
	struct repl *r = f->a.repl;

	assert_true(metric(r, "last_catchup", "ops") == 0);
	repl_stat_catchup(r, false, 1000);
	for (int i = 0; i < 7; i++)
		repl_applied(r, 0);
	repl_stat_catchup(r, false, 1500); /* still behind: one episode */
	assert_true(metric(r, "last_catchup", "ops") == 0);
	repl_stat_catchup(r, true, 3000);
	assert_true(metric(r, "last_catchup", "ops") == 7);
	assert_true(metric(r, "last_catchup", "ms") == 2000);
	/* level again: the last episode stays */
	repl_applied(r, 0);
	repl_stat_catchup(r, true, 4000);
	assert_true(metric(r, "last_catchup", "ops") == 7);
	assert_true(metric(r, "last_catchup", "ms") == 2000);
}

/* r's status of its one peer at now_ms (the caller's: cJSON_Delete). */
static cJSON *peer_status(struct repl *r, uint64_t now_ms)
{
	cJSON *arr = cJSON_CreateArray(), *o;

	repl_status(r, arr, now_ms);
	assert_int_equal(cJSON_GetArraySize(arr), 1);
	o = cJSON_DetachItemFromArray(arr, 0);
	cJSON_Delete(arr);
	return o;
}

static bool connected(const cJSON *o)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(o, "connected"));
}

/* paloalto's seq in heartbeat hb of epoch, 0 when not listed. */
static uint64_t hb_seq(const Grantd__V1__Heartbeat *hb, uint64_t epoch)
{
	for (size_t i = 0; i < hb->n_vv; i++)
		if (!strcmp(hb->vv[i]->origin, "paloalto") &&
		    hb->vv[i]->epoch == epoch)
			return hb->vv[i]->seq;
	return 0;
}

/* b holds both of a's grants and has a heartbeat saying so.  The digest
 * alone is not enough: a heartbeat sent while the batch was being made
 * durable already carries the new digest but lists only what was
 * published (repl_hb_fill), so its vector is one batch behind. */
static bool heard(struct fx_pair *f)
{
	const Grantd__V1__Heartbeat *hb = f->b.repl->peers[0].hb;

	return hb && hb->digest.len == DIGEST_LEN &&
	       !memcmp(hb->digest.data, ops_digest(f->a.o), DIGEST_LEN) &&
	       hb_seq(hb, ops_epoch(f->a.o)) == 2 &&
	       ops_vv_get(f->b.o, NULL, "paloalto", ops_epoch(f->a.o)) == 2;
}

static void test_peer_status(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	struct repl_peer *p = &f->b.repl->peers[0];
	char hex[2 * DIGEST_LEN + 1];
	cJSON *st;

	/* never heard */
	st = peer_status(f->b.repl, clock_mono_ms());
	assert_false(connected(st));
	assert_true(cJSON_GetObjectItem(st, "last_heard_ms")->valuedouble ==
	            -1);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(st, "release")));
	cJSON_Delete(st);
	assert_int_equal(fx_node_grants(&f->a, 2, WAIT_MS), 0);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !heard(f) && clock_mono_ms() < end;)
		fx_nodes_round(both, 2, 5);
	assert_true(heard(f));
	/* heard: connected until CONNECTED_MS of silence */
	st = peer_status(f->b.repl, p->last_heard_ms + CONNECTED_MS - 1);
	assert_true(connected(st));
	assert_string_equal(cJSON_GetObjectItem(st, "site")->valuestring,
	                    "paloalto");
	assert_string_equal(cJSON_GetObjectItem(st, "role")->valuestring,
	                    "frontend");
	assert_string_equal(cJSON_GetObjectItem(st, "release")->valuestring,
	                    GRANTD_VERSION);
	digest_hex(hex, ops_digest(f->a.o));
	assert_string_equal(cJSON_GetObjectItem(st, "digest")->valuestring,
	                    hex);
	assert_true(cJSON_GetObjectItem(st, "lag_ops")->valuedouble == 0);
	cJSON_Delete(st);
	st = peer_status(f->b.repl, p->last_heard_ms + CONNECTED_MS);
	assert_false(connected(st));
	cJSON_Delete(st);
	/* a heartbeat showing 3 more of paloalto's stream: 3 behind */
	Grantd__V1__Heartbeat *hb = p->hb;
	for (size_t i = 0; i < hb->n_vv; i++)
		if (!strcmp(hb->vv[i]->origin, "paloalto"))
			hb->vv[i]->seq += 3;
	st = peer_status(f->b.repl, clock_mono_ms());
	assert_true(cJSON_GetObjectItem(st, "lag_ops")->valuedouble == 3);
	cJSON_Delete(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_refusals_by_reason, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_latency_when_durable,
	                                        setup, fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_catchup_episode, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_peer_status, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
