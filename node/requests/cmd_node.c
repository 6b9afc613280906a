/*
 * cmd_node.c: the node itself, for the administrator: status, verify,
 * backup, rebuild, rekey.  verify, rebuild and rekey read beyond the
 * store (the operations' counters, the peers, git replication) through
 * cmd_ctx.node, on the writer thread: verify recomputes the digest from
 * the records and compares it with the live one.  status is answered by
 * the reader thread from the parts the writer published
 * (cmd_status_store, cmd_status_repl) and its view.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/stat.h>
#include <zmq.h>

#include "cmd.h"
#include "digest.h"
#include "err.h"
#include "peerfeatures.h"
#include "gitrepl.h"
#include "hlc.h"
#include "log.h"
#include "names.h"
#include "ops_tlog.h"
#include "records.h"
#include "repl.h"
#include "store.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

/* ---- status, backup, rebuild -------------------------------------------- */

/* args: --from SITE [--trust-unsigned] */
static int cmd_rebuild(struct cmd_ctx *x, struct req *r)
{
	bool trust = r->rq->n_args == 3;

	if (r->rq->n_args < 2 || strcmp(r->rq->args[0], "--from") ||
	    (trust && strcmp(r->rq->args[2], "--trust-unsigned")))
		return cmd_bad(r, "usage: grantctl rebuild --from SITE, or "
			       "grantctl rebuild --from SITE --trust-unsigned");
	const char *site = r->rq->args[1];
	int rc = repl_rebuild(x->node->repl, site, trust);
	if (rc == GD_ENOTFOUND)
		return cmd_bad(r, "'%s' is not a configured peer site", site);
	if (rc < 0)
		return cmd_refuse(r, "cannot reach site %s: its link is not up "
				  "(yet, when this node has just started); "
				  "'grantctl status' shows when it is "
				  "connected, then ask again", site);
	if (x->node->gitrepl)
		gitrepl_all(x->node->gitrepl, site);
	buf_printf(&r->out, "rebuilding from %s: everything it has that this "
		   "site lacks is being fetched, repositories too; watch "
		   "'grantctl status' until lag_ops and pending_refs are 0\n",
		   site);
	if (trust)
		buf_printf(&r->out, "records from %s without signed operations "
			   "are trusted in the state transfer this starts (after "
			   "one running, if any; status: "
			   "replication.unsigned_records_trusted)\n", site);
	return 0;
}

/* args: DIR (absolute, must not exist): a RocksDB checkpoint at DIR/store.
 * grantctl copies the repositories to DIR/repos once this answers. */
static int cmd_backup(struct cmd_ctx *x, struct req *r)
{
	const char *dir = r->rq->args[0];
	struct buf path = BUF_INIT;
	struct stat st;
	int rc;

	if (dir[0] != '/' || strstr(dir, "/../") || strlen(dir) > 1024)
		return cmd_bad(r, "backup DIR must be an absolute path, not "
			       "'%s'", dir);
	if (stat(dir, &st) == 0)
		return cmd_bad(r, "'%s' exists: give a new directory (a backup "
			       "never overwrites)", dir);
	if (mkdir(dir, 0700) < 0)
		return cmd_refuse(r, "cannot create '%s': %s",
				  dir, strerror(errno));
	buf_printf(&path, "%s/store", dir);
	rc = store_checkpoint(x->p.store, path.p);
	if (rc == 0) {
		buf_printf(&r->out, "store checkpoint written to %s\n", path.p);
		/* the repository root, for grantctl to copy */
		buf_puts(&r->path, x->p.cfg->repo_dir);
		log_info("backup written dir=%s", dir);
	} else {
		rc = cmd_refuse(r, "checkpoint failed (see the node's log)");
	}
	buf_free(&path);
	return rc;
}

/* The tips kept under refs/grantd/conflicts (CF_LOSERS entries gitrepl
 * marked "kept"; the others are still being looked at). */
