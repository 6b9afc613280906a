/* confval.c: the shapes of config values that are more than a word. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "confval.h"
#include "banned.h"

bool confval_endpoint(const char *v)
{
	return !strncmp(v, "tcp://", 6) || !strncmp(v, "ipc://", 6);
}

/* What users type after ssh: a DNS name (labels of letters, digits and
 * '-', joined by '.'), optionally after the account and '@'
 * (git@git.example.org: users need not set User in their ssh_config). */
bool confval_host(const char *v)
{
	const char *at = strchr(v, '@');
	size_t n;

	if (at) {
		if (at == v || *v == '-' || at - v > 32)
			return false;
		for (const char *p = v; p < at; p++)
			if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
				return false;
		v = at + 1;
	}
	n = strlen(v);
	if (n == 0 || n > 253 || v[0] == '.' || v[0] == '-' || v[n - 1] == '.')
		return false;
	for (const char *p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' &&
		    !(*p == '.' && p[1] != '.'))
			return false;
	return true;
}

/* ADDRESS:PORT, the address an IPv4 dotted quad, a name, or [IPv6]. */
bool confval_listen(const char *v)
{
	const char *colon = strrchr(v, ':');
	char *end;
	long port;

	if (!colon || colon == v)
		return false;
	if (v[0] == '[' && colon[-1] != ']')
		return false;
	if (v[0] != '[' && memchr(v, ':', (size_t)(colon - v)))
		return false;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	return !errno && end != colon + 1 && !*end && port > 0 && port < 65536;
}
