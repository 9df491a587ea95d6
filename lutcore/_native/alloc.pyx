"""numpy data-memory handler over csrc/core/alloc.h (see lutcore._alloc)."""
from cpython.pycapsule cimport PyCapsule_New
from lutcore._native._common cimport *

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    ctypedef struct PyDataMemAllocator:
        void *ctx
        void *(*malloc)(void *, size_t) noexcept nogil
        void *(*calloc)(void *, size_t, size_t) noexcept nogil
        void *(*realloc)(void *, void *, size_t) noexcept nogil
        void (*free)(void *, void *, size_t) noexcept nogil
    ctypedef struct PyDataMem_Handler:
        char name[127]
        unsigned char version
        PyDataMemAllocator allocator
    object PyDataMem_SetHandler(object handler)

cdef extern from "core/alloc.h" nogil:
    ctypedef struct lc_alloc_cache:
        size_t limit
        size_t held
        int n
        size_t hits
        size_t misses
    lc_alloc_cache lc_cache
    size_t LC_ALLOC_MIN
    void *lc_am_malloc(void *, size_t) noexcept
    void *lc_am_calloc(void *, size_t, size_t) noexcept
    void *lc_am_realloc(void *, void *, size_t) noexcept
    void lc_am_free(void *, void *, size_t) noexcept
    void lc_cache_lock()
    void lc_cache_unlock()
    void lc_alloc_trim()
    void lc_alloc_set_limit(size_t limit)

cdef PyDataMem_Handler _handler
from libc.string cimport memset, strcpy
memset(_handler.name, 0, 127)
strcpy(_handler.name, b"lutcore_cache")
_handler.version = 1
_handler.allocator.ctx = NULL
_handler.allocator.malloc = lc_am_malloc
_handler.allocator.calloc = lc_am_calloc
_handler.allocator.realloc = lc_am_realloc
_handler.allocator.free = lc_am_free

HANDLER = PyCapsule_New(&_handler, "mem_handler", NULL)
MIN_BYTES = LC_ALLOC_MIN


def set_handler(handler):
    """Install ``handler`` (a numpy mem_handler capsule, or None for numpy's
    default) in the current context; returns the previous one."""
    return PyDataMem_SetHandler(handler)


def set_limit(size_t nbytes):
    """The cache's byte limit; the oldest cached blocks are freed until it fits."""
    lc_alloc_set_limit(nbytes)


def info():
    lc_cache_lock()
    d = {"cached_bytes": lc_cache.held, "cached_blocks": lc_cache.n, "limit_bytes": lc_cache.limit,
         "hits": lc_cache.hits, "misses": lc_cache.misses}
    lc_cache_unlock()
    return d


def trim():
    lc_alloc_trim()
