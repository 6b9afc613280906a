/*
 * ga2fa.c: kernel.org's 2fa files (ga2fa.h), read the way totp-cgi reads
 * them (totpcgi/backends/file.py): the secret is the first line, option
 * lines start with '"', a scratch code is a line of 8 characters (we take
 * the all-digit ones: only those can be typed as a token).
 */
#define _GNU_SOURCE /* timegm */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "ga2fa.h"
#include "xalloc.h"
#include "banned.h"

/* ---- secrets/USER.totp -------------------------------------------------- */

static int fail(const char **why, const char *text)
{
	*why = text;
	return GD_EINVAL;
}

/* The line at *p (without the newline, blanks around it cut) into line;
 * *p moves past it.  False at the end of text. */
static bool next_line(const char **p, char *line, size_t len)
{
	const char *s = *p, *e;
	size_t n;

	if (!*s)
		return false;
	e = s + strcspn(s, "\n");
	*p = *e ? e + 1 : e;
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && strchr(" \t\r", e[-1]))
		e--;
	n = (size_t)(e - s) < len - 1 ? (size_t)(e - s) : len - 1;
	memcpy(line, s, n);
	line[n] = '\0';
	return true;
}

static bool base32_ok(const char *s)
{
	size_t n = strlen(s);

	return n && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                      "abcdefghijklmnopqrstuvwxyz234567=") == n;
}

/* An option line, '"' and the blank after it already seen. */
static void option(struct ga2fa_secret *out, const char *o)
{
	if (!strncmp(o, "HOTP_COUNTER", 12)) {
		char *end;
		unsigned long long c = strtoull(o + 12, &end, 10);
		/* totp-cgi: a counter that is no number is 0 */
		out->hotp = true;
		out->counter = end == o + 12 ? 0 : c;
	}
}

int ga2fa_parse_secret(struct ga2fa_secret *out,
                       const char *text,
                       const char **why)
{
	char line[GA2FA_SECRET_MAX + 2];
	const char *p = text;

	memset(out, 0, sizeof(*out));
	if (!next_line(&p, line, sizeof(line)) || !*line)
		return fail(why, "no secret on the first line");
	if (!strncmp(line, "aes256+hmac256", 14)) {
		explicit_bzero(line, sizeof(line));
		return fail(why, "the secret is encrypted with a PIN "
		                 "(aes256+hmac256): it cannot be imported");
	}
	if (strlen(line) > GA2FA_SECRET_MAX || !base32_ok(line)) {
		explicit_bzero(line, sizeof(line));
		return fail(why, "the first line is no base32 secret");
	}
	memcpy(out->secret, line, strlen(line) + 1);
	explicit_bzero(line, sizeof(line));
	while (next_line(&p, line, sizeof(line))) {
		if (line[0] == '"') {
			option(out, line + 1 + strspn(line + 1, " "));
		} else if (strlen(line) == GA2FA_SCRATCH_LEN &&
		           strspn(line, "0123456789") == GA2FA_SCRATCH_LEN) {
			if (out->nscratch == GA2FA_MAX_SCRATCH) {
				ga2fa_secret_clear(out);
				explicit_bzero(line, sizeof(line));
				return fail(why, "more than 16 scratch codes");
			}
			memcpy(out->scratch[out->nscratch++], line,
			       GA2FA_SCRATCH_LEN + 1);
		}
	}
	explicit_bzero(line, sizeof(line));
	return 0;
}

void ga2fa_secret_clear(struct ga2fa_secret *s)
{
	explicit_bzero(s, sizeof(*s));
}

/* ---- state/USER.json ---------------------------------------------------- */

/* A scratch code as the state holds it: a string, or (older totp-cgi) a
 * number, which lost its leading zeros. */
static bool scratch_of(char out[GA2FA_SCRATCH_LEN + 1], const cJSON *j)
{
	if (cJSON_IsString(j) && strlen(j->valuestring) == GA2FA_SCRATCH_LEN) {
		memcpy(out, j->valuestring, GA2FA_SCRATCH_LEN + 1);
		return true;
	}
	if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble < 1e8) {
		snprintf(out, GA2FA_SCRATCH_LEN + 1, "%08lld",
		         (long long)j->valuedouble);
		return true;
	}
	return false;
}

