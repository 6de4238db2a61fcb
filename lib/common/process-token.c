/*
 * process-token.c - a number that names this process, for the loader to
 * tell the process that opened it from a child of fork() on every call
 * to rf_loader_next() and rf_loader_release().
 *
 * getpid() would tell them apart, but glibc no longer caches it: it is a
 * system call, twice per batch (260 ns each on a virtual machine, where
 * the transport ceiling, ringfeed-bench --source empty --batch 1, went
 * from 201,000 to 289,000 batches/s without them). The token is
 * read from one page mapped with MADV_WIPEONFORK instead: the kernel hands
 * a child of fork() that page zeroed, however the child was made (fork(),
 * _Fork(), clone() without CLONE_VM: no atfork handler needed), and the
 * first call there draws the child's own token. It mixes in the time as
 * well as the pid, so that a later process that happens to get a dead
 * owner's pid does not pass for it either. Where the page cannot be had
 * (a kernel without MADV_WIPEONFORK), the token is the pid, asked for
 * every time.
 */
#include "config.h"

#include "common/process-token.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/mix64.h"

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18 /* Linux 4.14 */
#endif

/* The token's place in the page; NULL before the first call, NO_PAGE
 * where no page could be had. A child of fork() inherits the address,
 * not the contents. */
static _Atomic uint64_t no_page; /* only its address is used */
#define NO_PAGE (&no_page)
static _Atomic(_Atomic uint64_t *) token_page;

static _Atomic uint64_t *map_token_page(void)
{
    const size_t size = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    _Atomic uint64_t *page = NO_PAGE;
    if (p != MAP_FAILED && madvise(p, size, MADV_WIPEONFORK) == 0)
        page = p;
    else if (p != MAP_FAILED)
        munmap(p, size);
    _Atomic uint64_t *expected = NULL;
    if (atomic_compare_exchange_strong(&token_page, &expected, page))
        return page;
    if (page != NO_PAGE) /* another thread's came first */
        munmap(p, size);
    return expected;
}

uint64_t rf__process_token(void)
{
    _Atomic uint64_t *slot =
        atomic_load_explicit(&token_page, memory_order_acquire);
    if (!slot)
        slot = map_token_page();
    if (slot == NO_PAGE)
        return (uint64_t)getpid();
    uint64_t token = atomic_load_explicit(slot, memory_order_relaxed);
    if (token != 0)
        return token;
    /* Never a pid: those are below 2^32. */
    token = rf__mix64((uint64_t)getpid(), rf__now_ns()) | UINT64_C(1) << 63;
    uint64_t none = 0;
    if (!atomic_compare_exchange_strong(slot, &none, token))
        token = none; /* another thread of this process drew it first */
    return token;
}
