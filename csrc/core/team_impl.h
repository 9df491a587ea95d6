/* csrc/core/team_impl.h — lutcore's thread team (the body of core/team.h's lc_team_for).
 * Included by lutcore/_native/_cpu.pyx only: one team per process, bound into every other
 * module through a capsule (lutcore._native._cpu.team_capsule).
 *
 * A job: n work units, fn(ctx, u, tid).  The caller publishes it (one 64-bit word: the job's
 * generation and the units left to claim), wakes the workers it needs that sleep, and claims
 * units itself like any worker; a unit is claimed by a compare-and-swap on that word, so a
 * thread that comes late (the OS ran another process on its core) finds nothing left and
 * holds back nothing.  The call returns when the count of units done reaches n: it waits only
 * for units being computed, never for a thread to arrive.
 *
 * Waiting, tuned to lutcore's call pattern (kernels back to back with a little Python
 * between them):
 *   - a worker that finds no unit spins on its own slot for at most its budget (at rest
 *     spin_ns, default 100 µs, LUTCORE_TEAM_SPIN_US; grown up to 5 x that when jobs come in
 *     gaps a little longer, see lc_team_worker), so the next kernel of a forward pass finds it
 *     awake; then it sleeps on a futex (a condition variable off Linux) until a caller wakes it;
 *   - the caller, its units done, spins for the others' at most spin_ns, then sleeps;
 *   - contention: a spinning thread that sees a gap in its own clock (it was descheduled:
 *     another process wants this core) stops spinning, and every thread of the team sleeps
 *     at once instead of spinning for quiet_ns (20 ms) after it: a thread that spins looks
 *     like a CPU hog to the scheduler, and a hog is what waits when cores are short.
 * So after a call returns, lutcore burns at most 5 x spin_ns (0.5 ms) of CPU per worker.
 *
 * Fork: the child has no workers (pthread_atfork resets the team; the child's first job
 * starts new ones).  Workers block every signal (Ctrl-C goes to the caller's thread).
 */
#ifndef LUTCORE_TEAM_IMPL_H
#define LUTCORE_TEAM_IMPL_H

#include "core/team.h"

#if defined(__unix__) || defined(__APPLE__)
#define LC_TEAM_POSIX 1
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <errno.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <limits.h>
#endif
#else
#define LC_TEAM_POSIX 0
#endif

#if LC_TEAM_POSIX

#define LC_TEAM_MAX 4096

#define LC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define LC_LOAD_SC(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define LC_STORE_SC(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

static inline void lc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t lc_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A 32-bit word one thread sleeps on while it holds `val`, and the wake-up. */
typedef struct {
    uint32_t word;
#if !defined(__linux__)
    pthread_mutex_t mu;
    pthread_cond_t cv;
#endif
} lc_waitword;

static void lc_ww_init(lc_waitword *w) {
    w->word = 0;
#if !defined(__linux__)
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
#endif
}

static void lc_ww_wait(lc_waitword *w, uint32_t val) {
#if defined(__linux__)
    syscall(SYS_futex, &w->word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    pthread_mutex_lock(&w->mu);
    while (LC_LOAD_SC(&w->word) == val) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
#endif
}

static void lc_ww_wake(lc_waitword *w) {
#if defined(__linux__)
    syscall(SYS_futex, &w->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
#endif
}

/* One worker's slot, a cache line of its own: the generation of the last job it was given
 * (it sleeps on it) and whether it sleeps. */
typedef struct {
    lc_waitword gen;
    int sleeping;
} __attribute__((aligned(64))) lc_slot;

typedef struct {
    uint64_t state __attribute__((aligned(64)));  /* generation << 32 | units left to claim */
    lc_waitword done __attribute__((aligned(64)));  /* units done of this job (the caller sleeps on it) */
    int caller_sleeping;
    /* the job (written by the caller before it publishes state, read after a claim) */
    lc_unit_fn fn;
    void *ctx;
    int64_t n;
    int nthreads;
    uint32_t gen;
    int nworkers;               /* started so far (ids 1..nworkers) */
    int spawn_failed;
    int64_t spin_ns, quiet_ns;  /* a worker's spin budget at rest; the quiet time after contention */
    int64_t pub_ns;             /* when the current job was published (a worker's gap: from its idle start) */
    int64_t quiet_until;        /* no thread spins before this time (contention seen) */
    pthread_mutex_t lock;       /* one caller at a time; a second caller runs its units alone */
    /* counters for tests and benchmarks */
    uint64_t jobs, units_workers, worker_sleeps, caller_sleeps, contended, serial_busy;
    lc_slot slots[LC_TEAM_MAX];
} lc_team_t;

static lc_team_t lc_team;
static int lc_team_ready = 0;

/* Spin while *p == val for at most budget ns; 1 if it changed.  A gap between two looks at the
 * clock far longer than the spin between them means the thread was descheduled: contention —
 * the team stops spinning for quiet_ns. */
static int lc_team_spin(uint32_t *p, uint32_t val, int64_t budget) {
    if (budget <= 0) return LC_LOAD(p) != val;
    int64_t t0 = lc_now_ns(), last = t0;
    if (t0 < LC_LOAD(&lc_team.quiet_until)) return LC_LOAD(p) != val;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (LC_LOAD(p) != val) return 1;
            lc_cpu_relax();
        }
        int64_t t = lc_now_ns();
        if (t - last > 50000) {   /* 64 pauses take a few µs: this thread lost its core */
            __atomic_add_fetch(&lc_team.contended, 1, __ATOMIC_RELAXED);
            LC_STORE(&lc_team.quiet_until, t + lc_team.quiet_ns);
            return LC_LOAD(p) != val;
        }
        if (t - t0 > budget) return LC_LOAD(p) != val;
        last = t;
    }
}

