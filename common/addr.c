/*
 * addr.c: address and CIDR parsing with inet_pton, canonical formatting
 * with inet_ntop, and containment.  Shared by the node (grants, checks) and
 * the clients (argument checks) so both agree on what an address is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "err.h"
#include "banned.h"

static void addr_mask(struct gd_net *n)
{
	int bits = n->family == AF_INET ? 32 : 128;
	for (int i = n->prefix; i < bits; i++)
		n->addr[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
}

int addr_parse(struct gd_net *out, const char *s, bool allow_prefix)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t hlen = slash ? (size_t)(slash - s) : strlen(s);
	int prefix = -1;

	memset(out, 0, sizeof(*out));
	if (hlen == 0 || hlen >= sizeof(host))
		return GD_EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (slash) {
		const char *p = slash + 1;
		char *end;
		if (!allow_prefix || *p < '0' || *p > '9' || strlen(p) > 3)
			return GD_EINVAL;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || *end || v < 0 || v > 128)
			return GD_EINVAL;
		prefix = (int)v;
	}
	if (inet_pton(AF_INET, host, out->addr) == 1) {
		out->family = AF_INET;
		out->prefix = 32;
	} else if (inet_pton(AF_INET6, host, out->addr) == 1) {
		static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0,
						    0, 0, 0, 0, 0xff, 0xff };
		out->family = AF_INET6;
		out->prefix = 128;
		if (!memcmp(out->addr, mapped, sizeof(mapped))) {
			memmove(out->addr, out->addr + 12, 4);
			memset(out->addr + 4, 0, 12);
			out->family = AF_INET;
			out->prefix = 32;
			if (prefix >= 0) {
				/* ::ffff:a.b.c.d/N counts the 96 mapped bits */
				if (prefix < 96)
					return GD_EINVAL;
				prefix -= 96;
			}
		}
	} else {
		return GD_EINVAL;
	}
	if (prefix >= 0) {
		if (prefix > out->prefix)
			return GD_EINVAL;
		out->prefix = prefix;
		addr_mask(out);
	}
	return 0;
}

int addr_to_net(struct gd_net *out, const struct gd_net *ip, int prefix)
{
	int bits = ip->family == AF_INET ? 32 : 128;
	if (prefix < 0 || prefix > bits)
		return GD_EINVAL;
	*out = *ip;
	out->prefix = prefix;
	addr_mask(out);
	return 0;
}

void addr_format(char out[ADDR_STRLEN], const struct gd_net *net)
{
	char host[INET6_ADDRSTRLEN];
	int bits = net->family == AF_INET ? 32 : 128;

	if (!inet_ntop(net->family, net->addr, host, sizeof(host)))
		host[0] = '\0';
	if (net->prefix == bits)
		snprintf(out, ADDR_STRLEN, "%s", host);
	else
		snprintf(out, ADDR_STRLEN, "%s/%d", host, net->prefix);
}

bool addr_contains(const struct gd_net *net, const struct gd_net *ip)
{
	if (net->family != ip->family)
		return false;
	int full = net->prefix / 8, rest = net->prefix % 8;
	if (memcmp(net->addr, ip->addr, (size_t)full))
		return false;
	if (rest) {
		uint8_t m = (uint8_t)(0xff00u >> rest);
		if ((net->addr[full] & m) != (ip->addr[full] & m))
			return false;
	}
	return true;
}
