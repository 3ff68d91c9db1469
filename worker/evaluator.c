/*
 * The test-suite and custom-script evaluators (worker/README.md "Sandbox") on top of the
 * sandbox. An evaluation is a small state machine driven by sandbox callbacks:
 *
 *   EV_COMPILE  the language has a compile step: one sandbox run that hands
 *               back the artifact (compilation_error ends the suite early)
 *   EV_CASES    test-suite: one sandbox run per case, one after another (a
 *               case re-queues behind other evaluations, so slots are shared
 *               fairly), each compared with the expected output
 *   EV_SCRIPT   custom-script: one run with the document of worker/README.md "Sandbox" on stdin;
 *               container: one run of an imported image (worker/image.h) with the
 *               submission in /submission, its scores read from /output/score.json
 *   EV_DONE     the callback ran; the evaluation waits for its timer to close
 *
 * The language table (deploy/languages.json) is compiled in as the default;
 * the configured file replaces it. A sandbox_pool owns the table and the
 * sandbox (its slots bound concurrency).
 */
#include "evaluator.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "languages_default.h"
#include "log.h"
#include "rubric.h"
#include "sandbox.h"
#include "score.h"
#include "spec.h"
#include "util.h"

#define EV_MAX_FILES 256
#define EV_MAX_FILES_BYTES (16u << 20)
/* A compiled program is held in the worker for the whole evaluation, and a few bytes of
 * source can make the compiler emit megabytes (a large initialised array, an assembler
 * .skip): keep the amplification small. */
#define EV_MAX_ARTIFACT_MIB 16
#define EV_MAX_ARTIFACT (EV_MAX_ARTIFACT_MIB * 1048576u)
#define EV_STR_(x) #x
#define EV_STR(x) EV_STR_(x)
#define EV_COMPILE_OUTPUT_KEEP 8192
/* A custom script's own score channel: a file in its working directory that the submission
 * cannot write into (stdout, the weaker form, carries whatever the script echoes). */
#define EV_SCORE_FILE "score.json"
#define EV_SCORE_FILE_MAX (64u << 10)
#define EV_ERR_EXCERPT 300

struct lang {
	char *name;
	char *entry;
	char **compile;          /* NULL-terminated, or NULL */
	char *artifact;          /* with compile */
	char **run;              /* NULL-terminated */
	int extra_processes;     /* tasks the runtime itself needs (threads) */
	uint64_t stack_bytes;    /* RLIMIT_STACK for its runs; 0: the sandbox default */
	struct sandbox_limits compile_lim;
};

struct sandbox_pool {
	uv_loop_t *loop;
	struct sandbox *sb;
	struct lang *langs;
	size_t nlangs;
	int active;                /* evaluations not yet freed */
	char image_dir[4096];      /* the image store (ARBITER_IMAGE_DIR) */
	struct container_limits ct_max;   /* what a container spec may ask for (ARBITER_CONTAINER_MAX_*) */
};

enum ev_state { EV_COMPILE, EV_CASES, EV_SCRIPT, EV_DONE };
enum ev_kind { EV_SUITE, EV_CUSTOM };
enum cmp_mode { CMP_EXACT, CMP_TRIM, CMP_NUMERIC };

enum verdict {
	V_ACCEPTED, V_WRONG_ANSWER, V_RUNTIME_ERROR, V_OUTPUT_LIMIT, V_MEMORY_LIMIT, V_TIME_LIMIT,
	V_COMPILATION_ERROR, V_INTERNAL_ERROR,
};
static const char *const verdict_names[] = {
	"accepted", "wrong_answer", "runtime_error", "output_limit_exceeded",
	"memory_limit_exceeded", "time_limit_exceeded", "compilation_error", "internal_error",
};

struct case_result {
	enum verdict v;
	bool ran;
	uint64_t cpu_ms, wall_ms, memory_kb;
	bool exited;
	int exit_code, signal;
};

struct ev {
	struct sandbox_pool *sp;
	const struct spec *spec;
	eval_cb *cb;
	void *data;
	enum ev_kind kind;
	enum ev_state state;
	const struct lang *lang;
	uv_timer_t timer;           /* delivers early outcomes asynchronously */
	/* the program's files (owned) */
	struct sandbox_file *files;
	size_t nfiles;
	char *artifact;
	size_t artifact_len;
	struct sandbox_file *run_files;   /* files + artifact, for the runs */
	size_t nrun_files;
	bool has_compile;
	bool compile_failed;
	struct strbuf compile_output;
	/* test-suite */
	const json_t *cases;        /* borrowed from the spec */
	size_t ncases, next;
	struct case_result *results;
	enum cmp_mode cmp;
	const char *tol;            /* numeric:TOL, the decimal text */
	struct sandbox_limits lim;
	char *dim_key;
	/* custom-script */
	bool too_deep;              /* the answer nests too deep: not given to the script */
	char *stdin_doc;
	size_t stdin_len;
	/* outcome */
	bool failed;
	char err[512];
	struct sandbox_req req;     /* the run in flight (borrowed by the sandbox) */
	/* container */
	bool container;
	bool image_missing;         /* the store lacks the image: EVALUATOR_IMAGE_MISSING */
	uv_work_t open_work;        /* image_open on the thread pool */
	int open_rc;
	char open_err[600];
	char *digest;               /* the spec's image (a copy: the thread reads no spec) */
	json_t *ct_warnings;        /* limits the spec asked above the maxima (owned), or NULL */
	struct image *image;
	char **argv, **envv;        /* NULL-terminated, owned */
	char *path;                 /* the PATH of envv */
};

/* ======================================================================================
 * The language table
 * ==================================================================================== */

static void lang_clear(struct lang *l)
{
	free(l->name);
	free(l->entry);
	free(l->artifact);
	for (char **p = l->compile; p && *p; p++)
		free(*p);
	free(l->compile);
	for (char **p = l->run; p && *p; p++)
		free(*p);
	free(l->run);
	memset(l, 0, sizeof *l);
}

static void langs_free(struct lang *langs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lang_clear(&langs[i]);
	free(langs);
}

static char **str_array(const json_t *a)
{
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 64)
		return NULL;
	char **v = xcalloc(json_array_size(a) + 1, sizeof *v);
	for (size_t i = 0; i < json_array_size(a); i++) {
		const json_t *s = json_array_get(a, i);
		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
			for (size_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return NULL;
		}
		v[i] = xstrdup(json_string_value(s));
	}
	return v;
}

static int lim_field(const json_t *o, const char *k, uint64_t max, uint64_t *out)
{
	const json_t *v = json_object_get(o, k);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) <= 0 || (uint64_t)json_integer_value(v) > max)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* Reads the limits object (worker/README.md "Sandbox") ({cpu_ms, wall_ms, memory_mb, processes, output_kb}) over the
 * defaults in *l, clamping to safe maxima. */
static int parse_limits(const json_t *o, struct sandbox_limits *l)
{
	if (!o)
		return 0;
	if (!json_is_object(o))
		return -1;
	uint64_t cpu = l->cpu_ms, wall = 0, mem = l->memory_bytes >> 20, procs = l->processes,
	         out = l->output_bytes >> 10;
	if (lim_field(o, "cpu_ms", 1u << 30, &cpu) < 0 || lim_field(o, "wall_ms", 1u << 30, &wall) < 0 ||
	    lim_field(o, "memory_mb", 1u << 30, &mem) < 0 ||
	    lim_field(o, "processes", 1u << 30, &procs) < 0 ||
	    lim_field(o, "output_kb", 1u << 30, &out) < 0)
		return -1;
	if (cpu > 60000)
		cpu = 60000;
	if (!wall)
		wall = json_object_get(o, "cpu_ms") ? cpu * 2 + 1000 : l->wall_ms;
	if (wall > 120000)
		wall = 120000;
	if (mem > 4096)
		mem = 4096;
	if (procs > 256)
		procs = 256;
	if (out > 65536)
		out = 65536;
	l->cpu_ms = (uint32_t)cpu;
	l->wall_ms = (uint32_t)wall;
	l->memory_bytes = mem << 20;
	l->processes = (uint32_t)procs;
	l->output_bytes = out << 10;
	return 0;
}

