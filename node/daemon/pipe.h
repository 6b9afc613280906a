/*
 * pipe.h: the messages on the node's internal pipes, by name.
 *
 * Threads talk over inproc PAIR pipes (STYLE.md: an actor is a thread and
 * a pipe).  Every message kind on them is named here, with the helpers
 * that pack and read them, so that a sender and its reader can be found
 * by a search and a malformed message is refused in one place
 * (OpenSMTPD's imsg_type).  gitrepl's pair has its own names (gitrepl.h).
 *
 * The reader <-> writer pipe (readers.h), three frames
 * [type|id][""][body], the type the first byte of the first frame:
 *   PIPE_REQ_USER, PIPE_REQ_ADMIN  reader -> writer: a request from that
 *                                  socket, id its ROUTER routing id;
 *                                  writer -> reader: the answer to send
 *                                  back the same way
 *   PIPE_VIEW                      writer -> reader: a new read view,
 *                                  syncing flag or status parts wait in
 *                                  the hand-over slots (id, body empty)
 *   PIPE_QUIT                      writer -> reader: stop the thread
 *
 * The writer <-> syncer pipe (syncer.h), one frame of 8 bytes:
 *   PIPE_SYNC       writer -> syncer: make ticket T durable;
 *                   syncer -> writer: everything up to T is
 *   PIPE_SYNC_STOP  writer -> syncer: stop the thread
 *
 * Callers: readers.c, control.c (reader pipe), syncer.c (syncer pipe).
 */
#ifndef GD_PIPE_H
#define GD_PIPE_H

#include <stddef.h>
#include <stdint.h>

enum pipe_msg {
	PIPE_NONE = -1,      /* not a message of this pipe: dropped */
	/* reader <-> writer: the first byte of the first frame */
	PIPE_REQ_USER = 0,
	PIPE_REQ_ADMIN = 1,
	PIPE_VIEW = 'V',
	PIPE_QUIT = 'Q',
	/* writer <-> syncer */
	PIPE_SYNC = 0x100,
	PIPE_SYNC_STOP,
};

/* The longest id a reader-pipe message carries (request.h keeps routing
 * ids up to 256 bytes). */
#define PIPE_ID_MAX 256

/* The name of t, for logs ("PIPE_VIEW"; "PIPE_NONE" for an unknown t). */
const char *pipe_msg_name(enum pipe_msg t);

/* Send [type|id][""][body] on sock (flags: 0 or ZMQ_DONTWAIT).  Returns 0,
 * GD_EINVAL for an id over PIPE_ID_MAX or a type not of the reader pipe,
 * or GD_EIO (errno set by ZeroMQ). */
int pipe_send(void *sock, enum pipe_msg type, const void *id, size_t idlen,
	      const void *body, size_t len, int flags);

/* The type of a reader-pipe message whose first frame is frame0 (the id
 * follows the type byte): PIPE_NONE when it is none of them. */
enum pipe_msg pipe_type(const void *frame0, size_t len);

/* Send ticket as type (PIPE_SYNC, or PIPE_SYNC_STOP without one) on
 * the syncer pipe.  Returns 0 or GD_EIO. */
int pipe_send_ticket(void *sock, enum pipe_msg type, uint64_t ticket);

/* Read one syncer-pipe message: PIPE_SYNC with *ticket set,
 * PIPE_SYNC_STOP, 0 when none is waiting (flags ZMQ_DONTWAIT), GD_EPROTO
 * for a malformed one, or GD_EIO (zmq_errno() says why: EINTR, ETERM). */
int pipe_recv_ticket(void *sock, uint64_t *ticket, int flags);

#endif
