/*
 * cmd_repo.c: repositories.  Where grant-shell finds a repository to
 * fetch from (repo.read), the pushes grant-hook hands over to replicate
 * (hook.refs), and the administrator's repo add, mode, writers and list;
 * the rows of repo del and rename too, whose handlers (and the adoption
 * of a repository repo add finds there) are in cmd_repoadmin.c.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "addr.h"
#include "authkeys.h"
#include "cmd.h"
#include "cmd_repo_int.h"
#include "crashpoint.h"
#include "err.h"
#include "hookline.h"
#include "log.h"
#include "names.h"
#include "peerfeatures.h"
#include "policy.h"
#include "pushleaf.h"
#include "pushlog.h"
#include "records.h"
#include "repos.h"
#include "tlogstore.h"
#include "xalloc.h"
#include "banned.h"

/* ---- fetch -------------------------------------------------------------- */

static int cmd_repo_read(struct cmd_ctx *x, struct req *r)
{
	char repo[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *rp;
	int rc;

	if (cmd_repo_arg(r, r->rq->args[0], repo, sizeof(repo)) < 0)
		return 0;
	rc = policy_repo_load(&rp, &x->p, repo);
	if (rc == GD_ENOTFOUND)
		return cmd_refuse(r, "repository '%s' does not exist", repo);
	if (rc < 0)
		return rc;
	grantd__v1__repo__free_unpacked(rp, NULL);
	repos_path(&r->path, x->p.cfg->repo_dir, repo);
	return 0;
}

/* ---- pushes to replicate (grant-hook) ----------------------------------- */

/* Beside gitolite, a repository gitolite made here (repo_dir/NAME.git is
 * a directory) is hosted even without a record: its first push registers
 * it. */
static bool gitolite_hosts(const struct cmd_ctx *x, const char *repo)
{
	struct buf path = BUF_INIT;
	struct stat st;
	bool yes;

	if (!x->p.cfg->gitolite_home)
		return false;
	repos_path(&path, x->p.cfg->repo_dir, repo);
	yes = stat(path.p, &st) == 0 && S_ISDIR(st.st_mode);
	buf_free(&path);
	return yes;
}

/* The record of a repository registered by its first push: mode off (no
 * 2fa from grantd's side: gitolite's VREFs decide), no writers (gitolite's
 * conf does). */
static int register_repo(struct cmd_ctx *x, const char *repo)
{
	Grantd__V1__Repo rp = GRANTD__V1__REPO__INIT;
	int rc;

	rp.name = (char *)repo;
	SET(rp, mode, GRANTD__V1__REPO_MODE__MODE_OFF);
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_REPO, &rp)) < 0)
		return rc;
	log_info("repository registered repo=%s mode=off: first push "
	         "through gitolite",
	         repo);
	return 0;
}

/* The factors push.check names (policy_push), and gitolite's VREF. */
static const char *factor_known(const char *f)
{
	static const char *known[] = {"grant", "security-key", "mode-off",
	                              "not-required", "vref"};

	for (size_t i = 0; f && i < GD_ARRAY_SIZE(known); i++)
		if (!strcmp(f, known[i]))
			return known[i];
	return NULL;
}

/* The push's own time: its id begins with the hook's clock (ms, 16 hex
 * digits, hookline.h); without an id, the node's. */
static int64_t pushed_ms(const struct req *r, const char *id)
{
	uint64_t ms = 0;

	if (!id)
		return (int64_t)r->now_ms;
	for (int i = 0; i < 16; i++) {
		char c = id[i];
		ms = ms << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
	}
	return ms > INT64_MAX ? (int64_t)r->now_ms : (int64_t)ms;
}

/* Does a push get a transparency log leaf?  Only once every frontend
 * announces "push-tlog" (an older one would refuse the PushLeaf body:
 * docs/upgrading.md 3); a context without the node (the handlers' unit
 * tests) makes none, a node without peers does. */
static bool tlog_on(const struct cmd_ctx *x)
{
	if (!x->node)
		return false;
	return !x->node->repl ||
	       repl_feature_everywhere(x->node->repl, FEATURE_PUSH_TLOG);
}

/* The leaf text of entry e (docs/push-log.md "The transparency log's
 * leaves"): its public fields, the address only as its commitment under
 * salt.  0, or GD_EINVAL when a field breaks the leaf's rules (then the
 * push is logged without a leaf: never a reason to lose it). */
