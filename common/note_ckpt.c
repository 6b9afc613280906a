/*
 * note_ckpt.c: C2SP tlog-checkpoint texts (note.h).
 *
 * A checkpoint's text is what a log signs and a cosigner cosigns: origin,
 * tree size and root hash, one per line, then optional extension lines.
 * The parser accepts exactly one spelling of a size and a hash, so two
 * texts of one tree head are the same bytes.
 */
#include <sodium.h>
#include <string.h>

#include "err.h"
#include "note.h"
#include "banned.h"

/* The line at *p (up to "\n", which must be there), its length in *n;
 * *p moves past it. */
static const char *next_line(const char **p, const char *end, size_t *n)
{
	const char *line = *p, *nl;

	if (*p >= end)
		return NULL;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	if (!nl)
		return NULL;
	*n = (size_t)(nl - line);
	*p = nl + 1;
	return line;
}

/* Decimal, no leading zero, < 2^63. */
static int parse_size(int64_t *out, const char *s, size_t n)
{
	int64_t v = 0;

	if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
		return GD_EINVAL;
	for (size_t i = 0; i < n; i++) {
		int d = s[i] - '0';
		if (d < 0 || d > 9 || v > (INT64_MAX - d) / 10)
			return GD_EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_root(struct tlog_hash *out, const char *s, size_t n)
{
	uint8_t bin[TLOG_HASH_LEN + 3];

	/* 32 bytes are 44 characters, the last one "=" */
	if (n != 44 || note_b64_decode(bin, sizeof(bin), s, n) != TLOG_HASH_LEN)
		return GD_EINVAL;
	memcpy(out->b, bin, TLOG_HASH_LEN);
	return 0;
}

int note_checkpoint_parse(struct note_checkpoint *out,
                          const char *text,
                          size_t len)
{
	const char *p = text, *end = text + len, *line;
	struct note_checkpoint c = {0};
	size_t n;

	if (!note_text_ok(text, len))
		return GD_EINVAL;
	line = next_line(&p, end, &n);
	if (!line || n == 0 || n > NOTE_NAME_MAX)
		return GD_EINVAL;
	memcpy(c.origin, line, n);
	c.origin_len = n;
	line = next_line(&p, end, &n);
	if (!line || parse_size(&c.size, line, n))
		return GD_EINVAL;
	line = next_line(&p, end, &n);
	if (!line || parse_root(&c.root, line, n))
		return GD_EINVAL;
	c.ext = p;
	c.ext_len = (size_t)(end - p);
	while ((line = next_line(&p, end, &n)))
		if (n == 0)
			return GD_EINVAL; /* extension lines are non-empty */
	if (p != end)
		return GD_EINVAL;
	if (c.ext_len == 0)
		c.ext = NULL;
	*out = c;
	return 0;
}

int note_checkpoint_format(struct buf *out,
                           const char *origin,
                           size_t len,
                           int64_t size,
                           const struct tlog_hash *root)
{
	char b64[sodium_base64_ENCODED_LEN(TLOG_HASH_LEN,
	                                   sodium_base64_VARIANT_ORIGINAL)];

	if (len == 0 || len > NOTE_NAME_MAX || size < 0 ||
	    memchr(origin, '\n', len))
		return GD_EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)origin[i] < 0x20)
			return GD_EINVAL;
	sodium_bin2base64(b64, sizeof(b64), root->b, TLOG_HASH_LEN,
	                  sodium_base64_VARIANT_ORIGINAL);
	buf_add(out, origin, len);
	buf_printf(out, "\n%lld\n%s\n", (long long)size, b64);
	return 0;
}
