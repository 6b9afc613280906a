/*
 * test_peerpolicy.c: node/peers/peerpolicy.h, the [policy] settings that must
 * agree across sites (issue 19, N8): what differs is found key by key
 * with both values, only frontend peers count, and a token_quorum that
 * differs (either way) refuses token validation with one line naming it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "peerpolicy.h"

static struct config cfg;

static void setup_cfg(enum config_quorum q)
{
	static char palo[] = "paloalto", port[] = "portland",
	            mont[] = "montreal";

	memset(&cfg, 0, sizeof(cfg));
	cfg.site = palo;
	cfg.role = CONFIG_ROLE_FRONTEND;
	cfg.policy.token_quorum = q;
	cfg.policy.security_keys = CONFIG_SK_TOUCH;
	cfg.policy.totp_window = 1;
	cfg.policy.hotp_lookahead = 20;
	cfg.policy.lockout_failures = 5;
	cfg.policy.lockout_window = 900;
	cfg.npeers = 2;
	cfg.peers[0].site = port;
	cfg.peers[0].role = CONFIG_ROLE_FRONTEND;
	cfg.peers[1].site = mont;
	cfg.peers[1].role = CONFIG_ROLE_MIRROR;
}

static void test_alike(void **state)
{
	struct peerpolicy pp;
	Grantd__V1__PolicySettings ps;
	struct buf why = BUF_INIT;
	cJSON *o = cJSON_CreateObject();

	(void)state;
	setup_cfg(CONFIG_QUORUM_MAJORITY);
	peerpolicy_init(&pp, &cfg);
	peerpolicy_fill(&cfg, &ps);
	assert_string_equal(ps.token_quorum, "majority");
	assert_string_equal(ps.security_keys, "touch");
	peerpolicy_take(&pp, "portland", &ps);
	assert_true(pp.peers[0].heard);
	assert_int_equal(pp.peers[0].n, 0);
	assert_false(peerpolicy_refuses(&pp, &why));
	peerpolicy_json(&pp, "portland", o);
	assert_int_equal(
	        cJSON_GetArraySize(cJSON_GetObjectItem(o, "policy_mismatch")),
	        0);
	assert_int_equal(cJSON_GetObjectItem(o, "policy_mismatches")->valueint,
	                 0);
	cJSON_Delete(o);
	buf_free(&why);
}

static void test_differs(void **state)
{
	struct peerpolicy pp;
	Grantd__V1__PolicySettings ps;
	struct buf why = BUF_INIT;
	cJSON *o = cJSON_CreateObject(), *d;

	(void)state;
	for (int q = 0; q < 2; q++) {
		/* local among majority, and majority beside a local peer */
		setup_cfg(q ? CONFIG_QUORUM_MAJORITY : CONFIG_QUORUM_LOCAL);
		peerpolicy_init(&pp, &cfg);
		peerpolicy_fill(&cfg, &ps);
		ps.token_quorum = q ? "local" : "majority";
		ps.hotp_lookahead = 30;
		peerpolicy_take(&pp, "portland", &ps);
		assert_int_equal(pp.peers[0].n, 2);
		assert_true(peerpolicy_refuses(&pp, &why));
		assert_null(strchr(why.p, '\n'));
		assert_non_null(strstr(why.p, "portland"));
		assert_non_null(strstr(why.p, q ? "token_quorum = local"
		                                : "token_quorum = majority"));
		buf_reset(&why);
	}
	peerpolicy_json(&pp, "portland", o);
	d = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "policy_mismatch"), 1);
	assert_string_equal(cJSON_GetObjectItem(d, "key")->valuestring,
	                    "hotp_lookahead");
	assert_string_equal(cJSON_GetObjectItem(d, "here")->valuestring, "20");
	assert_string_equal(cJSON_GetObjectItem(d, "peer")->valuestring, "30");
	cJSON_Delete(o);

	/* other keys differ: shown, but tokens are not refused */
	setup_cfg(CONFIG_QUORUM_MAJORITY);
	peerpolicy_init(&pp, &cfg);
	peerpolicy_fill(&cfg, &ps);
	ps.security_keys = "off";
	ps.lockout_window = 60;
	peerpolicy_take(&pp, "portland", &ps);
	assert_int_equal(pp.peers[0].n, 2);
	assert_false(peerpolicy_refuses(&pp, &why));
	/* and once alike again, nothing differs */
	peerpolicy_fill(&cfg, &ps);
	peerpolicy_take(&pp, "portland", &ps);
	assert_int_equal(pp.peers[0].n, 0);
	/* a peer that sends no settings (an older grantd) is not compared;
	 * a missing value is a difference ("?") */
	peerpolicy_take(&pp, "portland", NULL);
	assert_int_equal(pp.peers[0].n, 0);
	ps.has_totp_window = 0;
	peerpolicy_take(&pp, "portland", &ps);
	assert_int_equal(pp.peers[0].n, 1);
	assert_string_equal(pp.peers[0].diff[0].there, "?");
	buf_free(&why);
}

static void test_mirrors_not_compared(void **state)
{
	struct peerpolicy pp;
	Grantd__V1__PolicySettings ps;
	struct buf why = BUF_INIT;

	(void)state;
	setup_cfg(CONFIG_QUORUM_MAJORITY);
	peerpolicy_init(&pp, &cfg);
	peerpolicy_fill(&cfg, &ps);
	ps.token_quorum = "local";
	peerpolicy_take(&pp, "montreal", &ps); /* a mirror */
	peerpolicy_take(&pp, "nosuchsite", &ps);
	assert_int_equal(pp.peers[1].n, 0);
	assert_false(peerpolicy_refuses(&pp, &why));
	/* this site a mirror: nothing compared */
	cfg.role = CONFIG_ROLE_MIRROR;
	peerpolicy_take(&pp, "portland", &ps);
	assert_int_equal(pp.peers[0].n, 0);
	assert_false(peerpolicy_refuses(&pp, &why));
	buf_free(&why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_alike),
	        cmocka_unit_test(test_differs),
	        cmocka_unit_test(test_mirrors_not_compared),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