static int leaf_text(struct buf *out,
                     const Grantd__V1__PushLogEntry *e,
                     uint64_t index,
                     const uint8_t salt[PUSHLEAF_SALT_LEN])
{
	struct pushleaf l = {.index = index, .time_ms = e->pushed_ms};
	int rc = GD_EINVAL;

	l.refs = xcalloc(e->n_changes ? e->n_changes : 1, sizeof(*l.refs));
	if (strlen(e->origin) >= sizeof(l.origin) ||
	    strlen(e->repo) >= sizeof(l.repo))
		goto done;
	memcpy(l.origin, e->origin, strlen(e->origin) + 1);
	memcpy(l.repo, e->repo, strlen(e->repo) + 1);
	/* each optional field was checked by log_push: within bounds */
	snprintf(l.user, sizeof(l.user), "%s", e->user ? e->user : "");
	snprintf(l.key, sizeof(l.key), "%s", e->key_fp ? e->key_fp : "");
	snprintf(l.kind, sizeof(l.kind), "%s", e->key_kind ? e->key_kind : "");
	snprintf(l.factor, sizeof(l.factor), "%s", e->factor ? e->factor : "");
	if (e->client_ip) {
		pushleaf_addr_commit(l.addr, salt, e->client_ip);
		l.has_addr = true;
	}
	for (size_t i = 0; i < e->n_changes; i++) {
		const Grantd__V1__RefChange *c = e->changes[i];
		if (strlen(c->ref) > PUSHLEAF_REF_MAX)
			goto done;
		snprintf(l.refs[i].ref, sizeof(l.refs[i].ref), "%s", c->ref);
		snprintf(l.refs[i].old, sizeof(l.refs[i].old), "%s", c->old);
		snprintf(l.refs[i].new_, sizeof(l.refs[i].new_), "%s", c->new_);
	}
	l.nrefs = e->n_changes;
	rc = pushleaf_format(out, &l);
done:
	free(l.refs);
	return rc;
}

/* The push's leaf, numbered at this site's tree size, in the batch of its
 * entry e: made into e (leaf_index, addr_salt: the caller's salt) and
 * emitted.  *index: the leaf's; false in *made when the push gets none. */
static int log_leaf(struct cmd_ctx *x,
                    Grantd__V1__PushLogEntry *e,
                    uint8_t salt[PUSHLEAF_SALT_LEN],
                    struct buf *text,
                    bool *made)
{
	uint64_t index;
	int rc;

	*made = false;
	if (!tlog_on(x))
		return 0;
	if ((rc = tlogstore_size(ops_store(x->ops), x->p.batch,
	                         ops_site(x->ops), &index)) < 0)
		return rc;
	randombytes_buf(salt, PUSHLEAF_SALT_LEN);
	if (leaf_text(text, e, index, salt) < 0) {
		log_error("push leaf not made origin=%s repo=%s: a field breaks "
		          "the leaf's format; the push is logged without one",
		          e->origin, e->repo);
		return 0;
	}
	SET(*e, leaf_index, index);
	e->addr_salt.data = salt, e->addr_salt.len = PUSHLEAF_SALT_LEN;
	e->has_addr_salt = 1;
	*made = true;
	return 0;
}

static int emit_leaf(struct cmd_ctx *x,
                     const Grantd__V1__PushLogEntry *e,
                     const struct buf *text)
{
	Grantd__V1__PushLeaf l = GRANTD__V1__PUSH_LEAF__INIT;

	l.origin = e->origin;
	SET(l, index, e->leaf_index);
	l.text.data = (uint8_t *)text->p, l.text.len = text->len;
	l.has_text = 1;
	return cmd_emit_body(x, GRANTD__V1__OP__BODY_PUSH_LEAF, &l);
}

/*
 * The push log entry of a push recorded here (docs/push-log.md): who (as
 * grant-hook says grant-shell saw it; what does not check is left out,
 * never a reason to lose the push), what allowed it, each ref's old and
 * new value; numbered and chained after this site's head, hashed, and
 * made an operation in the same batch as the push's RefUpdate, so both
 * are written or neither.  With its transparency log leaf (log_leaf) when
 * every frontend takes them; "logged as SITE#INDEX" then goes into the
 * answer, for grant-hook to show.
 */
