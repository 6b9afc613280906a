/*
 * test_pushleaf.c: common/pushleaf.h, the text of a push log leaf: the
 * text written, read back, and every way a text is refused.  The address
 * commitment's known answer was computed apart from this code (python3
 * hashlib.sha256 over "grantd addr v1\n" || bytes 0..31 || "192.0.2.7").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "err.h"
#include "pushleaf.h"

#define Z      "0000000000000000000000000000000000000000"
#define A      "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
#define B      "9f0c1d2e3b4a59687766554433221100ffeeddcc"
#define COMMIT "UjjYpT5UGZc2QHsfGhq06OY0Dau9mfUyjRoLvfFfUqk="

static const char text[] = "grantd push v1\n"
                           "origin paloalto\n"
                           "index 12\n"
                           "time 1764892800123\n"
                           "repo linux/kernel\n"
                           "user alice\n"
                           "key SHA256:abcDEF0123+/xyz\n"
                           "kind sk-touch\n"
                           "factor security-key\n"
                           "addr " COMMIT "\n"
                           "ref refs/heads/main " A " " B "\n"
                           "ref refs/tags/v1 " Z " " A "\n";

static void test_round_trip(void **state)
{
	struct pushleaf l;
	struct buf out = BUF_INIT;

	(void)state;
	assert_int_equal(pushleaf_parse(&l, text, strlen(text)), 0);
	assert_string_equal(l.origin, "paloalto");
	assert_int_equal(l.index, 12);
	assert_int_equal(l.time_ms, 1764892800123LL);
	assert_string_equal(l.repo, "linux/kernel");
	assert_string_equal(l.user, "alice");
	assert_string_equal(l.kind, "sk-touch");
	assert_string_equal(l.factor, "security-key");
	assert_true(l.has_addr);
	assert_int_equal(l.nrefs, 2);
	assert_string_equal(l.refs[1].ref, "refs/tags/v1");
	assert_string_equal(l.refs[1].old, Z);
	assert_string_equal(l.refs[1].new_, A);
	assert_int_equal(pushleaf_format(&out, &l), 0);
	assert_int_equal(out.len, strlen(text));
	assert_memory_equal(out.p, text, out.len);
	pushleaf_free(&l);
	pushleaf_free(&l); /* again: harmless */
	buf_free(&out);
}

static void test_dashes(void **state)
{
	struct pushleaf_ref r = {"refs/heads/x", Z, A};
	struct pushleaf l = {.origin = "site-b",
	                     .index = 0,
	                     .time_ms = 0,
	                     .repo = "r",
	                     .nrefs = 1,
	                     .refs = &r};
	struct pushleaf back;
	struct buf out = BUF_INIT;
	static const char want[] = "grantd push v1\norigin site-b\nindex 0\n"
	                           "time 0\nrepo r\nuser -\nkey -\nkind -\n"
	                           "factor -\naddr -\n"
	                           "ref refs/heads/x " Z " " A "\n";

	(void)state;
	assert_int_equal(pushleaf_format(&out, &l), 0);
	assert_string_equal(out.p, want);
	assert_int_equal(pushleaf_parse(&back, out.p, out.len), 0);
	assert_string_equal(back.user, "");
	assert_string_equal(back.key, "");
	assert_false(back.has_addr);
	pushleaf_free(&back);
	buf_free(&out);
}

static void test_addr_commit(void **state)
{
	uint8_t salt[PUSHLEAF_SALT_LEN], c[PUSHLEAF_COMMIT_LEN];
	char b64[64];

	(void)state;
	for (int i = 0; i < PUSHLEAF_SALT_LEN; i++)
		salt[i] = (uint8_t)i;
	pushleaf_addr_commit(c, salt, "192.0.2.7");
	sodium_bin2base64(b64, sizeof(b64), c, sizeof(c),
	                  sodium_base64_VARIANT_ORIGINAL);
	assert_string_equal(b64, COMMIT);
}

/* text with the first occurrence of from replaced by to */
static int parse_edited(const char *from, const char *to)
{
	char buf[4096];
	const char *at = strstr(text, from);
	struct pushleaf l;
	int rc;

	assert_non_null(at);
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - text), text, to,
	         at + strlen(from));
	rc = pushleaf_parse(&l, buf, strlen(buf));
	pushleaf_free(&l);
	return rc;
}

