/*
 * test_addr.c: common/addr.h, the one parser of addresses and networks.
 *
 * Grants are keyed by what addr_parse() and addr_format() make of the
 * client's address, and push checks ask addr_contains(), so every form an
 * ssh client can show up with (IPv4, IPv6, IPv4-mapped IPv6) must land on
 * one canonical value, and every malformed string must be refused.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "addr.h"
#include "err.h"

static void parse_ok(struct gd_net *n, const char *s, bool allow_prefix)
{
	if (addr_parse(n, s, allow_prefix) != 0)
		fail_msg("addr_parse refused '%s'", s);
}

/* Parse s (which must be good) and compare its canonical text. */
static void canon_is(const char *s, bool allow_prefix, const char *want)
{
	char out[ADDR_STRLEN];
	struct gd_net n;

	parse_ok(&n, s, allow_prefix);
	addr_format(out, &n);
	if (strcmp(out, want))
		fail_msg("'%s' formats as '%s', want '%s'", s, out, want);
}

static void parse_bad(const char *s, bool allow_prefix)
{
	struct gd_net n;
	int rc = addr_parse(&n, s, allow_prefix);
	if (rc != GD_EINVAL)
		fail_msg("addr_parse('%s', %s) = %d, want GD_EINVAL", s,
			 allow_prefix ? "true" : "false", rc);
}

static bool contains(const char *net, const char *ip)
{
	struct gd_net n, i;

	parse_ok(&n, net, true);
	parse_ok(&i, ip, false);
	return addr_contains(&n, &i);
}

static void test_ipv4(void **state)
{
	struct gd_net n;

	parse_ok(&n, "192.0.2.7", false);
	assert_int_equal(n.family, AF_INET);
	assert_int_equal(n.prefix, 32);
	assert_memory_equal(n.addr, ((uint8_t[]){ 192, 0, 2, 7 }), 4);
	canon_is("192.0.2.7", false, "192.0.2.7");
	canon_is("0.0.0.0", false, "0.0.0.0");
	canon_is("255.255.255.255", false, "255.255.255.255");
	/* a single address is fine where a prefix is allowed */
	canon_is("192.0.2.7", true, "192.0.2.7");
}

static void test_ipv6(void **state)
{
	struct gd_net n;

	parse_ok(&n, "2001:db8::7", false);
	assert_int_equal(n.family, AF_INET6);
	assert_int_equal(n.prefix, 128);
	assert_memory_equal(n.addr,
			    ((uint8_t[]){ 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
					  0, 0, 0, 0, 0, 0, 0, 7 }), 16);
	canon_is("2001:db8::7", false, "2001:db8::7");
	/* canonical text is lower case with the zeros compressed */
	canon_is("2001:0DB8:0000:0000:0000:0000:0000:0007", false,
		 "2001:db8::7");
	canon_is("::1", false, "::1");
	canon_is("::", false, "::");
}

static void test_v4_mapped(void **state)
{
	struct gd_net v4, mapped, hex;

	parse_ok(&v4, "192.0.2.7", false);
	parse_ok(&mapped, "::ffff:192.0.2.7", false);
	parse_ok(&hex, "::FFFF:c000:0207", false);
	assert_int_equal(mapped.family, AF_INET);
	assert_int_equal(mapped.prefix, 32);
	assert_memory_equal(&mapped, &v4, sizeof(v4));
	assert_memory_equal(&hex, &v4, sizeof(v4));
	canon_is("::ffff:192.0.2.7", false, "192.0.2.7");

	/* a v4 grant covers the mapped form of the same client, and back */
	assert_true(contains("192.0.2.0/24", "::ffff:192.0.2.7"));
	assert_true(contains("192.0.2.7", "::ffff:192.0.2.7"));
	assert_true(contains("::ffff:192.0.2.7", "192.0.2.7"));
	canon_is("::ffff:192.0.2.0/120", true, "192.0.2.0/24");
	assert_true(contains("::ffff:192.0.2.0/120", "192.0.2.99"));
	assert_false(contains("::ffff:192.0.2.0/120", "192.0.3.1"));

	/* other addresses that embed an IPv4 address stay IPv6 */
	parse_ok(&hex, "::ffff:0:c000:207", false);
	assert_int_equal(hex.family, AF_INET6);
	parse_ok(&hex, "64:ff9b::192.0.2.7", false);
	assert_int_equal(hex.family, AF_INET6);
	assert_false(contains("192.0.2.7", "64:ff9b::192.0.2.7"));
}

