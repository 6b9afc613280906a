/*
 * planes.c: the table of who may say what on which socket (planes.h).
 *
 * Why a table and not a check in each handler: the vote plane used to
 * trust every admitted key, and a mirror's key read every user's marks
 * from it and made two frontends promise next = 2^64-1 (review N1).  A
 * check written in each handler is a check a new handler forgets; one
 * row per kind, consulted before any handler runs, is not (the unit test
 * holds the rows to the descriptor's oneof).
 */
#include <stddef.h>

#include "planes.h"
#include "banned.h"

/* clang-format off */
static const struct plane_row rows[] = {
#define PLANES_ROW(k, sf, sm, bf, bm, df, dm)                                  \
	{ .kind = GRANTD__V1__PEER_MSG__BODY_##k,                              \
	  .name = #k,                                                          \
	  .answer = { { sf, sm }, { bf, bm }, { df, dm } } },
	GD_PLANE_KINDS(PLANES_ROW)
#undef PLANES_ROW
};
/* clang-format on */

const struct plane_row *planes_rows(int *n)
{
	*n = (int)(sizeof(rows) / sizeof(rows[0]));
	return rows;
}

const struct plane_row *planes_row(int kind)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].kind == kind)
			return &rows[i];
	return NULL;
}

enum plane_answer
planes_answer(int kind, enum plane_sock sock, enum plane_role role)
{
	const struct plane_row *r = planes_row(kind);

	if (role != PLANE_FRONTEND && role != PLANE_MIRROR)
		return PLANE_ZAP;
	if (!r || (int)sock < 0 || sock >= PLANE__SOCKS)
		return PLANE_DROP;
	return (enum plane_answer)r->answer[sock][role];
}

enum plane_role planes_role(enum config_role r)
{
	return r == CONFIG_ROLE_FRONTEND ? PLANE_FRONTEND
	       : r == CONFIG_ROLE_MIRROR ? PLANE_MIRROR
	                                 : PLANE_UNKNOWN;
}

const char *planes_answer_name(enum plane_answer a)
{
	switch (a) {
	case PLANE_TAKE:
		return "take";
	case PLANE_DROP:
		return "drop";
	case PLANE_NOT_VOTER:
		return "not_voter";
	case PLANE_ZAP:
		return "zap";
	}
	return "?";
}

const char *planes_sock_name(enum plane_sock s)
{
	return s == PLANE_SYNC     ? "sync"
	       : s == PLANE_SUB    ? "sub"
	       : s == PLANE_DEALER ? "dealer"
	                           : "?";
}

const char *planes_role_name(enum plane_role r)
{
	return r == PLANE_FRONTEND ? "frontend"
	       : r == PLANE_MIRROR ? "mirror"
	                           : "unknown";
}

bool planes_refusal(const Grantd__V1__PeerMsg *in,
                    Grantd__V1__PeerMsg *out,
                    struct plane_refusal *st)
{
	switch (in->body_case) {
	case GRANTD__V1__PEER_MSG__BODY_VOTE_REQ:
		/* the pid alone, so the asker can match it; nothing held */
		grantd__v1__vote_rep__init(&st->vote_rep);
		if (in->vote_req && in->vote_req->has_pid) {
			st->vote_rep.pid = in->vote_req->pid;
			st->vote_rep.has_pid = 1;
		}
		st->vote_rep.verdict = GRANTD__V1__VOTE_VERDICT__VOTE_NOT_VOTER;
		st->vote_rep.has_verdict = 1;
		out->body_case = GRANTD__V1__PEER_MSG__BODY_VOTE_REP;
		out->vote_rep = &st->vote_rep;
		return true;
	case GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ:
		/* no record, no count: a voter that does not vote here */
		grantd__v1__use_sync_rep__init(&st->use_sync_rep);
		st->use_sync_rep.voter = 0;
		st->use_sync_rep.has_voter = 1;
		st->use_sync_rep.done = 0;
		st->use_sync_rep.has_done = 1;
		out->body_case = GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP;
		out->use_sync_rep = &st->use_sync_rep;
		return true;
	default:
		return false;
	}
}
