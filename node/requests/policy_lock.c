/*
 * policy_lock.c: the lockout (policy.h: policy_lock_state, SPEC 2.7):
 * failed attempts in the window at every site, each counted once, those
 * before the last unlock forgiven by stamp.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ops.h"
#include "policy.h"
#include "xalloc.h"
#include "banned.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int policy_lock_state(const struct policy_ctx *pc,
                      const char *user,
                      uint64_t now_ms,
                      int *failures,
                      uint64_t *until_ms)
{
	const struct config_policy *p = &pc->cfg->policy;
	uint64_t window_ms = (uint64_t)p->lockout_window * 1000;
	uint64_t since = now_ms > window_ms ? now_ms - window_ms : 0;
	Grantd__V1__Unlock *un = NULL;
	uint64_t *at = NULL;
	size_t nat = 0, cap = 0;
	struct buf v = BUF_INIT;
	struct store_iter *it;
	const char *key;
	size_t klen;
	int rc;

	*failures = 0;
	*until_ms = 0;
	rc = store_get(pc->store, pc->batch, CF_UNLOCK, user, strlen(user), &v);
	if (rc == 0)
		un = grantd__v1__unlock__unpack(NULL, v.len,
		                                (const uint8_t *)v.p);
	else if (rc != GD_ENOTFOUND)
		goto done;
	store_iter_new(&it, pc->store, pc->batch, CF_FAILS, user,
	               strlen(user) + 1);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Failures *f = grantd__v1__failures__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		for (size_t i = 0; f && i < f->n_hlc; i++) {
			if (hlc_ms(f->hlc[i]) <= since)
				continue;
			/* An unlock forgives the attempts stamped before it
			 * and no others, whatever its stamp says of the wall
			 * clock: a site that knows the unlock stamps every
			 * later attempt after it (its HLC observed it). */
			if (un && !ops_stamp_after(f->hlc[i], f->site, un->hlc,
			                           un->origin))
				continue;
			GD_GROW(at, cap, nat + 1);
			at[nat++] = hlc_ms(f->hlc[i]);
		}
		if (f)
			grantd__v1__failures__free_unpacked(f, NULL);
	}
	store_iter_free(&it);
	if (rc < 0)
		goto done;
	rc = 0;
	*failures = (int)nat;
	if ((int)nat >= p->lockout_failures) {
		qsort(at, nat, sizeof(*at), cmp_u64);
		/* locked until enough failures age out of the window */
		*until_ms = at[nat - (size_t)p->lockout_failures] + window_ms;
	}
done:
	if (un)
		grantd__v1__unlock__free_unpacked(un, NULL);
	free(at);
	buf_free(&v);
	return rc;
}
