/* csrc/core/alloc.h — a caching allocator for numpy array data.
 *
 * Why: fresh memory costs a page fault per 4 KiB on first touch (docs/DESIGN.md,
 * Performance: ~2.5 GB/s against ~45 GB/s for mapped memory), and glibc hands
 * large blocks back to the kernel on free, so a training step that allocates
 * its activations afresh every step pays for every page every step.  This
 * allocator keeps freed large blocks and hands them out again: from the
 * second step on, the same shapes reuse the same mapped memory.
 *
 * Installed as a numpy PyDataMem_Handler (numpy >= 1.22) only inside
 * lutcore's own calls (a context variable, see lutcore._alloc): user code is
 * never affected.  Blocks below LC_ALLOC_MIN go straight to malloc.  Every
 * block carries a 64-byte header (its capacity and a tag), so free/realloc
 * need no lookup and the data is 64-byte aligned.  A request takes the
 * smallest cached block that holds it and wastes at most half of it; the
 * cache never holds more than its byte limit (oldest blocks go first).  A
 * spin lock guards the cache (numpy may free from any thread); it is held
 * only for a scan of at most LC_ALLOC_SLOTS entries, never across a malloc.
 */
#ifndef LUTCORE_ALLOC_H
#define LUTCORE_ALLOC_H

#include "common.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* the lock, per platform (64-byte aligned allocation: common.h) */
#if defined(_WIN32)
#include <windows.h>
static volatile LONG lc_cache_flag = 0;
static inline void lc_cache_lock(void) { while (InterlockedExchange(&lc_cache_flag, 1)) {} }
static inline void lc_cache_unlock(void) { InterlockedExchange(&lc_cache_flag, 0); }
#else
#include <stdatomic.h>
static atomic_flag lc_cache_flag = ATOMIC_FLAG_INIT;
static inline void lc_cache_lock(void) { while (atomic_flag_test_and_set_explicit(&lc_cache_flag, memory_order_acquire)) {} }
static inline void lc_cache_unlock(void) { atomic_flag_clear_explicit(&lc_cache_flag, memory_order_release); }
#endif

#define LC_ALLOC_MIN ((size_t)256 << 10)   /* smaller blocks are not cached */
#define LC_ALLOC_SLOTS 512
#define LC_ALLOC_HDR 64
#define LC_ALLOC_TAG 0x6c7574636f726531ull  /* "lutcore1" */

typedef struct { size_t cap; size_t len; uint64_t tag; } lc_blk_hdr;   /* cap 0: not cached; len: bytes asked */

typedef struct {
    size_t limit;                  /* bytes the cache may hold */
    size_t held;                   /* bytes it holds */
    int n;                         /* cached blocks, oldest first */
    void *blk[LC_ALLOC_SLOTS];     /* header addresses */
    size_t hits, misses;
} lc_alloc_cache;

static lc_alloc_cache lc_cache = {(size_t)2 << 30, 0, 0, {0}, 0, 0};

static inline size_t lc_alloc_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

/* Blocks of 4 MiB and more start on a 2 MiB boundary and ask for transparent
 * huge pages, as numpy's own allocator does for its large arrays: the kernels
 * walk rows a page or more apart (a scan row is 6 KiB), and with 4 KiB pages
 * every row is a TLB miss.  Elsewhere (or if the advice is refused) the block
 * is an ordinary one. */
#define LC_ALLOC_HUGE ((size_t)4 << 20)
static void *lc_blk_map(size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n >= LC_ALLOC_HUGE) {
        void *p = NULL;
        if (posix_memalign(&p, (size_t)2 << 20, n) != 0) return NULL;
        (void)madvise(p, n & ~(((size_t)2 << 20) - 1), MADV_HUGEPAGE);
        return p;
    }
#endif
    return lc_aligned_alloc(n);
}

/* a fresh block of capacity cap (header included in the mapping), or NULL */
static void *lc_blk_new(size_t cap) {
    void *h = lc_blk_map(LC_ALLOC_HDR + cap);
    if (!h) return NULL;
    lc_blk_hdr *hd = (lc_blk_hdr *)h;
    hd->cap = cap;
    hd->tag = LC_ALLOC_TAG;
    return (char *)h + LC_ALLOC_HDR;
}

/* data pointer of a cached block holding n bytes (recycled: *fresh = 0) */
static void *lc_blk_get(size_t n, int *fresh) {
    void *best = NULL;
    size_t bcap = 0;
    int bi = -1;
    lc_cache_lock();
    for (int i = 0; i < lc_cache.n; i++) {
        size_t cap = ((lc_blk_hdr *)lc_cache.blk[i])->cap;
        if (cap >= n && cap / 2 <= n && (bi < 0 || cap < bcap)) { bi = i; bcap = cap; }
    }
    if (bi >= 0) {
        best = lc_cache.blk[bi];
        memmove(lc_cache.blk + bi, lc_cache.blk + bi + 1, (size_t)(lc_cache.n - bi - 1) * sizeof(void *));
        lc_cache.n--;
        lc_cache.held -= bcap;
        lc_cache.hits++;
    } else {
        lc_cache.misses++;
    }
    lc_cache_unlock();
    if (best) {
        *fresh = 0;
        ((lc_blk_hdr *)best)->len = n;
        return (char *)best + LC_ALLOC_HDR;
    }
    *fresh = 1;
    void *p = lc_blk_new(lc_alloc_round(n));
    if (p) ((lc_blk_hdr *)((char *)p - LC_ALLOC_HDR))->len = n;
    return p;
}

