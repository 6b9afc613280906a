/*
 * fixture.c: the unit tests' shared setup and teardown, and the
 * operations they make by hand (fixture.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <git2.h>
#include <sodium.h>

#include "config.h"
#include "fixture.h"
#include "ops.h"
#include "store.h"

int fx_group_setup(const char *ident, enum log_level level)
{
	if (sodium_init() < 0)
		return -1;
	git_libgit2_init();
	log_init(ident, false, level);
	return 0;
}

int fx_group_teardown(void **state)
{
	(void)state;
	git_libgit2_shutdown();
	return 0;
}

int fx_mkdtemp(char *dir, size_t size, const char *name, bool tmpfs)
{
	const char *tmp = getenv("TMPDIR");
	struct stat st;
	int n;

	if (tmpfs && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
		tmp = "/dev/shm";
	n = snprintf(dir, size, "%s/%s.XXXXXX",
	             tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp", name);
	if (n < 0 || (size_t)n >= size || !mkdtemp(dir))
		return -1;
	return 0;
}

int fx_rmtree(const char *dir)
{
	char cmd[256];
	int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);

	if (n < 0 || (size_t)n >= sizeof(cmd) || system(cmd) != 0)
		return -1;
	return 0;
}

int fx_store_open(struct store **s,
                  struct ops **o,
                  const char *dir,
                  const struct config *cfg,
                  const uint8_t *seal_key)
{
	char path[256];
	bool created = false;
	int n = snprintf(path, sizeof(path), "%s/store", dir);

	if (n < 0 || (size_t)n >= sizeof(path) ||
	    store_open(s, &created, path, seal_key) < 0)
		return -1;
	if (o && ops_open(o, *s, cfg, created) < 0)
		return -1;
	return 0;
}

void fx_store_close(struct store **s, struct ops **o)
{
	if (o)
		ops_destroy(o);
	store_destroy(s);
}

/* ---- operations by hand ---------------------------------------------------
 */

static void
fx_stamp(struct fx_op *t, const char *origin, uint64_t seq, uint64_t hlc)
{
	memset(t, 0, sizeof(*t));
	grantd__v1__op__init(&t->op);
	t->op.origin = (char *)origin;
	t->op.epoch = FX_EPOCH, t->op.has_epoch = 1;
	t->op.seq = seq, t->op.has_seq = 1;
	t->op.hlc = hlc, t->op.has_hlc = 1;
}

Grantd__V1__Op *fx_op_user(struct fx_op *t,
                           const char *origin,
                           uint64_t seq,
                           uint64_t hlc,
                           const char *name,
                           const char *key,
                           bool del)
{
	fx_stamp(t, origin, seq, hlc);
	grantd__v1__user__init(&t->user);
	t->user.name = (char *)name;
	t->keys[0] = (char *)key;
	t->user.keys = t->keys;
	t->user.n_keys = key ? 1 : 0;
	t->user.deleted = del, t->user.has_deleted = del;
	t->op.body_case = GRANTD__V1__OP__BODY_USER;
	t->op.user = &t->user;
	return &t->op;
}

Grantd__V1__Op *fx_op_grant(struct fx_op *t,
                            const char *origin,
                            uint64_t seq,
                            uint64_t hlc,
                            const char *user,
                            const char *net,
                            int64_t expires,
                            bool revoked)
{
	fx_stamp(t, origin, seq, hlc);
	grantd__v1__grant__init(&t->grant);
	t->grant.user = (char *)user;
	t->grant.net = (char *)net;
	t->grant.session = "";
	t->grant.added = 1700000000, t->grant.has_added = 1;
	t->grant.expires = expires, t->grant.has_expires = 1;
	t->grant.site = (char *)origin;
	t->grant.revoked = revoked, t->grant.has_revoked = 1;
	t->op.body_case = GRANTD__V1__OP__BODY_GRANT;
	t->op.grant = &t->grant;
	return &t->op;
}

int fx_apply(struct ops *o,
             struct store *s,
             Grantd__V1__Op *const *ops,
             size_t n)
{
	struct store_batch *b;
	bool applied;
	int rc = 0;

	if (store_batch_new(&b, s) < 0)
		return -1;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (ops_apply(o, b, ops[i], &applied) < 0 || !applied)
			rc = -1;
	if (rc == 0 && ops_commit(o, b, false) < 0)
		rc = -1;
	store_batch_free(&b);
	return rc;
}

static const uint8_t fx_seal_key[STORE_SEAL_KEY_LEN] =
        "fixture seal key 0123456789abcd";

int fx_site_open(struct fx_site *n, const char *parent, const char *site)
{
	struct stat st;

	fx_site_close(n);
	snprintf(n->site, sizeof(n->site), "%s", site);
	if (snprintf(n->dir, sizeof(n->dir), "%s/%s", parent, site) >=
	            (int)sizeof(n->dir) ||
	    (stat(n->dir, &st) < 0 && mkdir(n->dir, 0700) < 0))
		return -1;
	memset(&n->cfg, 0, sizeof(n->cfg));
	n->cfg.site = n->site;
	n->cfg.data_dir = n->dir;
	n->cfg.repo_dir = n->dir;
	n->cfg.oplog_retention = 7 * 24 * 3600;
	return fx_store_open(&n->s, &n->o, n->dir, &n->cfg, fx_seal_key);
}

