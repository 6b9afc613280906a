/*
 * cmd_keys.c: a user's SSH keys one by one, for the operator: user.keys
 * lists them with the fingerprints sshd logs (so a key in an auth log can
 * be found), user.key-del removes one.  Adding keys is user.add's
 * (cmd_user.c); the keys grant-keys reads are keys.list and keys.find.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "cmd_user_int.h"
#include "err.h"
#include "log.h"
#include "records.h"
#include "banned.h"

/* The type and comment of key line k ("TYPE BASE64 [COMMENT]") into
 * type and comment (empty when none). */
static void key_parts(const char *k, struct buf *type, struct buf *comment)
{
	size_t t = strcspn(k, " \t");
	const char *b = k + t + strspn(k + t, " \t");
	const char *c = b + strcspn(b, " \t");

	c += strspn(c, " \t");
	buf_reset(type);
	buf_reset(comment);
	buf_add(type, k, t);
	buf_puts(comment, c);
	buf_str(type);
	buf_str(comment);
}

int cmd_user_keys(struct cmd_ctx *x, struct req *r)
{
	const char *name = r->rq->args[0];
	cJSON *arr = r->rq->json ? cJSON_CreateArray() : NULL;
	struct buf type = BUF_INIT, comment = BUF_INIT;
	struct policy_user u;
	char fp[RECORDS_FP_MAX];
	int rc;

	if (!cmd_name_arg(r, name))
		goto done;
	if ((rc = policy_user_load(&u, &x->p, name)) < 0) {
		cJSON_Delete(arr);
		return rc;
	}
	if (!u.user) {
		cmd_refuse(r, "no such user '%s'", name);
		goto clear;
	}
	for (size_t i = 0; i < u.user->n_keys; i++) {
		const char *k = u.user->keys[i];
		if (records_ssh_fingerprint(fp, k) < 0)
			snprintf(fp, sizeof(fp), "-");
		key_parts(k, &type, &comment);
		if (arr) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "fingerprint", fp);
			cJSON_AddStringToObject(o, "type", type.p);
			cJSON_AddStringToObject(o, "comment", comment.p);
			cJSON_AddItemToArray(arr, o);
		} else {
			buf_printf(&r->out, "%s %s%s%s\n", fp, type.p,
			           comment.len ? " " : "", comment.p);
		}
	}
	if (arr) {
		cmd_print_json(r, arr);
		arr = NULL;
	}
clear:
	policy_user_clear(&u);
done:
	cJSON_Delete(arr);
	buf_free(&type);
	buf_free(&comment);
	return 0;
}

int cmd_user_key_del(struct cmd_ctx *x, struct req *r)
{
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	const char *name = r->rq->args[0], *want = r->rq->args[1];
	char *keys[OPS_MAX_KEYS];
	char fp[RECORDS_FP_MAX];
	struct policy_user u;
	size_t n = 0, gone = 0;
	int rc;

	if (!cmd_name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&u, &x->p, name)) < 0)
		return rc;
	if (!u.user) {
		cmd_refuse(r, "no such user '%s'", name);
		goto done;
	}
	for (size_t i = 0; i < u.user->n_keys && n < OPS_MAX_KEYS; i++) {
		const char *k = u.user->keys[i];
		bool hit = !strcmp(k, want) ||
		           (records_ssh_fingerprint(fp, k) == 0 &&
		            !strcmp(fp, want));
		if (hit)
			gone++;
		else
			keys[n++] = u.user->keys[i];
	}
	if (!gone) {
		cmd_refuse(r,
		           "user '%s' has no key %s (see: grantctl user "
		           "keys %s)",
		           name, want, name);
		goto done;
	}
	nu.name = (char *)name;
	nu.keys = keys;
	nu.n_keys = n;
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_USER, &nu)) < 0)
		goto done;
	buf_printf(&r->out, "removed key %s from user %s (%zu key%s left)\n",
	           want, name, n, n == 1 ? "" : "s");
	log_info("user key removed user=%s fp=%.64s keys=%zu", name, want, n);
done:
	policy_user_clear(&u);
	return rc;
}
