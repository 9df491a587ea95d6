/* csrc/core/team.h — the parallel loop every kernel family uses: lc_team_for.
 *
 * lc_team_for(nthreads, n, fn, ctx) runs fn(ctx, u, tid) for every work unit u in [0, n),
 * tid < nthreads naming the thread (its scratch), and returns when every unit is done.
 * Units go to threads dynamically, so a kernel's bits must not depend on which thread
 * computes which unit (every family's units are computed whole by one thread).
 *
 * The team is lutcore's own (csrc/core/team_impl.h, built into lutcore._native._cpu and
 * bound into every module at import: lc_team_bind).  Why not an OpenMP region: an OpenMP
 * region ends at a barrier every thread of the team must reach, so a thread that the OS
 * has not yet scheduled (another process holds its core) holds back the whole call even
 * when the others have done every unit; and libgomp's threads spin for milliseconds
 * between regions, which makes them look like CPU hogs to the scheduler, so it is exactly
 * those threads that wait.  Here the caller runs units itself, a thread that arrives late
 * finds none left and holds back nothing, and the call returns when the units are done.
 * See team_impl.h for the waiting policy (spin briefly, then sleep).
 *
 * Unbound (a module not loaded through lutcore._native, or no threads on this platform) the
 * loop is an OpenMP dynamic loop, or serial without OpenMP: the same units, the same bits.
 */
#ifndef LUTCORE_TEAM_H
#define LUTCORE_TEAM_H

#include "core/common.h"

typedef void (*lc_unit_fn)(void *ctx, int64_t u, int tid);
typedef void (*lc_team_run_fn)(int nthreads, int64_t n, lc_unit_fn fn, void *ctx);

/* The team's entry point in lutcore._native._cpu, once bound (per module: each extension
 * is its own translation unit). */
static lc_team_run_fn lc_team_run_bound = NULL;

static inline void lc_team_bind(void *p) { lc_team_run_bound = (lc_team_run_fn)p; }
static inline int lc_team_is_bound(void) { return lc_team_run_bound != NULL; }

static inline void lc_team_for(int nthreads, int64_t n, lc_unit_fn fn, void *ctx) {
    if (n <= 0) return;
    if (nthreads > n) nthreads = (int)n;
    if (nthreads <= 1) {
        for (int64_t u = 0; u < n; u++) fn(ctx, u, 0);
        return;
    }
    if (lc_team_run_bound) {
        lc_team_run_bound(nthreads, n, fn, ctx);
        return;
    }
    LC_PRAGMA(omp parallel for schedule(dynamic, 1) num_threads(nthreads))
    for (int64_t u = 0; u < n; u++) fn(ctx, u, omp_get_thread_num());
}

/* A loop over n independent items in ranges: fn(ctx, i0, i1, tid) for consecutive ranges
 * covering [0, n), each at least `grain` items (the last may be shorter), at most 4 per
 * thread (so a thread that comes late leaves a quarter of its share, not all of it, to the
 * others).  Only for items whose results do not depend on the range they fall in. */
typedef void (*lc_range_fn)(void *ctx, int64_t i0, int64_t i1, int tid);
typedef struct { lc_range_fn fn; void *ctx; int64_t n, nunits; } lc_team_range_job;

static void lc_team_range_unit(void *p, int64_t u, int tid) {
    const lc_team_range_job *j = (const lc_team_range_job *)p;
    int64_t i0 = j->n / j->nunits * u + (u < j->n % j->nunits ? u : j->n % j->nunits);
    int64_t i1 = i0 + j->n / j->nunits + (u < j->n % j->nunits ? 1 : 0);
    j->fn(j->ctx, i0, i1, tid);
}

static inline void lc_team_range(int nthreads, int64_t n, int64_t grain, lc_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t nunits = (n + grain - 1) / grain, most = 4 * (int64_t)(nthreads > 1 ? nthreads : 1);
    if (nunits > most) nunits = most;
    if (nthreads <= 1 || nunits <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    lc_team_range_job j = {fn, ctx, n, nunits};
    lc_team_for(nthreads, nunits, lc_team_range_unit, &j);
}

#endif /* LUTCORE_TEAM_H */