static int add_conflicts(struct cmd_ctx *x, cJSON *arr)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, name = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, x->p.store, x->p.batch, CF_LOSERS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		struct records_span repo, ref, site;
		char tip[RECORDS_OID_HEX + 1];
		uint64_t hlc;
		bool kept;

		if (records_loser_parse(key, klen, &repo, &ref, &site,
					&hlc) < 0 ||
		    records_loser_value_parse(v.p, v.len, tip, &kept) < 0 ||
		    !kept)
			continue;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "repo", repo.p);
		cJSON_AddStringToObject(e, "ref", ref.p);
		cJSON_AddStringToObject(e, "site", site.p);
		cJSON_AddStringToObject(e, "tip", tip);
		buf_reset(&name);
		buf_printf(&name, "refs/grantd/conflicts/%s/%s", site.p,
			   ref.p);
		cJSON_AddStringToObject(e, "kept_as", name.p);
		cJSON_AddItemToArray(arr, e);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&name);
	return rc < 0 ? rc : 0;
}

cJSON *cmd_status_store(struct ops *ops, int64_t now)
{
	char digest[2 * DIGEST_LEN + 1], h[24], ep[17];
	uint64_t forks;
	cJSON *j = cJSON_CreateObject(), *vector, *counts;

	uint8_t pub[DIGEST_LEN];

	digest_hex(digest, ops_digest(ops));
	cJSON_AddStringToObject(j, "site", ops_site(ops));
	cJSON_AddStringToObject(j, "role",
				config_role_name(ops_config(ops)->role));
	cJSON_AddStringToObject(j, "digest", digest);
	/* what runs here (docs/upgrading.md): open stores are stamped */
	cJSON_AddStringToObject(j, "release", GRANTD_VERSION);
	cJSON_AddNumberToObject(j, "store_format", STORE_FORMAT);
	/* the families a mirror holds: equal at a mirror and its frontends
	 * once it has caught up (docs/mirrors.md) */
	ops_digest_public(ops, pub);
	digest_hex(digest, pub);
	cJSON_AddStringToObject(j, "digest_public", digest);
	/* beyond 2^53: a JSON integer written as text, not a double */
	snprintf(h, sizeof(h), "%llu", (unsigned long long)ops_hlc_last(ops));
	cJSON_AddRawToObject(j, "hlc", h);
	snprintf(ep, sizeof(ep), "%016llx", (unsigned long long)ops_epoch(ops));
	cJSON_AddStringToObject(j, "epoch", ep);
	vector = cJSON_AddArrayToObject(j, "vector");
	for (size_t i = 0; i < ops_vv_count(ops); i++) {
		cJSON *e = cJSON_CreateObject();
		snprintf(ep, sizeof(ep), "%016llx",
			 (unsigned long long)ops_vv_at(ops, i)->epoch);
		cJSON_AddStringToObject(e, "origin", ops_vv_at(ops, i)->origin);
		cJSON_AddStringToObject(e, "epoch", ep);
		cJSON_AddNumberToObject(e, "seq",
					(double)ops_vv_at(ops, i)->seq);
		/* counted in its origin's retired total (ops.h) */
		if (ops_vv_at(ops, i)->retired)
			cJSON_AddBoolToObject(e, "retired", true);
		cJSON_AddItemToArray(vector, e);
	}
	/* live records of each family with a live test in the record table
	 * (a user or repository not deleted, a grant neither revoked nor
	 * expired, a ref that exists, a push-log entry), kept by ops; named
	 * as the table names them, but the push log, "push_log" since status
	 * first showed it */
	counts = cJSON_AddObjectToObject(j, "counts");
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind((enum store_cf)cf);
		if (!k->live)
			continue;
		cJSON_AddNumberToObject(
		        counts, cf == CF_PUSHLOG ? "push_log" : k->name,
		        (double)ops_count(ops, (enum store_cf)cf, now));
	}
	/* the push log's forks held and entries refused (docs/push-log.md) */
	if (ops_pushlog_forks(ops, NULL, &forks) == 0)
		cJSON_AddNumberToObject(counts, "push_log_forks", (double)forks);
	cJSON_AddNumberToObject(counts, "push_log_refused",
				(double)ops_pushlog_refused(ops));
	/* transparency log leaves refused: out of order (ops_tlog.c) */
	cJSON_AddNumberToObject(counts, "tlog_leaves_refused",
				(double)ops_tlog_refused(ops));
	return j;
}