static int
state_fields(struct ga2fa_state *out, const cJSON *root, const char **why)
{
	const cJSON *succ =
	        cJSON_GetObjectItemCaseSensitive(root, "success_timestamps");
	const cJSON *used =
	        cJSON_GetObjectItemCaseSensitive(root, "used_scratch_tokens");
	const cJSON *ctr = cJSON_GetObjectItemCaseSensitive(root, "counter");
	const cJSON *j;

	if ((succ && !cJSON_IsArray(succ)) || (used && !cJSON_IsArray(used)))
		return fail(why, "success_timestamps or used_scratch_tokens "
		                 "is not a list");
	cJSON_ArrayForEach(j, succ)
	{
		if (!cJSON_IsNumber(j) || j->valuedouble < 0)
			return fail(why, "a success timestamp is no number");
		if (!out->has_success ||
		    (int64_t)j->valuedouble > out->last_success)
			out->last_success = (int64_t)j->valuedouble;
		out->has_success = true;
	}
	cJSON_ArrayForEach(j, used)
	{
		if (out->nused == GA2FA_MAX_USED)
			return fail(why, "more than 64 used scratch codes");
		if (!scratch_of(out->used[out->nused], j))
			return fail(why, "a used scratch code is not 8 digits");
		out->nused++;
	}
	if (ctr && !cJSON_IsNumber(ctr))
		return fail(why, "counter is no number");
	if (ctr && ctr->valuedouble >= 0)
		out->counter = (int64_t)ctr->valuedouble;
	return 0;
}

int ga2fa_parse_state(struct ga2fa_state *out,
                      const char *json,
                      const char **why)
{
	cJSON *root = cJSON_Parse(json);
	int rc;

	memset(out, 0, sizeof(*out));
	out->counter = -1;
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fail(why, "not a JSON object");
	}
	rc = state_fields(out, root, why);
	cJSON_Delete(root);
	return rc;
}

/* ---- validations/USER.js ------------------------------------------------ */

int ga2fa_parse_time(int64_t *out, const char *s)
{
	struct tm tm = {0};
	int n = 0, oh = 0, om = 0;
	char sep, sign;
	const char *p;

	if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
	           &tm.tm_mday, &sep, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
	           &n) != 7 ||
	    (sep != ' ' && sep != 'T') || tm.tm_mon < 1 || tm.tm_mon > 12 ||
	    tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60)
		return GD_EINVAL;
	p = s + n;
	if (*p == '.')
		p += 1 + strspn(p + 1, "0123456789");
	sign = *p;
	if (sign == '+' || sign == '-') {
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || oh > 23 ||
		    om > 59)
			return GD_EINVAL;
		p += 1 + n;
	} else if (sign == 'Z') {
		p++;
	}
	if (*p)
		return GD_EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = (int64_t)timegm(&tm) - (sign == '-'   ? -1
	                               : sign == '+' ? 1
	                                             : 0) *
	                                      (oh * 3600 + om * 60);
	return 0;
}

static int one_val(struct ga2fa_val *v, const cJSON *e, const char **why)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "added");
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, "expires");

	if (!e->string || strlen(e->string) >= sizeof(v->net) ||
	    !cJSON_IsObject(e))
		return fail(why, "an entry is not NET: {...}");
	snprintf(v->net, sizeof(v->net), "%s", e->string);
	if (!cJSON_IsString(x) ||
	    ga2fa_parse_time(&v->expires, x->valuestring) < 0)
		return fail(why, "an entry has no expires time");
	if (!cJSON_IsString(a) ||
	    ga2fa_parse_time(&v->added, a->valuestring) < 0)
		v->added = 0;
	v->session = cJSON_GetObjectItemCaseSensitive(e, "sessionid") != NULL;
	return 0;
}

int ga2fa_parse_validations(struct ga2fa_val **out,
                            size_t *n,
                            const char *json,
                            const char **why)
{
	cJSON *root = cJSON_Parse(json);
	const cJSON *e;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fail(why, "not a JSON object");
	}
	*out = xcalloc((size_t)cJSON_GetArraySize(root) + 1, sizeof(**out));
	cJSON_ArrayForEach(e, root)
	{
		if ((rc = one_val(&(*out)[*n], e, why)) < 0)
			break;
		(*n)++;
	}
	cJSON_Delete(root);
	if (rc < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}