void fx_site_close(struct fx_site *n)
{
	if (n->o || n->s)
		fx_store_close(&n->s, &n->o);
}

int fx_sites_open(struct fx_sites **out, const char *name)
{
	struct fx_sites *f = calloc(1, sizeof(*f));

	*out = NULL;
	if (!f)
		return -1;
	if (fx_mkdtemp(f->dir, sizeof(f->dir), name, false) < 0) {
		free(f);
		return -1;
	}
	*out = f;
	return 0;
}

int fx_sites_teardown(void **state)
{
	struct fx_sites *f = *state;
	int rc;

	if (!f)
		return 0;
	for (int i = 0; i < FX_SITES; i++)
		fx_site_close(&f->n[i]);
	rc = fx_rmtree(f->dir);
	free(f);
	*state = NULL;
	return rc;
}

/* ---- a replicating node ------------------------------------------------- */

#include <zmq.h>

#include "clock.h"
#include "repl.h"
#include "syncer.h"
#include "vote.h"
#include "writer.h"

static void fx_node_durable(const struct writer_durable *d, void *payload);

int fx_node_open(struct fx_node *n,
                 const char *parent,
                 const char *site,
                 const uint8_t *seal_key)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->site, sizeof(n->site), "%s", site);
	if (snprintf(n->dir, sizeof(n->dir), "%s/%s", parent, site) >=
	            (int)sizeof(n->dir) ||
	    mkdir(n->dir, 0700) < 0)
		return -1;
	snprintf(n->pub_ep, sizeof(n->pub_ep), "ipc://%s/pub", n->dir);
	snprintf(n->sync_ep, sizeof(n->sync_ep), "ipc://%s/sync", n->dir);
	snprintf(n->repo_dir, sizeof(n->repo_dir), "%s/repos", n->dir);
	if (zmq_curve_keypair(n->curve_pub, n->curve_sec) < 0)
		return -1;
	n->cfg.site = n->site;
	n->cfg.repo_dir = n->repo_dir;
	n->cfg.data_dir = n->dir;
	n->cfg.publish = n->pub_ep;
	n->cfg.sync = n->sync_ep;
	n->cfg.oplog_retention = 7 * 24 * 3600;
	if (fx_store_open(&n->s, &n->o, n->dir, &n->cfg, seal_key) < 0)
		return -1;
	if (!(n->zctx = zmq_ctx_new()) ||
	    syncer_start(&n->sy, n->s, n->zctx, NULL) < 0)
		return -1;
	n->self = (struct peer_self){n->zctx, n->site, n->curve_pub,
	                             n->curve_sec};
	return writer_open(&n->w,
	                   &(struct writer_opts){.store = n->s,
	                                         .ops = n->o,
	                                         .syncer = n->sy,
	                                         .repo_dir = n->repo_dir,
	                                         .durable_fn = fx_node_durable,
	                                         .durable_payload = n}) < 0
	               ? -1
	               : 0;
}

void fx_node_peer(struct fx_node *n,
                  const struct fx_node *other,
                  enum config_role role)
{
	struct config_peer *p = &n->cfg.peers[n->cfg.npeers++];

	p->site = (char *)other->site;
	p->role = role;
	p->publish = (char *)other->pub_ep;
	p->sync = (char *)other->sync_ep;
	memcpy(p->public_key, other->curve_pub, sizeof(p->public_key));
}

int fx_node_link(struct fx_node *n)
{
	if (peer_open(&n->link,
	              &(struct peer_link_opts){.self = &n->self,
	                                       .peers = n->cfg.peers,
	                                       .npeers = n->cfg.npeers,
	                                       .sync = n->cfg.sync,
	                                       .maxmsg = 64 * 1024}) < 0)
		return -1;
	return repl_open(&n->repl, &(struct repl_opts){.ops = n->o,
	                                               .store = n->s,
	                                               .cfg = &n->cfg,
	                                               .self = &n->self,
	                                               .link = n->link,
	                                               .writer = n->w}) < 0
	               ? -1
	               : 0;
}

int fx_node_vote(struct fx_node *n)
{
	return vote_open(&n->vote, &(struct vote_opts){.cfg = &n->cfg,
	                                               .store = n->s,
	                                               .writer = n->w,
	                                               .self = &n->self,
	                                               .link = n->link,
	                                               .data_dir = n->dir,
	                                               .created = true}) < 0
	               ? -1
	               : 0;
}