cJSON *cmd_status_repl(struct repl *repl, struct gitrepl *g,
		       uint64_t now_ms)
{
	cJSON *j = cJSON_CreateObject();

	cJSON *f = cJSON_AddArrayToObject(j, "features");

	repl_status(repl, cJSON_AddArrayToObject(j, "peers"), now_ms);
	repl_tlog_status(repl, j);
	/* each feature of this build, and whether every frontend has it */
	for (int i = 0; i < FEATURE__COUNT; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "name",
					peerfeatures_name((enum feature)i));
		cJSON_AddBoolToObject(e, "everywhere",
				      repl_feature_everywhere(
					      repl, (enum feature)i));
		cJSON_AddItemToArray(f, e);
	}
	repl_metrics(repl, cJSON_AddObjectToObject(j, "replication"));
	repl_mirror_lag(repl, j, now_ms);
	if (g)
		gitrepl_status(g, cJSON_AddObjectToObject(j, "git"));
	cJSON_AddNumberToObject(j, "refused_peers",
				(double)repl_refused(repl));
	cJSON_AddNumberToObject(j, "dropped",
				(double)repl_dropped_total(repl));
	return j;
}

/* A copy of from's member key, as to's member of the same name (none
 * when from has none). */
static void take(cJSON *to, const cJSON *from, const char *key)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(from, key);

	if (i)
		cJSON_AddItemToObject(to, key, cJSON_Duplicate(i, true));
}

/* The per-origin sums of the vector as the view stores it (CF_VV). */
static int add_applied(struct cmd_ctx *x, cJSON *applied)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, x->p.store, x->p.batch, CF_VV, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		struct records_span os;
		uint64_t epoch;
		char origin[NAME_SITE_MAX + 1];
		if (records_vv_parse(key, klen, &os, &epoch) < 0 ||
		    os.len > NAME_SITE_MAX || v.len != 8)
			continue;
		memcpy(origin, os.p, os.len);
		origin[os.len] = '\0';
		double seq = (double)store_get_be64(v.p);
		cJSON *prev = cJSON_GetObjectItem(applied, origin);
		if (prev)
			cJSON_SetNumberValue(prev, prev->valuedouble + seq);
		else
			cJSON_AddNumberToObject(applied, origin, seq);
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* 0 when absent: counts.dropped comes with the replication part, which
 * the reader may not have yet */
static double num(const cJSON *o, const char *key)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(i) ? i->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key)->valuestring;
}

/* "release:  peer SITE RELEASE features=A,B" for peer o of status. */
static void peer_release_text(struct req *r, const cJSON *o)
{
	const cJSON *rel = cJSON_GetObjectItem(o, "release"), *f;
	const char *sep = " features=";

	buf_printf(&r->out, "release:  peer %s %s", str(o, "site"),
		   cJSON_IsString(rel) ? rel->valuestring : "unknown (not "
							    "heard yet)");
	cJSON_ArrayForEach(f, cJSON_GetObjectItem(o, "features")) {
		buf_printf(&r->out, "%s%s", sep, f->valuestring);
		sep = ",";
	}
	buf_puts(&r->out, "\n");
}

