/* The wait for poll loops after a callback's removal (quiesce.c). */
#ifndef CDD_QUIESCE_H
#define CDD_QUIESCE_H

#include <stdint.h>

#define CDD_QUIESCE_SLOTS 128

uint64_t *cdd_quiesce_slot_n(int i);
void cdd_quiesce_init(void);
void cdd_quiesce(void);
void cdd_quiesce_stats(uint64_t *v);
int cdd_quiesce_remove_none(uint16_t port);

#endif
