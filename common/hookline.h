/*
 * hookline.h: the ref update lines of a push, as git hands them to a
 * post-receive hook ("OLD NEW REF", one per line), and the id a push is
 * recorded under.
 *
 * grant-hook reads them from stdin and from its spool files, the node
 * checks each line of a hook.refs request: one parser for both.  A push id
 * is made once per push by grant-hook and kept with the push's lines in
 * the spool, so a push sent again (its answer timed out) carries the same
 * id and the node can tell it has recorded it already.
 *
 * Pure functions of their arguments (hookline_id_make reads the kernel's
 * random source): any thread.
 */
#ifndef GD_HOOKLINE_H
#define GD_HOOKLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOOKLINE_OID_HEX 40
/* git allows longer ref names than grantd replicates (ops_ref_name_ok):
 * a line with one is well formed, its ref is just not replicated */
#define HOOKLINE_REF_MAX 1024
/* "OLD NEW REF" with the longest ref */
#define HOOKLINE_LINE_MAX (2 * HOOKLINE_OID_HEX + 2 + HOOKLINE_REF_MAX)
#define HOOKLINE_MAX_LINES 100000

/* A push id: 16 hex digits of the wall clock in ms when the push was
 * made (so ids sort by age), then 16 random hex digits. */
#define HOOKLINE_ID_LEN 32
/* A request id: the push id, "-", the request's index in the push
 * (decimal, a push of many refs is sent in several requests). */
#define HOOKLINE_REQ_ID_MAX (HOOKLINE_ID_LEN + 1 + 10)

struct hookline {
	char old[HOOKLINE_OID_HEX + 1];
	char new_[HOOKLINE_OID_HEX + 1];
	char ref[HOOKLINE_REF_MAX + 1];
};

/*
 * Parse one line (without its newline): exactly three words separated by
 * single spaces, OLD and NEW 40 lower-case hex digits, REF 1 to
 * HOOKLINE_REF_MAX bytes with no control character or space.  Returns 0
 * with *out filled, or GD_EINVAL (*out then undefined).
 */
int hookline_parse(struct hookline *out, const char *line);

/* Who made a push, for the push log: "by" and words KEY=VALUE separated
 * by single spaces, KEY of [a-z_], each VALUE 1 to HOOKLINE_BY_VALUE_MAX
 * printable characters other than space.  The keys grant-hook writes:
 * user, ip, fp (key fingerprint), kind (key kind), factor. */
#define HOOKLINE_BY_MAX 512
#define HOOKLINE_BY_VALUE_MAX 100

/* The lines of one push, and its id ("" when the text had none). */
struct hooklines {
	char **v;      /* each a line that hookline_parse accepts */
	size_t n, cap;
	char id[HOOKLINE_ID_LEN + 1];
	char by[HOOKLINE_BY_MAX + 1];  /* the words after "by ", or "" */
};

/*
 * Split text (len bytes; the last line may lack its newline) into l, which
 * must be zeroed or freed before.  An optional first line "id ID" sets
 * l->id; an optional "by WORDS" line (first, or second after the id)
 * sets l->by (hookline_by_ok); every other line that is not empty (a "\r" before the newline is
 * dropped) must parse.  Returns 0, GD_EINVAL (a line that does not parse,
 * a NUL byte, a bad id line; *bad_line, if not NULL, is its number from
 * 1), or GD_ETOOBIG (more than HOOKLINE_MAX_LINES lines).  On error l is
 * emptied.  Free with hooklines_free.
 */
int hooklines_parse(struct hooklines *l, const char *text, size_t len,
		    size_t *bad_line);
void hooklines_free(struct hooklines *l);

/* Are these words a "by" line's (without "by ")?  "" is. */
bool hookline_by_ok(const char *words);

/* Append " KEY=VALUE" to by (size HOOKLINE_BY_MAX + 1; the first word
 * without the space) when value is a valid value; else nothing.  Returns
 * whether it was added. */
bool hookline_by_add(char *by, const char *key, const char *value);

/* The value of key in by into out (size HOOKLINE_BY_VALUE_MAX + 1): true,
 * or false with out "" when by has no such word. */
bool hookline_by_get(char out[HOOKLINE_BY_VALUE_MAX + 1], const char *by,
		     const char *key);

/* A fresh push id made at now_ms (wall clock).  Returns 0 or GD_EIO (no
 * random bytes). */
int hookline_id_make(char out[HOOKLINE_ID_LEN + 1], uint64_t now_ms);
bool hookline_id_ok(const char *s);

/* out gets "ID-INDEX". */
void hookline_req_id(char out[HOOKLINE_REQ_ID_MAX + 1], const char *id,
		     unsigned index);
bool hookline_req_id_ok(const char *s);

#endif
