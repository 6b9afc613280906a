/* gitio.c: what the actor hands its stages (gitio.h).  Actor thread. */
#include <stdarg.h>
#include <stdio.h>
#include <sodium.h>
#include <string.h>

#include "err.h"
#include "gitio.h"
#include "log.h"
#include "repos.h"
#include "banned.h"

void gitio_path(const struct gitio *io, struct buf *out, const char *name)
{
	repos_path(out, io->repo_dir, name);
}

git_repository *gitio_repo(struct gitio *io, const char *name)
{
	struct buf path = BUF_INIT;

	if (io->repo && !strcmp(io->repo_name, name))
		return io->repo;
	gitio_close(io);
	gitio_path(io, &path, name);
	if (git_repository_open_bare(&io->repo, path.p) < 0) {
		io->repo = NULL;
		log_debug("repository not openable (yet) repo=%s: %s", name,
		          gitproc_why());
	} else {
		snprintf(io->repo_name, sizeof(io->repo_name), "%s", name);
	}
	buf_free(&path);
	return io->repo;
}

int gitio_repo_record(struct store *s, const char *name, Grantd__V1__Repo **out)
{
	struct buf v = BUF_INIT;

	*out = NULL;
	if (store_get(s, NULL, CF_REPOS, name, strlen(name), &v) == 0)
		*out = grantd__v1__repo__unpack(NULL, v.len,
		                                (const uint8_t *)v.p);
	buf_free(&v);
	return *out ? 0 : GD_ENOTFOUND;
}

void gitio_close(struct gitio *io)
{
	git_repository_free(io->repo);
	io->repo = NULL;
	io->repo_name[0] = '\0';
}

int gitio_peer_index(const struct gitio *io, const char *site)
{
	for (int i = 0; site && i < io->npeers; i++)
		if (!strcmp(io->peers[i].site, site))
			return i;
	return -1;
}

void gitio_error(struct gitio *io, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(io->st->last_error, sizeof(io->st->last_error), fmt, ap);
	va_end(ap);
}

int gitio_send(struct gitio *io, void *sock, const Grantd__V1__PeerMsg *m)
{
	(void)io;
	return peer_send(sock, m, NULL, 0);
}

int gitio_send_router(struct gitio *io,
                      const struct buf *rid,
                      const Grantd__V1__PeerMsg *m)
{
	return io->to_router(io->arg, rid, m);
}

void gitio_pack_err(struct gitio *io,
                    void *sock,
                    const struct buf *rid,
                    uint64_t id,
                    const char *why)
{
	Grantd__V1__PeerMsg m;
	peer_msg_init(io->self, &m);
	Grantd__V1__PackErr e = GRANTD__V1__PACK_ERR__INIT;
	e.has_id = true;
	e.id = id;
	e.why = (char *)why;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_ERR;
	m.pack_err = &e;
	if (sock)
		gitio_send(io, sock, &m);
	else
		gitio_send_router(io, rid, &m);
}

static void mark_hash(uint8_t *out, const char *key, size_t klen)
{
	crypto_generichash(out, GITIO_MARK_HASH, (const uint8_t *)key, klen,
	                   NULL, 0);
}

void gitio_mark(struct gitio *io,
                const char *key,
                size_t klen,
                const char *val,
                size_t vlen)
{
	io->mark(io->arg, key, klen, val, vlen);
	mark_hash(io->marked[io->nmarked++ % GITIO_MARKS_RECENT], key, klen);
}

bool gitio_mark_sent(const struct gitio *io, const char *key, size_t klen)
{
	uint8_t h[GITIO_MARK_HASH];
	unsigned n = io->nmarked < GITIO_MARKS_RECENT ? io->nmarked
	                                              : GITIO_MARKS_RECENT;

	mark_hash(h, key, klen);
	for (unsigned i = 0; i < n; i++)
		if (!memcmp(io->marked[i], h, sizeof(h)))
			return true;
	return false;
}