/* "peer:" (with its policy differences) and "release:" lines of peer o. */
static void peer_text(struct req *r, const cJSON *o)
{
	const cJSON *role = cJSON_GetObjectItem(o, "role");
	const cJSON *link = cJSON_GetObjectItem(o, "link"), *d;
	bool mirror =
	        cJSON_IsString(role) && !strcmp(role->valuestring, "mirror");
	bool bad = cJSON_IsString(link) && strcmp(link->valuestring, "up") &&
	           strcmp(link->valuestring, "connecting");

	buf_printf(&r->out,
	           "peer:     %s %s last_heard_ms=%.0f "
	           "lag_ops=%.0f lag_ms=%.0f%s%s%s\n",
	           str(o, "site"),
	           cJSON_IsTrue(cJSON_GetObjectItem(o, "connected"))
	                   ? "connected"
	                   : "NOT CONNECTED",
	           num(o, "last_heard_ms"), num(o, "lag_ops"), num(o, "lag_ms"),
	           mirror ? " role=mirror" : "", bad ? " link=" : "",
	           bad ? link->valuestring : "");
	cJSON_ArrayForEach(
	        d, cJSON_GetObjectItemCaseSensitive(o, "policy_mismatch"))
	        buf_printf(&r->out,
	                   "policy:   DIFFERS from peer %s %s here=%s "
	                   "peer=%s\n",
	                   str(o, "site"), str(d, "key"), str(d, "here"),
	                   str(d, "peer"));
	peer_release_text(r, o);
}

/* "quorum:" line: the vote's figures only where there is a vote. */
static void quorum_text(struct req *r, const cJSON *o)
{
	if (!strcmp(str(o, "mode"), "local")) {
		buf_puts(&r->out, "quorum:   local (each site decides its "
		                  "tokens alone; no votes)\n");
		return;
	}
	buf_printf(&r->out,
	           "quorum:   %s voter=%s frontends=%.0f "
	           "majority=%.0f accepted=%.0f refused=%.0f\n",
	           str(o, "mode"),
	           cJSON_IsTrue(cJSON_GetObjectItem(o, "voter")) ? "yes" : "no",
	           num(o, "frontends"), num(o, "majority"), num(o, "accepted"),
	           num(o, "refused"));
}

/* "hlc:" line: the stamp, then its wall-clock part readable. */
static void hlc_text(struct req *r, const char *hlc)
{
	char when[40];
	uint64_t h = strtoull(hlc, NULL, 10);

	cmd_fmt_time(when, sizeof(when), (int64_t)(hlc_ms(h) / 1000));
	buf_printf(&r->out, "hlc:      %s (%s +%llu)\n", hlc, when,
	           (unsigned long long)(h & ((1ULL << HLC_LOGICAL_BITS) - 1)));
}