static void test_cidr_clears_host_bits(void **state)
{
	struct gd_net n;

	parse_ok(&n, "192.0.2.77/24", true);
	assert_int_equal(n.family, AF_INET);
	assert_int_equal(n.prefix, 24);
	assert_memory_equal(n.addr, ((uint8_t[]){ 192, 0, 2, 0 }), 4);
	canon_is("192.0.2.77/24", true, "192.0.2.0/24");
	canon_is("10.1.2.3/8", true, "10.0.0.0/8");
	canon_is("192.0.2.255/25", true, "192.0.2.128/25");
	canon_is("172.31.255.255/12", true, "172.16.0.0/12");
	canon_is("192.0.2.7/32", true, "192.0.2.7");
	canon_is("192.0.2.7/0", true, "0.0.0.0/0");
	canon_is("2001:db8:1234:5678::1/48", true, "2001:db8:1234::/48");
	canon_is("2001:db8::ff/121", true, "2001:db8::80/121");
	canon_is("2001:db8::1/128", true, "2001:db8::1");
	canon_is("::/0", true, "::/0");
	canon_is("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/1", true, "8000::/1");
}

static void test_bad_input(void **state)
{
	static const char *bad[] = {
		"1.2.3", "1.2.3.4.5", "1.2.3.256", "256.1.1.1", "abc", "",
		"010.0.0.1", " 1.2.3.4", "1.2.3.4 ", "1.2.3.4\n", "1.2.3.-4",
		"1.2.3.4/", "/24", "/", "1.2.3.4/33", "1.2.3.4/-1",
		"1.2.3.4/+8", "1.2.3.4/ 8", "1.2.3.4/8 ", "1.2.3.4/8/8",
		"1.2.3.4/0x8", "1.2.3.4/1000", "1.2.3.4/99999999999999999999",
		"::1/129", "::1/200", "2001:db8::/", "2001:db8:::1",
		"2001:db8::g", "1:2:3:4:5:6:7:8:9", "fe80::1%eth0",
		"[2001:db8::1]", "192.0.2.7:22", "localhost",
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		parse_bad(bad[i], true);

	/* far longer than any address */
	char longs[300];
	memset(longs, '1', sizeof(longs) - 1);
	longs[sizeof(longs) - 1] = '\0';
	parse_bad(longs, true);
	memcpy(longs, "1.2.3.4/", 8);
	parse_bad(longs, true);
}

static void test_prefix_not_allowed(void **state)
{
	parse_bad("192.0.2.0/24", false);
	parse_bad("192.0.2.7/32", false);
	parse_bad("2001:db8::/48", false);
	parse_bad("::ffff:192.0.2.7/128", false);
	parse_bad("1.2.3.4/", false);
}

static void test_contains(void **state)
{
	assert_true(contains("192.0.2.128/25", "192.0.2.128"));
	assert_true(contains("192.0.2.128/25", "192.0.2.255"));
	assert_false(contains("192.0.2.128/25", "192.0.2.127"));
	assert_false(contains("192.0.2.128/25", "192.0.3.128"));
	assert_true(contains("172.16.0.0/12", "172.31.1.2"));
	assert_false(contains("172.16.0.0/12", "172.32.0.0"));
	assert_true(contains("192.0.2.7", "192.0.2.7"));
	assert_false(contains("192.0.2.7", "192.0.2.8"));
	assert_true(contains("0.0.0.0/0", "203.0.113.9"));

	assert_true(contains("2001:db8::/32", "2001:db8:ffff::1"));
	assert_false(contains("2001:db8::/32", "2001:db9::1"));
	assert_true(contains("2001:db8::80/121", "2001:db8::ff"));
	assert_false(contains("2001:db8::80/121", "2001:db8::7f"));
	assert_true(contains("2001:db8::1", "2001:db8::1"));
	assert_false(contains("2001:db8::1", "2001:db8::2"));
	assert_true(contains("::/0", "2001:db8::1"));
}

static void test_contains_across_families(void **state)
{
	/* a network of one family never holds an address of the other,
	 * not even the all-covering /0 */
	assert_false(contains("0.0.0.0/0", "::1"));
	assert_false(contains("0.0.0.0/0", "2001:db8::1"));
	assert_false(contains("::/0", "192.0.2.7"));
	assert_false(contains("::/0", "::ffff:192.0.2.7"));
	assert_false(contains("2001:db8::/32", "192.0.2.7"));
	assert_false(contains("192.0.2.0/24", "2001:db8::c000:207"));
	/* ...but a mapped address is the IPv4 one */
	assert_true(contains("0.0.0.0/0", "::ffff:203.0.113.9"));
}

static void test_to_net(void **state)
{
	struct gd_net ip, net;
	char out[ADDR_STRLEN];

	parse_ok(&ip, "192.0.2.77", false);
	assert_int_equal(addr_to_net(&net, &ip, 24), 0);
	addr_format(out, &net);
	assert_string_equal(out, "192.0.2.0/24");
	assert_true(addr_contains(&net, &ip));
	/* ip itself is left as it was */
	addr_format(out, &ip);
	assert_string_equal(out, "192.0.2.77");

	assert_int_equal(addr_to_net(&net, &ip, 32), 0);
	addr_format(out, &net);
	assert_string_equal(out, "192.0.2.77");
	assert_int_equal(addr_to_net(&net, &ip, 0), 0);
	addr_format(out, &net);
	assert_string_equal(out, "0.0.0.0/0");
	assert_int_equal(addr_to_net(&net, &ip, 33), GD_EINVAL);
	assert_int_equal(addr_to_net(&net, &ip, -1), GD_EINVAL);

	/* a mapped client address widens as IPv4 */
	parse_ok(&ip, "::ffff:192.0.2.77", false);
	assert_int_equal(addr_to_net(&net, &ip, 12), 0);
	addr_format(out, &net);
	assert_string_equal(out, "192.0.0.0/12");

	parse_ok(&ip, "2001:db8:1234:5678::1", false);
	assert_int_equal(addr_to_net(&net, &ip, 48), 0);
	addr_format(out, &net);
	assert_string_equal(out, "2001:db8:1234::/48");
	assert_int_equal(addr_to_net(&net, &ip, 128), 0);
	assert_int_equal(addr_to_net(&net, &ip, 129), GD_EINVAL);
	assert_int_equal(addr_to_net(&net, &ip, -1), GD_EINVAL);
}

static void test_format_fits(void **state)
{
	/* the longest text forms fit ADDR_STRLEN with room to spare */
	char out[ADDR_STRLEN];
	struct gd_net n;

	parse_ok(&n, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127", true);
	addr_format(out, &n);
	assert_string_equal(out, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127");
	parse_ok(&n, "255.255.255.254/31", true);
	addr_format(out, &n);
	assert_string_equal(out, "255.255.255.254/31");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_cidr_clears_host_bits),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_prefix_not_allowed),
		cmocka_unit_test(test_contains),
		cmocka_unit_test(test_contains_across_families),
		cmocka_unit_test(test_to_net),
		cmocka_unit_test(test_format_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
