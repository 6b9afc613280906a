/* syncer.c: one thread that fsyncs the WAL for the writer thread. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "pipe.h"
#include "syncer.h"
#include "thread.h"
#include "xalloc.h"
#include "banned.h"

struct syncer {
	struct store *store;
	void *zctx;
	void *pipe;       /* writer's end */
	struct metrics_counts *counts; /* NULL: not counted */
	pthread_t thread;
	char endpoint[64];
};

static void *syncer_main(void *arg)
{
	struct syncer *sy = arg;
	void *pipe = zmq_socket(sy->zctx, ZMQ_PAIR);

	if (!pipe || zmq_connect(pipe, sy->endpoint) < 0) {
		log_error("syncer cannot start: %s", zmq_strerror(zmq_errno()));
		exit(1);
	}
	for (;;) {
		uint64_t t, max = 0, commits = 1, t0;
		int got = pipe_recv_ticket(pipe, &t, 0);
		if (got == GD_EIO && zmq_errno() == EINTR)
			continue; /* thread_start blocks signals; still */
		if (got != PIPE_SYNC)
			break; /* stop, or the pipe is gone */
		max = t;
		/* every ticket already waiting rides on the same fsync */
		while ((got = pipe_recv_ticket(pipe, &t, ZMQ_DONTWAIT)) ==
		       PIPE_SYNC) {
			if (t > max)
				max = t;
			commits++;
		}
		if (got == PIPE_SYNC_STOP)
			goto stop;
		t0 = clock_mono_us();
		if (store_sync(sy->store) < 0) {
			log_error("fsync of the write-ahead log failed: "
				  "stopping so that nothing unacknowledged is "
				  "served");
			_exit(1);
		}
		if (sy->counts) {
			metrics_observe(&sy->counts->fsync,
					clock_mono_us() - t0);
			metrics_observe(&sy->counts->commit_batches, commits);
		}
		pipe_send_ticket(pipe, PIPE_SYNC, max);
	}
stop:
	zmq_close(pipe);
	return NULL;
}

int syncer_start(struct syncer **out, struct store *s, void *zctx,
		 struct metrics_counts *counts)
{
	struct syncer *sy = xcalloc(1, sizeof(*sy));
	int zero = 0;

	sy->store = s;
	sy->zctx = zctx;
	sy->counts = counts;
	snprintf(sy->endpoint, sizeof(sy->endpoint), "inproc://syncer-%p",
		 (void *)sy);
	sy->pipe = zmq_socket(zctx, ZMQ_PAIR);
	zmq_setsockopt(sy->pipe, ZMQ_LINGER, &zero, sizeof(zero));
	if (!sy->pipe || zmq_bind(sy->pipe, sy->endpoint) < 0 ||
	    thread_start(&sy->thread, "gd-syncer", syncer_main, sy) != 0) {
		log_error("cannot start the syncer thread");
		if (sy->pipe)
			zmq_close(sy->pipe);
		free(sy);
		*out = NULL;
		return GD_EIO;
	}
	*out = sy;
	return 0;
}

void syncer_destroy(struct syncer **sp)
{
	struct syncer *sy = *sp;
	if (!sy)
		return;
	pipe_send_ticket(sy->pipe, PIPE_SYNC_STOP, 0);
	pthread_join(sy->thread, NULL);
	zmq_close(sy->pipe);
	free(sy);
	*sp = NULL;
}

void syncer_request(struct syncer *sy, uint64_t ticket)
{
	pipe_send_ticket(sy->pipe, PIPE_SYNC, ticket);
}

void *syncer_socket(struct syncer *sy)
{
	return sy->pipe;
}

uint64_t syncer_done(struct syncer *sy)
{
	uint64_t t;

	if (pipe_recv_ticket(sy->pipe, &t, ZMQ_DONTWAIT) != PIPE_SYNC)
		return 0;
	return t;
}
