/* Files mapped for reading that shrink under the process.
 *
 * The images of a .npy file or a stored .npz member are memory-mapped (worker/data/data_npy.c,
 * worker/data/data_npz.c), so memory does not grow with the data set and the ranks of a node share
 * the page cache. If another program truncates or rewrites the file while a run reads it, the
 * kernel raises SIGBUS at the next access past the file's new end: the process died with exit
 * 135 and no word, which a scheduler reads as worth a retry (>= 128).
 *
 * Each mapping is registered here with the file's name, and the registration installs a SIGBUS
 * handler (again, should another have replaced it since): a fault inside a registered mapping
 * writes one line naming the file,
 *   mwtrain: error: data/x_train.npy: the memory-mapped file shrank while it was read
 *   (truncated or rewritten during the run?): byte 1048576 of its 47040128-byte mapping is
 *   gone (SIGBUS)
 * and ends the process with MW_EDATA's exit code (3: bad data, do not retry); under mpirun the
 * launcher then ends the other ranks. Any other SIGBUS goes to the action installed before
 * (Open MPI's, or the default).
 *
 * Why a handler and not pread: the mapping is what keeps a 4 GB x_train.npy at 80 MiB per rank
 * (docs/data.md, "Memory does not grow with the data set"), and batches are assembled on the
 * compute threads, where a failed read would have no way out but this one; a file changing under a
 * run is a mistake that must end it, clearly and without a retry. The handler is async-signal
 * safe: it reads the registry (slots published with atomic stores), formats with its own
 * digits and write(2)s, then _exit()s. */
#ifndef MW_COMMON_MAPGUARD_H
#define MW_COMMON_MAPGUARD_H

#include <stddef.h>

/* Register [addr, addr + nbytes) as a mapping of the file `name` (copied; at most 255 bytes
 * kept). 0, or -1 when the registry (64 mappings) is full: that mapping then keeps the default
 * SIGBUS. */
int mw_mapguard_add(const void *addr, size_t nbytes, const char *name);
/* Forget the mapping starting at addr (before it is unmapped); nothing when unknown. */
void mw_mapguard_remove(const void *addr);

#endif
