/*
 * packsrv.c: packs served to peers (packsrv.h): a stream per PackReq, its
 * pack-objects child, its credit.  Actor thread only.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "gitproc.h"
#include "log.h"
#include "ops.h"
#include "packbuild.h"
#include "packsrv.h"
#include "xalloc.h"
#include "banned.h"

#define CHUNK_MAX        GITIO_CHUNK_MAX
#define STREAMS_MAX      PACKSRV_STREAMS_MAX
#define CREDIT_MAX       64 /* most a server lets itself be owed */
#define STREAMS_PER_PEER 3 /* packs served at once to one peer */
#define KEEPALIVE_MS     3000 /* an empty chunk while git is busy */
#define SERVE_IDLE_MS    30000 /* no credit this long: stream dropped */

/* A pack being served to a peer. */
struct stream {
	struct buf rid; /* the asker's ROUTER routing id */
	char site[NAME_SITE_MAX + 1];
	uint64_t id;
	pid_t pid;
	int fd; /* pack-objects' stdout, non-blocking; -1: a small pack
	         * built in-process, in mem */
	struct buf mem;
	size_t off; /* of mem, sent */
	uint32_t credit, seq;
	uint64_t last_ms; /* last credit or chunk: idle measure */
	uint64_t sent_ms; /* last frame sent, for keep-alives */
	uint64_t bytes;
};

struct packsrv {
	struct gitio *io;
	struct stream streams[STREAMS_MAX];
	int nstreams;
	struct stream *polled[STREAMS_MAX]; /* packsrv_poll's, in order */
	int npolled;
	uint8_t *chunk; /* CHUNK_MAX of scratch */
};

void packsrv_open(struct packsrv **out, struct gitio *io)
{
	struct packsrv *ps = xcalloc(1, sizeof(*ps));

	ps->io = io;
	ps->chunk = xmalloc(CHUNK_MAX);
	for (int i = 0; i < STREAMS_MAX; i++)
		ps->streams[i].fd = -1;
	*out = ps;
}

static void stream_close(struct packsrv *ps, struct stream *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		gitproc_wait(s->pid);
	}
	if (s->fd >= 0)
		close(s->fd);
	buf_free(&s->rid);
	buf_free(&s->mem);
	*s = ps->streams[--ps->nstreams];
	ps->streams[ps->nstreams] = (struct stream){.fd = -1};
}

static struct stream *
stream_find(struct packsrv *ps, const char *site, uint64_t id)
{
	for (int i = 0; i < ps->nstreams; i++)
		if (ps->streams[i].id == id &&
		    !strcmp(ps->streams[i].site, site))
			return &ps->streams[i];
	return NULL;
}

/* What a request asks, checked: the wants (all here) and the haves
 * here, as oids in want and have (q's sizes) and as pack-objects' input
 * in in.  NULL, or why not. */
static const char *request_read(git_odb *odb,
                                const Grantd__V1__PackReq *q,
                                git_oid *want,
                                git_oid *have,
                                size_t *nhave,
                                struct buf *in)
{
	*nhave = 0;
	for (size_t i = 0; i < q->n_wants; i++) {
		if (!ops_oid_ok(q->wants[i]) ||
		    git_oid_fromstr(&want[i], q->wants[i]) < 0)
			return "bad request";
		if (!git_odb_exists(odb, &want[i]))
			return "not here";
		buf_printf(in, "%s\n", q->wants[i]);
	}
	for (size_t i = 0; i < q->n_haves; i++)
		if (ops_oid_ok(q->haves[i]) &&
		    git_oid_fromstr(&have[*nhave], q->haves[i]) == 0 &&
		    git_odb_exists(odb, &have[*nhave])) {
			buf_printf(in, "^%s\n", q->haves[i]);
			++*nhave;
		}
	return NULL;
}

/* Start s's pack: built in-process when it is small (packbuild.h), else
 * by pack-objects reading in.  0, or -1 when git cannot run. */
static int stream_begin(struct stream *s,
                        git_repository *repo,
                        const char *path,
                        const git_oid *want,
                        size_t nwant,
                        const git_oid *have,
                        size_t nhave,
                        const struct buf *in)
{
	static const char *const args[] = {
	        "pack-objects",        "--revs", "--thin", "--stdout", "-q",
	        "--delta-base-offset", NULL};
	struct gitproc_cmd c = GITPROC_CMD_INIT;
	int rc = packbuild_small(&s->mem, repo, want, nwant, have, nhave);

	if (rc == 0 && s->mem.len)
		return 0;
	if (rc != GD_ETOOBIG)
		log_debug("pack not built in-process: %s", gitproc_why());
	buf_free(&s->mem);
	c.git_dir = path;
	c.argv = args;
	c.input = in;
	c.out_pipe = c.no_stderr = true;
	if (gitproc_start(&c) < 0)
		return -1;
	s->pid = c.pid;
	s->fd = c.out;
	return 0;
}

