/*
 * test_metrics.c: node/daemon/metrics.h, the exposition writer and the page.
 *
 * What a scraper relies on: label values and HELP texts escaped as the
 * text format says (a site name or a reason can never break a line),
 * histogram buckets cumulative and ending at le="+Inf" equal to _count,
 * values spelled as Prometheus reads them, and the page made from the
 * status parts the writer publishes (retired epochs not counted twice).
 * The endpoint itself (HTTP, /ready, promtool) is tested against real
 * nodes by tests/integration/test_metrics.sh.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "metrics.h"

static void has(const struct buf *b, const char *want)
{
	if (!strstr(buf_str(b), want))
		fail_msg("'%s' not in:\n%s", want, buf_str(b));
}

static void hasnt(const struct buf *b, const char *no)
{
	if (strstr(buf_str(b), no))
		fail_msg("'%s' unexpected in:\n%s", no, buf_str(b));
}

static void test_escaping(void **state)
{
	struct buf b = BUF_INIT;

	metrics_family(&b, "grantd_x_total", "counter",
		       "a \\ backslash\nand a \"quote\"");
	/* HELP escapes \ and newline, not the quote */
	has(&b, "# HELP grantd_x_total a \\\\ backslash\\nand a \"quote\"\n"
		"# TYPE grantd_x_total counter\n");
	buf_reset(&b);
	metrics_sample(&b, "grantd_x_total",
		       (const char *[]){ "reason", "a\"b\\c\nd", "peer", "p",
					 NULL }, 3);
	assert_string_equal(buf_str(&b),
			    "grantd_x_total{reason=\"a\\\"b\\\\c\\nd\","
			    "peer=\"p\"} 3\n");
	buf_reset(&b);
	metrics_sample(&b, "grantd_y", NULL, 0.25);
	metrics_sample(&b, "grantd_y", (const char *[]){ NULL }, 1e15);
	metrics_sample(&b, "grantd_y", NULL, NAN);
	metrics_sample(&b, "grantd_y", NULL, INFINITY);
	metrics_sample(&b, "grantd_y", NULL, -INFINITY);
	metrics_sample(&b, "grantd_y", NULL, 0.1);
	metrics_sample(&b, "grantd_y", NULL, -1);
	assert_string_equal(buf_str(&b),
			    "grantd_y 0.25\n"
			    "grantd_y 1000000000000000\n"
			    "grantd_y NaN\n"
			    "grantd_y +Inf\n"
			    "grantd_y -Inf\n"
			    "grantd_y 0.1\n"
			    "grantd_y -1\n");
	buf_free(&b);
}

static void test_histogram(void **state)
{
	struct metrics_counts c;
	struct buf b = BUF_INIT;

	metrics_counts_init(&c);
	/* fsync bounds (µs): 100, 250, 500, 1000, ... 1000000 */
	metrics_observe(&c.fsync, 50);       /* le 0.0001 */
	metrics_observe(&c.fsync, 100);      /* le 0.0001: bounds inclusive */
	metrics_observe(&c.fsync, 101);      /* le 0.00025 */
	metrics_observe(&c.fsync, 2000);     /* le 0.0025 */
	metrics_observe(&c.fsync, 5000000);  /* above the last bound */
	metrics_observe(NULL, 1);            /* NULL-safe */
	metrics_histogram(&b, "grantd_fsync_duration_seconds", "fsync.",
			  &c.fsync);
	has(&b, "# TYPE grantd_fsync_duration_seconds histogram\n");
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"0.0001\"} 2\n");
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"0.00025\"} 3\n");
	/* cumulative: an empty bucket repeats the count below it */
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"0.0005\"} 3\n");
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"0.001\"} 3\n");
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"0.0025\"} 4\n");
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"1\"} 4\n");
	has(&b, "grantd_fsync_duration_seconds_bucket{le=\"+Inf\"} 5\n"
		"grantd_fsync_duration_seconds_sum 5.002251\n"
		"grantd_fsync_duration_seconds_count 5\n");
	/* the buckets never go down, and +Inf is the last */
	{
		const char *p = buf_str(&b), *inf;
		double last = -1;
		while ((p = strstr(p, "_bucket{le=\""))) {
			const char *v = strchr(p, '}') + 2;
			double x = strtod(v, NULL);
			assert_true(x >= last);
			last = x;
			p = v;
		}
		inf = strstr(buf_str(&b), "le=\"+Inf\"");
		assert_non_null(inf);
		assert_null(strstr(inf + 1, "_bucket"));
	}
	buf_reset(&b);
	/* plain counts, scale 1 */
	metrics_observe(&c.commit_batches, 3);
	metrics_histogram(&b, "grantd_group_commit_batches", "batches.",
			  &c.commit_batches);
	has(&b, "grantd_group_commit_batches_bucket{le=\"2\"} 0\n"
		"grantd_group_commit_batches_bucket{le=\"4\"} 1\n");
	has(&b, "grantd_group_commit_batches_sum 3\n");
	buf_free(&b);
}