static void test_refusals(void **state)
{
	static const char *const edits[][2] = {
	        {"grantd push v1\n", "grantd push v2\n"},
	        {"origin paloalto", "origin Palo"},
	        {"origin paloalto\n", ""},
	        {"index 12", "index 012"},
	        {"index 12", "index -1"},
	        {"index 12", "index 99999999999999999999"},
	        {"index 12", "index 9223372036854775808"},
	        {"index 12", "index "},
	        {"time 1764892800123", "time 1764892800123 "},
	        {"repo linux/kernel", "repo linux/kernel.git"},
	        {"user alice", "user Alice"},
	        {"user alice", "user al ice"},
	        {"key SHA256:abcDEF0123+/xyz", "key MD5:ab"},
	        {"kind sk-touch", "kind fido"},
	        {"kind sk-touch", "kind"},
	        {"factor security-key", "factor luck"},
	        {"addr " COMMIT,
	         "addr UjjYpT5UGZc2QHsfGhq06OY0Dau9mfUyjRoLvfFfUqk"},
	        {"addr " COMMIT,
	         "addr UjjYpT5UGZc2QHsfGhq06OY0Dau9mfUyjRoLvfFfUql="},
	        {"addr ", "addr  "},
	        {"refs/heads/main " A, "refs/heads/main " A " "},
	        {"refs/heads/main", "heads/main"},
	        {"refs/heads/main", "refs/heads/ma\tin"},
	        {"refs/heads/main " A,
	         "refs/heads/main 3B18E512DBA79E4C8300DD08AEB37F8E728B8DAD"},
	        {"refs/heads/main " A, "refs/heads/main " A "0"},
	        {"user alice\nkey", "key SHA256:x\nuser alice\nkey"},
	        {"ref refs/tags/v1 " Z " " A "\n", "ref refs/tags/v1 " Z " " A},
	        {"ref refs/tags/v1 " Z " " A "\n",
	         "ref refs/tags/v1 " Z " " A "\r\n"},
	        {"ref refs/tags/v1 " Z " " A "\n",
	         "ref refs/tags/v1 " Z " " A "\nextra 1\n"},
	        {"\nref refs/heads/main " A " " B "\nref refs/tags/v1 " Z " " A
	         "\n",
	         "\n"},
	};

	(void)state;
	assert_int_equal(parse_edited("index 12", "index 12"), 0);
	assert_int_equal(parse_edited("user alice", "user -"), 0);
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		if (parse_edited(edits[i][0], edits[i][1]) != GD_EINVAL)
			fail_msg("edit %zu (%s -> %s) parsed", i, edits[i][0],
			         edits[i][1]);
	}
}

static void test_format_refuses(void **state)
{
	struct pushleaf_ref r = {"refs/heads/x", Z, A};
	struct pushleaf l = {
	        .origin = "s", .repo = "r", .nrefs = 1, .refs = &r};
	struct buf out = BUF_INIT;

	(void)state;
	strcpy(l.user, "bad\nuser");
	assert_int_equal(pushleaf_format(&out, &l), GD_EINVAL);
	assert_int_equal(out.len, 0);
	l.user[0] = '\0';
	l.nrefs = 0;
	assert_int_equal(pushleaf_format(&out, &l), GD_EINVAL);
	l.nrefs = 1;
	strcpy(r.new_, "zz");
	assert_int_equal(pushleaf_format(&out, &l), GD_EINVAL);
	strcpy(r.new_, A);
	l.time_ms = -1;
	assert_int_equal(pushleaf_format(&out, &l), GD_EINVAL);
	l.time_ms = 5;
	assert_int_equal(pushleaf_format(&out, &l), 0);
	buf_free(&out);
}

static void test_bounds(void **state)
{
	struct pushleaf_ref *refs =
	        calloc(PUSHLEAF_MAX_REFS + 1, sizeof(*refs));
	struct pushleaf l = {.origin = "s", .repo = "r", .refs = refs};
	struct pushleaf back;
	struct buf out = BUF_INIT;
	size_t n;

	(void)state;
	assert_non_null(refs);
	for (size_t i = 0; i <= PUSHLEAF_MAX_REFS; i++) {
		memcpy(refs[i].ref, "refs/x", 7);
		memcpy(refs[i].old, Z, sizeof(Z));
		memcpy(refs[i].new_, A, sizeof(A));
	}
	/* the most ref lines, short: fits */
	l.nrefs = PUSHLEAF_MAX_REFS;
	assert_int_equal(pushleaf_format(&out, &l), 0);
	assert_true(out.len <= PUSHLEAF_TEXT_MAX);
	assert_int_equal(pushleaf_parse(&back, out.p, out.len), 0);
	assert_int_equal(back.nrefs, PUSHLEAF_MAX_REFS);
	pushleaf_free(&back);
	/* one more: refused, written or read */
	l.nrefs = PUSHLEAF_MAX_REFS + 1;
	assert_int_equal(pushleaf_format(&out, &l), GD_EINVAL);
	l.nrefs = PUSHLEAF_MAX_REFS;
	assert_int_equal(pushleaf_format(&out, &l), 0);
	buf_printf(&out, "ref refs/x %s %s\n", Z, A);
	assert_int_equal(pushleaf_parse(&back, out.p, out.len), GD_EINVAL);
	pushleaf_free(&back);
	/* the longest names: the text would pass PUSHLEAF_TEXT_MAX */
	memset(l.repo, 'r', PUSHLEAF_REPO_MAX);
	for (n = 0; n < PUSHLEAF_MAX_REFS; n++) {
		memset(refs[n].ref, 'a', PUSHLEAF_REF_MAX);
		memcpy(refs[n].ref, "refs/", 5);
	}
	assert_int_equal(pushleaf_format(&out, &l), GD_EINVAL);
	assert_int_equal(out.len, 0);
	/* as many as fit */
	n = (PUSHLEAF_TEXT_MAX - 1024 - PUSHLEAF_REPO_MAX) /
	    (PUSHLEAF_REF_MAX + 2 * PUSHLEAF_OID_HEX + 7);
	l.nrefs = n;
	assert_int_equal(pushleaf_format(&out, &l), 0);
	assert_int_equal(pushleaf_parse(&back, out.p, out.len), 0);
	pushleaf_free(&back);
	assert_int_equal(pushleaf_parse(&back, out.p, PUSHLEAF_TEXT_MAX + 1),
	                 GD_ETOOBIG);
	pushleaf_free(&back);
	free(refs);
	buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_round_trip),
	        cmocka_unit_test(test_dashes),
	        cmocka_unit_test(test_addr_commit),
	        cmocka_unit_test(test_refusals),
	        cmocka_unit_test(test_format_refuses),
	        cmocka_unit_test(test_bounds),
	};
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