static void stream_pump(struct packsrv *ps, struct stream *s);

void packsrv_request(struct packsrv *ps,
                     const struct buf *rid,
                     const char *site,
                     const Grantd__V1__PackReq *q)
{
	char norm[NAME_REPO_MAX + 1];
	struct buf path = BUF_INIT, in = BUF_INIT;
	git_repository *repo = NULL;
	git_odb *odb = NULL;
	git_oid *want = NULL, *have = NULL;
	const char *why = NULL;
	size_t nhave;

	if (!q->has_id || !q->repo || !q->n_wants ||
	    q->n_wants > GITIO_WANTS_MAX || q->n_haves > GITIO_HAVES_MAX ||
	    name_repo_norm(norm, sizeof(norm), q->repo) < 0 ||
	    strcmp(norm, q->repo)) {
		why = "bad request";
		goto out;
	}
	int mine = 0;
	for (int i = 0; i < ps->nstreams; i++)
		mine += !strcmp(ps->streams[i].site, site);
	if (ps->nstreams == STREAMS_MAX || mine == STREAMS_PER_PEER ||
	    stream_find(ps, site, q->id)) {
		why = "busy";
		goto out;
	}
	gitio_path(ps->io, &path, q->repo);
	if (git_repository_open_bare(&repo, path.p) < 0 ||
	    git_repository_odb(&odb, repo) < 0) {
		why = "no such repository here";
		goto out;
	}
	want = xcalloc(q->n_wants, sizeof(*want));
	have = xcalloc(q->n_haves ? q->n_haves : 1, sizeof(*have));
	if ((why = request_read(odb, q, want, have, &nhave, &in)))
		goto out;
	struct stream *s = &ps->streams[ps->nstreams];
	*s = (struct stream){.fd = -1, .id = q->id};
	if (stream_begin(s, repo, path.p, want, q->n_wants, have, nhave, &in) <
	    0) {
		why = "cannot run git pack-objects";
		goto out;
	}
	ps->nstreams++;
	buf_add(&s->rid, rid->p, rid->len);
	snprintf(s->site, sizeof(s->site), "%s", site);
	s->credit = !q->has_credit || !q->credit ? 1
	            : q->credit < CREDIT_MAX     ? q->credit
	                                         : CREDIT_MAX;
	s->last_ms = s->sent_ms = clock_mono_ms();
	log_debug("serving pack peer=%s repo=%s wants=%zu haves=%zu%s", site,
	          q->repo, q->n_wants, q->n_haves,
	          s->fd < 0 ? " (in-process)" : "");
	if (s->fd < 0)
		stream_pump(ps, s);
out:
	if (why) {
		log_info("pack not served peer=%s repo=%s: %s", site,
		         q->repo ? q->repo : "-", why);
		gitio_pack_err(ps->io, NULL, rid, q->has_id ? q->id : 0, why);
	}
	free(want);
	free(have);
	git_odb_free(odb);
	git_repository_free(repo);
	buf_free(&path);
	buf_free(&in);
}

static void send_chunk(struct packsrv *ps,
                       struct stream *s,
                       const void *p,
                       size_t len,
                       bool last)
{
	Grantd__V1__PeerMsg m;
	peer_msg_init(ps->io->self, &m);
	Grantd__V1__PackChunk c = GRANTD__V1__PACK_CHUNK__INIT;
	c.has_id = c.has_seq = c.has_data = c.has_last = true;
	c.id = s->id;
	c.seq = s->seq++;
	c.data.data = (uint8_t *)p;
	c.data.len = len;
	c.last = last;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK;
	m.pack_chunk = &c;
	gitio_send_router(ps->io, &s->rid, &m);
	s->sent_ms = clock_mono_ms();
	s->bytes += len;
}

/* The last chunk: the pack is whole. */
static void stream_served(struct packsrv *ps, struct stream *s)
{
	send_chunk(ps, s, "", 0, true);
	ps->io->st->served++;
	ps->io->st->bytes_out += s->bytes;
	log_info("pack served peer=%s bytes=%llu", s->site,
	         (unsigned long long)s->bytes);
}