static cJSON *parse(const char *s)
{
	cJSON *j = cJSON_Parse(s);
	assert_non_null(j);
	return j;
}

static void test_render(void **state)
{
	struct metrics_counts c;
	struct buf b = BUF_INIT;
	cJSON *store = parse(
		"{\"site\":\"paloalto\",\"vector\":["
		"{\"origin\":\"paloalto\",\"epoch\":\"00\",\"seq\":7},"
		"{\"origin\":\"paloalto\",\"epoch\":\"a1\",\"seq\":5,"
		" \"retired\":true},"
		"{\"origin\":\"paloalto\",\"epoch\":\"b2\",\"seq\":3},"
		"{\"origin\":\"portland\",\"epoch\":\"c3\",\"seq\":4}],"
		"\"counts\":{\"users\":2,\"grants\":5,\"repos\":1,\"refs\":0,"
		"\"push_log_forks\":2,\"push_log_refused\":4}}");
	cJSON *repl = parse(
		"{\"peers\":[{\"site\":\"portland\",\"connected\":true,"
		"\"last_heard_ms\":120,\"lag_ops\":0,\"lag_ms\":0},"
		"{\"site\":\"montreal\",\"connected\":false,"
		"\"last_heard_ms\":-1,\"lag_ops\":12,\"lag_ms\":2500}],"
		"\"replication\":{\"dropped\":{\"forged_origin\":1,"
		"\"snapshot_record\":2}},"
		"\"git\":{\"pending_refs\":3,\"packs_fetched\":4,"
		"\"fetch_failures\":1,\"bytes_fetched\":1000,"
		"\"conflicts_kept\":2},\"refused_peers\":6,\"dropped\":9,"
		"\"quorum\":{\"mode\":\"majority\",\"voter\":true,"
		"\"frontends\":3,\"majority\":2,\"accepted\":7,"
		"\"refused\":2,\"promised\":5,\"votes_refused\":1,"
		"\"waiting\":0}}");

	metrics_counts_init(&c);
	metrics_inc(&c.vals[METRICS_VAL_VALID]);
	metrics_inc(&c.vals[METRICS_VAL_VALID]);
	metrics_inc(&c.checks[METRICS_CHECK_REFUSED]);
	metrics_inc(&c.lockouts);
	metrics_render(&b, store, repl, true, &c, "9.9.9");
	has(&b, "grantd_build_info{version=\"9.9.9\",site=\"paloalto\"} 1\n");
	has(&b, "grantd_syncing 1\n");
	/* 7 (retired total) + 3; the retired epoch's own 5 not again */
	has(&b, "grantd_ops_applied_total{origin=\"paloalto\"} 10\n");
	has(&b, "grantd_ops_applied_total{origin=\"portland\"} 4\n");
	has(&b, "grantd_records{kind=\"grants\"} 5\n");
	has(&b, "grantd_push_log_forks 2\n");
	has(&b, "grantd_push_log_refused_total 4\n");
	has(&b, "grantd_peer_connected{peer=\"portland\"} 1\n");
	has(&b, "grantd_peer_connected{peer=\"montreal\"} 0\n");
	has(&b, "grantd_peer_last_heard_seconds{peer=\"portland\"} 0.12\n");
	has(&b, "grantd_peer_last_heard_seconds{peer=\"montreal\"} -1\n");
	has(&b, "grantd_peer_lag_ops{peer=\"montreal\"} 12\n");
	has(&b, "grantd_peer_lag_seconds{peer=\"montreal\"} 2.5\n");
	has(&b, "grantd_peer_messages_dropped_total{reason=\"forged_origin\"} "
		"1\n");
	/* the drops without a reason of their own: 9 - 1 - 2 */
	has(&b, "grantd_peer_messages_dropped_total{reason=\"other\"} 6\n");
	has(&b, "grantd_peer_connections_refused_total 6\n");
	has(&b, "grantd_git_pending_refs 3\n");
	has(&b, "grantd_git_fetch_failures_total 1\n");
	has(&b, "grantd_git_conflicts_total 2\n");
	has(&b, "grantd_token_validations_total{result=\"valid\"} 2\n");
	has(&b, "grantd_token_validations_total{result=\"locked\"} 0\n");
	has(&b, "grantd_push_checks_total{result=\"refused\"} 1\n");
	has(&b, "grantd_lockouts_total 1\n");
	has(&b, "grantd_token_quorum_majority 1\n");
	has(&b, "grantd_token_quorum_voter 1\n");
	has(&b, "grantd_token_quorum_uses_total{result=\"accepted\"} 7\n");
	has(&b, "grantd_token_quorum_uses_total{result=\"refused\"} 2\n");
	has(&b, "grantd_token_quorum_votes_total{vote=\"yes\"} 5\n");
	has(&b, "grantd_token_quorum_votes_total{vote=\"no\"} 1\n");
	has(&b, "# TYPE grantd_git_fetch_duration_seconds histogram\n");
	/* every family has its HELP and TYPE, once */
	{
		const char *p = buf_str(&b);
		int helps = 0, types = 0;
		for (; (p = strstr(p, "# HELP ")); p++)
			helps++;
		for (p = buf_str(&b); (p = strstr(p, "# TYPE ")); p++)
			types++;
		assert_int_equal(helps, types);
		assert_true(helps >= 25);
	}
	/* nothing published yet: build info, syncing and counters only */
	buf_reset(&b);
	metrics_render(&b, NULL, NULL, false, NULL, "9.9.9");
	has(&b, "grantd_build_info{version=\"9.9.9\",site=\"\"} 1\n");
	has(&b, "grantd_syncing 0\n");
	hasnt(&b, "grantd_peer_connected");
	hasnt(&b, "grantd_token_quorum");
	cJSON_Delete(store);
	cJSON_Delete(repl);
	buf_free(&b);
}

static void test_unready(void **state)
{
	char dir[] = "/tmp/test_metrics.XXXXXX";

	assert_non_null(mkdtemp(dir));
	assert_null(metrics_unready(false, dir));
	assert_non_null(strstr(metrics_unready(true, dir), "syncing"));
	assert_non_null(strstr(metrics_unready(false, "/nonexistent/dir"),
			       "not writable"));
	rmdir(dir);
}

/* The endpoint has no authentication: only a loopback bind goes without
 * a warning (review N9). */
static void test_listen_public(void **state)
{
	(void)state;
	assert_false(metrics_listen_public("127.0.0.1:9100"));
	assert_false(metrics_listen_public("127.31.4.2:9100"));
	assert_false(metrics_listen_public("[::1]:9100"));
	assert_false(metrics_listen_public("[::ffff:127.0.0.1]:9100"));
	assert_true(metrics_listen_public("0.0.0.0:9100"));
	assert_true(metrics_listen_public("192.0.2.1:9100"));
	assert_true(metrics_listen_public("[::]:9100"));
	assert_true(metrics_listen_public("[2001:db8::1]:9100"));
	assert_false(metrics_listen_public("no port"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_unready),
		cmocka_unit_test(test_listen_public),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
