/* A host-only stand-in for the CUDA runtime and NCCL calls that cluster/nccl.c makes, linked
 * into tests/test_nccl_mock.c in place of libcudart and libnccl. It lets the GPU all-reduce's
 * control flow run on a machine without a GPU: the non-blocking protocol (ncclInProgress, state
 * polling, streams that are busy for a while), the shard, tail and staging arithmetic, and the
 * failure paths (asynchronous errors, hangs, aborts), with every device access checked against
 * the fake device allocations.
 *
 * Fake devices are numbered 0..ndev-1 with PCI bus ids "0000:<d>:00.0"; "device memory" is host
 * memory registered per device (mock_dev_alloc). All NCCL ranks of a communicator must live in
 * this process (one process per node in the tests); a collective runs when every rank has
 * posted it, on host memory, summing in rank order. Copies to the device are done when
 * enqueued; a copy to the host lands only once a query finds its stream, or an event recorded
 * after it, passed (the host buffer holds NaNs until then), so a host that reads a staged
 * buffer before waiting for it sums garbage. */
#ifndef MW_TESTS_NCCL_MOCK_H
#define MW_TESTS_NCCL_MOCK_H

#include <stddef.h>

typedef enum {
    MOCK_OK,
    MOCK_ASYNC_ERROR, /* after collective number `at`, the communicators report ncclRemoteError */
    MOCK_HANG,        /* from collective number `at` on, the streams never become idle */
    MOCK_COPY_HANG,   /* from copy number `at` on, the streams never become idle */
    MOCK_INIT_HANG,   /* new communicators never finish their set-up */
} mock_fault;

/* Reset everything but the misuse count: ndev fake devices, no fault, counters zeroed,
 * allocations and communicators freed. */
void mock_reset(int ndev);
void mock_inject(mock_fault fault, int at);
/* Slow devices: each collective completes `seconds` after it runs (every stream and event of
 * the process reads busy until then), the progress count (mock_progress) moving meanwhile, as
 * when a long backward pass runs before the collective on its stream. 0 (the default): off. */
void mock_slow(double seconds);
/* A count that moves while slow devices are busy (mock_slow) and stands still otherwise. */
long mock_progress(void);
/* Fake device memory of nbytes on device dev (host memory, zero-filled); NULL on bad input. */
void *mock_dev_alloc(int dev, size_t nbytes);
void mock_dev_free(void *p);

/* Does [p, p + nbytes) lie inside one fake allocation of device dev (-1: pinned host
 * memory)? nbytes 0: p may be anything. */
int mock_inside(const void *p, size_t nbytes, int dev);
/* The device cudaSetDevice last made current (0 at the start). */
int mock_current_device(void);

/* Called, when set, as each collective is posted: its stream and the memory it reads (send)
 * and writes (recv). tests/hostdev.c checks the order of its contexts' reduce streams with it. */
extern void (*mock_on_post)(void *stream, const void *send, size_t send_bytes, const void *recv,
                            size_t recv_bytes);

/* Counters since mock_reset. */
int mock_aborts(void);        /* ncclCommAbort calls */
int mock_destroys(void);      /* ncclCommDestroy calls */
int mock_live_comms(void);    /* communicators neither aborted nor destroyed */
int mock_collectives(void);   /* collectives run */
int mock_host_allocs(void);   /* cudaHostAlloc calls (pinned host memory) */
int mock_host_frees(void);    /* cudaFreeHost calls */
int mock_violations(void);    /* misuses found since the start (bad pointer, blocking config,
                                 ...); each is printed */
int mock_pending_error(void); /* a CUDA error left behind for cudaGetLastError (0: none) */

#endif
