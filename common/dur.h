/*
 * dur.h: durations, the one place they are parsed and printed.
 *
 * Text form: a positive integer and a unit, s m h d or w ("90s", "15m",
 * "24h", "30d", "2w").  A bare integer is refused: "grant_default = 24"
 * meant 24 hours to the operator who wrote it, not 24 seconds.
 */
#ifndef GD_DUR_H
#define GD_DUR_H

#include <stdint.h>
#include <stddef.h>

/* Seconds in *out; GD_EINVAL for anything else, including a number
 * without a unit, 0 and values beyond ten years. */
int dur_parse(int64_t *out, const char *s);

/* Milliseconds in *out: "500ms", or any duration dur_parse takes ("2s").
 * GD_EINVAL for anything else, including 0. */
int dur_parse_ms(int64_t *out, const char *s);

/* "1d 2h", "15m", "30s": the largest units, at most two of them. */
void dur_format(char *out, size_t outlen, int64_t seconds);

/* The units dur_parse takes, for error messages: "s, m, h, d or w". */
#define DUR_UNITS "s, m, h, d or w"

#endif