/* status as text, from its JSON j (every member present). */
static int status_text(struct cmd_ctx *x, struct req *r, const cJSON *j)
{
	const cJSON *counts = cJSON_GetObjectItemCaseSensitive(j, "counts");
	const cJSON *o, *git = cJSON_GetObjectItemCaseSensitive(j, "git");

	buf_printf(&r->out, "site:     %s\nrole:     %s\n", str(j, "site"),
	           str(j, "role"));
	buf_printf(
	        &r->out, "syncing:  %s\n",
	        x->syncing
	                ? "yes (catching up with peers: token validation waits)"
	                : "no");
	buf_printf(&r->out, "epoch:    %s\n", str(j, "epoch"));
	hlc_text(r, str(j, "hlc"));
	buf_printf(&r->out,
	           "digest:   %s\nusers:    %lld\ngrants:   %lld (live)\n"
	           "repos:    %lld\ndropped:  %llu peer messages refused "
	           "(metrics: grantd_peer_messages_dropped_total by reason)\n",
	           str(j, "digest"), (long long)num(counts, "users"),
	           (long long)num(counts, "grants"),
	           (long long)num(counts, "repos"),
	           (unsigned long long)num(counts, "dropped"));
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "applied"))
	        buf_printf(&r->out, "applied:  %s %.0f\n", o->string,
	                   o->valuedouble);
	buf_printf(&r->out, "release:  %s store_format=%.0f\n",
	           str(j, "release"), num(j, "store_format"));
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "features"))
	        buf_printf(&r->out, "feature:  %s %s\n", str(o, "name"),
	                   cJSON_IsTrue(cJSON_GetObjectItem(o, "everywhere"))
	                           ? "everywhere"
	                           : "NOT everywhere");
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "peers"))
	        peer_text(r, o);
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "mirror_lag"))
	        buf_printf(&r->out,
	                   "mirror:   of %s %s lag_ops=%.0f lag_ms=%.0f\n",
	                   str(o, "site"),
	                   cJSON_IsTrue(cJSON_GetObjectItem(o, "fed"))
	                           ? "fed"
	                           : "NOT FED",
	                   num(o, "ops"), num(o, "ms"));
	if (git)
		buf_printf(&r->out,
		           "git:      pending_refs=%.0f packs_fetched=%.0f "
		           "fetch_failures=%.0f packs_served=%.0f\n",
		           num(git, "pending_refs"), num(git, "packs_fetched"),
		           num(git, "fetch_failures"),
		           num(git, "packs_served"));
	if (git && cJSON_GetObjectItemCaseSensitive(git, "gitolite_syncs"))
		buf_printf(&r->out,
		           "gitolite: admin_syncs=%.0f "
		           "failures=%.0f%s%s\n",
		           num(git, "gitolite_syncs"),
		           num(git, "gitolite_sync_failures"),
		           *str(git, "gitolite_last_error") ? " last_error="
		                                            : "",
		           str(git, "gitolite_last_error"));
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "conflicts"))
	        buf_printf(&r->out,
	                   "conflict: repo=%s ref=%s site=%s tip=%s "
	                   "kept_as=%s\n",
	                   str(o, "repo"), str(o, "ref"), str(o, "site"),
	                   str(o, "tip"), str(o, "kept_as"));
	if ((o = cJSON_GetObjectItemCaseSensitive(j, "quorum")))
		quorum_text(r, o);
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(j, "tlog"))
	        buf_printf(&r->out,
	                   "tlog:     %s leaves=%.0f checkpoint=%.0f "
	                   "signatures=%.0f cosigned=%.0f refused=%.0f "
	                   "proofs=%.0f\n",
	                   str(o, "origin"), num(o, "leaves"),
	                   num(o, "checkpoint"), num(o, "signatures"),
	                   num(o, "cosigned"), num(o, "refused"),
	                   num(o, "proofs"));
	return 0;
}

/* Answered by the reader thread: the writer's parts as last published
 * (x->status), the vector sums and conflicts from the view, the syncing
 * flag and the bad requests the reader counted. */
static int cmd_status(struct cmd_ctx *x, struct req *r)
{
	const cJSON *s, *rp, *sc;
	cJSON *j, *applied, *counts;
	int rc;

	if (!x->status || !x->status->store || !x->status->repl)
		return cmd_refuse(r, "status not known yet: try again");
	s = x->status->store;
	rp = x->status->repl;
	sc = cJSON_GetObjectItemCaseSensitive(s, "counts");
	j = cJSON_CreateObject();
	take(j, s, "site");
	take(j, s, "role");
	take(j, s, "digest");
	take(j, s, "digest_public");
	take(j, s, "release");
	take(j, s, "store_format");
	take(j, rp, "features");
	take(j, s, "hlc");
	take(j, s, "epoch");
	applied = cJSON_AddObjectToObject(j, "applied");
	take(j, s, "vector");
	take(j, rp, "peers");
	take(j, rp, "mirror_lag");
	cJSON_AddBoolToObject(j, "syncing", x->syncing);
	take(j, rp, "replication");
	take(j, rp, "git");
	take(j, rp, "quorum");
	take(j, rp, "tlog");
	take(j, rp, "attest"); /* loop.c: records made before signing */
	if ((rc = add_applied(x, applied)) < 0 ||
	    (rc = add_conflicts(x, cJSON_AddArrayToObject(j, "conflicts"))) < 0) {
		cJSON_Delete(j);
		return rc;
	}
	counts = cJSON_AddObjectToObject(j, "counts");
	take(counts, sc, "users");
	take(counts, sc, "grants");
	take(counts, sc, "repos");
	take(counts, sc, "refs");
	take(counts, sc, "push_log");
	take(counts, sc, "push_log_forks");
	take(counts, sc, "push_log_refused");
	take(counts, sc, "tlog_leaves_refused");
	take(counts, rp, "dropped");
	cJSON_AddNumberToObject(counts, "bad_requests",
				(double)x->status->bad_requests);
	take(counts, rp, "refused_peers");
	if (r->rq->json) {
		cmd_print_json(r, j);
		return 0;
	}
	rc = status_text(x, r, j);
	cJSON_Delete(j);
	return rc;
}