/* A pack in memory: a chunk per credit, the last one when all is sent
 * (the stream then closed). */
static void stream_pump(struct packsrv *ps, struct stream *s)
{
	while (s->credit && s->off < s->mem.len) {
		size_t n = s->mem.len - s->off;
		if (n > CHUNK_MAX)
			n = CHUNK_MAX;
		send_chunk(ps, s, s->mem.p + s->off, n, false);
		s->off += n;
		s->credit--;
		s->last_ms = clock_mono_ms();
	}
	if (s->off == s->mem.len) {
		stream_served(ps, s);
		stream_close(ps, s);
	}
}

/* pack-objects has output and the asker has credit: one chunk. */
static void stream_read(struct packsrv *ps, struct stream *s)
{
	uint8_t *chunk = ps->chunk;
	size_t got = 0;
	bool eof = false;

	if (!s->credit)
		return;
	while (got < CHUNK_MAX) {
		ssize_t r = read(s->fd, chunk + got, CHUNK_MAX - got);
		if (r > 0) {
			got += (size_t)r;
		} else if (r == 0) {
			eof = true;
			break;
		} else if (errno != EINTR) {
			break; /* EAGAIN: send what there is */
		}
	}
	s->last_ms = clock_mono_ms();
	if (got) {
		send_chunk(ps, s, chunk, got, false);
		s->credit--;
	}
	if (!eof)
		return;
	int rc = gitproc_wait(s->pid);
	s->pid = -1;
	if (rc == 0) {
		stream_served(ps, s);
	} else {
		log_warn("git pack-objects failed peer=%s status=%d", s->site,
		         rc);
		gitio_pack_err(ps->io, NULL, &s->rid, s->id,
		               "pack-objects failed");
	}
	stream_close(ps, s);
}

void packsrv_credit(struct packsrv *ps,
                    const char *site,
                    const Grantd__V1__PackCredit *c)
{
	struct stream *s = stream_find(ps, site, c->id);

	if (s) {
		uint64_t n = (uint64_t)s->credit + c->n;
		s->credit = n > CREDIT_MAX ? CREDIT_MAX : (uint32_t)n;
		s->last_ms = clock_mono_ms();
		if (s->fd < 0)
			stream_pump(ps, s);
	}
}

void packsrv_cancel(struct packsrv *ps, const char *site, uint64_t id)
{
	struct stream *s = stream_find(ps, site, id);

	if (s) {
		log_info("pack stream cancelled by peer=%s", site);
		stream_close(ps, s);
	}
}

void packsrv_tick(struct packsrv *ps, uint64_t t)
{
	for (int i = 0; i < ps->nstreams; i++) {
		struct stream *st = &ps->streams[i];
		if (st->credit && t - st->sent_ms > KEEPALIVE_MS)
			send_chunk(ps, st, "", 0, false);
	}
	for (int i = ps->nstreams; i-- > 0;)
		if (!ps->streams[i].credit &&
		    t - ps->streams[i].last_ms > SERVE_IDLE_MS) {
			log_warn("pack stream dropped peer=%s: no "
			         "credit for %d s",
			         ps->streams[i].site, SERVE_IDLE_MS / 1000);
			stream_close(ps, &ps->streams[i]);
		}
}

int packsrv_poll(struct packsrv *ps, zmq_pollitem_t *items)
{
	ps->npolled = 0;
	for (int i = 0; i < ps->nstreams; i++)
		if (ps->streams[i].credit > 0 && ps->streams[i].fd >= 0) {
			items[ps->npolled] = (zmq_pollitem_t){
			        NULL, ps->streams[i].fd, ZMQ_POLLIN, 0};
			ps->polled[ps->npolled++] = &ps->streams[i];
		}
	return ps->npolled;
}

void packsrv_ready(struct packsrv *ps, const zmq_pollitem_t *items)
{
	/* closing a stream moves the last one into its place: go from the
	 * end, so that polled[] still points at the streams polled */
	for (int i = ps->npolled; i-- > 0;)
		if (items[i].revents)
			stream_read(ps, ps->polled[i]);
	ps->npolled = 0;
}

void packsrv_destroy(struct packsrv **psp)
{
	struct packsrv *ps = *psp;

	if (!ps)
		return;
	while (ps->nstreams)
		stream_close(ps, &ps->streams[0]);
	free(ps->chunk);
	free(ps);
	*psp = NULL;
}