static int log_push(struct cmd_ctx *x,
                    struct req *r,
                    const char *repo,
                    Grantd__V1__RefChange **chp,
                    size_t k,
                    const char *id)
{
	Grantd__V1__PushLogEntry e = GRANTD__V1__PUSH_LOG_ENTRY__INIT;
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	const Grantd__V1__Request *rq = r->rq;
	uint8_t prev[PUSHLOG_HASH_LEN], hash[PUSHLOG_HASH_LEN];
	uint8_t salt[PUSHLEAF_SALT_LEN];
	struct buf text = BUF_INIT;
	char ip[ADDR_STRLEN];
	struct gd_net net;
	bool leaf;
	uint64_t head;
	int rc;

	if ((rc = ops_pushlog_head(x->ops, x->p.batch, ops_site(x->ops), &head,
	                           prev)) < 0)
		return rc;
	e.origin = (char *)ops_site(x->ops);
	SET(e, n, head + 1);
	e.prev.data = prev, e.prev.len = sizeof(prev), e.has_prev = 1;
	if (rq->user && name_user_ok(rq->user))
		e.user = rq->user;
	if (rq->key_fp && authkeys_fp_ok(rq->key_fp))
		e.key_fp = rq->key_fp;
	if (r->key != POLICY_KEY_UNKNOWN)
		e.key_kind = rq->key_kind;
	if (rq->client_ip && addr_parse(&net, rq->client_ip, false) == 0) {
		addr_format(ip, &net);
		e.client_ip = ip;
	}
	e.factor = (char *)factor_known(rq->factor);
	e.repo = (char *)repo;
	e.changes = chp;
	e.n_changes = k;
	e.push_id = (char *)id;
	SET(e, pushed_ms, pushed_ms(r, id));
	if ((rc = log_leaf(x, &e, salt, &text, &leaf)) < 0)
		goto done;
	SET(e, hlc, ops_stamp(x->ops));
	pushlog_hash(hash, &e);
	e.hash.data = hash, e.hash.len = sizeof(hash), e.has_hash = 1;
	/* test hook: a site that rewrites an entry after hashing it */
	if (faultpoint("pushlog-tamper"))
		e.user = "mallory";
	op.body_case = GRANTD__V1__OP__BODY_PUSH_LOG;
	op.push_log = &e;
	SET(op, hlc, e.hlc);
	if ((rc = cmd_emit(x, &op)) < 0 ||
	    (leaf && (rc = emit_leaf(x, &e, &text)) < 0))
		goto done;
	if (leaf)
		buf_printf(&r->out, "logged as %s#%llu\n", e.origin,
		           (unsigned long long)e.leaf_index);
	log_info("push logged origin=%s n=%llu leaf=%lld repo=%s user=%s "
	         "ip=%s factor=%s refs=%zu",
	         e.origin, (unsigned long long)e.n,
	         leaf ? (long long)e.leaf_index : -1LL, repo,
	         e.user ? e.user : "-", e.client_ip ? e.client_ip : "-",
	         e.factor ? e.factor : "-", k);
done:
	sodium_memzero(salt, sizeof(salt));
	buf_free(&text);
	return rc;
}

/* args: REPO, then post-receive lines "OLD NEW REF"; push_id: grant-hook's
 * request id (hookline.h), optional.  A request whose id was recorded
 * already (its answer timed out, grant-hook sent it again) is answered
 * as recorded, and makes no second operation: a newer stamp for the same
 * push could move a ref back over a later push from another site.
 * Beside gitolite a repository without a record whose directory exists
 * (gitolite_hosts) gets its record in the same batch, before the push's
 * RefUpdate, so that every site applies them in that order. */
