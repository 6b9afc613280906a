/*
 * peerfeatures.h: what this release of the peer protocol can do, by name.
 *
 * Every heartbeat carries this node's release (GRANTD_VERSION) and the
 * names below (Heartbeat.release, Heartbeat.features); each peer's last
 * heartbeat is kept (repl_hb.c) and shown in `grantctl status`.  A node of
 * 0.1.0 sends neither: status shows it as "0.1.0 or older".
 *
 * The rule (docs/upgrading.md): a change that a node of an older release
 * would not understand or would refuse (a new message, a new meaning of a
 * field, an operation it would reject, such as signed operations) gets a
 * name here, and the code turns it on only while
 * repl_feature_everywhere() says every configured frontend announced it.
 * During a rolling upgrade the last site to move turns it on everywhere;
 * a site started again on an older release turns it off.  A name is never
 * reused, and never dropped while a release that announces it may run.
 *
 * Only the names are here (no .c): repl_hb.c sends them, cmd_node.c shows
 * them, and any room of the node may ask repl_feature_everywhere() from
 * the main loop (the owner of struct repl).
 */
#ifndef GD_PEERFEATURES_H
#define GD_PEERFEATURES_H

#include <stdbool.h>

/* X(ID, "name", "what it means"): every feature of this release. */
#define GD_FEATURES(X)                                  \
	X(RELEASE_IN_HEARTBEAT, "release-in-heartbeat", \
	  "heartbeats carry the release and the feature list (0.2.0)")  \
	X(PUSH_TLOG, "push-tlog",                                     \
	  "pushes get a transparency log leaf: Op body PushLeaf (issue 21)")

enum feature {
#define GD_FEATURE_ENUM(id, name, desc) FEATURE_##id,
	GD_FEATURES(GD_FEATURE_ENUM)
#undef GD_FEATURE_ENUM
	        FEATURE__COUNT
};

/* f's name ("release-in-heartbeat"); "?" out of range. */
static inline const char *peerfeatures_name(enum feature f)
{
	static const char *const names[FEATURE__COUNT] = {
#define GD_FEATURE_NAME(id, name, desc) [FEATURE_##id] = name,
	        GD_FEATURES(GD_FEATURE_NAME)
#undef GD_FEATURE_NAME
	};
	return (unsigned)f < FEATURE__COUNT ? names[f] : "?";
}

/* Longest release string and feature name taken from a peer, and most
 * names: a heartbeat with more is cut to these (repl_hb_take). */
#define FEATURES_NAME_MAX 64
#define FEATURES_MAX      64

struct repl;

/* True when every configured frontend peer's last heartbeat named f
 * (mirrors are not asked; a frontend not heard since this node started,
 * or last heard on a release without f, is false).  This node has every
 * feature of its own build.  Main loop only.  (repl_hb.c) */
bool repl_feature_everywhere(struct repl *r, enum feature f);

#endif
