/*
 * packfetch.c: the one fetch in flight (packfetch.h).  The objects one
 * repository lacks are asked of a peer as a thin pack (PackReq{wants,
 * haves} on the actor's DEALER), WINDOW chunks of credit ahead; each
 * PackChunk goes straight into a `git index-pack` child writing into a
 * quarantine (a pack of HOLD_MAX bytes at most, a push of a few commits,
 * into libgit2's indexer, checked by connect_pack: no child to start),
 * and the pack enters the repository only once its tips are proved
 * connected.  A peer that fails
 * (an error, a bad or unconnected pack, FETCH_IDLE_MS of silence) is
 * dropped for the next.  Actor thread only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2/sys/odb_backend.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "connect.h"
#include "crashpoint.h"
#include "err.h"
#include "gitproc.h"
#include "log.h"
#include "metrics.h"
#include "packfetch.h"
#include "xalloc.h"
#include "banned.h"

#include <sodium.h>

#define WINDOW        8 /* chunks a fetch lets ahead */
#define FETCH_IDLE_MS 10000 /* silent this long: ask the next peer */
#define WANTS_MAX     GITIO_WANTS_MAX
#define HAVES_MAX     GITIO_HAVES_MAX

/* The fetch in flight (active), or the last one. */
struct fetch {
	bool active;
	uint64_t id;
	int peer; /* index being asked */
	uint32_t tried; /* peers asked this round (bits) */
	int first; /* peer to ask first, -1: config order */
	char repo[NAME_REPO_MAX + 1];
	char wants[WANTS_MAX][OID_HEX + 1];
	size_t nwants;
	struct buf qdir; /* the quarantine, "" when none */
	struct buf held; /* the pack's first bytes, until there
	                  * are too many and index-pack starts
	                  * (a small pack: libgit2's indexer) */
	pid_t ipid; /* git index-pack into it, 0: none */
	int ifd; /* its stdin (non-blocking), -1: closed */
	uint32_t seq;
	uint64_t last_ms, started_ms, bytes;
	/* the stages of the last attempt, ms after started_ms (debug log):
	 * the first chunk, the last, index-pack or libgit2 done, tips
	 * proved connected */
	uint64_t first_ms, recv_ms, indexed_ms, checked_ms;
};

struct packfetch {
	struct gitio *io;
	struct store *store;
	void *const *dealer;
	struct metrics_hist *hist;
	struct fetch f;
	uint64_t next_id;
	/* how the fetch ended, for the public call now returning */
	enum packfetch_verdict verdict;
};

/* ---- the quarantine ---------------------------------------------------------
 * A pack from a peer is indexed into NAME.git/grantd-incoming-XXXXXX/ (an
 * objects directory of its own, the repository's objects as its
 * alternate), checked there, and only then renamed into objects/pack/:
 * objects that fail the checks never enter the repository, so a ref can
 * never be moved onto them later. */

#define QUARANTINE "grantd-incoming-"

/* A pack up to this size is held in memory and indexed by libgit2 when it
 * ends (no child to start: a one-commit pack is 1-3 KB); a larger one
 * goes to git index-pack as it comes (faster from about 64 KB: libgit2
 * indexes ~6 MB/s here, index-pack costs ~10 ms to start).  Small enough
 * that test_git_rogue's bad packs (47-78 KB) take the index-pack path and
 * its unconnected one the libgit2 path. */
#define HOLD_MAX (32 * 1024)

/* Remove a quarantine directory and what is in it (two levels). */
static void quarantine_remove(const char *dir)
{
	struct buf p = BUF_INIT;
	const char *sub[] = {"/pack", ""};

	for (size_t i = 0; i < GD_ARRAY_SIZE(sub); i++) {
		struct dirent *de;
		DIR *d;
		buf_reset(&p);
		buf_printf(&p, "%s%s", dir, sub[i]);
		if ((d = opendir(p.p))) {
			while ((de = readdir(d)))
				if (strcmp(de->d_name, ".") &&
				    strcmp(de->d_name, ".."))
					unlinkat(dirfd(d), de->d_name,
					         !strcmp(de->d_name, "pack") &&
					                         !*sub[i]
					                 ? AT_REMOVEDIR
					                 : 0);
			closedir(d);
		}
	}
	rmdir(dir);
	buf_free(&p);
}

