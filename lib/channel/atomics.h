/*
 * atomics.h - every memory-ordering primitive ringfeed uses, in one place.
 *
 * The rings and bells in shared memory are read and written by different
 * processes. Each store_release below pairs with a load_acquire on the other
 * side; the comment at each call site names its partner. The full fences
 * order a store before a later load (the "sleeping flag" handshake), which
 * acquire/release alone cannot do.
 */
#ifndef RF_ATOMICS_H
#define RF_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#define RF__CACHELINE 64

static inline uint32_t rf__load_acquire32(const _Atomic uint32_t *p)
{
    return atomic_load_explicit(p, memory_order_acquire);
}

static inline void rf__store_release32(_Atomic uint32_t *p, uint32_t v)
{
    atomic_store_explicit(p, v, memory_order_release);
}

static inline uint32_t rf__load_relaxed32(const _Atomic uint32_t *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}

static inline void rf__store_relaxed32(_Atomic uint32_t *p, uint32_t v)
{
    atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline uint64_t rf__load_relaxed64(const _Atomic uint64_t *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}

static inline void rf__store_relaxed64(_Atomic uint64_t *p, uint64_t v)
{
    atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline void rf__add_relaxed64(_Atomic uint64_t *p, uint64_t v)
{
    atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

/* Orders every earlier store before every later load (Dekker handshake). */
/* Reads *p and clears it in one step: a flag set by one thread and taken
 * by another, once (pairs with the setter's store_release). */
static inline uint32_t rf__take32(_Atomic uint32_t *p)
{
    return atomic_exchange_explicit(p, 0, memory_order_acq_rel);
}

static inline void rf__fence_full(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}

/* Tells the CPU that this is a spin-wait loop (saves power, frees the
 * sibling hyper-thread). */
static inline void rf__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif /* RF_ATOMICS_H */
