/*
 * xferfx.h: two frontends for state-transfer tests (unit/recops,
 * unit/xfer_trust).  paloalto holds a few grants with its log truncated,
 * so a transfer is portland's only way to them; both sign their
 * operations (common/opsig.h) and x->v knows both keys.  A test writes
 * forged records into paloalto's store as a dishonest or an old paloalto
 * would (fx_xfer_forge), then links portland and runs the transfer.
 */
#ifndef GD_TEST_XFERFX_H
#define GD_TEST_XFERFX_H

#include <stdbool.h>
#include <stdint.h>

#include "fixture.h"
#include "opsig.h"

struct fx_xfer {
	struct fx_pair *f; /* a: paloalto, b: portland (not linked yet) */
	struct opsig_signer ka, kb;
	struct opsig_verifier v;
};

/* The pair under name, paloalto given ngrants grants (within wait_ms)
 * and its log truncated.  Returns 0 or -1. */
int fx_xfer_open(struct fx_xfer **out,
                 const char *name,
                 int ngrants,
                 uint64_t wait_ms);

/* Close the pair and free x (NULL: nothing).  Returns 0 or -1. */
int fx_xfer_close(struct fx_xfer **x);

/* How much of paloalto's stream portland holds (its vector). */
uint64_t fx_xfer_held(struct fx_xfer *x);

/* A grant of user for 192.0.2.66/32 stamped by portland, written into
 * paloalto's store; with signer, beside it a RecordOps of one operation
 * signed by signer that makes the grant of op_user (NULL: user's own).
 * Returns 0 or -1. */
int fx_xfer_forge(struct fx_xfer *x,
                  const char *user,
                  const struct opsig_signer *signer,
                  const char *op_user);

/* Does portland hold user's grant for 192.0.2.66/32? (-1: a store error) */
int fx_xfer_has_grant(struct fx_xfer *x, const char *user);

#endif
