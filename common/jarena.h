/*
 * jarena: bump allocation for the jansson values of one parsed document (an answer).
 *
 * Reading a 7 KB answer makes ~1,200 small jansson allocations (one per value, hashtable
 * buckets, one per object member, the string copies) and freeing it as many frees; with
 * glibc most of them miss the per-thread cache. jarena_install() makes jansson allocate
 * through this module: between jarena_begin() and jarena_end() the values a thread creates
 * are carved from 64 KiB chunks of one reserved address range; any other allocation (other
 * threads, outside that window, blocks above 16 KiB) is plain malloc, so a pointer jansson
 * hands out to be released with free() (json_dumps) is still a malloc block.
 *
 * Safe whatever the code does with the values: an arena counts its live blocks and returns
 * its chunks only when the last of them is freed (jansson frees each value when its
 * reference count drops to 0), so a value kept with json_incref past the document keeps its
 * chunks. Frees may come from any thread (the count is atomic).
 *
 * Under AddressSanitizer jarena_install does nothing: every value stays its own heap block
 * and a use after free is reported as usual.
 */
#ifndef ARBITER_JARENA_H
#define ARBITER_JARENA_H

#include <stddef.h>

struct jarena;

/* Installs the arena allocator as jansson's (json_set_alloc_funcs): call once, before any
 * other thread uses jansson (a process's start). Blocks jansson allocated before stay valid
 * (they are freed with free()). Returns 0, or -1 when no address range could be reserved
 * (jansson then keeps malloc and jarena_begin returns NULL). */
int jarena_install(void);

/* Starts an arena: until jarena_end, this thread's jansson allocations come from it, so the
 * window should only read a document (json_dumps' text, which callers release with free(),
 * must not be made in it). Returns NULL (and nothing changes) when the allocator is not
 * installed, this thread has an arena open already, or the range is used up. */
struct jarena *jarena_begin(void);

/* Documents shorter than this many bytes of text are read without an arena: they hold few
 * values, and an arena keeps at least one 64 KiB chunk (its touched pages) for as long as any
 * of its values lives. With an arena for every answer, a worker holding 512 small judged
 * answers in flight grew from 32 to 40 MB of RSS (bench_judge.py). */
#define JARENA_MIN_DOC 4096

/* jarena_begin() for a document of `len` bytes of text, or NULL (plain malloc) when it is
 * shorter than JARENA_MIN_DOC. */
struct jarena *jarena_begin_for(size_t len);

/* Ends the window jarena_begin opened (a: its result; NULL does nothing). The arena lives
 * on until its last value is freed. */
void jarena_end(struct jarena *a);

/* Arenas alive in the process (opened, and not all of their values freed yet). */
size_t jarena_alive(void);

#endif