/* ---- rekey -------------------------------------------------------------- */

/* The sealing key of the CURVE key file at path (checked as at start:
 * mode 0600, a pair that belongs together); 0 or a cmd_bad() reply. */
static int rekey_load(struct req *r, const char *path,
		      uint8_t seal[STORE_SEAL_KEY_LEN],
		      char pub[Z85_KEY_LEN + 1])
{
	char sec[Z85_KEY_LEN + 1], derived[Z85_KEY_LEN + 1];
	uint8_t raw[32];
	struct buf err = BUF_INIT;
	int rc = 0;

	if (config_read_keyfile(path, pub, sec, &err) < 0)
		rc = cmd_bad(r, "%s", err.p);
	else if (!zmq_z85_decode(raw, sec) ||
		 zmq_curve_public(derived, sec) != 0 || strcmp(derived, pub))
		rc = cmd_bad(r, "%s: the public and secret keys do not belong "
			     "together (make a new pair with grantctl keygen)",
			     path);
	else
		store_seal_key(seal, raw);
	sodium_memzero(sec, sizeof(sec));
	sodium_memzero(raw, sizeof(raw));
	buf_free(&err);
	return rc < 0 ? rc : r->status ? 1 : 0;
}

/* args: NEWKEYFILE (absolute): re-seal every stored secret under the
 * sealing key of that CURVE key file, in this batch (atomic).  The node
 * keeps its current CURVE key until it is restarted with the new file. */
static int cmd_rekey(struct cmd_ctx *x, struct req *r)
{
	const char *path = r->rq->args[0];
	uint8_t seal[STORE_SEAL_KEY_LEN];
	char pub[Z85_KEY_LEN + 1];
	size_t count = 0;
	int rc;

	if (path[0] != '/' || strlen(path) > 1024)
		return cmd_bad(r, "rekey NEWKEYFILE must be an absolute path, "
			       "not '%s'", path);
	if ((rc = rekey_load(r, path, seal, pub)) != 0)
		return rc < 0 ? rc : 0;
	if (!strcmp(pub, x->node->curve_pub)) {
		sodium_memzero(seal, sizeof(seal));
		return cmd_bad(r, "%s holds the node's current key; make a new "
			       "one with grantctl keygen", path);
	}
	rc = store_rekey(x->p.store, x->p.batch, seal, &count);
	sodium_memzero(seal, sizeof(seal));
	if (rc == GD_EAGAIN)
		return cmd_refuse(r, "another rekey is in progress; try again");
	if (rc < 0)
		return rc;
	r->wrote = true; /* answer once durable */
	log_info("store rekeyed values=%zu new_key=%s public_key=%s", count,
		 path, pub);
	buf_printf(&r->out,
		   "re-sealed %zu stored values under the key in %s\n"
		   "now set 'secret_key = %s' in %s and restart grantd;\n"
		   "its public key becomes %s: set it as public_key of "
		   "[peer %s] at every other site\n",
		   count, path, path, x->node->conf_path, pub, x->p.cfg->site);
	return 0;
}

/* grantctl verify: the digest made again from the records on disk against
 * the live one (SPEC 3.5).  A family whose share differs is named: the
 * records of that family and the digest parted.  The digest holds no
 * record, so it cannot name one; two sites' per-family digests (--json)
 * tell which family to compare when their states differ. */