static int langs_parse(const char *text, size_t len, struct lang **out, size_t *nout,
                       char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root) {
		snprintf(err, errlen, "line %d, column %d: %s", je.line, je.column, je.text);
		return -1;
	}
	if (!json_is_object(root) || json_object_size(root) == 0) {
		snprintf(err, errlen, "the language table must be a non-empty JSON object");
		json_decref(root);
		return -1;
	}
	struct lang *langs = xcalloc(json_object_size(root), sizeof *langs);
	size_t n = 0;
	const char *name;
	json_t *v;
	json_object_foreach(root, name, v) {
		struct lang *l = &langs[n++];
		l->name = xstrdup(name);
		const json_t *entry = json_object_get(v, "entry");
		if (!json_is_object(v) || !json_is_string(entry) ||
		    !sandbox_path_ok(json_string_value(entry))) {
			snprintf(err, errlen, "language '%.64s': \"entry\" must be a relative file name", name);
			goto fail;
		}
		l->entry = xstrdup(json_string_value(entry));
		l->run = str_array(json_object_get(v, "run"));
		if (!l->run) {
			snprintf(err, errlen, "language '%.64s': \"run\" must be a non-empty array of strings",
			         name);
			goto fail;
		}
		const json_t *c = json_object_get(v, "compile");
		if (c) {
			l->compile = str_array(c);
			const json_t *a = json_object_get(v, "artifact");
			if (!l->compile || !json_is_string(a) || !sandbox_path_ok(json_string_value(a))) {
				snprintf(err, errlen, "language '%.64s': \"compile\" must be a non-empty array of "
				         "strings, with \"artifact\" the relative file it produces", name);
				goto fail;
			}
			l->artifact = xstrdup(json_string_value(a));
		}
		const json_t *x = json_object_get(v, "extra_processes");
		if (x && (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 256)) {
			snprintf(err, errlen, "language '%.64s': \"extra_processes\" must be 0..256", name);
			goto fail;
		}
		l->extra_processes = x ? (int)json_integer_value(x) : 0;
		const json_t *st = json_object_get(v, "stack_mb");
		if (st && (!json_is_integer(st) || json_integer_value(st) < 1 ||
		           json_integer_value(st) > 4096)) {
			snprintf(err, errlen, "language '%.64s': \"stack_mb\" must be 1..4096", name);
			goto fail;
		}
		l->stack_bytes = st ? (uint64_t)json_integer_value(st) << 20 : 0;
		l->compile_lim = (struct sandbox_limits){
			.cpu_ms = 10000, .wall_ms = 20000, .memory_bytes = 512u << 20, .processes = 32,
			.output_bytes = 64u << 10, .file_bytes = 64u << 20, .open_files = 256,
		};
		if (parse_limits(json_object_get(v, "compile_limits"), &l->compile_lim) < 0) {
			snprintf(err, errlen, "language '%.64s': bad \"compile_limits\"", name);
			goto fail;
		}
	}
	json_decref(root);
	*out = langs;
	*nout = n;
	return 0;
fail:
	json_decref(root);
	langs_free(langs, n);
	return -1;
}

static const struct lang *lang_find(const struct sandbox_pool *sp, const char *name)
{
	for (size_t i = 0; name && i < sp->nlangs; i++)
		if (!strcmp(sp->langs[i].name, name))
			return &sp->langs[i];
	return NULL;
}

/* ======================================================================================
 * Pool
 * ==================================================================================== */

#define DEFAULT_LANGUAGES_FILE "deploy/languages.json"

static int pool_new(uv_loop_t *loop, const struct config *cfg, struct sandbox_pool **out,
                    char *err, size_t errlen);

int sandbox_pool_new(uv_loop_t *loop, const struct config *cfg, struct sandbox_pool **out,
                     char *err, size_t errlen)
{
	*out = NULL;
	/* Without the worker's configuration (`arbiter score`), the same settings table read
	 * from the environment and ARBITER_CONFIG's file (deploy/README.md "Configuration"). */
	struct config own;
	bool own_cfg = !cfg;
	if (own_cfg) {
		static char *const argv[] = { "score", NULL };
		if (config_load(1, (char **)argv, &own, err, errlen) != 0)
			return -1;
		if (own.sandbox_uid_base && own.sandbox_uid_base < 1000) {
			snprintf(err, errlen, "ARBITER_SANDBOX_UID_BASE must be 0 or 1000..4000000000");
			config_free(&own);
			return -1;
		}
		cfg = &own;
	}
	int rc = pool_new(loop, cfg, out, err, errlen);
	if (own_cfg)
		config_free(&own);
	return rc;
}

static int pool_new(uv_loop_t *loop, const struct config *cfg, struct sandbox_pool **out,
                    char *err, size_t errlen)
{
	int slots = cfg->sandbox_slots;
	const char *file = cfg->languages_file;
	struct sandbox_pool *sp = xcalloc(1, sizeof *sp);
	sp->loop = loop;

	/* The language table: the configured file, else the built-in copy. The default path
	 * is relative to the repository; when it is not there the built-in copy is the same. */
	char lerr[256];
	char *text = NULL;
	size_t len = 0;
	const char *source = "built-in";
	if (file && *file) {
		FILE *f = fopen(file, "rb");
		if (f) {
			struct strbuf b = { 0 };
			char buf[8192];
			size_t n;
			while ((n = fread(buf, 1, sizeof buf, f)) > 0 && b.len < (1u << 20))
				strbuf_add(&b, buf, n);
			fclose(f);
			strbuf_addlit(&b, "");
			text = b.buf;
			len = b.len;
			source = file;
		} else if (strcmp(file, DEFAULT_LANGUAGES_FILE)) {
			snprintf(err, errlen, "language table %s: %s", file, strerror(errno));
			free(sp);
			return -1;
		}
	}
	int rc = text ? langs_parse(text, len, &sp->langs, &sp->nlangs, lerr, sizeof lerr)
	              : langs_parse(ARBITER_DEFAULT_LANGUAGES, strlen(ARBITER_DEFAULT_LANGUAGES),
	                            &sp->langs, &sp->nlangs, lerr, sizeof lerr);
	free(text);
	if (rc < 0) {
		snprintf(err, errlen, "language table %s: %s", source, lerr);
		free(sp);
		return -1;
	}
	struct sandbox_opts o = { .slots = slots };
	o.uid_base = (uint32_t)cfg->sandbox_uid_base;   /* 0 or 1000..4e9 (config_validate) */
	o.no_cgroups = cfg->sandbox_cgroup && !strcmp(cfg->sandbox_cgroup, "none");
	o.lock_dir = cfg->sandbox_lock_dir;
	o.no_cgroup_mount = cfg->sandbox_cgroup_mount && !strcmp(cfg->sandbox_cgroup_mount, "no");
	o.allow_unsafe_memory = cfg->sandbox_allow_unsafe_memory &&
	                        !strcmp(cfg->sandbox_allow_unsafe_memory, "1");
	if (sandbox_new(loop, &o, &sp->sb, err, errlen) < 0) {
		langs_free(sp->langs, sp->nlangs);
		free(sp);
		return -1;
	}
	struct image_opts io;
	image_opts_from_config(cfg, &io, sp->image_dir, sizeof sp->image_dir);
	evaluator_container_maxima(cfg, &sp->ct_max);
	LOGI(NULL, NULL, "evaluators: %zu languages from %s", sp->nlangs, source);
	*out = sp;
	return 0;
}

void sandbox_pool_free(struct sandbox_pool *sp)
{
	if (!sp)
		return;
	if (sp->active || sandbox_busy(sp->sb) || sandbox_queued(sp->sb)) {
		LOGE(NULL, NULL, "sandbox_pool_free with %d evaluations in progress: not freeing",
		     sp->active);
		if (sandbox_busy(sp->sb) || sandbox_queued(sp->sb))
			sandbox_free(sp->sb);   /* kills the runs, keeps the memory they use */
		return;
	}
	sandbox_free(sp->sb);
	langs_free(sp->langs, sp->nlangs);
	free(sp);
}

int sandbox_pool_busy(const struct sandbox_pool *sp)
{
	return sp ? sandbox_busy(sp->sb) : 0;
}

/* ======================================================================================
 * Output comparison
 * ==================================================================================== */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* trim: trailing whitespace of every line and trailing empty lines are ignored. */
static bool cmp_trim(const char *a, size_t na, const char *b, size_t nb)
{
	size_t i = 0, j = 0;
	for (;;) {
		/* the next line of each, without its trailing whitespace */
		size_t ea = i, eb = j;
		while (ea < na && a[ea] != '\n')
			ea++;
		while (eb < nb && b[eb] != '\n')
			eb++;
		size_t la = ea, lb = eb;
		while (la > i && is_space(a[la - 1]))
			la--;
		while (lb > j && is_space(b[lb - 1]))
			lb--;
		bool enda = i >= na, endb = j >= nb;
		if (enda || endb) {
			/* whatever is left on the other side must be blank */
			const char *r = enda ? b : a;
			size_t k = enda ? j : i, n = enda ? nb : na;
			for (; k < n; k++)
				if (!is_space(r[k]))
					return false;
			return true;
		}
		if (la - i != lb - j || memcmp(a + i, b + j, la - i))
			return false;
		i = ea + 1;
		j = eb + 1;
	}
}