/* give a block back: cached while the limit allows (oldest evicted) */
static void lc_blk_put(void *data) {
    void *h = (char *)data - LC_ALLOC_HDR;
    size_t cap = ((lc_blk_hdr *)h)->cap;
    void *evict[LC_ALLOC_SLOTS];
    int ne = 0;
    lc_cache_lock();
    if (cap > lc_cache.limit) {
        evict[ne++] = h;
    } else {
        while (lc_cache.n > 0 && (lc_cache.n == LC_ALLOC_SLOTS || lc_cache.held + cap > lc_cache.limit)) {
            void *o = lc_cache.blk[0];
            lc_cache.held -= ((lc_blk_hdr *)o)->cap;
            memmove(lc_cache.blk, lc_cache.blk + 1, (size_t)(lc_cache.n - 1) * sizeof(void *));
            lc_cache.n--;
            evict[ne++] = o;
        }
        lc_cache.blk[lc_cache.n++] = h;
        lc_cache.held += cap;
    }
    lc_cache_unlock();
    for (int i = 0; i < ne; i++) lc_aligned_free(evict[i]);
}

/* every allocation carries the header: small ones too, so free/realloc can tell */
static void *lc_am_malloc(void *ctx, size_t n) {
    (void)ctx;
    if (n < LC_ALLOC_MIN) {
        void *h = lc_aligned_alloc(LC_ALLOC_HDR + (n ? n : 1));
        if (!h) return NULL;
        ((lc_blk_hdr *)h)->cap = 0;                 /* 0: not cached */
        ((lc_blk_hdr *)h)->len = n;
        ((lc_blk_hdr *)h)->tag = LC_ALLOC_TAG;
        return (char *)h + LC_ALLOC_HDR;
    }
    int fresh;
    return lc_blk_get(n, &fresh);
}

static void *lc_am_calloc(void *ctx, size_t nelem, size_t elsize) {
    if (elsize && nelem > SIZE_MAX / elsize) return NULL;
    size_t n = nelem * elsize;
    if (n < LC_ALLOC_MIN) {
        void *p = lc_am_malloc(ctx, n);
        if (p) memset(p, 0, n);
        return p;
    }
    int fresh;
    void *p = lc_blk_get(n, &fresh);
    if (p) memset(p, 0, n);          /* fresh or recycled: mapped memory zeroes at memset speed */
    return p;
}

static void lc_am_free(void *ctx, void *p, size_t size) {
    (void)ctx;
    (void)size;
    if (!p) return;
    void *h = (char *)p - LC_ALLOC_HDR;
    if (((lc_blk_hdr *)h)->cap == 0) lc_aligned_free(h);
    else lc_blk_put(p);
}

static void *lc_am_realloc(void *ctx, void *p, size_t n) {
    if (!p) return lc_am_malloc(ctx, n);
    lc_blk_hdr *hd = (lc_blk_hdr *)((char *)p - LC_ALLOC_HDR);
    size_t cap = hd->cap, len = hd->len;
    if (cap && n <= cap && cap / 2 <= n) { hd->len = n; return p; }   /* still fits its block */
    void *q = lc_am_malloc(ctx, n);
    if (!q) return NULL;
    memcpy(q, p, len < n ? len : n);
    lc_am_free(ctx, p, 0);
    return q;
}

/* set the byte limit, freeing the oldest cached blocks until the cache fits it */
static void lc_alloc_set_limit(size_t limit) {
    void *evict[LC_ALLOC_SLOTS];
    int ne = 0;
    lc_cache_lock();
    lc_cache.limit = limit;
    while (lc_cache.n > 0 && lc_cache.held > limit) {
        void *o = lc_cache.blk[0];
        lc_cache.held -= ((lc_blk_hdr *)o)->cap;
        memmove(lc_cache.blk, lc_cache.blk + 1, (size_t)(lc_cache.n - 1) * sizeof(void *));
        lc_cache.n--;
        evict[ne++] = o;
    }
    lc_cache_unlock();
    for (int i = 0; i < ne; i++) lc_aligned_free(evict[i]);
}

static void lc_alloc_trim(void) {          /* free every cached block */
    void *all[LC_ALLOC_SLOTS];
    int n;
    lc_cache_lock();
    n = lc_cache.n;
    memcpy(all, lc_cache.blk, (size_t)n * sizeof(void *));
    lc_cache.n = 0;
    lc_cache.held = 0;
    lc_cache_unlock();
    for (int i = 0; i < n; i++) lc_aligned_free(all[i]);
}

#endif /* LUTCORE_ALLOC_H */
