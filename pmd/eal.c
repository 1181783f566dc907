/* The EAL's start, pdump, and the worker lcores' launch. */
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pdump.h>
#include "cdd.h"
#include "_cgo_export.h" /* cddLcoreLoop, lcore_cgo.go's job loop */

/* rte_errno is per thread: read it on the thread that called rte_eal_init. */
int cdd_eal_init(int argc, char **argv, int *err)
{
	rte_errno = 0;
	int rc = rte_eal_init(argc, argv);
	*err = rte_errno;
	return rc;
}

int cdd_pdump_init(int *err)
{
	rte_errno = 0;
	int rc = rte_pdump_init();
	*err = rte_errno;
	return rc;
}

int cdd_lcore_launch(unsigned int lcore)
{
	return rte_eal_remote_launch(cddLcoreLoop, NULL, lcore);
}