/* Quarantines left by a fetch that a crash interrupted. */
static void quarantine_sweep(const char *repo_path)
{
	struct buf p = BUF_INIT;
	struct dirent *de;
	DIR *d = opendir(repo_path);

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, QUARANTINE, strlen(QUARANTINE))) {
			buf_reset(&p);
			buf_printf(&p, "%s/%s", repo_path, de->d_name);
			quarantine_remove(p.p);
		}
	if (d)
		closedir(d);
	buf_free(&p);
}

/* Make qdir, an objects directory for index-pack to write a pack in. */
static int quarantine_open(const char *repo_path, struct buf *qdir)
{
	struct buf pack = BUF_INIT;
	int rc = 0;

	buf_reset(qdir);
	buf_printf(qdir, "%s/" QUARANTINE "XXXXXX", repo_path);
	if (!mkdtemp(qdir->p)) {
		buf_reset(qdir);
		return GD_EIO;
	}
	buf_printf(&pack, "%s/pack", qdir->p);
	if (mkdir(pack.p, 0755) < 0) {
		quarantine_remove(qdir->p);
		buf_reset(qdir);
		rc = GD_EIO;
	}
	buf_free(&pack);
	return rc;
}

/* Move the checked pack (and its index, last: it makes the pack visible)
 * into the repository, fsynced. */
static int quarantine_commit(const char *repo_path, const char *qdir)
{
	static const char *const exts[] = {".pack", ".rev", ".idx"};
	struct buf from = BUF_INIT, to = BUF_INIT, dir = BUF_INIT;
	struct buf moved = BUF_INIT;
	struct dirent *de;
	int rc = 0;
	DIR *d;

	buf_printf(&dir, "%s/pack", qdir);
	if (!(d = opendir(dir.p))) {
		buf_free(&dir);
		return GD_EIO;
	}
	for (size_t e = 0; rc == 0 && e < GD_ARRAY_SIZE(exts); e++) {
		rewinddir(d);
		while (rc == 0 && (de = readdir(d))) {
			size_t l = strlen(de->d_name), el = strlen(exts[e]);
			if (l <= el || strcmp(de->d_name + l - el, exts[e]))
				continue;
			buf_reset(&from);
			buf_reset(&to);
			buf_printf(&from, "%s/%s", dir.p, de->d_name);
			buf_printf(&to, "%s/objects/pack/%s", repo_path,
			           de->d_name);
			if (rename(from.p, to.p) < 0) {
				rc = GD_EIO;
				break;
			}
			buf_add(&moved, to.p, to.len + 1);
			crashpoint(
			        "pack-move"); /* the pack in, its index not */
		}
	}
	closedir(d);
	/* a pack without its index is invisible but takes space: a move
	 * that failed half-way takes back what it moved */
	for (size_t off = 0; rc < 0 && off < moved.len;
	     off += strlen(moved.p + off) + 1)
		unlink(moved.p + off);
	buf_free(&moved);
	buf_reset(&dir);
	buf_printf(&dir, "%s/objects/pack", repo_path);
	int fd = open(dir.p, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fsync(fd) < 0)
		rc = GD_EIO;
	if (fd >= 0)
		close(fd);
	buf_free(&from);
	buf_free(&to);
	buf_free(&dir);
	return rc;
}

/* ---- fetching packs ----------------------------------------------------- */

static void fetch_done(struct packfetch *pf, bool ok);

/* The verdict of the public call returning now, taken. */
static enum packfetch_verdict verdict(struct packfetch *pf)
{
	enum packfetch_verdict v = pf->verdict;

	pf->verdict = PACKFETCH_GOING;
	return v;
}

/* The haves of a fetch: the repository's own tips, and for a fork its
 * parent's (objects the fork reaches through alternates). */
static void fetch_haves(struct packfetch *pf,
                        git_repository *repo,
                        Grantd__V1__PackReq *q,
                        struct buf *hv)
{
	struct buf path = BUF_INIT;
	Grantd__V1__Repo *r;
	size_t n = 0;