/* A decimal token: [+-] digits [. digits] [e|E [+-] digits], at least one digit in the
 * mantissa, an exponent of at most 6 digits. Its value is 0.dig × 10^exp with dig its
 * significant digits (no leading or trailing zeros; none for zero). No hex, no inf/nan. */
struct dnum {
	bool neg;
	char *dig;       /* owned */
	size_t nd;
	long exp;
};

static bool dnum_parse(const char *s, size_t n, struct dnum *d)
{
	memset(d, 0, sizeof *d);
	size_t i = 0;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		d->neg = s[i++] == '-';
	d->dig = xmalloc(n + 1);
	size_t nint = 0, nfrac = 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		d->dig[d->nd++] = s[i++], nint++;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			d->dig[d->nd++] = s[i++], nfrac++;
	}
	long e = 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E') && nint + nfrac) {
		i++;
		bool eneg = false;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			eneg = s[i++] == '-';
		size_t k = 0;
		while (i < n && s[i] >= '0' && s[i] <= '9' && k < 7)
			e = e * 10 + (s[i++] - '0'), k++;
		if (k == 0 || k > 6)
			goto bad;
		if (eneg)
			e = -e;
	}
	if (i != n || nint + nfrac == 0)
		goto bad;
	d->exp = (long)nint + e;
	size_t lead = 0;
	while (lead < d->nd && d->dig[lead] == '0')
		lead++;
	memmove(d->dig, d->dig + lead, d->nd - lead);
	d->nd -= lead;
	d->exp -= (long)lead;
	while (d->nd && d->dig[d->nd - 1] == '0')
		d->nd--;
	if (!d->nd) {
		d->neg = false;
		d->exp = 0;
	}
	return true;
bad:
	free(d->dig);
	d->dig = NULL;
	return false;
}

/* Digit of |d| at the power of ten p. */
static int dnum_at(const struct dnum *d, long p)
{
	long i = d->exp - 1 - p;
	return d->nd && i >= 0 && (size_t)i < d->nd ? d->dig[i] - '0' : 0;
}

