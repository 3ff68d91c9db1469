/*
 * jarena: bump allocation for the jansson values of one parsed document (common/jarena.h).
 *
 * One address range is reserved at install (no memory behind it); chunks of CHUNK bytes,
 * aligned to CHUNK, are made usable as needed and reused through free lists, never given back
 * to the range. A chunk starts with its header (the arena it serves); the first chunk of an
 * arena also holds the arena. Freeing a block finds its arena from its address (rounded down
 * to the chunk) and counts one free; the arena's chunks return to the free lists after the
 * last one.
 *
 * The live count: while the arena is open its owner counts allocations in a plain field and
 * the atomic `live` holds OPEN minus the frees so far, so it cannot reach 0; jarena_end
 * subtracts OPEN minus the allocations, leaving the blocks still alive. Whoever brings it to 0
 * (jarena_end or a free, on any thread) releases the arena, exactly once.
 */
#include "jarena.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define JARENA_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JARENA_OFF 1
#endif
#endif

#define CHUNK ((size_t)64 << 10)
#define BIG ((size_t)16 << 10)          /* larger blocks are plain malloc */
#define ALIGN 16
#define KEEP_HOT 64                     /* free chunks kept as they are (4 MiB) */
#define OPEN (SIZE_MAX / 2)

struct chunk {
	struct jarena *a;
	struct chunk *next;
};

struct jarena {
	atomic_size_t live;
	size_t nalloc;                      /* blocks handed out (owner, while open) */
	char *p, *end;                      /* free space in the current chunk */
	struct chunk *chunks;
};

#define HDR ((sizeof(struct chunk) + ALIGN - 1) & ~(size_t)(ALIGN - 1))
#define ARENA_SZ ((sizeof(struct jarena) + ALIGN - 1) & ~(size_t)(ALIGN - 1))

/* Set once by jarena_install, read-only afterwards. */
static char *g_base;
static size_t g_size;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_top;                     /* next chunk never used (under g_mu) */
static struct chunk *g_hot, *g_cold;    /* free chunks: as left, and with pages dropped */
static size_t g_nhot;
static atomic_size_t g_alive;

static _Thread_local struct jarena *t_cur;

static struct chunk *chunk_get(void)
{
	struct chunk *c = NULL;
	bool fresh = false;
	pthread_mutex_lock(&g_mu);
	if (g_hot) {
		c = g_hot;
		g_hot = c->next;
		g_nhot--;
	} else if (g_cold) {
		c = g_cold;
		g_cold = c->next;
	} else if ((size_t)(g_base + g_size - g_top) >= CHUNK) {
		c = (struct chunk *)g_top;
		g_top += CHUNK;
		fresh = true;
	}
	pthread_mutex_unlock(&g_mu);
	if (fresh && mprotect(c, CHUNK, PROT_READ | PROT_WRITE) < 0) {
		/* not usable: lost from the range (only when the system refuses memory) */
		return NULL;
	}
	return c;
}

static void chunk_put(struct chunk *c)
{
	bool drop;
	pthread_mutex_lock(&g_mu);
	drop = g_nhot >= KEEP_HOT;
	if (!drop) {
		c->next = g_hot;
		g_hot = c;
		g_nhot++;
	}
	pthread_mutex_unlock(&g_mu);
	if (!drop)
		return;
	madvise(c, CHUNK, MADV_DONTNEED);   /* the pages go back; the chunk stays usable */
	pthread_mutex_lock(&g_mu);
	c->next = g_cold;
	g_cold = c;
	pthread_mutex_unlock(&g_mu);
}

static void release(struct jarena *a)
{
	struct chunk *c = a->chunks;   /* a lives in the last chunk of the list: read first */
	while (c) {
		struct chunk *next = c->next;
		chunk_put(c);
		c = next;
	}
	atomic_fetch_sub_explicit(&g_alive, 1, memory_order_relaxed);
}

static void *arena_malloc(size_t n)
{
	struct jarena *a = t_cur;
	if (!a || n > BIG)
		return malloc(n);
	n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if ((size_t)(a->end - a->p) < n) {
		struct chunk *c = chunk_get();
		if (!c)
			return malloc(n);
		c->a = a;
		c->next = a->chunks;
		a->chunks = c;
		a->p = (char *)c + HDR;
		a->end = (char *)c + CHUNK;
	}
	void *r = a->p;
	a->p += n;
	a->nalloc++;
	return r;
}

static void arena_free(void *p)
{
	if (!p)
		return;
	if ((uintptr_t)p - (uintptr_t)g_base >= g_size) {
		free(p);
		return;
	}
	struct chunk *c = (struct chunk *)((uintptr_t)p & ~(uintptr_t)(CHUNK - 1));
	struct jarena *a = c->a;
	if (atomic_fetch_sub_explicit(&a->live, 1, memory_order_acq_rel) == 1)
		release(a);
}

int jarena_install(void)
{
#ifdef JARENA_OFF
	(void)arena_malloc;   /* not installed: each value its own heap block for the sanitizer */
	(void)arena_free;
	return 0;
#else
	if (g_base)
		return 0;
	static const size_t sizes[] = { (size_t)16 << 30, (size_t)1 << 30, (size_t)64 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t want = sizes[i] + CHUNK;
		void *m = mmap(NULL, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			continue;
		uintptr_t b = ((uintptr_t)m + CHUNK - 1) & ~(uintptr_t)(CHUNK - 1);
		g_base = g_top = (char *)b;
		g_size = sizes[i];
		json_set_alloc_funcs(arena_malloc, arena_free);
		return 0;
	}
	return -1;
#endif
}

struct jarena *jarena_begin_for(size_t len)
{
	return len >= JARENA_MIN_DOC ? jarena_begin() : NULL;
}

struct jarena *jarena_begin(void)
{
	if (!g_base || t_cur)
		return NULL;
	struct chunk *c = chunk_get();
	if (!c)
		return NULL;
	struct jarena *a = (struct jarena *)((char *)c + HDR);
	c->a = a;
	c->next = NULL;
	a->chunks = c;
	a->p = (char *)a + ARENA_SZ;
	a->end = (char *)c + CHUNK;
	a->nalloc = 0;
	atomic_init(&a->live, OPEN);
	atomic_fetch_add_explicit(&g_alive, 1, memory_order_relaxed);
	t_cur = a;
	return a;
}

void jarena_end(struct jarena *a)
{
	if (!a)
		return;
	t_cur = NULL;
	size_t sub = OPEN - a->nalloc;
	if (atomic_fetch_sub_explicit(&a->live, sub, memory_order_acq_rel) == sub)
		release(a);
}

size_t jarena_alive(void)
{
	return atomic_load_explicit(&g_alive, memory_order_relaxed);
}