/* Claim and run units of job `gen` as thread `id` until none is left. */
static void lc_team_work(int id, uint32_t gen) {
    for (;;) {
        uint64_t s = LC_LOAD(&lc_team.state);
        uint32_t left = (uint32_t)s;
        if ((uint32_t)(s >> 32) != gen || left == 0) return;
        if (id >= __atomic_load_n(&lc_team.nthreads, __ATOMIC_RELAXED)) return;
        if (!__atomic_compare_exchange_n(&lc_team.state, &s, s - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        /* claimed: the job cannot end before this unit is done, so its fields are this job's */
        int64_t n = lc_team.n;
        lc_team.fn(lc_team.ctx, n - (int64_t)left, id);
        if (id) __atomic_add_fetch(&lc_team.units_workers, 1, __ATOMIC_RELAXED);
        uint32_t d = __atomic_add_fetch(&lc_team.done.word, 1, __ATOMIC_SEQ_CST);
        if (d == (uint32_t)n && LC_LOAD_SC(&lc_team.caller_sleeping)) lc_ww_wake(&lc_team.done);
    }
}

/* A worker's spin adapts to the gaps between jobs, as a hypervisor's halt polling does: a
 * worker that went to sleep and was woken by a job published less than LC_TEAM_SPIN_GROW
 * budgets after it fell idle would have been awake had it spun that long, so its budget grows
 * to 1.5 x that gap (at most LC_TEAM_SPIN_GROW x the resting budget, 0.5 ms by default); a job
 * that comes later, after a sleep, puts it back to rest.  Kernels called with a little Python
 * or a torch op between them (0.1-0.5 ms) then find the worker awake instead of paying a
 * wake-up each (measured: a 0.05 ms kernel at 2 threads ran 1.05-1.3x its 1-thread time with
 * the fixed 0.1 ms budget).  Contention still stops every spin (lc_team_spin). */
#define LC_TEAM_SPIN_GROW 5

static void *lc_team_worker(void *arg) {
    int id = (int)(intptr_t)arg;
    lc_slot *me = &lc_team.slots[id];
    uint32_t seen = LC_LOAD(&me->gen.word);
    int64_t spin = lc_team.spin_ns;
    for (;;) {
        int64_t idle0 = lc_now_ns(), rest = lc_team.spin_ns, most = LC_TEAM_SPIN_GROW * rest;
        if (spin > most) spin = most;
        if (!lc_team_spin(&me->gen.word, seen, spin)) {
            LC_STORE_SC(&me->sleeping, 1);
            while (LC_LOAD_SC(&me->gen.word) == seen) {
                __atomic_add_fetch(&lc_team.worker_sleeps, 1, __ATOMIC_RELAXED);
                lc_ww_wait(&me->gen, seen);
            }
            LC_STORE_SC(&me->sleeping, 0);
            int64_t gap = LC_LOAD(&lc_team.pub_ns) - idle0;
            spin = gap < most ? gap + gap / 2 : rest;
            if (spin < rest) spin = rest;
        }
        seen = LC_LOAD(&me->gen.word);
        lc_team_work(id, seen);
    }
    return NULL;
}

/* Start workers up to id want (they begin asleep-or-spinning on their slot's current gen). */
static void lc_team_grow(int want) {
    if (want > LC_TEAM_MAX - 1) want = LC_TEAM_MAX - 1;
    if (lc_team.spawn_failed || want <= lc_team.nworkers) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    size_t st = 0;
    pthread_attr_getstacksize(&attr, &st);
    if (st < ((size_t)8 << 20)) pthread_attr_setstacksize(&attr, (size_t)8 << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (lc_team.nworkers < want) {
        pthread_t t;
        int id = lc_team.nworkers + 1;
        if (pthread_create(&t, &attr, lc_team_worker, (void *)(intptr_t)id) != 0) {
            lc_team.spawn_failed = 1;   /* run with the threads there are */
            break;
        }
        lc_team.nworkers = id;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void lc_team_serial(int64_t n, lc_unit_fn fn, void *ctx) {
    for (int64_t u = 0; u < n; u++) fn(ctx, u, 0);
}

/* One job of at most 2^31 units on the team (the caller holds the lock). */
static void lc_team_job(int nthreads, int64_t n, lc_unit_fn fn, void *ctx) {
    lc_team_grow(nthreads - 1);
    if (nthreads > lc_team.nworkers + 1) nthreads = lc_team.nworkers + 1;
    if (nthreads <= 1) {
        lc_team_serial(n, fn, ctx);
        return;
    }
    uint32_t gen = lc_team.gen + 1;
    if (gen == 0) gen = 1;
    lc_team.gen = gen;
    lc_team.fn = fn;
    lc_team.ctx = ctx;
    lc_team.n = n;
    __atomic_store_n(&lc_team.nthreads, nthreads, __ATOMIC_RELAXED);
    __atomic_store_n(&lc_team.done.word, 0, __ATOMIC_RELAXED);
    lc_team.jobs++;
    LC_STORE(&lc_team.pub_ns, lc_now_ns());
    LC_STORE_SC(&lc_team.state, ((uint64_t)gen << 32) | (uint64_t)n);
    for (int i = 1; i < nthreads; i++) {
        lc_slot *s = &lc_team.slots[i];
        LC_STORE_SC(&s->gen.word, gen);
        if (LC_LOAD_SC(&s->sleeping)) lc_ww_wake(&s->gen);
    }
    lc_team_work(0, gen);
    /* the others' units: spin for them at most spin_ns (not while the team is quiet), then sleep */
    const uint32_t want = (uint32_t)n;
    int64_t t0 = lc_now_ns();
    while (LC_LOAD(&lc_team.done.word) != want) {
        for (int i = 0; i < 64 && LC_LOAD(&lc_team.done.word) != want; i++) lc_cpu_relax();
        int64_t t = lc_now_ns();
        if (t - t0 > lc_team.spin_ns || t < LC_LOAD(&lc_team.quiet_until)) break;
    }
    if (LC_LOAD(&lc_team.done.word) == want) return;
    LC_STORE_SC(&lc_team.caller_sleeping, 1);
    uint32_t d;
    while ((d = LC_LOAD_SC(&lc_team.done.word)) != want) {
        lc_team.caller_sleeps++;
        lc_ww_wait(&lc_team.done, d);
    }
    LC_STORE_SC(&lc_team.caller_sleeping, 0);
}

/* A job of more units than one job word counts: its units in slices, each a job. */
typedef struct { lc_unit_fn fn; void *ctx; int64_t base; } lc_team_slice;

static void lc_team_slice_unit(void *p, int64_t u, int tid) {
    lc_team_slice *s = (lc_team_slice *)p;
    s->fn(s->ctx, s->base + u, tid);
}

static void lc_team_run_impl(int nthreads, int64_t n, lc_unit_fn fn, void *ctx) {
    if (n <= 0) return;
    if (nthreads > n) nthreads = (int)n;
    if (nthreads <= 1 || !lc_team_ready) {
        lc_team_serial(n, fn, ctx);
        return;
    }
    if (pthread_mutex_trylock(&lc_team.lock) != 0) {
        /* the team is busy (another thread's call, or a unit calling a kernel): run alone */
        __atomic_add_fetch(&lc_team.serial_busy, 1, __ATOMIC_RELAXED);
        lc_team_serial(n, fn, ctx);
        return;
    }
    if (nthreads > LC_TEAM_MAX) nthreads = LC_TEAM_MAX;
    const int64_t most = (int64_t)1 << 30;
    if (n <= most) {
        lc_team_job(nthreads, n, fn, ctx);
    } else {
        for (int64_t base = 0; base < n; base += most) {
            lc_team_slice sl = {fn, ctx, base};
            lc_team_job(nthreads, n - base < most ? n - base : most, lc_team_slice_unit, &sl);
        }
    }
    pthread_mutex_unlock(&lc_team.lock);
}

static void lc_team_atfork_child(void) {
    /* the child has only the forking thread: no workers, the lock free */
    lc_team.nworkers = 0;
    lc_team.spawn_failed = 0;
    lc_team.caller_sleeping = 0;
    pthread_mutex_init(&lc_team.lock, NULL);
    for (int i = 0; i < LC_TEAM_MAX; i++) {
        lc_ww_init(&lc_team.slots[i].gen);
        lc_team.slots[i].sleeping = 0;
    }
    lc_ww_init(&lc_team.done);
    lc_team.state = 0;
    lc_team.gen = 0;
}

/* Set the team up once (the _cpu module's import); spin_us < 0: the default.  The workers a
 * default call uses (workers = the default thread count - 1) start now and go to sleep: a
 * thread started by a call begins on the caller's CPU, where the busy caller keeps it from
 * running until the scheduler moves it (milliseconds); one woken from sleep is placed on an
 * idle CPU. */
static void lc_team_init(int64_t spin_us, int workers) {
    if (lc_team_ready) return;
    pthread_mutex_init(&lc_team.lock, NULL);
    for (int i = 0; i < LC_TEAM_MAX; i++) lc_ww_init(&lc_team.slots[i].gen);
    lc_ww_init(&lc_team.done);
    lc_team.spin_ns = (spin_us < 0 ? 100 : spin_us) * 1000;
    lc_team.quiet_ns = 20 * 1000000;
    pthread_atfork(NULL, NULL, lc_team_atfork_child);
    lc_team_ready = 1;
    if (workers > 0) lc_team_grow(workers);
}

static void lc_team_set_spin(int64_t spin_us) { lc_team.spin_ns = spin_us * 1000; }

/* The team's self-test (tests/native/test_team.py): unit u counts its runs into count[u]
 * and writes its thread into tid[u]; nested: each unit runs an inner loop of 3 units through
 * lc_team_for (the team is the outer loop's: the inner one runs alone). */
typedef struct { int32_t *count, *tid, *inner; int nested, nthreads; int64_t work_ns; } lc_team_test_ctx;

static void lc_team_test_inner(void *p, int64_t u, int tid) {
    int32_t *inner = (int32_t *)p;
    (void)u;
    (void)tid;
    __atomic_add_fetch(inner, 1, __ATOMIC_RELAXED);
}

static void lc_team_test_unit(void *p, int64_t u, int tid) {
    lc_team_test_ctx *c = (lc_team_test_ctx *)p;
    __atomic_add_fetch(&c->count[u], 1, __ATOMIC_RELAXED);
    c->tid[u] = tid;
    if (c->work_ns > 0) {
        int64_t t0 = lc_now_ns();
        while (lc_now_ns() - t0 < c->work_ns) lc_cpu_relax();
    }
    if (c->nested) lc_team_run_impl(c->nthreads, 3, lc_team_test_inner, &c->inner[u]);
}

static void lc_team_selftest(int32_t *count, int32_t *tid, int32_t *inner, int64_t n, int nthreads, int nested,
                             int64_t work_us) {
    lc_team_test_ctx c = {count, tid, inner, nested, nthreads, work_us * 1000};
    lc_team_run_impl(nthreads, n, lc_team_test_unit, &c);
}

#else  /* no POSIX threads: lc_team_for's OpenMP loop */

static void lc_team_init(int64_t spin_us, int workers) { (void)spin_us; (void)workers; }
static void lc_team_set_spin(int64_t spin_us) { (void)spin_us; }
#define lc_team_run_impl NULL
static void lc_team_selftest(int32_t *count, int32_t *tid, int32_t *inner, int64_t n, int nthreads, int nested,
                             int64_t work_us) {
    (void)work_us; (void)count; (void)tid; (void)inner; (void)n; (void)nthreads; (void)nested;
}

#endif

#endif /* LUTCORE_TEAM_IMPL_H */