void fx_node_close(struct fx_node *n)
{
	vote_destroy(&n->vote);
	repl_destroy(&n->repl);
	peer_close(&n->link);
	writer_destroy(&n->w);
	syncer_destroy(&n->sy);
	if (n->zctx)
		zmq_ctx_term(n->zctx);
	n->zctx = NULL;
	if (n->o && n->s)
		fx_store_close(&n->s, &n->o);
	buf_free(&n->published);
}

/* writer_synced's durable batches: keep a copy of their operations, then
 * repl_publish; the view is not read here. */
static void fx_node_durable(const struct writer_durable *d, void *payload)
{
	struct fx_node *n = payload;
	struct buf *ops = d->ops;
	struct store_batch *view = d->view;
	size_t off = 0;

	store_batch_free(&view);
	if (!ops->len)
		return;
	buf_add(&n->published, ops->p, ops->len);
	while (off + 4 <= ops->len) {
		const uint8_t *p = (const uint8_t *)ops->p + off;
		off += 4 + ((size_t)p[0] << 24 | (size_t)p[1] << 16 |
		            (size_t)p[2] << 8 | p[3]);
		n->npublished++;
	}
	if (n->repl)
		repl_publish(ops, n->repl);
	else
		buf_reset(ops);
}

void fx_nodes_round(struct fx_node *const *nodes, int n, int ms)
{
	zmq_pollitem_t items[64];
	int k = 0;

	for (int i = 0; i < n; i++) {
		if (nodes[i]->repl)
			k += repl_pollitems(nodes[i]->repl, items + k, 56 - k);
		k += vote_pollitems(nodes[i]->vote, items + k, 60 - k);
		if (k < 64)
			items[k++] = (zmq_pollitem_t){
			        writer_socket(nodes[i]->w), 0, ZMQ_POLLIN, 0};
	}
	zmq_poll(items, k, ms);
	for (int i = 0; i < n; i++) {
		struct fx_node *x = nodes[i];
		zmq_pollitem_t it = {writer_socket(x->w), 0, ZMQ_POLLIN, 0};
		if (x->repl)
			repl_handle(x->repl);
		vote_handle(x->vote);
		while (zmq_poll(&it, 1, 0) == 1)
			writer_synced(x->w);
		if (x->repl)
			repl_tick(x->repl, clock_mono_ms());
		vote_tick(x->vote, clock_mono_ms());
	}
}

int fx_node_grants(struct fx_node *n, int k, int wait_ms)
{
	struct fx_node *one[] = {n};
	int before = n->npublished;
	uint64_t t;

	for (int i = 0; i < k; i++) {
		Grantd__V1__Op op = GRANTD__V1__OP__INIT;
		Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
		char user[32];
		snprintf(user, sizeof(user), "user%d", before + i);
		g.user = user;
		g.net = "192.0.2.7/32";
		g.session = "";
		g.added = 1700000000, g.has_added = 1;
		g.expires = 4102444800, g.has_expires = 1; /* 2100 */
		g.site = n->site;
		op.body_case = GRANTD__V1__OP__BODY_GRANT;
		op.grant = &g;
		if (ops_local(n->o, writer_batch(n->w), &op) < 0)
			return -1;
	}
	if (writer_commit(n->w, &t) < 0)
		return -1;
	for (uint64_t end = clock_mono_ms() + (uint64_t)wait_ms;
	     n->npublished < before + k && clock_mono_ms() < end;)
		fx_nodes_round(one, 1, 10);
	return n->npublished == before + k ? 0 : -1;
}

/* ---- two nodes ------------------------------------------------------------
 */

int fx_pair_open(struct fx_pair **out,
                 const char *name,
                 enum config_role b_role,
                 enum fx_pair_link how)
{
	struct fx_pair *f = calloc(1, sizeof(*f));

	*out = NULL;
	if (!f)
		return -1;
	if (fx_mkdtemp(f->dir, sizeof(f->dir), name, false) < 0) {
		free(f);
		return -1;
	}
	if (fx_node_open(&f->a, f->dir, "paloalto", fx_seal_key) < 0 ||
	    fx_node_open(&f->b, f->dir, "portland", fx_seal_key) < 0)
		goto fail;
	f->b.cfg.role = b_role;
	fx_node_peer(&f->a, &f->b, b_role);
	fx_node_peer(&f->b, &f->a, CONFIG_ROLE_FRONTEND);
	if (how != FX_PAIR_UNLINKED && fx_node_link(&f->a) < 0)
		goto fail;
	if (how == FX_PAIR_LINKED && fx_node_link(&f->b) < 0)
		goto fail;
	*out = f;
	return 0;
fail:
	fx_pair_close(&f);
	return -1;
}

int fx_pair_close(struct fx_pair **pp)
{
	struct fx_pair *f = *pp;
	int rc;

	if (!f)
		return 0;
	fx_node_close(&f->a);
	fx_node_close(&f->b);
	rc = fx_rmtree(f->dir);
	free(f);
	*pp = NULL;
	return rc;
}

int fx_pair_teardown(void **state)
{
	struct fx_pair *f = *state;

	*state = NULL;
	return fx_pair_close(&f);
}
