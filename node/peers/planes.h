/*
 * planes.h: who may say what to this node, on which socket, in one table.
 *
 * Every message two sites exchange is one PeerMsg (grantd.proto); its
 * body case is its kind.  A kind arrives on one of three sockets:
 *
 *   PLANE_SYNC    this node's sync ROUTER: requests (peer.c's dispatch)
 *   PLANE_SUB     this node's SUB to a peer's PUB: its live operations
 *                 and heartbeats (repl.c)
 *   PLANE_DEALER  this node's DEALERs to a peer's sync ROUTER: the
 *                 answers to what this node asked (repl.c, vote.c,
 *                 packfetch.c)
 *
 * and from a sender of one of three roles, told by its CURVE key (ZAP):
 * a configured frontend, a configured mirror, or an unknown key.  The
 * table (GD_PLANE_KINDS) has one row per kind, in the order of the oneof,
 * with the answer for each (socket, role):
 *
 *   PLANE_TAKE       handed to whoever handles the kind
 *   PLANE_DROP       dropped before any handler runs, and counted
 *   PLANE_NOT_VOTER  the vote plane to a sender that has no vote (a
 *                    mirror): answered VOTE_NOT_VOTER (a VoteRep with
 *                    the pid alone; a UseSyncRep with voter = false and
 *                    no record), so it learns nothing, and counted
 *   PLANE_ZAP        never reaches a socket: the handshake refuses an
 *                    unknown key (peer.c's ZAP handler), which is every
 *                    unknown key's answer on every socket
 *
 * Who answers which role is the node's policy of planes by role (review
 * N1): the vote plane (vote_req, use_sync_req) is the frontends' alone;
 * a mirror is fed (mirror_sub) and catches up (ranges, snapshots, packs,
 * vectors); nobody's requests arrive on a SUB.  A kind without a row is
 * dropped; tests/unit/test_planes.c fails when a PeerMsg body case of
 * the descriptor has no row, and tests/integration/test_planes.sh sends
 * every kind from each role's key to a real node.
 *
 * Pure functions of constant data: any thread.
 */
#ifndef GD_PLANES_H
#define GD_PLANES_H

#include <stdbool.h>

#include "config.h"
#include "grantd.pb-c.h"

enum plane_sock { PLANE_SYNC, PLANE_SUB, PLANE_DEALER, PLANE__SOCKS };
enum plane_role { PLANE_FRONTEND, PLANE_MIRROR, PLANE_UNKNOWN, PLANE__ROLES };
enum plane_answer { PLANE_DROP, PLANE_TAKE, PLANE_NOT_VOTER, PLANE_ZAP };

/* Shorthands of the table: one letter per answer, the rows' columns are
 * sync (frontend, mirror), sub (frontend, mirror), dealer (frontend,
 * mirror); an unknown key is always PLANE_ZAP. */
#define PL_T PLANE_TAKE
#define PL__ PLANE_DROP
#define PL_N PLANE_NOT_VOTER

/* clang-format off */
#define GD_PLANE_KINDS(X)                                                      \
	/*  KIND          sync F M    sub F M     dealer F M */               \
	X(OP,           PL__, PL__, PL_T, PL__, PL__, PL__)                    \
	X(HEARTBEAT,    PL__, PL__, PL_T, PL__, PL_T, PL__)                    \
	X(RANGE_REQ,    PL_T, PL_T, PL__, PL__, PL__, PL__)                    \
	X(RANGE_REP,    PL__, PL__, PL__, PL__, PL_T, PL__)                    \
	X(VV_REQ,       PL_T, PL_T, PL__, PL__, PL__, PL__)                    \
	X(SNAP_REQ,     PL_T, PL_T, PL__, PL__, PL__, PL__)                    \
	X(SNAP_REP,     PL__, PL__, PL__, PL__, PL_T, PL__)                    \
	X(PACK_REQ,     PL_T, PL_T, PL__, PL__, PL__, PL__)                    \
	X(PACK_CHUNK,   PL__, PL__, PL__, PL__, PL_T, PL__)                    \
	X(PACK_CREDIT,  PL_T, PL_T, PL__, PL__, PL__, PL__)                    \
	X(PACK_ERR,     PL_T, PL_T, PL__, PL__, PL_T, PL__)                    \
	/* the vote plane: frontends only (N1) */                              \
	X(VOTE_REQ,     PL_T, PL_N, PL__, PL__, PL__, PL__)                    \
	X(VOTE_REP,     PL__, PL__, PL__, PL__, PL_T, PL__)                    \
	X(USE_SYNC_REQ, PL_T, PL_N, PL__, PL__, PL__, PL__)                    \
	X(USE_SYNC_REP, PL__, PL__, PL__, PL__, PL_T, PL__)                    \
	/* a mirror's feed: it subscribes, a frontend sends */                 \
	X(MIRROR_SUB,   PL__, PL_T, PL__, PL__, PL__, PL__)                    \
	X(MIRROR_OPS,   PL__, PL__, PL__, PL__, PL_T, PL__)                    \
	/* the push log's heads, published by frontends (N2) */               \
	X(PUSHLOG_HEADS, PL__, PL__, PL_T, PL__, PL__, PL__)                   \
	/* the transparency log: checkpoints and cosignatures, between */     \
	/* frontends on PUB (tlogwit.h) */                                    \
	X(CHECKPOINT,   PL__, PL__, PL_T, PL__, PL__, PL__)                    \
	X(COSIG,        PL__, PL__, PL_T, PL__, PL__, PL__)                    \
	/* a mirror's checkpoints, asked of a frontend (tlogwit.h) */          \
	X(CKPT_REQ,     PL_T, PL_T, PL__, PL__, PL__, PL__)                    \
	X(CKPT_REP,     PL__, PL__, PL__, PL__, PL_T, PL__)
/* clang-format on */

struct plane_row {
	int kind; /* a Grantd__V1__PeerMsg__BodyCase */
	const char *name; /* the kind's field name in grantd.proto */
	unsigned char answer[PLANE__SOCKS][2]; /* [sock][frontend, mirror] */
};

/* The row of kind, or NULL when it has none. */
const struct plane_row *planes_row(int kind);

/* Every row (*n of them), in table order. */
const struct plane_row *planes_rows(int *n);

/* The answer for kind on sock from role: PLANE_ZAP for an unknown key,
 * PLANE_DROP for a kind without a row. */
enum plane_answer
planes_answer(int kind, enum plane_sock sock, enum plane_role role);

/* The role of a configured peer's role. */
enum plane_role planes_role(enum config_role r);

/* "take", "drop", "not_voter", "zap"; "sync", "sub", "dealer";
 * "frontend", "mirror", "unknown" (logs, tests). */
const char *planes_answer_name(enum plane_answer a);
const char *planes_sock_name(enum plane_sock s);
const char *planes_role_name(enum plane_role r);

/* The refusal of a PLANE_NOT_VOTER kind: out (peer_msg_init'ed by the
 * caller) gets the body answering in, in the storage of *st (which must
 * live as long as out).  false when in's kind has no such answer. */
struct plane_refusal {
	Grantd__V1__VoteRep vote_rep;
	Grantd__V1__UseSyncRep use_sync_rep;
};
bool planes_refusal(const Grantd__V1__PeerMsg *in,
                    Grantd__V1__PeerMsg *out,
                    struct plane_refusal *st);

#endif
