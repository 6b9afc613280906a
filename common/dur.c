/* dur.c: duration parsing and printing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dur.h"
#include "err.h"
#include "banned.h"

#define DUR_MAX (10LL * 366 * 86400)

int dur_parse(int64_t *out, const char *s)
{
	char *end;
	int64_t mult;

	if (!s || *s < '0' || *s > '9' || strlen(s) > 20)
		return GD_EINVAL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || v <= 0)
		return GD_EINVAL;
	if (!*end || end[1])
		return GD_EINVAL; /* no unit, or more than one character */
	switch (*end) {
	case 's':
		mult = 1;
		break;
	case 'm':
		mult = 60;
		break;
	case 'h':
		mult = 3600;
		break;
	case 'd':
		mult = 86400;
		break;
	case 'w':
		mult = 7 * 86400;
		break;
	default:
		return GD_EINVAL;
	}
	if (v > DUR_MAX / mult)
		return GD_EINVAL;
	*out = v * mult;
	return 0;
}

int dur_parse_ms(int64_t *out, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	char *end;

	if (n > 2 && !strcmp(s + n - 2, "ms")) {
		if (*s < '0' || *s > '9' || n > 20)
			return GD_EINVAL;
		errno = 0;
		long long v = strtoll(s, &end, 10);
		if (errno || v <= 0 || end != s + n - 2 || v > DUR_MAX)
			return GD_EINVAL;
		*out = v;
		return 0;
	}
	int64_t sec;
	if (dur_parse(&sec, s) < 0)
		return GD_EINVAL;
	*out = sec * 1000;
	return 0;
}

void dur_format(char *out, size_t outlen, int64_t s)
{
	static const struct {
		int64_t n;
		char u;
	} units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
	size_t off = 0;
	int shown = 0;

	if (outlen)
		out[0] = '\0';
	if (s <= 0) {
		snprintf(out, outlen, "0s");
		return;
	}
	for (size_t i = 0; i < GD_ARRAY_SIZE(units) && shown < 2; i++) {
		int64_t q = s / units[i].n;
		if (!q)
			continue;
		s -= q * units[i].n;
		int n = snprintf(out + off, outlen - off, "%s%lld%c",
		                 shown ? " " : "", (long long)q, units[i].u);
		if (n < 0 || (size_t)n >= outlen - off)
			return;
		off += (size_t)n;
		shown++;
	}
}
