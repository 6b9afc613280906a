/*
 * packsrv.c: packs served to peers (gitrepl_int.h).  A PackReq starts
 * `git pack-objects --revs --thin --stdout` in the repository; its output
 * goes back in chunks of at most CHUNK_MAX, never more than the asker's
 * credit ahead, with an empty chunk every KEEPALIVE_MS while git counts or
 * compresses.  A stream without credit for SERVE_IDLE_MS is dropped.  The
 * frames go out through the writer (the sync ROUTER is its socket).  Actor
 * thread only.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "gitrepl_int.h"
#include "log.h"
#include "ops.h"
#include "banned.h"

static void stream_close(struct gitrepl *g, struct stream *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		gitproc_wait(s->pid);
	}
	if (s->fd >= 0)
		close(s->fd);
	buf_free(&s->rid);
	*s = g->streams[--g->nstreams];
	g->streams[g->nstreams] = (struct stream){ .fd = -1 };
}

static struct stream *stream_find(struct gitrepl *g, const char *site,
				  uint64_t id)
{
	for (int i = 0; i < g->nstreams; i++)
		if (g->streams[i].id == id && !strcmp(g->streams[i].site, site))
			return &g->streams[i];
	return NULL;
}

void packsrv_request(struct gitrepl *g, const struct buf *rid,
		     const char *site, const Grantd__V1__PackReq *q)
{
	static const char *const args[] = { "pack-objects", "--revs", "--thin",
					    "--stdout", "-q",
					    "--delta-base-offset", NULL };
	char norm[NAME_REPO_MAX + 1];
	struct buf path = BUF_INIT, in = BUF_INIT;
	git_repository *repo = NULL;
	git_odb *odb = NULL;
	const char *why = NULL;
	git_oid oid;

	if (!q->has_id || !q->repo || !q->n_wants ||
	    q->n_wants > WANTS_MAX || q->n_haves > HAVES_MAX ||
	    name_repo_norm(norm, sizeof(norm), q->repo) < 0 ||
	    strcmp(norm, q->repo)) {
		why = "bad request";
		goto out;
	}
	int mine = 0;
	for (int i = 0; i < g->nstreams; i++)
		mine += !strcmp(g->streams[i].site, site);
	if (g->nstreams == STREAMS_MAX || mine == STREAMS_PER_PEER ||
	    stream_find(g, site, q->id)) {
		why = "busy";
		goto out;
	}
	gitrepl_path(g, &path, q->repo);
	if (git_repository_open_bare(&repo, path.p) < 0 ||
	    git_repository_odb(&odb, repo) < 0) {
		why = "no such repository here";
		goto out;
	}
	for (size_t i = 0; i < q->n_wants; i++) {
		if (!ops_oid_ok(q->wants[i]) ||
		    git_oid_fromstr(&oid, q->wants[i]) < 0) {
			why = "bad request";
			goto out;
		}
		if (!git_odb_exists(odb, &oid)) {
			why = "not here";
			goto out;
		}
		buf_printf(&in, "%s\n", q->wants[i]);
	}
	for (size_t i = 0; i < q->n_haves; i++)
		if (ops_oid_ok(q->haves[i]) &&
		    git_oid_fromstr(&oid, q->haves[i]) == 0 &&
		    git_odb_exists(odb, &oid))
			buf_printf(&in, "^%s\n", q->haves[i]);
	struct stream *s = &g->streams[g->nstreams];
	*s = (struct stream){ .fd = -1, .id = q->id };
	s->pid = gitproc_spawn(path.p, args, &in, &s->fd, NULL);
	if (s->pid < 0) {
		why = "cannot run git pack-objects";
		goto out;
	}
	g->nstreams++;
	buf_add(&s->rid, rid->p, rid->len);
	snprintf(s->site, sizeof(s->site), "%s", site);
	s->credit = !q->has_credit || !q->credit ? 1 :
		    q->credit < CREDIT_MAX ? q->credit : CREDIT_MAX;
	s->last_ms = s->sent_ms = clock_mono_ms();
	log_debug("serving pack peer=%s repo=%s wants=%zu haves=%zu", site,
		  q->repo, q->n_wants, q->n_haves);
out:
	if (why) {
		log_info("pack not served peer=%s repo=%s: %s", site,
			 q->repo ? q->repo : "-", why);
		gitrepl_pack_err(g, g->pair, rid, q->has_id ? q->id : 0, why);
	}
	git_odb_free(odb);
	git_repository_free(repo);
	buf_free(&path);
	buf_free(&in);
}

static void send_chunk(struct gitrepl *g, struct stream *s, const void *p,
		       size_t len, bool last)
{
	Grantd__V1__PeerMsg m;
	peer_msg_init(g->self, &m);
	Grantd__V1__PackChunk c = GRANTD__V1__PACK_CHUNK__INIT;
	c.has_id = c.has_seq = c.has_data = c.has_last = true;
	c.id = s->id;
	c.seq = s->seq++;
	c.data.data = (uint8_t *)p;
	c.data.len = len;
	c.last = last;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK;
	m.pack_chunk = &c;
	gitrepl_send(g, g->pair, &s->rid, &m);
	s->sent_ms = clock_mono_ms();
	s->bytes += len;
}

/* pack-objects has output and the asker has credit: one chunk. */
void packsrv_read(struct gitrepl *g, struct stream *s, uint8_t *chunk)
{
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
		send_chunk(g, s, chunk, got, false);
		s->credit--;
	}
	if (!eof)
		return;
	int rc = gitproc_wait(s->pid);
	s->pid = -1;
	if (rc == 0) {
		send_chunk(g, s, "", 0, true);
		g->st.served++;
		g->st.bytes_out += s->bytes;
		log_info("pack served peer=%s bytes=%llu", s->site,
			 (unsigned long long)s->bytes);
	} else {
		log_warn("git pack-objects failed peer=%s status=%d", s->site,
			 rc);
		gitrepl_pack_err(g, g->pair, &s->rid, s->id,
				 "pack-objects failed");
	}
	stream_close(g, s);
}

void packsrv_credit(struct gitrepl *g, const char *site,
		    const Grantd__V1__PackCredit *c)
{
	struct stream *s = stream_find(g, site, c->id);

	if (s) {
		uint64_t n = (uint64_t)s->credit + c->n;
		s->credit = n > CREDIT_MAX ? CREDIT_MAX : (uint32_t)n;
		s->last_ms = clock_mono_ms();
	}
}

void packsrv_cancel(struct gitrepl *g, const char *site, uint64_t id)
{
	struct stream *s = stream_find(g, site, id);

	if (s) {
		log_info("pack stream cancelled by peer=%s", site);
		stream_close(g, s);
	}
}

void packsrv_tick(struct gitrepl *g, uint64_t t)
{
	for (int i = 0; i < g->nstreams; i++) {
		struct stream *st = &g->streams[i];
		if (st->credit && t - st->sent_ms > KEEPALIVE_MS)
			send_chunk(g, st, "", 0, false);
	}
	for (int i = g->nstreams; i-- > 0;)
		if (!g->streams[i].credit &&
		    t - g->streams[i].last_ms > SERVE_IDLE_MS) {
			log_warn("pack stream dropped peer=%s: no "
				 "credit for %d s", g->streams[i].site,
				 SERVE_IDLE_MS / 1000);
			stream_close(g, &g->streams[i]);
		}
}

void packsrv_close_all(struct gitrepl *g)
{
	while (g->nstreams)
		stream_close(g, &g->streams[0]);
}