/* -1, 0, 1 as |a| <, =, > |b|, over the powers hi down to lo. */
static int mag_cmp(const signed char *a, const signed char *b, size_t n)
{
	for (size_t i = n; i-- > 0;)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* |x - y| <= tol, exactly. -1 when the numbers are too far apart in scale to line up
 * (more than a million decimal places between their digits). */
static int dnum_within(const struct dnum *x, const struct dnum *y, const struct dnum *tol)
{
	if (!tol->nd)   /* tolerance 0: the same value */
		return x->neg == y->neg && x->nd == y->nd && x->exp == y->exp &&
		       !memcmp(x->dig, y->dig, x->nd);
	const struct dnum *all[] = { x, y, tol };
	long hi = LONG_MIN, lo = LONG_MAX;
	for (int k = 0; k < 3; k++) {
		if (!all[k]->nd)
			continue;
		if (all[k]->exp > hi)
			hi = all[k]->exp;
		if (all[k]->exp - (long)all[k]->nd < lo)
			lo = all[k]->exp - (long)all[k]->nd;
	}
	if (hi - lo > (1L << 20))
		return -1;
	size_t n = (size_t)(hi - lo) + 2;   /* positions lo..hi, and a carry */
	signed char *a = xcalloc(n, 1), *b = xcalloc(n, 1), *t = xcalloc(n, 1), *r = xcalloc(n, 1);
	for (size_t i = 0; i < n; i++) {
		a[i] = (signed char)dnum_at(x, lo + (long)i);
		b[i] = (signed char)dnum_at(y, lo + (long)i);
		t[i] = (signed char)dnum_at(tol, lo + (long)i);
	}
	if (x->neg != y->neg && x->nd && y->nd) {   /* |x - y| = |x| + |y| */
		int c = 0;
		for (size_t i = 0; i < n; i++) {
			int v = a[i] + b[i] + c;
			r[i] = (signed char)(v % 10);
			c = v / 10;
		}
	} else {                                     /* ||x| - |y|| */
		const signed char *big = mag_cmp(a, b, n) >= 0 ? a : b, *small = big == a ? b : a;
		int br = 0;
		for (size_t i = 0; i < n; i++) {
			int v = big[i] - small[i] - br;
			br = v < 0;
			r[i] = (signed char)(v < 0 ? v + 10 : v);
		}
	}
	int rc = mag_cmp(r, t, n) <= 0;
	free(a);
	free(b);
	free(t);
	free(r);
	return rc;
}

bool evaluator_numeric_match(const char *a, size_t na, const char *b, size_t nb, const char *tol)
{
	struct dnum t;
	if (!tol || !dnum_parse(tol, strlen(tol), &t) || t.neg) {
		if (tol && t.dig)
			free(t.dig);
		t = (struct dnum){ 0 };
	}
	size_t i = 0, j = 0;
	bool match = true;
	for (;;) {
		while (i < na && is_space(a[i]))
			i++;
		while (j < nb && is_space(b[j]))
			j++;
		if (i >= na || j >= nb) {
			match = i >= na && j >= nb;
			break;
		}
		size_t ei = i, ej = j;
		while (ei < na && !is_space(a[ei]))
			ei++;
		while (ej < nb && !is_space(b[ej]))
			ej++;
		struct dnum x, y;
		int within = -1;
		if (dnum_parse(a + i, ei - i, &x)) {
			if (dnum_parse(b + j, ej - j, &y)) {
				within = dnum_within(&x, &y, &t);
				free(y.dig);
			}
			free(x.dig);
		}
		if (within == 0 ||
		    (within < 0 && (ei - i != ej - j || memcmp(a + i, b + j, ei - i)))) {
			match = false;
			break;
		}
		i = ei;
		j = ej;
	}
	free(t.dig);
	return match;
}

static bool outputs_match(const struct ev *e, const char *got, size_t ng, const char *want,
                          size_t nw)
{
	switch (e->cmp) {
	case CMP_EXACT:
		return ng == nw && !memcmp(got, want, ng);
	case CMP_NUMERIC:
		return evaluator_numeric_match(got, ng, want, nw, e->tol);
	case CMP_TRIM:
	default:
		return cmp_trim(got, ng, want, nw);
	}
}

/* ======================================================================================
 * The evaluation
 * ==================================================================================== */

static bool depth_ok(const json_t *v, int left)
{
	if ((json_is_array(v) || json_is_object(v)) && left <= 0)
		return false;
	const json_t *x;
	if (json_is_array(v)) {
		size_t i;
		json_array_foreach(v, i, x)
			if (!depth_ok(x, left - 1))
				return false;
	} else if (json_is_object(v)) {
		const char *k;
		json_object_foreach((json_t *)v, k, x)
			if (!depth_ok(x, left - 1))
				return false;
	}
	return true;
}

bool evaluator_depth_ok(const json_t *v, int max)
{
	return !v || depth_ok(v, max);
}

/* A copy of n bytes that may contain NUL (JSON strings can), NUL-terminated. */
static char *memdup(const char *p, size_t n)
{
	char *c = xmalloc(n + 1);
	memcpy(c, p, n);
	c[n] = 0;
	return c;
}

static void ev_free(struct ev *e)
{
	for (size_t i = 0; i < e->nfiles; i++) {
		free((char *)e->files[i].path);
		free((char *)e->files[i].data);
	}
	free(e->files);
	free(e->run_files);
	free(e->artifact);
	free(e->results);
	free(e->dim_key);
	free(e->stdin_doc);
	strbuf_free(&e->compile_output);
	image_free(e->image);
	for (char **p = e->argv; p && *p; p++)
		free(*p);
	free(e->argv);
	for (char **p = e->envv; p && *p; p++)
		free(*p);
	free(e->envv);
	free(e->path);
	free(e->digest);
	json_decref(e->ct_warnings);
	free(e);
}

static void on_ev_close(uv_handle_t *h)
{
	struct ev *e = h->data;
	e->sp->active--;
	ev_free(e);
}

static void ev_fail(struct ev *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ev_fail(struct ev *e, const char *fmt, ...)
{
	if (e->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->err, sizeof e->err, fmt, ap);
	va_end(ap);
	e->failed = true;
}

/* Makes s[0..n) valid UTF-8 without NUL in place (PostgreSQL's jsonb refuses \u0000,
 * jansson refuses invalid UTF-8): every byte of a bad sequence, and NUL, becomes '?'. */
static void utf8_sanitize(char *s, size_t n)
{
	unsigned char *p = (unsigned char *)s;
	size_t i = 0;
	while (i < n) {
		unsigned c = p[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		bool good = len > 0 && i + len <= n;
		for (size_t k = 1; good && k < len; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				good = false;
		if (good && len > 1) {
			uint32_t cp = c & (0x7f >> len);
			for (size_t k = 1; k < len; k++)
				cp = (cp << 6) | (p[i + k] & 0x3f);
			static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
			if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				good = false;
		}
		if (!good) {
			p[i++] = '?';
			continue;
		}
		if (c == 0)
			p[i] = '?';
		i += len;
	}
}

/* Appends an excerpt of a program's stderr to a message (printable ASCII only). */
static void excerpt(struct strbuf *sb, const char *s, size_t n, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k < max; i++, k++) {
		unsigned char c = (unsigned char)s[i];
		strbuf_addf(sb, "%c", c == '\n' ? ' ' : (c >= 32 && c < 127) ? (char)c : '?');
	}
	if (n > max)
		strbuf_addlit(sb, "...");
}

static int round_ratio(int64_t num, int64_t den)
{
	if (den <= 0 || num < 0)
		return 0;
	/* 1000 * num / den, half up, exact (128-bit: num and den reach 10^12 per case) */
	unsigned __int128 v = ((unsigned __int128)num * 2000 + (unsigned __int128)den) /
	                      ((unsigned __int128)den * 2);
	return v > 1000 ? 1000 : (int)v;
}

/* Case weights in micro-units, exactly as written; -1 outside the documented range (the
 * spec validation refuses those: a spec that bypassed it is the challenge's error). */
static int64_t weight_micro(const json_t *c)
{
	const json_t *w = json_object_get(c, "weight");
	if (!w)
		return 1000000;
	dec6 d;
	if (json_is_number(w) && dec_from_json(w, &d, NULL) == 0 && d >= SPEC_CASE_WEIGHT_MIN &&
	    d <= SPEC_CASE_WEIGHT_MAX)
		return d;
	return -1;
}

static void ev_complete(struct ev *e)
{
	e->state = EV_DONE;
	if (e->failed) {
		e->cb(e->image_missing ? EVALUATOR_IMAGE_MISSING : -1, NULL, e->err, e->data);
		goto out;
	}
	if (e->kind == EV_CUSTOM && e->too_deep) {
		/* The submission's doing: its external dimensions score 0, with a warning. */
		json_t *w = json_array();
		json_array_append_new(w, json_pack("{s:s, s:s, s:o}", "severity", "warning", "field",
		                                   "answer", "message",
		                                   json_sprintf("the answer nests deeper than %d levels: it "
		                                                "was not given to the scoring script, whose "
		                                                "dimensions score 0", EVALUATOR_MAX_DEPTH)));
		struct score_ext ext = { 0, NULL, NULL, NULL, w };
		e->cb(0, &ext, NULL, e->data);
		json_decref(w);
		goto out;
	}
	if (e->kind == EV_CUSTOM) {   /* the script's result is delivered by on_script */
		e->cb(-1, NULL, "custom-script evaluation ended without a result", e->data);
		goto out;
	}
	{
		int64_t total = 0, passed = 0;
		bool bad_weight = false;
		json_t *tests = json_array();
		for (size_t i = 0; i < e->ncases; i++) {
			const json_t *c = json_array_get(e->cases, i);
			const struct case_result *r = &e->results[i];
			int64_t w = weight_micro(c);
			if (w < 0 || __builtin_add_overflow(total, w, &total) ||
			    (r->v == V_ACCEPTED && __builtin_add_overflow(passed, w, &passed)))
				bad_weight = true;
			json_t *t = json_object();
			json_object_set_new(t, "name", json_string(json_string_value(json_object_get(c, "name"))));
			json_object_set_new(t, "verdict", json_string(verdict_names[r->v]));
			json_object_set_new(t, "cpu_ms", json_integer((json_int_t)r->cpu_ms));
			json_object_set_new(t, "wall_ms", json_integer((json_int_t)r->wall_ms));
			json_object_set_new(t, "memory_kb", json_integer((json_int_t)r->memory_kb));
			json_object_set_new(t, "exit_code", r->ran && r->exited ? json_integer(r->exit_code)
			                                                        : json_null());
			json_object_set_new(t, "signal", r->ran && !r->exited && r->signal
			                                     ? json_integer(r->signal) : json_null());
			json_array_append_new(tests, t);
		}
		json_t *extra = json_object();
		json_object_set_new(extra, "tests", tests);
		if (e->has_compile) {
			if (e->compile_output.buf)
				utf8_sanitize(e->compile_output.buf, e->compile_output.len);
			json_t *c = json_object();
			json_object_set_new(c, "verdict",
			                    json_string(e->compile_failed ? "compilation_error" : "ok"));
			json_object_set_new(c, "output", json_stringn_nocheck(e->compile_output.buf
			                    ? e->compile_output.buf : "", e->compile_output.len));
			json_object_set_new(extra, "compile", c);
		}
		if (bad_weight) {
			json_decref(extra);
			e->cb(-1, NULL, "test_suite.cases: a weight is outside 0.000001..1000000 or the "
			      "total overflows", e->data);
			goto out;
		}
		int score = round_ratio(passed, total);
		const char *keys[1] = { e->dim_key };
		int scores[1] = { score };
		struct score_ext ext = { 1, keys, scores, extra, NULL };
		e->cb(0, &ext, NULL, e->data);
		json_decref(extra);
	}
out:
	uv_close((uv_handle_t *)&e->timer, on_ev_close);
}

static void on_timer(uv_timer_t *t)
{
	ev_complete(t->data);
}

static void complete_soon(struct ev *e)
{
	uv_timer_start(&e->timer, on_timer, 0, 0);
}

/* Every case gets verdict v without running (compilation errors, unusable submissions). */
static void all_cases(struct ev *e, enum verdict v)
{
	for (size_t i = 0; i < e->ncases; i++) {
		memset(&e->results[i], 0, sizeof e->results[i]);
		e->results[i].v = v;
	}
}

static void start_case(struct ev *e);
static void start_script(struct ev *e);

static void build_run_files(struct ev *e)
{
	e->run_files = xcalloc(e->nfiles + 1, sizeof *e->run_files);
	size_t n = 0;
	for (size_t i = 0; i < e->nfiles; i++) {
		if (e->artifact && !strcmp(e->files[i].path, e->lang->artifact))
			continue;   /* the compiled artifact replaces a submitted file of that name */
		e->run_files[n++] = e->files[i];
	}
	if (e->artifact)
		e->run_files[n++] = (struct sandbox_file){ e->lang->artifact, e->artifact,
		                                          e->artifact_len, true };
	e->nrun_files = n;
}

static void after_compile(struct ev *e)
{
	build_run_files(e);
	if (e->kind == EV_SUITE) {
		e->state = EV_CASES;
		start_case(e);
	} else {
		e->state = EV_SCRIPT;
		start_script(e);
	}
}

/* Appends the compiler's output in[0..n) to o, bounded to the files of the run: a
 * diagnostic located in any other file ("/proc/cmdline:1:1: error: ...", followed by the
 * compiler's excerpt of that file) would echo host data, so it is replaced by one line
 * naming the file. */
static void compile_output_add(const struct ev *e, struct strbuf *o, const char *in, size_t n)
{
	bool suppress = false;
	size_t i = 0;
	while (i < n) {
		size_t end = i;
		while (end < n && in[end] != '\n')
			end++;
		size_t len = end - i + (end < n);
		const char *l = in + i;
		/* a location prefix: path:digits: */
		size_t c = 0;
		while (c < end - i && l[c] != ':' && l[c] != ' ' && l[c] != '\t')
			c++;
		size_t d = c + 1;
		while (d < end - i && l[d] >= '0' && l[d] <= '9')
			d++;
		bool located = c > 0 && c < end - i && l[c] == ':' && d > c + 1 && d < end - i &&
		               l[d] == ':';
		if (located) {
			const char *p = l;
			size_t pl = c;
			if (pl > 2 && !strncmp(p, "./", 2))
				p += 2, pl -= 2;
			else if (pl > 6 && !strncmp(p, "/work/", 6))
				p += 6, pl -= 6;
			bool ours = p[0] == '<';   /* <built-in>, <command-line> */
			for (size_t k = 0; k < e->nfiles && !ours; k++)
				ours = strlen(e->files[k].path) == pl && !memcmp(e->files[k].path, p, pl);
			if (!ours) {
				if (!suppress)
					strbuf_addf(o, "%.*s: [a message about a file outside the submission, "
					            "omitted]\n", (int)(c > 200 ? 200 : c), l);
				suppress = true;
				i += len;
				continue;
			}
			suppress = false;
		} else if (suppress && (l[0] == ' ' || l[0] == '\t')) {
			i += len;   /* the compiler's excerpt of that file */
			continue;
		} else {
			suppress = false;
		}
		strbuf_add(o, l, len);
		i += len;
	}
}

static void on_compiled(const struct sandbox_result *r, void *data)
{
	struct ev *e = data;
	if (r->internal_error) {
		ev_fail(e, "compile step: %s", r->error);
		complete_soon(e);
		return;
	}
	/* keep the compiler's output (stderr, then stdout), truncated */
	struct strbuf *o = &e->compile_output;
	strbuf_addlit(o, "");
	compile_output_add(e, o, r->err, r->err_len);
	compile_output_add(e, o, r->out, r->out_len);
	bool truncated = o->len > EV_COMPILE_OUTPUT_KEEP;
	if (truncated) {
		o->len = EV_COMPILE_OUTPUT_KEEP;
		o->buf[o->len] = 0;
	}
	const char *why = NULL;
	if (r->wall_exceeded || r->cpu_exceeded)
		why = "compilation time limit exceeded";
	else if (r->memory_exceeded)
		why = "compilation memory limit exceeded";
	else if (r->output_exceeded)
		why = "compiler output limit exceeded";
	else if (r->end != SANDBOX_EXITED || r->exit_code != 0)
		why = "";
	else if (!r->collected)
		why = "the compiler produced no program (or one larger than "
		      EV_STR(EV_MAX_ARTIFACT_MIB) " MiB)";
	utf8_sanitize(o->buf, o->len);
	if (truncated)
		strbuf_addf(o, "\n[output truncated]");
	if (why) {
		if (*why)
			strbuf_addf(o, "%s%s", o->len ? "\n" : "", why);
		if (e->kind == EV_CUSTOM) {
			struct strbuf m = { 0 };
			strbuf_addf(&m, "the scoring script does not compile: ");
			excerpt(&m, o->buf, o->len, EV_ERR_EXCERPT);
			ev_fail(e, "%s", m.buf);
			strbuf_free(&m);
		} else {
			e->compile_failed = true;
			all_cases(e, V_COMPILATION_ERROR);
		}
		complete_soon(e);
		return;
	}
	e->artifact = xmalloc(r->collected_len + 1);
	memcpy(e->artifact, r->collected, r->collected_len);
	e->artifact_len = r->collected_len;
	after_compile(e);
}

static void start_compile(struct ev *e)
{
	e->state = EV_COMPILE;
	memset(&e->req, 0, sizeof e->req);
	e->req.argv = (const char *const *)e->lang->compile;
	e->req.files = e->files;
	e->req.nfiles = e->nfiles;
	e->req.lim = e->lang->compile_lim;
	e->req.collect = e->lang->artifact;
	e->req.collect_max = EV_MAX_ARTIFACT;
	if (sandbox_run(e->sp->sb, &e->req, on_compiled, e) < 0) {
		ev_fail(e, "cannot start the compile step");
		complete_soon(e);
	}
}

/* -- test-suite ------------------------------------------------------------------------ */

static enum verdict case_verdict(const struct ev *e, const struct sandbox_result *r,
                                 const json_t *c)
{
	if (r->internal_error)
		return V_INTERNAL_ERROR;
	if (r->wall_exceeded || r->cpu_exceeded)
		return V_TIME_LIMIT;
	if (r->memory_exceeded)
		return V_MEMORY_LIMIT;
	if (r->output_exceeded)
		return V_OUTPUT_LIMIT;
	if (r->end != SANDBOX_EXITED || r->exit_code != 0)
		return V_RUNTIME_ERROR;
	const json_t *want = json_object_get(c, "expected_stdout");
	if (!outputs_match(e, r->out, r->out_len, json_string_value(want), json_string_length(want)))
		return V_WRONG_ANSWER;
	return V_ACCEPTED;
}

static void on_case(const struct sandbox_result *r, void *data)
{
	struct ev *e = data;
	const json_t *c = json_array_get(e->cases, e->next);
	struct case_result *cr = &e->results[e->next];
	cr->ran = true;
	cr->v = case_verdict(e, r, c);
	cr->cpu_ms = r->cpu_ms;
	cr->wall_ms = r->wall_ms;
	cr->memory_kb = r->memory_kb;
	cr->exited = r->end == SANDBOX_EXITED;
	cr->exit_code = r->exit_code;
	cr->signal = r->signal;
	if (cr->v == V_INTERNAL_ERROR) {
		/* the sandbox failed, not the program: the whole evaluation is retried */
		ev_fail(e, "test case '%s': %s", json_string_value(json_object_get(c, "name")), r->error);
		complete_soon(e);
		return;
	}
	e->next++;
	if (e->next < e->ncases)
		start_case(e);
	else
		complete_soon(e);
}

static void start_case(struct ev *e)
{
	const json_t *c = json_array_get(e->cases, e->next);
	const json_t *in = json_object_get(c, "stdin");
	memset(&e->req, 0, sizeof e->req);
	e->req.argv = e->container ? NULL : (const char *const *)e->lang->run;
	e->req.files = e->run_files;
	e->req.nfiles = e->nrun_files;
	e->req.stdin_data = json_is_string(in) ? json_string_value(in) : NULL;
	e->req.stdin_len = json_is_string(in) ? json_string_length(in) : 0;
	e->req.lim = e->lim;
	if (sandbox_run(e->sp->sb, &e->req, on_case, e) < 0) {
		ev_fail(e, "cannot start test case %zu", e->next);
		complete_soon(e);
	}
}

/* -- custom-script --------------------------------------------------------------------- */

/* The stdout line that is a JSON object with "scores" (a score line), and in *count how
 * many there are: the script's one when there is exactly one. With more than one, a
 * submission the script echoes may have added its own (README "custom-script"). */
static json_t *scores_line(const char *out, size_t n, size_t *count)
{
	json_t *found = NULL;
	size_t end = n;
	*count = 0;
	while (end > 0) {
		size_t start = end;
		while (start > 0 && out[start - 1] != '\n')
			start--;
		size_t a = start, b = end;
		while (a < b && is_space(out[a]))
			a++;
		while (b > a && is_space(out[b - 1]))
			b--;
		if (b > a && out[a] == '{') {
			json_t *j = json_loadb(out + a, b - a, 0, NULL);
			if (json_is_object(j) && json_object_get(j, "scores")) {
				++*count;
				if (!found)
					found = j;   /* the last one (read backwards) */
				else
					json_decref(j);
			} else {
				json_decref(j);
			}
		}
		end = start ? start - 1 : 0;
	}
	return found;
}

/* True when dimension i is the script's or the container's to score: external, and not
 * a judge criterion (hybrid: those are the LLM judge's alone; a container that writes
 * their keys does not score them). */
static bool scored_by_run(const struct ev *e, size_t i)
{
	if (!spec_dim_external(e->spec, i))
		return false;
	const json_t *dims = json_object_get(spec_json(e->spec), "dimensions");
	return !rubric_dim_is_judge(json_array_get(dims, i));
}

/* (Long: every way a script's run can end, in the order they are told apart.) */
static void on_script(const struct sandbox_result *r, void *data)
{
	struct ev *e = data;
	struct strbuf m = { 0 };
	json_t *line = NULL;
	if (r->internal_error) {
		ev_fail(e, "scoring script: %s", r->error);
		goto done;
	}
	const char *why = NULL;
	if (r->wall_exceeded || r->cpu_exceeded)
		why = "timed out";
	else if (r->memory_exceeded)
		why = "exceeded its memory limit";
	else if (r->output_exceeded)
		why = "printed too much";
	else if (r->end == SANDBOX_SIGNALED)
		why = "was killed by a signal";
	else if (r->exit_code != 0)
		why = "exited with an error";
	if (why) {
		strbuf_addf(&m, "scoring script %s", why);
		if (r->end == SANDBOX_SIGNALED)
			strbuf_addf(&m, " (signal %d)", r->signal);
		else if (r->exit_code)
			strbuf_addf(&m, " (exit code %d)", r->exit_code);
		if (r->err_len) {
			strbuf_addf(&m, ": ");
			excerpt(&m, r->err, r->err_len, EV_ERR_EXCERPT);
		}
		ev_fail(e, "%s", m.buf);
		goto done;
	}
	if (e->container && !r->collected) {
		ev_fail(e, "container: wrote no /output/%s (a JSON object with \"scores\")", EV_SCORE_FILE);
		goto done;
	}
	if (r->collected && e->container) {
		json_error_t jerr;
		line = json_loadb(r->collected, r->collected_len, 0, &jerr);
		json_t *ts = json_object_get(line, "test_score");
		if (json_is_object(line) && !json_object_get(line, "scores") && json_is_number(ts)) {
			/* The seed's form {"test_score": 0..100}: the one external dimension, x 10. */
			size_t nd = spec_ndims(e->spec), ext = 0, at = 0;
			for (size_t i = 0; i < nd; i++)
				if (scored_by_run(e, i)) {
					ext++;
					at = i;
				}
			if (ext != 1) {
				ev_fail(e, "container: {\"test_score\"} needs exactly one dimension scored by the"
				        " container (this spec has %zu): write {\"scores\": {...}}", ext);
				goto done;
			}
			json_t *sc = json_object();
			json_object_set_new(sc, spec_dim_key(e->spec, at),
			                    json_real(json_number_value(ts) * 10.0));
			json_object_set_new(line, "scores", sc);
		}
		if (!json_is_object(line) || !json_object_get(line, "scores")) {
			ev_fail(e, "container: /output/%s is not a JSON object with \"scores\"%s%s",
			        EV_SCORE_FILE, line ? "" : ": ", line ? "" : jerr.text);
			goto done;
		}
	} else if (r->collected) {
		/* The score file: only the script writes there (the submission can at most make
		 * a careless script echo it on stdout). */
		json_error_t jerr;
		line = json_loadb(r->collected, r->collected_len, 0, &jerr);
		if (!json_is_object(line) || !json_object_get(line, "scores")) {
			ev_fail(e, "scoring script: %s is not a JSON object with \"scores\"%s%s",
			        EV_SCORE_FILE, line ? "" : ": ", line ? "" : jerr.text);
			goto done;
		}
	} else {
		size_t lines;
		line = scores_line(r->out, r->out_len, &lines);
		if (lines > 1) {
			ev_fail(e, "the script printed %zu score lines; print exactly one, or write %s",
			        lines, EV_SCORE_FILE);
			goto done;
		}
	}
	if (!line) {
		ev_fail(e, "scoring script printed no JSON line with \"scores\" (and wrote no %s)",
		        EV_SCORE_FILE);
		goto done;
	}
	const json_t *scores = json_object_get(line, "scores");
	if (!json_is_object(scores)) {
		ev_fail(e, "scoring script: \"scores\" is not an object");
		goto done;
	}
	size_t nd = spec_ndims(e->spec);
	const char **keys = xcalloc(nd + 1, sizeof *keys);
	int *vals = xcalloc(nd + 1, sizeof *vals);
	json_t *clamped = json_array();
	size_t n = 0;
	for (size_t i = 0; i < nd; i++) {
		if (!scored_by_run(e, i))
			continue;
		const char *k = spec_dim_key(e->spec, i);
		const json_t *v = json_object_get(scores, k);
		if (!v)
			continue;   /* score_eval scores it 0 with a warning */
		char why[160];
		int sv, rule = score_script_value(v, &sv, why, sizeof why);
		if (rule < 0) {
			ev_fail(e, "scoring script: score for '%s' %s", k, why);
			break;
		}
		if (rule > 0) {   /* clamped, with a warning (common/README.md "Custom-script values") */
			json_t *w = json_pack("{s:s, s:s, s:s+}", "severity", "warning", "field", k,
			                      "message", "the scoring script's ", why);
			json_array_append_new(clamped, w);
		}
		keys[n] = k;
		vals[n] = sv;
		n++;
	}
	for (size_t i = 0; e->ct_warnings && i < json_array_size(e->ct_warnings); i++)
		json_array_append(clamped, json_array_get(e->ct_warnings, i));
	if (!e->failed) {
		struct score_ext ext = { n, keys, vals, NULL, clamped };
		e->state = EV_DONE;
		e->cb(0, &ext, NULL, e->data);
	}
	free(keys);
	free(vals);
	json_decref(clamped);
	if (!e->failed) {
		json_decref(line);
		strbuf_free(&m);
		uv_close((uv_handle_t *)&e->timer, on_ev_close);
		return;
	}
done:
	json_decref(line);
	strbuf_free(&m);
	complete_soon(e);
}

static void start_script(struct ev *e)
{
	memset(&e->req, 0, sizeof e->req);
	e->req.argv = e->container ? NULL : (const char *const *)e->lang->run;
	e->req.files = e->run_files;
	e->req.nfiles = e->nrun_files;
	e->req.stdin_data = e->stdin_doc;
	e->req.stdin_len = e->stdin_len;
	e->req.lim = e->lim;
	e->req.collect = EV_SCORE_FILE;
	e->req.collect_max = EV_SCORE_FILE_MAX;
	if (e->container) {
		e->req.argv = (const char *const *)e->argv;
		e->req.files = e->files;
		e->req.nfiles = e->nfiles;
		e->req.stdin_data = NULL;
		e->req.stdin_len = 0;
		e->req.rootfs = e->image->rootfs;
		e->req.envp = (const char *const *)e->envv;
		e->req.cwd = e->image->workdir;
		e->req.path = e->path;
	}
	if (sandbox_run(e->sp->sb, &e->req, on_script, e) < 0) {
		ev_fail(e, "cannot start the scoring script");
		complete_soon(e);
	}
}

/* -- set-up ---------------------------------------------------------------------------- */

/* The submission's files from answer.files. Returns NULL, or a message saying what is
 * wrong with them (a compilation_error for the submitter). */
static const char *take_files(struct ev *e, const json_t *answer, struct strbuf *why)
{
	const json_t *files = json_is_object(answer) ? json_object_get(answer, "files") : NULL;
	if (!json_is_object(files) || json_object_size(files) == 0) {
		strbuf_addf(why, "the answer has no \"files\" object ({\"%s\": \"...\"})", e->lang->entry);
		return why->buf;
	}
	if (json_object_size(files) > EV_MAX_FILES) {
		strbuf_addf(why, "too many files (at most %d)", EV_MAX_FILES);
		return why->buf;
	}
	e->files = xcalloc(json_object_size(files), sizeof *e->files);
	size_t total = 0;
	const char *path;
	json_t *v;
	bool has_entry = false;
	json_object_foreach((json_t *)files, path, v) {
		if (!sandbox_path_ok(path)) {
			strbuf_addf(why, "invalid file name \"%.*s\" (relative paths only, no \"..\")",
			            (int)utf8_cut(path, 200), path);
			return why->buf;
		}
		if (!json_is_string(v)) {
			strbuf_addf(why, "file \"%.*s\" must be a string", (int)utf8_cut(path, 200), path);
			return why->buf;
		}
		total += json_string_length(v) + strlen(path);
		if (total > EV_MAX_FILES_BYTES) {
			strbuf_addf(why, "the files are larger than %u bytes", EV_MAX_FILES_BYTES);
			return why->buf;
		}
		/* a file cannot also be a directory of another one */
		size_t pl = strlen(path);
		for (size_t i = 0; i < e->nfiles; i++) {
			const char *q = e->files[i].path;
			size_t ql = strlen(q);
			if ((pl < ql && !strncmp(q, path, pl) && q[pl] == '/') ||
			    (ql < pl && !strncmp(path, q, ql) && path[ql] == '/')) {
				const char *both = pl < ql ? path : q;
				strbuf_addf(why, "\"%.*s\" is both a file and a directory",
				            (int)utf8_cut(both, 200), both);
				return why->buf;
			}
		}
		e->files[e->nfiles++] = (struct sandbox_file){
			xstrdup(path), memdup(json_string_value(v), json_string_length(v)),
			json_string_length(v), false,
		};
		if (!strcmp(path, e->lang->entry))
			has_entry = true;
	}
	if (!has_entry) {
		strbuf_addf(why, "the entry file \"%s\" is missing", e->lang->entry);
		return why->buf;
	}
	return NULL;
}

static int setup_suite(struct ev *e, const json_t *ts, const json_t *answer)
{
	e->cases = json_object_get(ts, "cases");
	e->ncases = json_array_size(e->cases);
	e->results = xcalloc(e->ncases ? e->ncases : 1, sizeof *e->results);
	const json_t *dim = json_object_get(ts, "dimension");
	e->dim_key = xstrdup(json_is_string(dim) ? json_string_value(dim) : "correctness");
	const json_t *cmp = json_object_get(ts, "compare");
	const char *cs = json_is_string(cmp) ? json_string_value(cmp) : "trim";
	if (!strcmp(cs, "exact")) {
		e->cmp = CMP_EXACT;
	} else if (!strncmp(cs, "numeric:", 8)) {
		e->cmp = CMP_NUMERIC;
		e->tol = cs + 8;   /* borrowed from the spec, which outlives the evaluation */
	} else {
		e->cmp = CMP_TRIM;
	}
	e->lim = (struct sandbox_limits){
		.cpu_ms = 2000, .wall_ms = 5000, .memory_bytes = 256u << 20, .processes = 16,
		.output_bytes = 1u << 20, .file_bytes = 64u << 20, .open_files = 128,
	};
	if (parse_limits(json_object_get(ts, "limits"), &e->lim) < 0) {
		ev_fail(e, "test_suite.limits is not valid");
		return -1;
	}

	/* The language: the suite's, or the answer's among those the suite allows. */
	const json_t *tl = json_object_get(ts, "language");
	const json_t *al = json_is_object(answer) ? json_object_get(answer, "language") : NULL;
	const char *name = NULL;
	struct strbuf why = { 0 };
	if (json_is_string(tl)) {
		name = json_string_value(tl);
	} else if (json_is_array(tl)) {
		for (size_t i = 0; i < json_array_size(tl); i++)
			if (json_is_string(al) && !strcmp(json_string_value(json_array_get(tl, i)),
			                                  json_string_value(al)))
				name = json_string_value(al);
		if (!name && json_array_size(tl) == 1 && !al)
			name = json_string_value(json_array_get(tl, 0));
		if (!name) {
			strbuf_addf(&why, "answer.language must be one of");
			for (size_t i = 0; i < json_array_size(tl); i++)
				strbuf_addf(&why, " %s", json_string_value(json_array_get(tl, i)));
		}
	} else {
		ev_fail(e, "test_suite.language is missing");
		return -1;
	}
	if (name) {
		e->lang = lang_find(e->sp, name);
		if (!e->lang) {
			ev_fail(e, "language '%.*s' is not configured on this worker",
			        (int)utf8_cut(name, 64), name);
			strbuf_free(&why);
			return -1;
		}
		e->has_compile = e->lang->compile != NULL;
		e->lim.processes += (uint32_t)e->lang->extra_processes;
		e->lim.stack_bytes = e->lang->stack_bytes;
		take_files(e, answer, &why);
	}
	if (why.len) {
		/* the submission cannot be built: every case is a compilation error */
		e->compile_failed = true;
		e->has_compile = true;
		strbuf_add(&e->compile_output, why.buf, why.len);
		all_cases(e, V_COMPILATION_ERROR);
		strbuf_free(&why);
		complete_soon(e);
		return 0;
	}
	strbuf_free(&why);
	if (e->has_compile)
		start_compile(e);
	else
		after_compile(e);
	return 0;
}

static int setup_script(struct ev *e, const json_t *sc, const json_t *answer,
                        const json_t *metadata, const json_t *ground_truth, const json_t *match)
{
	const json_t *lang = json_object_get(sc, "language");
	const json_t *src = json_object_get(sc, "source");
	e->lang = json_is_string(lang) ? lang_find(e->sp, json_string_value(lang)) : NULL;
	if (!e->lang) {
		const char *ln = json_is_string(lang) ? json_string_value(lang) : "?";
		ev_fail(e, "script language '%.*s' is not configured on this worker",
		        (int)utf8_cut(ln, 64), ln);
		return -1;
	}
	if (!json_is_string(src)) {
		ev_fail(e, "script.source is missing");
		return -1;
	}
	e->files = xcalloc(1, sizeof *e->files);
	e->files[0] = (struct sandbox_file){ xstrdup(e->lang->entry),
	                                     memdup(json_string_value(src), json_string_length(src)),
	                                     json_string_length(src), false };
	e->nfiles = 1;
	e->has_compile = e->lang->compile != NULL;
	const json_t *to = json_object_get(sc, "timeout_ms");
	uint64_t timeout = json_is_integer(to) && json_integer_value(to) > 0
	                   ? (uint64_t)json_integer_value(to) : 10000;
	if (timeout > 120000)
		timeout = 120000;
	e->lim = (struct sandbox_limits){
		.cpu_ms = (uint32_t)timeout, .wall_ms = (uint32_t)timeout, .memory_bytes = 512u << 20,
		.processes = 32 + (uint32_t)e->lang->extra_processes, .output_bytes = 1u << 20,
		.file_bytes = 64u << 20, .open_files = 128, .stack_bytes = e->lang->stack_bytes,
	};
	/* Scripts in any language must be able to read every answer they get: JSON parsers
	 * have recursion limits (Python's is about 1000), and a crash of the script would be an
	 * internal error the submission forced. */
	if (!evaluator_depth_ok(answer, EVALUATOR_MAX_DEPTH) ||
	    !evaluator_depth_ok(metadata, EVALUATOR_MAX_DEPTH)) {
		e->too_deep = true;
		complete_soon(e);
		return 0;
	}
	json_t *doc = json_object();
	json_object_set_new(doc, "submission",
	                    json_pack("{s:o, s:o}", "answer",
	                              answer ? json_deep_copy(answer) : json_object(), "metadata",
	                              metadata ? json_deep_copy(metadata) : json_object()));
	json_object_set_new(doc, "ground_truth", ground_truth ? json_deep_copy(ground_truth)
	                                                      : json_object());
	json_object_set_new(doc, "match", match ? json_deep_copy(match) : json_object());
	e->stdin_doc = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(doc);
	if (!e->stdin_doc) {
		ev_fail(e, "cannot encode the script's input");
		return -1;
	}
	size_t n = strlen(e->stdin_doc);
	e->stdin_doc = xrealloc(e->stdin_doc, n + 2);
	e->stdin_doc[n] = '\n';
	e->stdin_doc[n + 1] = 0;
	e->stdin_len = n + 1;
	if (e->has_compile)
		start_compile(e);
	else
		after_compile(e);
	return 0;
}

/* Container limits a spec does not give; the maxima are the operator's settings
 * (ARBITER_CONTAINER_MAX_*, in the pool), which also cap these defaults. */
#define EV_CT_TIMEOUT_MS 60000
#define EV_CT_MEMORY_MB 512
#define EV_CT_PIDS 64
#define EV_CT_OUTPUT_MB 64

static char **strv_dup(char *const *v, size_t extra)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **o = xcalloc(n + extra + 1, sizeof *o);
	for (size_t i = 0; i < n; i++)
		o[i] = xstrdup(v[i]);
	return o;
}

void evaluator_container_maxima(const struct config *cfg, struct container_limits *max)
{
	*max = (struct container_limits){
		.wall_ms = (uint64_t)cfg->container_max_wall_ms,
		.cpu_ms = (uint64_t)cfg->container_max_cpu_ms,
		.memory_mb = (uint64_t)cfg->container_max_memory_mb,
		.pids = (uint64_t)cfg->container_max_pids,
		.output_mb = (uint64_t)cfg->container_max_output_mb,
	};
}

/* The container's limit k: the spec's value, else def; at most max (the setting named
 * setting), a spec's value above it with a warning appended to warnings (NULL: none). */
static uint64_t ct_limit(json_t *warnings, const json_t *c, const char *k, uint64_t def,
                         uint64_t max, const char *setting)
{
	const json_t *v = json_object_get(c, k);
	bool given = json_is_integer(v) && json_integer_value(v) > 0;
	uint64_t x = given ? (uint64_t)json_integer_value(v) : def;
	if (x <= max)
		return x;
	if (given && warnings)
		json_array_append_new(warnings, json_pack(
			"{s:s, s:s, s:o}", "severity", "warning", "field", "container",
			"message", json_sprintf("container.%s %llu is above this worker's maximum "
			                        "(%s=%llu): %llu used", k, (unsigned long long)x, setting,
			                        (unsigned long long)max, (unsigned long long)max)));
	return max;
}

void evaluator_container_limits(const struct container_limits *max, const json_t *c,
                                struct container_limits *out, json_t *warnings)
{
	out->wall_ms = ct_limit(warnings, c, "timeout_ms", EV_CT_TIMEOUT_MS, max->wall_ms,
	                        "ARBITER_CONTAINER_MAX_WALL_MS");
	out->cpu_ms = out->wall_ms < max->cpu_ms ? out->wall_ms : max->cpu_ms;
	out->memory_mb = ct_limit(warnings, c, "memory_mb", EV_CT_MEMORY_MB, max->memory_mb,
	                          "ARBITER_CONTAINER_MAX_MEMORY_MB");
	out->pids = ct_limit(warnings, c, "pids", EV_CT_PIDS, max->pids, "ARBITER_CONTAINER_MAX_PIDS");
	out->output_mb = ct_limit(warnings, c, "output_mb", EV_CT_OUTPUT_MB, max->output_mb,
	                          "ARBITER_CONTAINER_MAX_OUTPUT_MB");
}

/* evaluator container, once the image is open: its command and environment (the spec's
 * override them), then the run. */
static void container_start(struct ev *e)
{
	const json_t *root = spec_json(e->spec);
	const json_t *c = json_object_get(root, "container");
	const json_t *cmd = json_object_get(c, "cmd");
	if (json_is_array(cmd)) {
		e->argv = str_array(cmd);
	} else {
		size_t ne = 0, nc = 0;
		while (e->image->entrypoint[ne])
			ne++;
		while (e->image->cmd[nc])
			nc++;
		e->argv = xcalloc(ne + nc + 1, sizeof *e->argv);
		for (size_t i = 0; i < ne; i++)
			e->argv[i] = xstrdup(e->image->entrypoint[i]);
		for (size_t i = 0; i < nc; i++)
			e->argv[ne + i] = xstrdup(e->image->cmd[i]);
	}
	if (!e->argv || !e->argv[0]) {
		ev_fail(e, "container: image %s has no Entrypoint or Cmd and the spec gives no "
		        "container.cmd", e->image->digest);
		complete_soon(e);
		return;
	}
	/* The environment: the image's, then the spec's (replacing a variable of the same
	 * name), then HOME=/tmp unless set. */
	const json_t *env = json_object_get(c, "env");
	e->envv = strv_dup(e->image->env, json_object_size(env) + 1);
	size_t n = 0;
	while (e->envv[n])
		n++;
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)env, k, v) {
		size_t kl = strlen(k);
		struct strbuf b = { 0 };
		strbuf_addf(&b, "%s=%s", k, json_string_value(v));
		size_t i = 0;
		while (i < n && !(strncmp(e->envv[i], k, kl) == 0 && e->envv[i][kl] == '='))
			i++;
		if (i < n)
			free(e->envv[i]);
		else
			n++;
		e->envv[i] = b.buf;
	}
	bool home = false;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(e->envv[i], "PATH=", 5) && !e->path)
			e->path = xstrdup(e->envv[i] + 5);
		home |= !strncmp(e->envv[i], "HOME=", 5);
	}
	if (!home)
		e->envv[n++] = xstrdup("HOME=/tmp");
	if (!e->path)
		e->path = xstrdup("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	start_script(e);
}

