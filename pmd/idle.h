#ifndef CDD_IDLE_H
#define CDD_IDLE_H

/* cdd_idle_wait blocks the calling thread until the eventfd efd is
 * signalled or ns nanoseconds pass; it returns 1 when woken (and
 * clears the eventfd), 0 on timeout or an interrupted wait. */
int cdd_idle_wait(int efd, long ns);

#endif