static int cmd_hook_refs(struct cmd_ctx *x, struct req *r)
{
	Grantd__V1__RefUpdate u = GRANTD__V1__REF_UPDATE__INIT;
	size_t n = r->rq->n_args - 1, k = 0;
	Grantd__V1__RefChange *ch = xcalloc(n, sizeof(*ch));
	Grantd__V1__RefChange **chp = xcalloc(n, sizeof(*chp));
	struct hookline *words = xcalloc(n, sizeof(*words));
	const char *id = r->rq->push_id;
	char repo[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *rp = NULL;
	bool seen = false, unknown = false;
	int rc = 0;

	if (cmd_repo_arg(r, r->rq->args[0], repo, sizeof(repo)) < 0)
		goto done;
	if (id && !hookline_req_id_ok(id)) {
		rc = cmd_bad(r,
		             "bad push id (want %d hex digits, '-', a "
		             "number)",
		             HOOKLINE_ID_LEN);
		goto done;
	}
	rc = policy_repo_load(&rp, &x->p, repo);
	if (rc == GD_ENOTFOUND && gitolite_hosts(x, repo)) {
		unknown = true;
		rc = 0;
	} else if (rc == GD_ENOTFOUND) {
		rc = cmd_refuse(r, "repository '%s' is not hosted here", repo);
		goto done;
	}
	if (rc < 0)
		goto done;
	for (size_t i = 0; i < n; i++) {
		const char *line = r->rq->args[i + 1];
		if (hookline_parse(&words[k], line) < 0) {
			rc = cmd_bad(r,
			             "bad ref update line '%.300s' (want "
			             "'OLD NEW REF' as post-receive reads "
			             "them)",
			             line);
			goto done;
		}
		if (!ops_ref_name_ok(words[k].ref)) {
			log_warn("ref not replicated repo=%s ref=%.300s", repo,
			         words[k].ref);
			continue;
		}
		grantd__v1__ref_change__init(&ch[k]);
		ch[k].old = words[k].old;
		ch[k].new_ = words[k].new_;
		ch[k].ref = words[k].ref;
		chp[k] = &ch[k];
		k++;
	}
	if (k && id &&
	    (rc = ops_push_seen(x->ops, x->p.batch, repo, id, &seen)) < 0)
		goto done;
	if (seen) {
		/* answered once what recorded it is durable, like the first */
		r->wrote = true;
		log_info("push already recorded repo=%s id=%s refs=%zu", repo,
		         id, k);
	} else if (k) {
		if (unknown && (rc = register_repo(x, repo)) < 0)
			goto done;
		u.repo = repo;
		u.changes = chp;
		u.n_changes = k;
		u.push_id = (char *)id;
		if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_REFS, &u)) <
		            0 ||
		    (rc = log_push(x, r, repo, chp, k, id)) < 0)
			goto done;
		log_info("push recorded repo=%s refs=%zu id=%s", repo, k,
		         id ? id : "-");
	}
	buf_printf(&r->out, "replicating %zu ref update%s of %s\n", k,
	           k == 1 ? "" : "s", repo);
done:
	if (rp)
		grantd__v1__repo__free_unpacked(rp, NULL);
	free(ch);
	free(chp);
	free(words);
	return rc;
}

/* ---- admin: repositories ------------------------------------------------ */

static int mode_arg(struct req *r, const char *s, Grantd__V1__RepoMode *out)
{
	if (!strcmp(s, "off"))
		*out = GRANTD__V1__REPO_MODE__MODE_OFF;
	else if (!strcmp(s, "opt-in"))
		*out = GRANTD__V1__REPO_MODE__MODE_OPT_IN;
	else if (!strcmp(s, "required"))
		*out = GRANTD__V1__REPO_MODE__MODE_REQUIRED;
	else {
		cmd_bad(r, "bad mode '%s': use off, opt-in or required", s);
		return GD_EINVAL;
	}
	return 0;
}

static const char *mode_name(Grantd__V1__RepoMode m)
{
	return m == GRANTD__V1__REPO_MODE__MODE_OFF      ? "off"
	       : m == GRANTD__V1__REPO_MODE__MODE_OPT_IN ? "opt-in"
	                                                 : "required";
}

/* The answer and log line of a repo add that found a bare repository
 * there: how many refs replicate, and a note when its HEAD is not what
 * the other sites make (HEAD does not replicate: docs/operations.md 4a). */
static void
adopted(struct req *r, const char *name, size_t n, const struct buf *head)
{
	const char *h = head->len ? head->p : "-";

	buf_printf(&r->out, "adopted repository %s (%zu ref%s replicate%s)\n",
	           name, n, n == 1 ? "" : "s", n == 1 ? "s" : "");
	if (strcmp(h, "refs/heads/main"))
		buf_printf(&r->out,
		           "note: its HEAD is %s here; the other "
		           "sites make HEAD refs/heads/main (HEAD does not "
		           "replicate: set it there with git symbolic-ref, "
		           "see docs/operations.md 4a)\n",
		           h);
	log_info("repository adopted repo=%s refs=%zu head=%s", name, n, h);
}

