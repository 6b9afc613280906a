/*
 * xferfx.c: two frontends for state-transfer tests (xferfx.h).
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "ops.h"
#include "records.h"
#include "repl_int.h" /* TRUNCATE_MAX */
#include "store.h"
#include "writer.h"
#include "xferfx.h"

#define FORGED_NET "192.0.2.66/32"

int fx_xfer_open(struct fx_xfer **out,
                 const char *name,
                 int ngrants,
                 uint64_t wait_ms)
{
	struct fx_xfer *x = calloc(1, sizeof(*x));
	uint8_t ca[32] = {1}, cb[32] = {2};

	*out = NULL;
	if (!x)
		return -1;
	if (fx_pair_open(&x->f, name, CONFIG_ROLE_FRONTEND, FX_PAIR_LINK_A) <
	    0) {
		free(x);
		return -1;
	}
	*out = x;
	if (opsig_signer_init(&x->ka, ca, "h/grantd/paloalto") < 0 ||
	    opsig_signer_init(&x->kb, cb, "h/grantd/portland") < 0)
		return -1;
	ops_set_signer(x->f->a.o, &x->ka);
	ops_set_signer(x->f->b.o, &x->kb);
	opsig_verifier_init(&x->v);
	if (opsig_verifier_add(&x->v, "paloalto", x->ka.key.pub) < 0 ||
	    opsig_verifier_add(&x->v, "portland", x->kb.key.pub) < 0)
		return -1;
	if (fx_node_grants(&x->f->a, ngrants, (int)wait_ms) < 0 ||
	    ops_truncate_log(x->f->a.o, clock_wall_ms() + 60000,
	                     TRUNCATE_MAX) != ngrants)
		return -1;
	return 0;
}

int fx_xfer_close(struct fx_xfer **xp)
{
	struct fx_xfer *x = *xp;
	int rc;

	if (!x)
		return 0;
	rc = fx_pair_close(&x->f);
	opsig_signer_wipe(&x->ka);
	opsig_signer_wipe(&x->kb);
	free(x);
	*xp = NULL;
	return rc;
}

uint64_t fx_xfer_held(struct fx_xfer *x)
{
	return ops_vv_get(x->f->b.o, NULL, "paloalto", ops_epoch(x->f->a.o));
}

/* The RecordOps of one operation making g (of op_user), signed by signer,
 * into out. */
static int signed_recops(struct buf *out,
                         Grantd__V1__Grant *g,
                         const char *op_user,
                         const struct opsig_signer *signer)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__RecordOps ro = GRANTD__V1__RECORD_OPS__INIT;
	Grantd__V1__Grant body = *g;
	ProtobufCBinaryData d;
	struct buf one = BUF_INIT, *ptr = &one;
	uint8_t chain[OPSIG_HASH_LEN] = {0};
	int rc;

	op.origin = g->origin;
	op.epoch = FX_EPOCH, op.has_epoch = 1;
	op.seq = 1, op.has_seq = 1;
	op.hlc = g->hlc, op.has_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_GRANT;
	body.hlc = 0, body.has_hlc = 0, body.origin = NULL;
	if (op_user)
		body.user = (char *)op_user;
	op.grant = &body;
	grantd__v1__op__pack(
	        &op, buf_extend(&one, grantd__v1__op__get_packed_size(&op)));
	rc = opsig_sign_batch(signer, chain, &ptr, 1);
	if (rc == 0) {
		d.data = (uint8_t *)one.p, d.len = one.len;
		ro.ops = &d, ro.n_ops = 1;
		buf_reset(out);
		grantd__v1__record_ops__pack(
		        &ro,
		        buf_extend(out, grantd__v1__record_ops__get_packed_size(
		                                &ro)));
	}
	buf_free(&one);
	return rc;
}

int fx_xfer_forge(struct fx_xfer *x,
                  const char *user,
                  const struct opsig_signer *signer,
                  const char *op_user)
{
	struct fx_node *a = &x->f->a;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	struct buf k = BUF_INIT, v = BUF_INIT, rk = BUF_INIT;
	struct store_batch *b = writer_batch(a->w);
	uint64_t t;
	int rc = 0;

	g.user = (char *)user, g.net = FORGED_NET, g.session = "";
	g.added = 1700000000, g.has_added = 1;
	g.expires = 4102444800, g.has_expires = 1;
	g.site = "portland";
	g.hlc = FX_HLC(clock_wall_ms() - 1000, 0), g.has_hlc = 1;
	g.origin = "portland";
	records_key_grant(&k, g.user, g.net, g.session);
	grantd__v1__grant__pack(
	        &g, buf_extend(&v, grantd__v1__grant__get_packed_size(&g)));
	store_put(b, CF_GRANTS, k.p, k.len, v.p, v.len);
	if (signer && (rc = signed_recops(&v, &g, op_user, signer)) == 0) {
		records_key_recops(&rk, CF_GRANTS, k.p, k.len);
		store_put(b, CF_RECOPS, rk.p, rk.len, v.p, v.len);
	}
	if (rc == 0 && writer_commit(a->w, &t) < 0)
		rc = -1;
	buf_free(&k);
	buf_free(&v);
	buf_free(&rk);
	return rc < 0 ? -1 : 0;
}

int fx_xfer_has_grant(struct fx_xfer *x, const char *user)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	records_key_grant(&k, user, FORGED_NET, "");
	rc = store_get(x->f->b.s, NULL, CF_GRANTS, k.p, k.len, &v);
	buf_free(&k);
	buf_free(&v);
	return rc == 0 ? 1 : rc == GD_ENOTFOUND ? 0 : -1;
}
