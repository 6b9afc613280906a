/*
 * dur.h: durations, the one place they are parsed and printed.
 *
 * Text form: a positive integer and a unit, s m h d or w ("90s", "15m",
 * "24h", "30d", "2w"); a bare integer is seconds.
 */
#ifndef GD_DUR_H
#define GD_DUR_H

#include <stdint.h>
#include <stddef.h>

/* Seconds in *out; GD_EINVAL for anything else, including 0 and values
 * beyond ten years. */
int dur_parse(int64_t *out, const char *s);

/* Milliseconds in *out: "500ms", or any duration dur_parse takes ("2s").
 * GD_EINVAL for anything else, including 0. */
int dur_parse_ms(int64_t *out, const char *s);

/* "1d 2h", "15m", "30s": the largest units, at most two of them. */
void dur_format(char *out, size_t outlen, int64_t seconds);

#endif