	gitproc_tips(repo, hv, &n, HAVES_MAX);
	if (gitio_repo_record(pf->store, pf->f.repo, &r) == 0) {
		git_repository *parent = NULL;
		if (r->fork_of && *r->fork_of) {
			gitio_path(pf->io, &path, r->fork_of);
			if (git_repository_open_bare(&parent, path.p) == 0)
				gitproc_tips(parent, hv, &n, HAVES_MAX);
			git_repository_free(parent);
		}
		grantd__v1__repo__free_unpacked(r, NULL);
	}
	q->n_haves = n;
	q->haves = xcalloc(n ? n : 1, sizeof(char *));
	/* hv holds n lines of 41 bytes: point into it, NUL for newline */
	for (size_t i = 0; i < n; i++) {
		q->haves[i] = hv->p + i * (OID_HEX + 1);
		q->haves[i][OID_HEX] = '\0';
	}
	buf_free(&path);
}

/* Close index-pack's stdin, so it finishes (or fails on the pack it
 * has); with kill, stop it first.  Its exit status, or -1. */
static int indexer_end(struct fetch *f, bool kill_it)
{
	int rc;

	if (f->ipid <= 0)
		return -1;
	if (f->ifd >= 0)
		close(f->ifd);
	f->ifd = -1;
	if (kill_it)
		kill(f->ipid, SIGKILL);
	rc = gitproc_wait(f->ipid);
	f->ipid = 0;
	return rc;
}

/* Drop the current attempt: its index-pack, its quarantine and what is in
 * it. */
static void attempt_drop(struct fetch *f)
{
	indexer_end(f, true);
	buf_free(&f->held);
	if (f->qdir.len)
		quarantine_remove(f->qdir.p);
	buf_reset(&f->qdir);
}

/* Ask the next peer not asked yet; when none is left the fetch fails. */
static void fetch_ask(struct packfetch *pf)
{
	struct fetch *f = &pf->f;
	struct buf path = BUF_INIT;
	git_repository *repo;

	gitio_path(pf->io, &path, f->repo);
	for (;;) {
		int i = -1;
		if (f->first >= 0 && !(f->tried & (1u << f->first)))
			i = f->first;
		for (int k = 0; i < 0 && k < pf->io->npeers; k++)
			if (!(f->tried & (1u << k)))
				i = k;
		if (i < 0 || !(repo = gitio_repo(pf->io, f->repo))) {
			fetch_done(pf, false);
			break;
		}
		f->tried |= 1u << i;
		Grantd__V1__PeerMsg m;
		Grantd__V1__PackReq q = GRANTD__V1__PACK_REQ__INIT;
		char *wants[WANTS_MAX];
		struct buf hv = BUF_INIT;
		for (size_t k = 0; k < f->nwants; k++)
			wants[k] = f->wants[k];
		q.has_id = q.has_credit = true;
		q.id = f->id = ++pf->next_id;
		q.repo = f->repo;
		q.wants = wants;
		q.n_wants = f->nwants;
		q.credit = WINDOW;
		fetch_haves(pf, repo, &q, &hv);
		peer_msg_init(pf->io->self, &m);
		m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_REQ;
		m.pack_req = &q;
		int rc = gitio_send(pf->io, pf->dealer[i], &m);
		free(q.haves);
		buf_free(&hv);
		if (rc < 0) {
			log_debug("pack request not sent peer=%s (not "
			          "connected)",
			          pf->io->peers[i].site);
			continue;
		}
		f->ifd = -1;
		f->ipid = 0;
		if (quarantine_open(path.p, &f->qdir) < 0) {
			log_error("cannot start receiving a pack repo=%s: %s",
			          f->repo, strerror(errno));
			gitio_error(pf->io, "cannot receive into %s", f->repo);
			fetch_done(pf, false);
			break;
		}
		f->peer = i;
		f->seq = 0;
		f->bytes = 0;
		f->last_ms = clock_mono_ms();
		break;
	}
	buf_free(&path);
}

