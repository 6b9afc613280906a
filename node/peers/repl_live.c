/*
 * repl_live.c: the live operations a peer's SUB delivers, checked as one
 * run.  repl.c hands each operation message from a SUB here instead of
 * applying it at once; they are held until the round ends (repl_handle),
 * another kind of message of that peer is handled (so that order holds:
 * a heartbeat after its operations sees them applied), or LIVE_MAX are
 * held.  Then they are checked newest first (opsig_verify_run: one
 * Ed25519 check vouches for the chain of batches before it) and applied
 * in the order they came (repl_apply_op, told each one's verdict, so
 * that nothing is hashed twice).  A node that keeps up checks each batch
 * as it comes; one that fell behind catches up with one signature check
 * per run.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "records.h"
#include "repl_int.h"
#include "xalloc.h"
#include "banned.h"

#define LIVE_MAX HANDLE_MAX

void repl_live_flush(struct repl *r, struct repl_peer *p, uint64_t now_ms)
{
	const Grantd__V1__Op **ops;
	enum opsig_verdict *d;

	if (!p->nlive)
		return;
	ops = xcalloc(p->nlive, sizeof(*ops));
	d = xcalloc(p->nlive, sizeof(*d));
	for (size_t i = 0; i < p->nlive; i++)
		ops[i] = p->live[i]->op;
	opsig_verify_run(&r->verifier, ops, p->nlive, d);
	free(ops);
	for (size_t i = 0; i < p->nlive; i++) {
		Grantd__V1__PeerMsg *m = p->live[i];
		struct lat_stamp at = {.sent = (uint32_t)m->sent_us,
		                       .recv = (uint32_t)p->live_recv_us[i]};
		repl_apply_op(r, p, m->op, (int)d[i], m->sent_us ? &at : NULL,
		              now_ms);
		records_op_wipe(m->op);
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	}
	free(d);
	p->nlive = 0;
}

void repl_live_take(struct repl *r,
                    struct repl_peer *p,
                    Grantd__V1__PeerMsg *m,
                    uint64_t now_ms)
{
	size_t cap = p->caplive;

	GD_GROW(p->live, p->caplive, p->nlive + 1);
	if (p->caplive != cap)
		p->live_recv_us = xreallocarray(p->live_recv_us, p->caplive,
		                                sizeof(*p->live_recv_us));
	p->live_recv_us[p->nlive] = clock_wall_us();
	p->live[p->nlive++] = m;
	if (p->nlive >= LIVE_MAX)
		repl_live_flush(r, p, now_ms);
}

void repl_live_free(struct repl_peer *p)
{
	for (size_t i = 0; i < p->nlive; i++) {
		records_op_wipe(p->live[i]->op);
		grantd__v1__peer_msg__free_unpacked(p->live[i], NULL);
	}
	free(p->live);
	free(p->live_recv_us);
	p->live = NULL;
	p->live_recv_us = NULL;
	p->nlive = p->caplive = 0;
}
