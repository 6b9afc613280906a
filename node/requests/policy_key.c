/*
 * policy_key.c: the key a user logged in with as a factor (policy.h:
 * enum policy_key): parsed as grant-shell sends it, counted under [policy]
 * security_keys, and said in the refusals' texts.  Pure: no store.
 */
#include <string.h>

#include "err.h"
#include "policy.h"
#include "banned.h"

int policy_key_parse(enum policy_key *out, const char *s)
{
	static const char *names[] = {"", "plain", "sk-touch", "sk-pin"};

	*out = POLICY_KEY_UNKNOWN;
	if (!s)
		return 0;
	for (size_t i = 0; i < GD_ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum policy_key)i;
			return 0;
		}
	return GD_EINVAL;
}

bool policy_key_2fa(const struct config *cfg, enum policy_key k)
{
	switch (cfg->policy.security_keys) {
	case CONFIG_SK_TOUCH:
		return k == POLICY_KEY_SK_TOUCH || k == POLICY_KEY_SK_PIN;
	case CONFIG_SK_PIN:
		return k == POLICY_KEY_SK_PIN;
	case CONFIG_SK_OFF:
		break;
	}
	return false;
}

void policy_key_text(struct buf *out,
                     const struct config *cfg,
                     enum policy_key k)
{
	enum config_sk sk = cfg->policy.security_keys;
	const char *what = k == POLICY_KEY_SK_PIN ? "a security key with "
	                                            "touch and PIN"
	                                          : "a security key with touch";

	if (k == POLICY_KEY_UNKNOWN)
		return;
	if (k == POLICY_KEY_PLAIN)
		buf_printf(
		        out, "an ordinary SSH key (one factor%s)",
		        sk == CONFIG_SK_OFF ? ""
		        : sk == CONFIG_SK_PIN
		                ? "; a security key with a PIN, ed25519-sk, "
		                  "would count as two"
		                : "; a security key, ed25519-sk, would count "
		                  "as two");
	else if (policy_key_2fa(cfg, k))
		buf_printf(out, "%s (two factors)", what);
	else if (sk == CONFIG_SK_OFF)
		buf_printf(out,
		           "%s, counted as an ordinary SSH key here "
		           "(security_keys = off)",
		           what);
	else
		buf_printf(out,
		           "%s but no PIN, not two factors here "
		           "(security_keys = pin)",
		           what);
}