enum packfetch_verdict packfetch_start(struct packfetch *pf,
                                       const char *repo,
                                       const char (*wants)[OID_HEX + 1],
                                       size_t nwants,
                                       int first)
{
	struct fetch *f = &pf->f;
	struct buf path = BUF_INIT;

	GD_ASSERT(!f->active && nwants <= WANTS_MAX);
	if (!gitio_repo(pf->io, repo))
		return PACKFETCH_UNSTARTED;
	/* one fetch at a time: any quarantine here is a crash's leftover */
	gitio_path(pf->io, &path, repo);
	quarantine_sweep(path.p);
	buf_free(&path);
	memcpy(f->wants, wants, nwants * sizeof(f->wants[0]));
	f->nwants = nwants;
	f->active = true;
	f->tried = 0;
	f->first = first;
	f->started_ms = clock_mono_ms();
	snprintf(f->repo, sizeof(f->repo), "%s", repo);
	pf->verdict = PACKFETCH_GOING;
	fetch_ask(pf);
	return verdict(pf);
}

/* The peer being asked failed us: say why, drop what it sent, ask the
 * next one. */
static void fetch_failed_peer(struct packfetch *pf, const char *why)
{
	struct fetch *f = &pf->f;
	const char *site = pf->io->peers[f->peer].site;

	log_warn("pack fetch failed repo=%s peer=%s bytes=%llu: %s", f->repo,
	         site, (unsigned long long)f->bytes, why);
	gitio_error(pf->io, "fetch from %s of %s: %s", site, f->repo, why);
	pf->io->st->fetch_failures++;
	gitio_pack_err(pf->io, pf->dealer[f->peer], NULL, f->id, "cancelled");
	attempt_drop(f);
	fetch_ask(pf);
}

static void fetch_done(struct packfetch *pf, bool ok)
{
	struct fetch *f = &pf->f;
	uint64_t t = clock_mono_ms();

	attempt_drop(f);
	if (ok) {
		pf->io->st->fetches++;
		pf->io->st->bytes_in += f->bytes;
		pf->io->st->last_fetch_ms = t - f->started_ms;
		metrics_observe(pf->hist, pf->io->st->last_fetch_ms);
		pf->io->st->last_fetch_bytes = f->bytes;
		log_info("pack fetched repo=%s peer=%s wants=%zu bytes=%llu "
		         "ms=%llu",
		         f->repo, pf->io->peers[f->peer].site, f->nwants,
		         (unsigned long long)f->bytes,
		         (unsigned long long)(t - f->started_ms));
		log_debug("pack stages repo=%s first_chunk_ms=%llu "
		          "last_chunk_ms=%llu indexed_ms=%llu checked_ms=%llu "
		          "in_ms=%llu",
		          f->repo, (unsigned long long)f->first_ms,
		          (unsigned long long)f->recv_ms,
		          (unsigned long long)f->indexed_ms,
		          (unsigned long long)f->checked_ms,
		          (unsigned long long)(t - f->started_ms));
	} else {
		log_info("objects not found at any reachable peer repo=%s "
		         "wants=%zu (will retry)",
		         f->repo, f->nwants);
	}
	pf->verdict = ok ? PACKFETCH_OK : PACKFETCH_FAILED;
	f->active = false;
}

/* The whole pack is indexed in the quarantine: check it (unless libgit2
 * indexed it, and connect_pack has: checked), move it in. */
static void fetch_finish(struct packfetch *pf, bool checked)
{
	struct fetch *f = &pf->f;
	struct buf path = BUF_INIT;
	git_repository *repo;
	git_odb *odb = NULL;

	gitio_path(pf->io, &path, f->repo);
	if (!checked &&
	    !gitproc_connected(path.p, f->qdir.p, f->wants, f->nwants)) {
		buf_free(&path);
		fetch_failed_peer(pf, "pack does not connect the new tips");
		return;
	}
	f->checked_ms = clock_mono_ms() - f->started_ms;
	if (quarantine_commit(path.p, f->qdir.p) < 0) {
		log_error("cannot move a fetched pack into repo=%s: %s",
		          f->repo, strerror(errno));
		gitio_error(pf->io, "cannot move a pack into %s: %s", f->repo,
		            strerror(errno));
		buf_free(&path);
		fetch_done(pf, false);
		return;
	}
	if ((repo = gitio_repo(pf->io, f->repo)) &&
	    git_repository_odb(&odb, repo) == 0)
		git_odb_refresh(odb);
	git_odb_free(odb);
	buf_free(&path);
	fetch_done(pf, true);
}

/* index-pack refused the pack: the peer failed us, with git's reason. */
static void indexer_failed(struct packfetch *pf)
{
	struct fetch *f = &pf->f;
	char why[512];

	indexer_end(f, true); /* stalled, or already gone: reaped */
	gitproc_index_why(f->qdir.p, why, sizeof(why));
	fetch_failed_peer(pf, why);
}

