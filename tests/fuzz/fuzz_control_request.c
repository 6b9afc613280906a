/*
 * fuzz_control_request.c: the control-socket request decoder.
 *
 * request_decode() is the first code every byte from the user and admin
 * sockets meets; it must be safe on any input (SPEC 2.5).  Besides not
 * crashing, a request it accepts must be one the rest of the node can rely
 * on, so the checks below hold request.h's promises: a message is handed
 * out on success and only then, and a refusal comes with a reason.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "request.h"
#include "err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Grantd__V1__Request *req = NULL;
	struct buf err = BUF_INIT;

	int rc = request_decode(&req, data, size, NULL, &err);
	if (rc == 0) {
		if (!req || !req->cmd)
			abort();
		grantd__v1__request__free_unpacked(req, NULL);
	} else {
		if (req || (rc != GD_EPROTO && rc != GD_ETOOBIG) ||
		    !buf_str(&err)[0])
			abort();
	}
	buf_free(&err);
	return 0;
}
