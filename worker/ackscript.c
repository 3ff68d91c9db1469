/* Per-entry acknowledgement script; see ackscript.h. */
#include "ackscript.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

const char ackscript_lua[] =
	"-- arbiter: copy (dead-letter / release), then XACK + XDEL, entry by entry\n"
	"local recs = {}\n"
	"local i = 2\n"
	"while i <= #ARGV do\n"
	"  local mode, n = ARGV[i + 1], tonumber(ARGV[i + 2])\n"
	"  if (mode ~= 'a' and mode ~= 'd' and mode ~= 'r') or n == nil or n < 0 or n > 400\n"
	"      or n % 2 ~= 0 or i + 2 + n > #ARGV or (mode ~= 'a' and n == 0) then\n"
	"    return redis.error_reply('ackscript: malformed arguments at ' .. i)\n"
	"  end\n"
	"  recs[#recs + 1] = {ARGV[i], mode, i + 3, n}\n"
	"  i = i + 3 + n\n"
	"end\n"
	"local out = {}\n"
	"for _, r in ipairs(recs) do\n"
	"  local id, mode, first, n = r[1], r[2], r[3], r[4]\n"
	"  local res = 1\n"
	"  if mode ~= 'a' then\n"
	"    local f = {}\n"
	"    for k = 0, n - 1 do f[k + 1] = ARGV[first + k] end\n"
	"    local target = KEYS[1]\n"
	"    if mode == 'd' then target = KEYS[2] end\n"
	"    local x = redis.pcall('XADD', target, '*', unpack(f))\n"
	"    if type(x) == 'table' and x.err then res = 'copy: ' .. x.err end\n"
	"  end\n"
	"  if res == 1 then\n"
	"    local a = redis.pcall('XACK', KEYS[1], ARGV[1], id)\n"
	"    if type(a) == 'table' and a.err then\n"
	"      res = 'ack: ' .. a.err\n"
	"    else\n"
	"      redis.pcall('XDEL', KEYS[1], id)\n"
	"    end\n"
	"  end\n"
	"  out[#out + 1] = res\n"
	"end\n"
	"return out\n";

int ackscript_argv(const char *k_jobs, const char *k_dead, const char *group,
                   const struct ackscript_entry *e, int n, char *nbuf,
                   const char ***argv, size_t **lens)
{
	size_t max = 6;
	for (int i = 0; i < n; i++)
		max += 3 + (size_t)(e[i].nf > 0 ? e[i].nf : 0);
	const char **a = xcalloc(max, sizeof *a);
	size_t *l = xcalloc(max, sizeof *l);
	int c = 0;
#define PUSH(s, len) do { a[c] = (s); l[c] = (len); c++; } while (0)
	PUSH("EVAL", 4);
	PUSH(ackscript_lua, strlen(ackscript_lua));
	/* The dead-letter stream is named only when an entry goes there: a Cluster node
	 * importing our slot runs a multi-key script only if every key it names exists
	 * there, and {prefix}:dead does not exist until something is dead-lettered. */
	bool dead = false;
	for (int i = 0; i < n; i++)
		dead = dead || e[i].mode == ACKSCRIPT_DEAD;
	PUSH(dead ? "2" : "1", 1);
	PUSH(k_jobs, strlen(k_jobs));
	if (dead)
		PUSH(k_dead, strlen(k_dead));
	PUSH(group, strlen(group));
	for (int i = 0; i < n; i++) {
		static const char modes[] = { 'a', 'd', 'r' };
		const char *m = e[i].mode == ACKSCRIPT_DEAD ? &modes[1]
		              : e[i].mode == ACKSCRIPT_RELEASE ? &modes[2] : &modes[0];
		int nf = e[i].mode == ACKSCRIPT_ACK || e[i].nf < 0 ? 0 : e[i].nf;
		char *num = nbuf + (size_t)i * 12;
		snprintf(num, 12, "%d", nf);
		PUSH(e[i].id, strlen(e[i].id));
		PUSH(m, 1);
		PUSH(num, strlen(num));
		for (int k = 0; k < nf; k++)
			PUSH(e[i].f[k], e[i].flen ? e[i].flen[k] : strlen(e[i].f[k]));
	}
#undef PUSH
	*argv = a;
	*lens = l;
	return c;
}

int ackscript_parse(const redisReply *reply, int n, const char **errs)
{
	const char *why = NULL;
	if (!reply)
		why = "no reply";
	else if (reply->type == REDIS_REPLY_ERROR)
		why = reply->str;
	else if (reply->type != REDIS_REPLY_ARRAY || reply->elements != (size_t)n)
		why = "unexpected reply to the acknowledgement script";
	if (why) {
		for (int i = 0; i < n; i++)
			errs[i] = why;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const redisReply *x = reply->element[i];
		if (x->type == REDIS_REPLY_INTEGER && x->integer == 1)
			errs[i] = NULL;
		else if (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS ||
		         x->type == REDIS_REPLY_ERROR)
			errs[i] = x->str;
		else
			errs[i] = "unexpected element in the acknowledgement reply";
	}
	return 0;
}
