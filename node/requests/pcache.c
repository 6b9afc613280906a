/*
 * pcache.c: the reader's cache of push-decision facts (pcache.h).
 *
 * Three direct-mapped tables and, beside each, the list of its taken slots,
 * so that pcache_drop (once per new view: after every durable batch under
 * a load of vals) costs what is cached, not the table's size.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "pcache.h"
#include "xalloc.h"
#include "banned.h"

struct pcache {
	size_t slots; /* a power of two */
	struct pcache_user *users;
	struct pcache_repo *repos;
	struct pcache_key *keys;
	/* taken slots, in no order */
	uint32_t *used_users, *used_repos, *used_keys;
	size_t n_users, n_repos, n_keys;
};

/* FNV-1a, 64 bits: names are short; a collision only evicts. */
static size_t slot_of(const struct pcache *c, const char *name)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * UINT64_C(0x100000001b3);
	return (size_t)(h & (c->slots - 1));
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

void pcache_new(struct pcache **out, size_t slots)
{
	struct pcache *c = xcalloc(1, sizeof(*c));

	if (!slots)
		slots = PCACHE_SLOTS;
	GD_ASSERT((slots & (slots - 1)) == 0 && slots <= UINT32_MAX);
	c->slots = slots;
	c->users = xcalloc(slots, sizeof(*c->users));
	c->repos = xcalloc(slots, sizeof(*c->repos));
	c->keys = xcalloc(slots, sizeof(*c->keys));
	c->used_users = xcalloc(slots, sizeof(*c->used_users));
	c->used_repos = xcalloc(slots, sizeof(*c->used_repos));
	c->used_keys = xcalloc(slots, sizeof(*c->used_keys));
	*out = c;
}

void pcache_revokes_add(struct pcache_revokes *rv,
                        const struct gd_net *net,
                        uint64_t hlc,
                        const char *origin)
{
	GD_GROW(rv->addr, rv->cap_addr, rv->n_addr + 1);
	rv->addr[rv->n_addr++] = (struct pcache_addr_rev){
	        .net = *net, .hlc = hlc, .origin = dup_or_null(origin)};
}

void pcache_revokes_clear(struct pcache_revokes *rv)
{
	free(rv->user_origin);
	for (size_t i = 0; i < rv->n_addr; i++)
		free(rv->addr[i].origin);
	free(rv->addr);
	memset(rv, 0, sizeof(*rv));
}

void pcache_grants_clear(struct pcache_user *e)
{
	for (size_t i = 0; i < e->n_grants; i++)
		free(e->grants[i].session);
	free(e->grants);
	e->grants = NULL;
	e->n_grants = e->cap_grants = 0;
}

static void user_clear(struct pcache_user *e)
{
	free(e->name);
	pcache_revokes_clear(&e->rv);
	pcache_grants_clear(e);
	memset(e, 0, sizeof(*e));
}

bool pcache_grants_add(struct pcache_user *e,
                       const struct gd_net *net,
                       int64_t expires,
                       const char *session)
{
	if (e->grants_over)
		return false;
	if (e->n_grants == PCACHE_GRANTS_MAX) {
		pcache_grants_clear(e);
		e->grants_over = true;
		return false;
	}
	GD_GROW(e->grants, e->cap_grants, e->n_grants + 1);
	e->grants[e->n_grants++] = (struct pcache_grant){
	        .net = *net,
	        .expires = expires,
	        .session = session && *session ? xstrdup(session) : NULL};
	return true;
}

bool pcache_grant_allows(const struct gd_net *net,
                         int64_t expires,
                         const char *grant_session,
                         const struct gd_net *ip,
                         const char *session,
                         int64_t now)
{
	if (expires <= now || !addr_contains(net, ip))
		return false;
	return !grant_session || !*grant_session ||
	       (session && !strcmp(grant_session, session));
}

bool pcache_grants_cover(const struct pcache_user *e,
                         const struct gd_net *ip,
                         const char *session,
                         int64_t now)
{
	for (size_t i = 0; i < e->n_grants; i++) {
		const struct pcache_grant *g = &e->grants[i];
		if (pcache_grant_allows(&g->net, g->expires, g->session, ip,
		                        session, now))
			return true;
	}
	return false;
}

void pcache_repo_clear(struct pcache_repo *e)
{
	free(e->name);
	for (size_t i = 0; i < e->n_writers; i++)
		free(e->writers[i]);
	free(e->writers);
	memset(e, 0, sizeof(*e));
}

static void key_clear(struct pcache_key *e)
{
	free(e->fp);
	free(e->owner);
	free(e->line);
	memset(e, 0, sizeof(*e));
}

void pcache_drop(struct pcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_users; i++)
		user_clear(&c->users[c->used_users[i]]);
	for (size_t i = 0; i < c->n_repos; i++)
		pcache_repo_clear(&c->repos[c->used_repos[i]]);
	for (size_t i = 0; i < c->n_keys; i++)
		key_clear(&c->keys[c->used_keys[i]]);
	c->n_users = c->n_repos = c->n_keys = 0;
}

void pcache_free(struct pcache **cp)
{
	struct pcache *c = *cp;

	if (!c)
		return;
	pcache_drop(c);
	free(c->users);
	free(c->repos);
	free(c->keys);
	free(c->used_users);
	free(c->used_repos);
	free(c->used_keys);
	free(c);
	*cp = NULL;
}