/* More than HOLD_MAX bytes of pack: start index-pack and give it what
 * was held.  Returns 0, or GD_EIO having failed the peer (index-pack
 * refused) or ended the fetch (index-pack cannot run). */
static int indexer_start(struct packfetch *pf)
{
	struct fetch *f = &pf->f;
	struct buf path = BUF_INIT;

	gitio_path(pf->io, &path, f->repo);
	f->ipid = gitproc_index_start(path.p, f->qdir.p, &f->ifd);
	buf_free(&path);
	if (f->ipid <= 0) {
		f->ipid = 0;
		log_error("cannot start receiving a pack repo=%s: cannot run "
		          "git index-pack",
		          f->repo);
		gitio_error(pf->io, "cannot receive into %s", f->repo);
		fetch_done(pf, false);
		return GD_EIO;
	}
	if (gitproc_feed(f->ifd, f->held.p, f->held.len, FETCH_IDLE_MS) < 0) {
		indexer_failed(pf);
		return GD_EIO;
	}
	buf_free(&f->held);
	return 0;
}

/* The whole pack is held (HOLD_MAX bytes at most: a push of a few
 * commits): libgit2 indexes it in-process, faster than starting
 * index-pack for a small pack (docs/git-replication.md), and
 * connect_pack checks it connects, faster than starting rev-list.
 * Returns 0, or GD_EIO with libgit2's reason in why, or GD_EPROTO (not
 * connected) with what lacks what. */
static int index_held(struct packfetch *pf, char *why, size_t n)
{
	struct fetch *f = &pf->f;
	struct buf objects = BUF_INIT;
	git_odb_backend *be = NULL;
	git_odb_writepack *wp = NULL;
	git_indexer_progress prog = {0};
	git_odb *odb = NULL;
	int rc = 0;

	gitio_path(pf->io, &objects, f->repo);
	buf_puts(&objects, "/objects");
	/* a pack backend on the quarantine, the repository's objects (and
	 * its alternates) for thin-pack bases */
	if (git_odb_new(&odb) < 0 || git_odb_backend_pack(&be, f->qdir.p) < 0 ||
	    git_odb_add_backend(odb, be, 2) < 0 ||
	    git_odb_add_disk_alternate(odb, objects.p) < 0 ||
	    git_odb_write_pack(&wp, odb, NULL, NULL) < 0 ||
	    (f->held.len &&
	     wp->append(wp, f->held.p, f->held.len, &prog) < 0) ||
	    wp->commit(wp, &prog) < 0 || be->refresh(be) < 0) {
		snprintf(why, n, "%s", gitproc_why());
		rc = GD_EIO;
	}
	if (rc == 0)
		rc = connect_pack(odb, be, f->wants, f->nwants, why, n);
	if (wp)
		wp->free(wp);
	git_odb_free(odb);
	buf_free(&objects);
	buf_free(&f->held);
	return rc;
}

static void fetch_chunk(struct packfetch *pf, const Grantd__V1__PackChunk *c)
{
	struct fetch *f = &pf->f;
	bool data = c->has_data && c->data.len;

	if (!c->has_seq || c->seq != f->seq) {
		fetch_failed_peer(pf, "chunk out of order");
		return;
	}
	f->seq++;
	f->last_ms = clock_mono_ms();
	if (f->seq == 1)
		f->first_ms = f->last_ms - f->started_ms;
	if (!c->last && !data)
		return; /* a keep-alive: git is still counting or compressing */
	if (data) {
		f->bytes += c->data.len;
		if (f->ipid <= 0 && f->held.len + c->data.len <= HOLD_MAX) {
			/* held: the whole pack may be this small */
			buf_add(&f->held, c->data.data, c->data.len);
		} else if (f->ipid <= 0 && indexer_start(pf) < 0) {
			return;
		} else if (gitproc_feed(f->ifd, c->data.data, c->data.len,
		                        FETCH_IDLE_MS) < 0) {
			/* index-pack refused the pack early (or hangs) */
			indexer_failed(pf);
			return;
		}
	}
	if (!c->last) {
		Grantd__V1__PeerMsg m;
		Grantd__V1__PackCredit cr = GRANTD__V1__PACK_CREDIT__INIT;
		cr.has_id = cr.has_n = true;
		cr.id = f->id;
		cr.n = 1;
		peer_msg_init(pf->io->self, &m);
		m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT;
		m.pack_credit = &cr;
		gitio_send(pf->io, pf->dealer[f->peer], &m);
		return;
	}
	bool held = f->ipid <= 0; /* libgit2's, checked by connect_pack */
	f->recv_ms = f->last_ms - f->started_ms;
	if (held) {
		char why[512], not [600];
		int rc = index_held(pf, why, sizeof(why));
		if (rc == GD_EPROTO) {
			snprintf(not, sizeof(not ),
			         "pack does not connect the new tips: %s", why);
			fetch_failed_peer(pf, not );
			return;
		} else if (rc < 0) {
			fetch_failed_peer(pf, why);
			return;
		}
	} else if (indexer_end(f, false) != 0) {
		indexer_failed(pf);
		return;
	}
	f->indexed_ms = clock_mono_ms() - f->started_ms;
	fetch_finish(pf, held);
}

