/*
 * ackscript: acknowledging finished stream entries with one Lua script that
 * stops per entry on error. For each entry the copy comes first (the
 * dead-letter XADD to {prefix}:dead, or the release XADD back to
 * {prefix}:jobs), and only if Redis accepted it are the entry's XACK and XDEL
 * done. An entry whose copy fails stays pending and in the stream, so it is
 * retried (or reclaimed) instead of vanishing; the caller learns, entry by
 * entry, what happened. (A MULTI/EXEC block runs every command whatever the
 * earlier ones answered, so a failed dead-letter XADD there still acked and
 * deleted the entry.) The script checks the whole argument list before its
 * first write. No I/O here: argv building and reply parsing.
 */
#ifndef ARBITER_ACKSCRIPT_H
#define ARBITER_ACKSCRIPT_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* The script. KEYS: 1 the entries' stream ({prefix}:jobs, or the judge lane for jobs read
 * from it), 2 {prefix}:dead. ARGV: 1 the group, then per
 * entry: id, mode ("a" acknowledge, "d" dead-letter copy first, "r" release
 * copy to the entries' stream first), n, then n strings (field, value, ...).
 * Returns one element per entry: 1, or an error text ("copy: ..." / "ack: ...").
 * KEYS[2] is given only when an entry is dead-lettered (ackscript_argv). */
extern const char ackscript_lua[];

enum ackscript_mode { ACKSCRIPT_ACK = 'a', ACKSCRIPT_DEAD = 'd', ACKSCRIPT_RELEASE = 'r' };

/* One entry. f/flen: the copy's field/value strings (nf of them, even; borrowed; none
 * for ACKSCRIPT_ACK). */
struct ackscript_entry {
	const char *id;
	enum ackscript_mode mode;
	int nf;
	const char *const *f;
	const size_t *flen;
};

/* Builds the EVAL argument vector for entries e[0..n). Returns argc; *argv and
 * *lens are malloc'd (caller frees both; the strings stay borrowed, counts are
 * written into nbuf, which must hold n * 12 bytes and outlive the vector). */
int ackscript_argv(const char *k_jobs, const char *k_dead, const char *group,
                   const struct ackscript_entry *e, int n, char *nbuf,
                   const char ***argv, size_t **lens);

/* Reads the script's reply for n entries: errs[i] = NULL when entry i was copied
 * (if asked), acknowledged and deleted, else a reason (borrowed from reply, or
 * static). Returns 0, or -1 when the reply is not the script's (an error reply,
 * wrong shape: then every errs[i] is set to the same reason). */
int ackscript_parse(const redisReply *reply, int n, const char **errs);

#endif
