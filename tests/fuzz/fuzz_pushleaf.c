/*
 * fuzz_pushleaf.c: the push log leaf's parser (common/pushleaf.h) on any
 * bytes.
 *
 * grant-log reads leaves from any HTTP server and `grantctl log verify`
 * from the store, so the parser must be safe on anything and keep its
 * promise: a text it accepts, pushleaf_format writes back as the same
 * bytes (one spelling per leaf, so one leaf hash per leaf).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "pushleaf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pushleaf l;
	struct buf out = BUF_INIT;
	int rc = pushleaf_parse(&l, data, size);

	if (rc && rc != GD_EINVAL && rc != GD_ETOOBIG)
		abort();
	if (rc == 0) {
		if (l.nrefs < 1 || l.nrefs > PUSHLEAF_MAX_REFS)
			abort();
		if (pushleaf_format(&out, &l) != 0 || out.len != size ||
		    memcmp(out.p, data, size))
			abort();
	}
	pushleaf_free(&l);
	buf_free(&out);
	return 0;
}
