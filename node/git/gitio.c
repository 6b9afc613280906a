/* gitio.c: what the actor hands its stages (gitio.h).  Actor thread. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void gitio_mark(struct gitio *io,
                const char *key,
                size_t klen,
                const char *val,
                size_t vlen)
{
	io->mark(io->arg, key, klen, val, vlen);
}