/* The thread pool's part: reading the image's image.json (a file of the store, which may
 * sit on slow or network storage) never blocks the loop. Touches only e->open_*, e->image. */
static void open_work(uv_work_t *req)
{
	struct ev *e = req->data;
	struct image_opts io = { .dir = e->sp->image_dir };
	e->open_rc = image_open(&io, e->digest, &e->image, e->open_err, sizeof e->open_err);
}

static void open_done(uv_work_t *req, int status)
{
	struct ev *e = req->data;
	if (status < 0 || e->open_rc < 0) {
		e->image_missing = status >= 0 && e->open_rc == IMAGE_NOT_FOUND;
		ev_fail(e, "%s%s", e->image_missing ? "image_not_found: " : "",
		        status < 0 ? uv_strerror(status) : e->open_err);
		complete_soon(e);
		return;
	}
	container_start(e);
}

/* evaluator container: the limits and /submission's files (answer.json, metadata.json and
 * files/ from answer.files; names the sandbox would refuse are left out; answer.json has
 * everything) now, while answer and metadata are ours; the image is opened on the thread
 * pool and the run starts when it is (container_start). */
static int setup_container(struct ev *e, const json_t *root, const json_t *answer,
                           const json_t *metadata)
{
	const json_t *c = json_object_get(root, "container");
	const char *k;
	const json_t *v;
	struct container_limits l;
	e->ct_warnings = json_array();
	evaluator_container_limits(&e->sp->ct_max, c, &l, e->ct_warnings);
	e->lim = (struct sandbox_limits){
		.cpu_ms = (uint32_t)l.cpu_ms, .wall_ms = (uint32_t)l.wall_ms,
		.memory_bytes = l.memory_mb << 20, .processes = (uint32_t)l.pids,
		.output_bytes = 1u << 20, .file_bytes = l.output_mb << 20, .open_files = 256,
	};
	/* /submission */
	const json_t *files = json_is_object(answer) ? json_object_get(answer, "files") : NULL;
	e->files = xcalloc(json_object_size(files) + 2, sizeof *e->files);
	json_t *empty = json_object();
	char *a = json_dumps(answer ? answer : empty, JSON_COMPACT | JSON_ENCODE_ANY);
	char *m = json_dumps(metadata ? metadata : empty, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(empty);
	if (!a || !m) {
		free(a);
		free(m);
		ev_fail(e, "cannot encode the submission");
		return -1;
	}
	e->files[e->nfiles++] = (struct sandbox_file){ xstrdup("answer.json"), a, strlen(a), false };
	e->files[e->nfiles++] = (struct sandbox_file){ xstrdup("metadata.json"), m, strlen(m), false };
	size_t total = strlen(a) + strlen(m);
	json_object_foreach((json_t *)files, k, v) {
		struct strbuf p = { 0 };
		strbuf_addf(&p, "files/%s", k);
		total += json_string_length(v) + p.len;
		if (!json_is_string(v) || !sandbox_path_ok(p.buf) || total > EV_MAX_FILES_BYTES ||
		    e->nfiles >= EV_MAX_FILES) {
			strbuf_free(&p);
			continue;
		}
		bool clash = false;   /* a file cannot also be a directory of another one */
		for (size_t i = 2; i < e->nfiles && !clash; i++) {
			const char *q = e->files[i].path;
			size_t ql = strlen(q), pl = p.len;
			clash = (pl < ql && !strncmp(q, p.buf, pl) && q[pl] == '/') ||
			        (ql < pl && !strncmp(p.buf, q, ql) && p.buf[ql] == '/');
		}
		if (clash) {
			strbuf_free(&p);
			continue;
		}
		e->files[e->nfiles++] = (struct sandbox_file){
			p.buf, memdup(json_string_value(v), json_string_length(v)), json_string_length(v), false };
	}
	const char *digest = json_string_value(json_object_get(root, "image"));
	e->digest = xstrdup(digest ? digest : "");
	e->open_work.data = e;
	int rc = uv_queue_work(e->sp->loop, &e->open_work, open_work, open_done);
	if (rc < 0) {
		ev_fail(e, "container: opening the image: %s", uv_strerror(rc));
		return -1;
	}
	return 0;
}


int evaluator_run(struct sandbox_pool *sp, const struct spec *s, const json_t *answer,
                  const json_t *metadata, const json_t *ground_truth, const json_t *match,
                  eval_cb *cb, void *data)
{
	if (!sp || !s || !cb)
		return -1;
	enum spec_evaluator kind = spec_evaluator(s);
	const json_t *root = spec_json(s);
	const json_t *ts = json_object_get(root, "test_suite");
	const json_t *sc = json_object_get(root, "script");
	if (kind == SPEC_TEST_SUITE ? !json_is_object(ts) :
	    kind == SPEC_CUSTOM_SCRIPT ? !json_is_object(sc) : kind != SPEC_CONTAINER)
		return -1;
	struct ev *e = xcalloc(1, sizeof *e);
	sp->active++;
	e->sp = sp;
	e->spec = s;
	e->cb = cb;
	e->data = data;
	e->kind = kind == SPEC_TEST_SUITE ? EV_SUITE : EV_CUSTOM;
	uv_timer_init(sp->loop, &e->timer);
	e->timer.data = e;
	e->container = kind == SPEC_CONTAINER;
	int rc = e->kind == EV_SUITE ? setup_suite(e, ts, answer)
	         : e->container ? setup_container(e, root, answer, metadata)
	                        : setup_script(e, sc, answer, metadata, ground_truth, match);
	if (rc < 0)
		complete_soon(e);   /* e->failed: reported as internal_error, asynchronously */
	return 0;
}
