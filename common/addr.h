/*
 * addr.h: IP addresses and networks, the one place they are parsed.
 *
 * IPv4 and IPv6 are both accepted; an IPv4-mapped IPv6 address
 * (::ffff:192.0.2.7) is the IPv4 address, so a grant for one covers the
 * other.  A network's host bits must be zero only when `strict` is asked.
 */
#ifndef GD_ADDR_H
#define GD_ADDR_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct gd_net {
	int family;        /* AF_INET or AF_INET6 */
	uint8_t addr[16];  /* network byte order; 4 bytes used for AF_INET */
	int prefix;        /* 32 or 128 for a single address */
};

/* Longest text form addr_format() writes, with the NUL. */
#define ADDR_STRLEN 64

/*
 * Parse "ADDR" or, when allow_prefix, "ADDR/N".  Host bits under the prefix
 * are cleared (192.0.2.77/24 becomes 192.0.2.0/24).  Returns 0 or GD_EINVAL.
 */
int addr_parse(struct gd_net *out, const char *s, bool allow_prefix);

/* Widen an address to its /prefix network; GD_EINVAL if prefix is out of
 * range for the family. */
int addr_to_net(struct gd_net *out, const struct gd_net *ip, int prefix);

/* Canonical text: "192.0.2.7", "2001:db8::/48". */
void addr_format(char out[ADDR_STRLEN], const struct gd_net *net);

/* Whether ip (a single address) lies within net. */
bool addr_contains(const struct gd_net *net, const struct gd_net *ip);

#endif