/* args: NAME [--mode M] [--writer U]... [--fork-of P] into rp (name,
 * parent: the caller's buffers).  0, or 1 when r was answered (bad). */
static int add_args(struct req *r,
                    Grantd__V1__Repo *rp,
                    char *name,
                    char *parent,
                    char **writers)
{
	Grantd__V1__RepoMode mode = GRANTD__V1__REPO_MODE__MODE_REQUIRED;
	size_t nw = 0;

	if (cmd_repo_arg(r, r->rq->args[0], name, NAME_REPO_MAX + 1) < 0)
		return 1;
	for (size_t i = 1; i < r->rq->n_args; i++) {
		const char *a = r->rq->args[i];
		if (i + 1 == r->rq->n_args) {
			cmd_bad(r, "usage: grantctl repo add NAME [--mode "
			           "off|opt-in|required] [--writer USER]... "
			           "[--fork-of PARENT]");
			return 1;
		}
		const char *v = r->rq->args[++i];
		if (!strcmp(a, "--mode")) {
			if (mode_arg(r, v, &mode) < 0)
				return 1;
		} else if (!strcmp(a, "--writer")) {
			if (!cmd_name_arg(r, v))
				return 1;
			writers[nw++] = (char *)v;
		} else if (!strcmp(a, "--fork-of")) {
			if (cmd_repo_arg(r, v, parent, NAME_REPO_MAX + 1) < 0)
				return 1;
			rp->fork_of = parent;
		} else {
			cmd_bad(r,
			        "unknown option '%s' (use --mode, --writer "
			        "or --fork-of)",
			        a);
			return 1;
		}
	}
	rp->name = name;
	SET(*rp, mode, mode);
	rp->writers = writers;
	rp->n_writers = nw;
	return 0;
}

/* A new repository, or (repo_dir/NAME.git a bare repository already) one
 * adopted: its refs recorded in the same batch, after its record, so
 * every site fetches them. */
static int cmd_repo_add(struct cmd_ctx *x, struct req *r)
{
	Grantd__V1__Repo rp = GRANTD__V1__REPO__INIT;
	char name[NAME_REPO_MAX + 1], parent[NAME_REPO_MAX + 1];
	char *writers[GD_CTL_MAX_ARGS];
	struct buf refs = BUF_INIT, head = BUF_INIT;
	Grantd__V1__Repo *old = NULL;
	size_t nrefs = 0;
	int rc, found;

	if (add_args(r, &rp, name, parent, writers))
		return 0;
	rc = policy_repo_load(&old, &x->p, name);
	if (rc == 0) {
		grantd__v1__repo__free_unpacked(old, NULL);
		return cmd_refuse(r, "repository '%s' already exists", name);
	}
	if (rc != GD_ENOTFOUND)
		return rc;
	if (rp.fork_of) {
		rc = policy_repo_load(&old, &x->p, parent);
		if (rc == GD_ENOTFOUND)
			return cmd_refuse(r,
			                  "cannot fork '%s': no such "
			                  "repository",
			                  parent);
		if (rc < 0)
			return rc;
		grantd__v1__repo__free_unpacked(old, NULL);
		if (!strcmp(parent, name))
			return cmd_bad(r, "a repository cannot fork itself");
	}
	found = cmd_repo_found(x, r, name, &refs, &nrefs, &head);
	if (found < 0) {
		rc = found == GD_EDENIED ? 0 : found;
		goto done;
	}
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_REPO, &rp)) < 0 ||
	    (found && (rc = cmd_repo_refs_emit(x, name, &refs, false)) < 0))
		goto done;
	if (found)
		adopted(r, name, nrefs, &head);
	else
		buf_printf(&r->out, "added repository %s (mode %s)\n", name,
		           mode_name(rp.mode));
done:
	buf_free(&refs);
	buf_free(&head);
	return rc;
}

/* Change an existing repository: mode (args: NAME MODE) or writers
 * (args: NAME USER...). */