enum packfetch_verdict
packfetch_dealer(struct packfetch *pf, int i, zmq_msg_t *msg)
{
	const char *site = pf->io->peers[i].site, *bad;
	Grantd__V1__PeerMsg *m = peer_msg_decode(zmq_msg_data(msg),
	                                         zmq_msg_size(msg), site, &bad);
	struct fetch *f = &pf->f;
	uint64_t id = 0;

	if (!m) {
		static struct log_limit lim;
		uint64_t held;
		if (log_limit_pass(&lim, clock_mono_ms(), LOG_LIMIT_MS, &held))
			log_warn("git peer message dropped peer=%s: %s (%llu "
			         "more such lines held back)",
			         site, bad, (unsigned long long)held);
		return PACKFETCH_GOING;
	}
	if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK)
		id = m->pack_chunk->id;
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR)
		id = m->pack_err->id;
	if (!f->active || f->peer != i || id != f->id || !f->qdir.len) {
		/* a stream given up: tell the peer to stop it */
		if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK &&
		    !m->pack_chunk->last)
			gitio_pack_err(pf->io, pf->dealer[i], NULL, id,
			               "cancelled");
	} else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK) {
		fetch_chunk(pf, m->pack_chunk);
	} else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR) {
		char why[128];
		snprintf(why, sizeof(why), "peer says: %s",
		         m->pack_err->why ? m->pack_err->why : "?");
		fetch_failed_peer(pf, why);
	}
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	return verdict(pf);
}

enum packfetch_verdict packfetch_tick(struct packfetch *pf, uint64_t t)
{
	if (pf->f.active && t - pf->f.last_ms > FETCH_IDLE_MS)
		fetch_failed_peer(pf, "timed out");
	return verdict(pf);
}

void packfetch_open(struct packfetch **out, const struct packfetch_opts *o)
{
	struct packfetch *pf = xcalloc(1, sizeof(*pf));

	pf->io = o->io;
	pf->store = o->store;
	pf->dealer = o->dealer;
	pf->hist = o->fetch_hist;
	pf->f.ifd = -1;
	/* stream ids unlike those of an earlier run of this node, whose
	 * streams a peer may still hold */
	randombytes_buf(&pf->next_id, sizeof(pf->next_id));
	pf->next_id >>= 1;
	*out = pf;
}

void packfetch_destroy(struct packfetch **pfp)
{
	struct packfetch *pf = *pfp;

	if (!pf)
		return;
	if (pf->f.active) {
		pf->f.first = -1;
		pf->f.tried = ~0u;
		fetch_done(pf, false);
	}
	buf_free(&pf->f.qdir);
	buf_free(&pf->f.held);
	free(pf);
	*pfp = NULL;
}

const char *packfetch_repo(const struct packfetch *pf)
{
	return pf->f.active ? pf->f.repo : NULL;
}

const char *packfetch_last_repo(const struct packfetch *pf)
{
	return pf->f.repo;
}

const char (*packfetch_wants(const struct packfetch *pf,
                             size_t *n))[OID_HEX + 1]
{
	*n = pf->f.nwants;
	return (const char(*)[OID_HEX + 1]) pf->f.wants;
}
