/*
 * tlogwit.h: the transparency log's checkpoints between frontends (issue
 * 21, SPEC 9, docs/push-log.md "Checkpoints and witnesses"); a room of
 * repl (its thread, its PUB, its peers).
 *
 * As an origin: at most once a second while this site's tree has grown,
 * sign a checkpoint of it (ckpt.h) with this site's key (opsig.h: the
 * signed-note key HOST/grantd/SITE), keep it, publish it on PUB
 * (PeerMsg.checkpoint), and publish the newest again every 2 s with the
 * cosignatures collected, so that a peer that missed one, or restarted,
 * gets it.
 *
 * As a witness (every other frontend): a checkpoint from its origin (on
 * the origin's own SUB link) is checked against this site's copy of the
 * origin's leaves (ckpt_witness); when it passes, the new last cosigned
 * (size, root) is written and synced before the cosignature is published
 * (PeerMsg.cosig), as C2SP tlog-witness asks.  A checkpoint whose size
 * this site does not hold yet waits and is tried again each tick.  One
 * that is signed but is not the origin's log here (another root, or not
 * consistent with the last cosigned) is refused, logged, counted and kept
 * as proof (CF_META "tlog/proof/SITE/SIZE").
 *
 * Every site keeps, per origin, the newest checkpoint note with the
 * signatures that verify against the keys it knows (the origin's and the
 * frontends' cosigner keys: the same Ed25519 key, type 0x04, C2SP
 * tlog-cosignature), in CF_META "tlog/ckpt/SITE": what loghttp.h serves.
 * Keys come from [peer] verifier_key (the first, current key); a peer
 * without one is neither checked nor cosigned (its checkpoints counted as
 * unchecked).  A mirror neither makes nor cosigns checkpoints: it asks
 * each frontend it is fed by for the ones it keeps (ckpt_req on the sync
 * link, with its subscription) and keeps those whose signatures verify
 * against its keys, so that it serves them too.
 *
 * One owner thread (repl's), but tlogwit_source's functions and the
 * readers of what is kept (below), which only read committed state, run
 * on any thread (the HTTP endpoint's, a reader's for log verify).
 */
#ifndef GD_TLOGWIT_H
#define GD_TLOGWIT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "ckpt.h"
#include "config.h"
#include "grantd.pb-c.h"
#include "loghttp.h"
#include "opsig.h"
#include "peer.h"
#include "store.h"

#define TLOGWIT_EVERY_MS     1000 /* a new checkpoint at most this often */
#define TLOGWIT_REPUBLISH_MS 2000
#define TLOGWIT_TICK_MS      50 /* the tree size is read this often */

struct tlogwit;

struct tlogwit_opts {
	struct store *store;
	const struct config *cfg;
	const struct peer_self *self;
	void *pub; /* repl's PUB (NULL: no peers) */
	const struct opsig_signer *signer; /* this site's key */
};

/* Load each origin's last cosigned checkpoint and this site's newest.
 * *out is the caller's (tlogwit_destroy).  Returns 0 or a store error. */
int tlogwit_open(struct tlogwit **out, const struct tlogwit_opts *o);
void tlogwit_destroy(struct tlogwit **wp);

/* Make, publish and retry (above); call every loop turn. */
void tlogwit_tick(struct tlogwit *w, uint64_t now_ms);

/* A checkpoint published by from (its origin, on its SUB link). */
void tlogwit_take_checkpoint(struct tlogwit *w,
                             const char *from,
                             const Grantd__V1__Checkpoint *c);

/* A cosignature published by from (a witness). */
void tlogwit_take_cosig(struct tlogwit *w,
                        const char *from,
                        const Grantd__V1__Cosig *c);

/* A mirror's request for the kept checkpoints (on the sync ROUTER;
 * payload: the struct tlogwit): answered with every origin's note. */
void tlogwit_on_req(const struct peer_req *rq, void *payload);

/* Ask frontend dealer (we are a mirror) for its checkpoints. */
void tlogwit_ask(struct tlogwit *w, void *dealer);

/* A frontend's answer (we are a mirror): each note kept when its
 * signatures verify here and it is not older than the one kept. */
void tlogwit_take_notes(struct tlogwit *w, const Grantd__V1__CkptRep *rep);

/* status: "tlog": [{origin, leaves, checkpoint, signatures, cosigned,
 * refused, proofs, unchecked}], one per origin. */
void tlogwit_status(struct tlogwit *w, cJSON *status);

/* The HTTP endpoint's source over s's committed state (loghttp.h); s must
 * outlive the endpoint. */
void tlogwit_source(struct loghttp_source *out, struct store *s);

/* ---- what is kept, read on any thread (committed state) --------------- */

/* The kept note of site's log (CF_META "tlog/ckpt/SITE"), into note
 * (reset).  GD_ENOTFOUND: none. */
int tlogwit_kept_note(struct store *s, const char *site, struct buf *note);

/* The last checkpoint of site this witness cosigned ("tlog/wit/SITE");
 * size 0: none (or not readable). */
void tlogwit_kept_last(struct store *s,
                       const char *site,
                       struct ckpt_last *out);

/* Call fn for each kept proof ("tlog/proof/SITE/SIZE": the note as the
 * origin sent it), in key order; stops at fn's negative return, which is
 * returned.  0, or a store error. */
typedef int
tlogwit_proof_fn(const char *site, const char *note, size_t len, void *payload);
int tlogwit_kept_proofs(struct store *s, tlogwit_proof_fn *fn, void *payload);

/*
 * `grantctl log verify`'s check of the kept checkpoints (tlogwit_verify.c,
 * docs/push-log.md "Checking from the local store"), from s's committed
 * state and cfg's keys only: for this site and each peer, the kept note
 * checked again (ckpt_check: its signature against own, this site's
 * verifier key (NULL: unknown), or every key of [peer] verifier_key; its
 * root against the leaves here; its cosignatures counted against the
 * frontends' keys; the last cosigned here consistent with it), and every
 * kept proof named as a fork.  Adds to json (NULL: none) the arrays
 * "checkpoints" and "proofs" and "checkpoints_ok"; appends to text (NULL:
 * none) a line per origin and per proof ("tlog SITE: ..."); the first
 * failure's words go to why (reset).  Returns how many failures (a bad
 * signature, a root mismatch, an inconsistent last cosigned, a kept
 * proof: log verify then exits 1), or a negative store error.  Any
 * thread.
 */
int tlogwit_verify_kept(struct buf *why,
                        cJSON *json,
                        struct buf *text,
                        struct store *s,
                        const struct config *cfg,
                        const struct note_vkey *own);

#endif