static int cmd_verify(struct cmd_ctx *x, struct req *r)
{
	struct ops_verify *v = xcalloc(1, sizeof(*v));
	char live[2 * DIGEST_LEN + 1], stored[2 * DIGEST_LEN + 1];
	char disk[2 * DIGEST_LEN + 1], h[2 * DIGEST_LEN + 1];
	struct buf differs = BUF_INIT;
	cJSON *j, *fams;
	int rc;

	if ((rc = ops_verify(x->node->ops, v)) < 0) {
		free(v);
		return rc;
	}
	digest_hex(live, v->live);
	digest_hex(stored, v->stored);
	digest_hex(disk, v->disk);
	j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "site", ops_site(x->node->ops));
	cJSON_AddBoolToObject(j, "equal", v->equal);
	cJSON_AddStringToObject(j, "live", live);
	cJSON_AddStringToObject(j, "stored", stored);
	cJSON_AddStringToObject(j, "recomputed", disk);
	fams = cJSON_AddArrayToObject(j, "families");
	cJSON *dj = cJSON_AddArrayToObject(j, "differs");
	buf_printf(&r->out,
		   "site:       %s\nlive:       %s\nstored:     %s\n"
		   "recomputed: %s\n",
		   ops_site(x->node->ops), live, stored, disk);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		if (!v->covered[cf])
			continue;
		bool same = !memcmp(v->live_fam[cf], v->disk_fam[cf],
				    DIGEST_LEN);
		const char *name = store_cf_name(cf);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "family", name);
		cJSON_AddNumberToObject(o, "records", (double)v->records[cf]);
		digest_hex(h, v->disk_fam[cf]);
		cJSON_AddStringToObject(o, "recomputed", h);
		buf_printf(&r->out, "family:     %-8s records=%llu "
			   "recomputed=%.16s", name,
			   (unsigned long long)v->records[cf], h);
		digest_hex(h, v->live_fam[cf]);
		cJSON_AddStringToObject(o, "live", h);
		cJSON_AddBoolToObject(o, "equal", same);
		cJSON_AddItemToArray(fams, o);
		if (!same) {
			buf_printf(&r->out, " live=%.16s DIFFERS", h);
			buf_printf(&differs, "%s%s", differs.len ? " " : "",
				   name);
			cJSON_AddItemToArray(dj, cJSON_CreateString(name));
		}
		buf_puts(&r->out, "\n");
	}
	if (r->rq->json) {
		buf_reset(&r->out);
		cmd_print_json(r, j);
	} else {
		cJSON_Delete(j);
	}
	if (!v->equal) {
		log_error("verify: the live digest does not match the records "
			  "live=%s stored=%s recomputed=%s families=%s", live,
			  stored, disk, differs.len ? differs.p : "-");
		cmd_refuse(r, "the state digest does not match the records on "
			   "disk (live %.16s, stored %.16s, recomputed %.16s; "
			   "families differing: %s); restarting the node "
			   "recomputes it from the records", live, stored, disk,
			   differs.len ? differs.p : "none, only the total");
	}
	buf_free(&differs);
	free(v);
	return 0;
}

/* ---- the rows ----------------------------------------------------------- */

const struct cmd cmd_node_rows[] = {
	CMD_ROW("status", CMD_ON_ADMIN | CMD_READS, 0, 0,
		cmd_status),
	CMD_ROW("verify", CMD_ON_ADMIN | CMD_READS | CMD_NODE, 0, 0,
		cmd_verify),
	CMD_ROW("backup", CMD_ON_ADMIN | CMD_READS, 1, 1, cmd_backup),
	CMD_ROW("rebuild", CMD_ON_ADMIN | CMD_BATCH | CMD_NODE, 0, 3,
		cmd_rebuild),
	CMD_ROW("rekey", CMD_ON_ADMIN | CMD_BATCH | CMD_NODE, 1, 1,
		cmd_rekey),
};
const size_t cmd_node_nrows = GD_ARRAY_SIZE(cmd_node_rows);