/* Make e, slot i of a table whose entry's name is *entry_name, name's:
 * when it holds another name, what it held is cleared (clear(e)) and it
 * is named name; a free slot is noted in used first. */
static void claim(char **entry_name, void *e, void (*clear)(void *),
                  uint32_t *used, size_t *n_used, size_t i, const char *name)
{
	if (*entry_name && !strcmp(*entry_name, name))
		return;
	if (*entry_name)
		clear(e); /* evicted: its slot stays in used */
	else
		used[(*n_used)++] = (uint32_t)i;
	*entry_name = xstrdup(name);
}

static void user_clear_v(void *e)
{
	user_clear(e);
}

static void repo_clear_v(void *e)
{
	pcache_repo_clear(e);
}

static void key_clear_v(void *e)
{
	key_clear(e);
}

struct pcache_user *pcache_user(struct pcache *c, const char *name)
{
	size_t i = slot_of(c, name);
	struct pcache_user *e = &c->users[i];

	claim(&e->name, e, user_clear_v, c->used_users, &c->n_users, i, name);
	return e;
}

struct pcache_repo *pcache_repo(struct pcache *c, const char *name)
{
	size_t i = slot_of(c, name);
	struct pcache_repo *e = &c->repos[i];

	claim(&e->name, e, repo_clear_v, c->used_repos, &c->n_repos, i, name);
	return e;
}

struct pcache_key *pcache_key(struct pcache *c, const char *fp)
{
	size_t i = slot_of(c, fp);
	struct pcache_key *e = &c->keys[i];

	claim(&e->fp, e, key_clear_v, c->used_keys, &c->n_keys, i, fp);
	return e;
}

void pcache_key_set(struct pcache_key *e,
                    int owners,
                    const char *owner,
                    const char *line)
{
	GD_ASSERT(!e->known && !e->owner && !e->line);
	e->known = true;
	e->owners = owners;
	e->owner = owners ? dup_or_null(owner) : NULL;
	e->line = owners ? dup_or_null(line) : NULL;
}

void pcache_repo_set(struct pcache_repo *e,
                     bool exists,
                     int mode,
                     char *const *writers,
                     size_t n_writers)
{
	GD_ASSERT(!e->known && !e->writers);
	e->known = true;
	e->exists = exists;
	e->mode = mode;
	if (!n_writers)
		return;
	e->writers = xcalloc(n_writers, sizeof(*e->writers));
	for (size_t i = 0; i < n_writers; i++)
		e->writers[i] = dup_or_null(writers[i]);
	e->n_writers = n_writers;
}

bool pcache_repo_writer(const struct pcache_repo *e, const char *user)
{
	for (size_t i = 0; i < e->n_writers; i++)
		if (e->writers[i] && !strcmp(e->writers[i], user))
			return true;
	return false;
}

static void revokes_blocks(const struct pcache_revokes *rv,
                           void (*fn)(const void *, size_t, void *),
                           void *payload)
{
	if (rv->user_origin)
		fn(rv->user_origin, strlen(rv->user_origin) + 1, payload);
	if (rv->addr)
		fn(rv->addr, rv->cap_addr * sizeof(*rv->addr), payload);
	for (size_t i = 0; i < rv->n_addr; i++)
		if (rv->addr[i].origin)
			fn(rv->addr[i].origin, strlen(rv->addr[i].origin) + 1,
			   payload);
}

void pcache_each_block(const struct pcache *c,
                       void (*fn)(const void *p, size_t len, void *payload),
                       void *payload)
{
	fn(c, sizeof(*c), payload);
	fn(c->users, c->slots * sizeof(*c->users), payload);
	fn(c->repos, c->slots * sizeof(*c->repos), payload);
	fn(c->used_users, c->slots * sizeof(*c->used_users), payload);
	fn(c->used_repos, c->slots * sizeof(*c->used_repos), payload);
	fn(c->keys, c->slots * sizeof(*c->keys), payload);
	fn(c->used_keys, c->slots * sizeof(*c->used_keys), payload);
	for (size_t i = 0; i < c->slots; i++) {
		const struct pcache_key *k = &c->keys[i];
		const char *ks[] = {k->fp, k->owner, k->line};
		for (size_t j = 0; j < GD_ARRAY_SIZE(ks); j++)
			if (ks[j])
				fn(ks[j], strlen(ks[j]) + 1, payload);
	}
	for (size_t i = 0; i < c->slots; i++) {
		const struct pcache_user *u = &c->users[i];
		const struct pcache_repo *r = &c->repos[i];
		if (u->name) {
			fn(u->name, strlen(u->name) + 1, payload);
			revokes_blocks(&u->rv, fn, payload);
		}
		if (u->grants)
			fn(u->grants, u->cap_grants * sizeof(*u->grants),
			   payload);
		for (size_t j = 0; j < u->n_grants; j++)
			if (u->grants[j].session)
				fn(u->grants[j].session,
				   strlen(u->grants[j].session) + 1, payload);
		if (r->name)
			fn(r->name, strlen(r->name) + 1, payload);
		if (r->writers)
			fn(r->writers, r->n_writers * sizeof(*r->writers),
			   payload);
		for (size_t j = 0; j < r->n_writers; j++)
			if (r->writers[j])
				fn(r->writers[j], strlen(r->writers[j]) + 1,
				   payload);
	}
}
