#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "idle.h"

/* In C, not a Go timer: a Go sleep on a locked thread takes a second
 * thread to fire its timer and hand the wake-up over, which costs an
 * idle loop more than the wake-ups themselves. */
int cdd_idle_wait(int efd, long ns)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	struct timespec ts = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };
	uint64_t v;

	if (ppoll(&p, 1, &ts, NULL) <= 0)
		return 0;
	if (read(efd, &v, sizeof(v)) < 0)
		return 0;
	return 1;
}