static int repo_change(struct cmd_ctx *x, struct req *r, bool writers)
{
	char name[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *old = NULL;
	Grantd__V1__RepoMode mode;
	int rc;

	if (cmd_repo_arg(r, r->rq->args[0], name, sizeof(name)) < 0)
		return 0;
	if (!writers && mode_arg(r, r->rq->args[1], &mode) < 0)
		return 0;
	for (size_t i = 1; writers && i < r->rq->n_args; i++)
		if (!cmd_name_arg(r, r->rq->args[i]))
			return 0;
	rc = policy_repo_load(&old, &x->p, name);
	if (rc == GD_ENOTFOUND)
		return cmd_refuse(r, "no such repository '%s'", name);
	if (rc < 0)
		return rc;
	Grantd__V1__Repo rp = *old;
	rp.has_hlc = 0;
	rp.origin = NULL;
	rp.renamed_from = NULL; /* done with once the directory moved */
	if (writers) {
		rp.writers = r->rq->args + 1;
		rp.n_writers = r->rq->n_args - 1;
	} else {
		SET(rp, mode, mode);
	}
	rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_REPO, &rp);
	if (rc == 0)
		buf_printf(&r->out, "updated repository %s\n", name);
	grantd__v1__repo__free_unpacked(old, NULL);
	return rc;
}

static int cmd_repo_mode(struct cmd_ctx *x, struct req *r)
{
	return repo_change(x, r, false);
}

static int cmd_repo_writers(struct cmd_ctx *x, struct req *r)
{
	return repo_change(x, r, true);
}

static int cmd_repo_list(struct cmd_ctx *x, struct req *r)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, w = BUF_INIT;
	cJSON *arr = r->rq->json ? cJSON_CreateArray() : NULL;
	const char *key;
	size_t klen;
	int rc, shown = 0;

	store_iter_new(&it, x->p.store, x->p.batch, CF_REPOS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Repo *rp = grantd__v1__repo__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		if (!rp || rp->deleted) {
			if (rp)
				grantd__v1__repo__free_unpacked(rp, NULL);
			continue;
		}
		buf_reset(&w);
		for (size_t i = 0; i < rp->n_writers; i++)
			buf_printf(&w, "%s%s", i ? "," : "", rp->writers[i]);
		if (arr) {
			cJSON *o = cJSON_CreateObject();
			cJSON *wa = cJSON_AddArrayToObject(o, "writers");
			cJSON_AddStringToObject(o, "name", rp->name);
			cJSON_AddStringToObject(o, "mode", mode_name(rp->mode));
			for (size_t i = 0; i < rp->n_writers; i++)
				cJSON_AddItemToArray(
				        wa, cJSON_CreateString(rp->writers[i]));
			cJSON_AddStringToObject(o, "fork_of",
			                        rp->fork_of ? rp->fork_of : "");
			cJSON_AddItemToArray(arr, o);
		} else {
			if (!shown++)
				buf_printf(&r->out, "%-30s %-9s %-20s %s\n",
				           "NAME", "MODE", "FORK_OF",
				           "WRITERS");
			buf_printf(&r->out, "%-30s %-9s %-20s %s\n", rp->name,
			           mode_name(rp->mode),
			           rp->fork_of && *rp->fork_of ? rp->fork_of
			                                       : "-",
			           buf_str(&w));
		}
		grantd__v1__repo__free_unpacked(rp, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&w);
	if (arr)
		cmd_print_json(r, arr);
	return rc < 0 ? rc : 0;
}

/* ---- the rows ----------------------------------------------------------- */

const struct cmd cmd_repo_rows[] = {
        CMD_ROW("repo.read",
                CMD_ON_USER | CMD_ON_ADMIN | CMD_READS,
                1,
                1,
                cmd_repo_read),
        CMD_ROW("hook.refs",
                CMD_ON_USER | CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND |
                        CMD_NODE,
                2,
                GD_CTL_MAX_ARGS,
                cmd_hook_refs),
        CMD_ROW("repo.add",
                CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND,
                1,
                GD_CTL_MAX_ARGS,
                cmd_repo_add),
        CMD_ROW("repo.mode",
                CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND,
                2,
                2,
                cmd_repo_mode),
        CMD_ROW("repo.writers",
                CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND,
                1,
                GD_CTL_MAX_ARGS,
                cmd_repo_writers),
        CMD_ROW("repo.del",
                CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND,
                1,
                1,
                cmd_repo_del),
        CMD_ROW("repo.rename",
                CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND,
                2,
                2,
                cmd_repo_rename),
        CMD_ROW("repo.list", CMD_ON_ADMIN | CMD_READS, 0, 0, cmd_repo_list),
};
const size_t cmd_repo_nrows = GD_ARRAY_SIZE(cmd_repo_rows);
