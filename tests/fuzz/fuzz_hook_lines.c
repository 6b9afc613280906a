/*
 * fuzz_hook_lines.c: the "OLD NEW REF" lines of a push (common/hookline.h),
 * as grant-hook reads them from git or from a spool file, and as the node
 * checks each line of a hook.refs request.
 *
 * Checked on every input, as hookline.h promises: a parse that succeeds
 * keeps only lines the line parser accepts, with at most
 * HOOKLINE_MAX_LINES of them and a valid id or none; written back as a
 * spool file ("id ID" first) it parses to the same lines; a parse that
 * fails leaves nothing behind and names a line that exists.  The input is
 * also tried as one line and as a request id.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "hookline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const char *s)
{
	struct hookline hl;

	if (hookline_parse(&hl, s) < 0)
		return;
	if (strlen(hl.old) != HOOKLINE_OID_HEX ||
	    strlen(hl.new_) != HOOKLINE_OID_HEX || !*hl.ref ||
	    strlen(hl.ref) > HOOKLINE_REF_MAX || strchr(hl.ref, ' '))
		abort();
	/* the words are the line */
	char back[HOOKLINE_LINE_MAX + 1];
	snprintf(back, sizeof(back), "%s %s %s", hl.old, hl.new_, hl.ref);
	if (strcmp(back, s))
		abort();
}

static void round_trip(const struct hooklines *l)
{
	struct hooklines again = { 0 };
	struct buf text = BUF_INIT;
	size_t bad = 0;

	if (*l->id)
		buf_printf(&text, "id %s\n", l->id);
	for (size_t i = 0; i < l->n; i++)
		buf_printf(&text, "%s\n", l->v[i]);
	if (hooklines_parse(&again, text.p ? text.p : "", text.len, &bad) < 0 ||
	    again.n != l->n || strcmp(again.id, l->id))
		abort();
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(again.v[i], l->v[i]))
			abort();
	hooklines_free(&again);
	buf_free(&text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hooklines l = { 0 };
	size_t bad = 0, nl = 0;
	int rc;

	for (size_t i = 0; i < size; i++)
		nl += data[i] == '\n';
	rc = hooklines_parse(&l, (const char *)data, size, &bad);
	if (rc == 0) {
		if (l.n > HOOKLINE_MAX_LINES || l.n > nl + 1 ||
		    (*l.id && !hookline_id_ok(l.id)))
			abort();
		for (size_t i = 0; i < l.n; i++) {
			struct hookline hl;
			if (hookline_parse(&hl, l.v[i]) < 0)
				abort();
			check_line(l.v[i]);
		}
		round_trip(&l);
	} else {
		if ((rc != GD_EINVAL && rc != GD_ETOOBIG) || l.v || l.n ||
		    bad == 0 || bad > nl + 1)
			abort();
	}
	hooklines_free(&l);

	/* the whole input as one string: a line, a request id */
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	check_line(s);
	if (hookline_req_id_ok(s)) {
		char id[HOOKLINE_REQ_ID_MAX + 1];
		unsigned long part = strtoul(s + HOOKLINE_ID_LEN + 1, NULL, 10);
		if (part <= 0xffffffffUL) {
			hookline_req_id(id, s, (unsigned)part);
			if (strcmp(id, s))
				abort();
		}
	}
	free(s);
	return 0;
}
