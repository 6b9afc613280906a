/*
 * peerpolicy.c: the [policy] settings peers tell each other, compared
 * (peerpolicy.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "peerpolicy.h"
#include "banned.h"

static const char *quorum_name(enum config_quorum q)
{
	return q == CONFIG_QUORUM_MAJORITY ? "majority" : "local";
}

static const char *sk_name(enum config_sk k)
{
	return k == CONFIG_SK_OFF   ? "off"
	       : k == CONFIG_SK_PIN ? "pin"
	                            : "touch";
}

void peerpolicy_init(struct peerpolicy *pp, const struct config *cfg)
{
	memset(pp, 0, sizeof(*pp));
	pp->cfg = cfg;
	pp->npeers = cfg->npeers;
	for (int i = 0; i < cfg->npeers; i++) {
		pp->peers[i].site = cfg->peers[i].site;
		pp->peers[i].frontend =
		        cfg->peers[i].role == CONFIG_ROLE_FRONTEND;
	}
}

void peerpolicy_fill(const struct config *cfg, Grantd__V1__PolicySettings *out)
{
	const struct config_policy *p = &cfg->policy;

	grantd__v1__policy_settings__init(out);
	out->token_quorum = (char *)quorum_name(p->token_quorum);
	out->lockout_failures = (uint32_t)p->lockout_failures;
	out->has_lockout_failures = 1;
	out->lockout_window = (uint64_t)p->lockout_window;
	out->has_lockout_window = 1;
	out->totp_window = (uint32_t)p->totp_window;
	out->has_totp_window = 1;
	out->hotp_lookahead = (uint32_t)p->hotp_lookahead;
	out->has_hotp_lookahead = 1;
	out->security_keys = (char *)sk_name(p->security_keys);
}

static struct peerpolicy_peer *find(const struct peerpolicy *pp,
                                    const char *site)
{
	for (int i = 0; i < pp->npeers; i++)
		if (!strcmp(pp->peers[i].site, site))
			return (struct peerpolicy_peer *)&pp->peers[i];
	return NULL;
}

/* A value as text: a string (NULL or too long: "?") or a number (absent:
 * "?"). */
static void text_str(char out[PEERPOLICY_VALUE_MAX], const char *s)
{
	if (!s || strlen(s) >= PEERPOLICY_VALUE_MAX)
		s = "?";
	snprintf(out, PEERPOLICY_VALUE_MAX, "%s", s);
}

static void text_num(char out[PEERPOLICY_VALUE_MAX], bool has, uint64_t v)
{
	if (has)
		snprintf(out, PEERPOLICY_VALUE_MAX, "%" PRIu64, v);
	else
		snprintf(out, PEERPOLICY_VALUE_MAX, "?");
}

/* Fill d with what differs between ours and theirs. */
static void compare(struct peerpolicy_peer *d,
                    const Grantd__V1__PolicySettings *ours,
                    const Grantd__V1__PolicySettings *theirs)
{
	char h[PEERPOLICY_KEYS][PEERPOLICY_VALUE_MAX];
	char t[PEERPOLICY_KEYS][PEERPOLICY_VALUE_MAX];
	static const char *const keys[PEERPOLICY_KEYS] = {
	        "token_quorum", "lockout_failures", "lockout_window",
	        "totp_window",  "hotp_lookahead",   "security_keys",
	};

	text_str(h[0], ours->token_quorum);
	text_str(t[0], theirs->token_quorum);
	text_num(h[1], 1, ours->lockout_failures);
	text_num(t[1], theirs->has_lockout_failures, theirs->lockout_failures);
	text_num(h[2], 1, ours->lockout_window);
	text_num(t[2], theirs->has_lockout_window, theirs->lockout_window);
	text_num(h[3], 1, ours->totp_window);
	text_num(t[3], theirs->has_totp_window, theirs->totp_window);
	text_num(h[4], 1, ours->hotp_lookahead);
	text_num(t[4], theirs->has_hotp_lookahead, theirs->hotp_lookahead);
	text_str(h[5], ours->security_keys);
	text_str(t[5], theirs->security_keys);
	d->n = 0;
	for (int i = 0; i < PEERPOLICY_KEYS; i++) {
		if (!strcmp(h[i], t[i]))
			continue;
		d->diff[d->n].key = keys[i];
		memcpy(d->diff[d->n].here, h[i], PEERPOLICY_VALUE_MAX);
		memcpy(d->diff[d->n].there, t[i], PEERPOLICY_VALUE_MAX);
		d->n++;
	}
}

static bool same_diff(const struct peerpolicy_peer *a,
                      const struct peerpolicy_peer *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->diff[i].key, b->diff[i].key) ||
		    strcmp(a->diff[i].here, b->diff[i].here) ||
		    strcmp(a->diff[i].there, b->diff[i].there))
			return false;
	return true;
}

void peerpolicy_take(struct peerpolicy *pp,
                     const char *site,
                     const Grantd__V1__PolicySettings *ps)
{
	struct peerpolicy_peer *p = find(pp, site), now;
	Grantd__V1__PolicySettings ours;

	if (!p || !p->frontend || !ps || pp->cfg->role != CONFIG_ROLE_FRONTEND)
		return;
	peerpolicy_fill(pp->cfg, &ours);
	now = *p;
	compare(&now, &ours, ps);
	if (p->heard && same_diff(p, &now))
		return;
	for (int i = 0; i < now.n; i++)
		log_warn("policy differs from a frontend peer's peer=%s key=%s "
		         "here=%s peer_value=%s (set it alike in [policy] at "
		         "every site)%s",
		         site, now.diff[i].key, now.diff[i].here,
		         now.diff[i].there,
		         !strcmp(now.diff[i].key, "token_quorum")
		                 ? ": token validation is refused here"
		                 : "");
	if (!now.n && p->heard && p->n)
		log_info("policy agrees with the frontend peer's again "
		         "peer=%s",
		         site);
	now.heard = true;
	*p = now;
}

void peerpolicy_json(const struct peerpolicy *pp, const char *site, cJSON *o)
{
	const struct peerpolicy_peer *p = find(pp, site);
	cJSON *arr = cJSON_AddArrayToObject(o, "policy_mismatch");

	for (int i = 0; p && i < p->n; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "key", p->diff[i].key);
		cJSON_AddStringToObject(d, "here", p->diff[i].here);
		cJSON_AddStringToObject(d, "peer", p->diff[i].there);
		cJSON_AddItemToArray(arr, d);
	}
	cJSON_AddNumberToObject(o, "policy_mismatches", p ? p->n : 0);
}

bool peerpolicy_refuses(const struct peerpolicy *pp, struct buf *why)
{
	for (int i = 0; i < pp->npeers; i++) {
		const struct peerpolicy_peer *p = &pp->peers[i];
		for (int j = 0; j < p->n; j++) {
			if (strcmp(p->diff[j].key, "token_quorum"))
				continue;
			buf_printf(why,
			           "Token not accepted: this site has "
			           "token_quorum = %s and the frontend peer "
			           "%s has token_quorum = %s; tokens are "
			           "refused here until every site has the "
			           "same (ask an administrator). Existing "
			           "grants keep working.",
			           p->diff[j].here, p->site, p->diff[j].there);
			return true;
		}
	}
	return false;
}
