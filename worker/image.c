/*
 * The image store (see image.h): importing an OCI image archive or a docker-archive,
 * safely, into a content-addressed directory; listing, opening and removing images.
 *
 * An import reads the archive once, spooling each blob into the temporary
 * directory while hashing it (a blob whose SHA-256 differs from its name is
 * refused), then follows index.json -> manifest -> config and layers, checking
 * each descriptor's size and digest. A docker-archive's members are spooled under their
 * SHA-256 and its manifest.json turned into that OCI form first (docker_to_oci), so the
 * rest is the same. Each layer is read twice: first as a raw
 * stream, decompressed and hashed against the config's diff_id and bounded in
 * size (a compression bomb stops here, before anything is written), then as a
 * tar whose entries are applied one by one under the rules of image.h.
 */
#include "image.h"
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* libarchive is opened on the first import, not linked: it pulls libxml2, ICU and
 * libstdc++ into every process, and the worker, which never imports, would carry them
 * (+2.6 MB of resident memory per worker, measured with test/bench/bench_worker.py). */
#define LA_FUNCS(X) \
	X(archive_entry_filetype) \
	X(archive_entry_hardlink) \
	X(archive_entry_pathname) \
	X(archive_entry_perm) \
	X(archive_entry_symlink) \
	X(archive_error_string) \
	X(archive_read_data) \
	X(archive_read_free) \
	X(archive_read_new) \
	X(archive_read_next_header) \
	X(archive_read_open_fd) \
	X(archive_read_open_filename) \
	X(archive_read_support_filter_all) \
	X(archive_read_support_filter_gzip) \
	X(archive_read_support_filter_none) \
	X(archive_read_support_format_raw) \
	X(archive_read_support_format_tar)
#define LA_MEMBER(f) __typeof__(f) *f;
static struct {
	int state;                    /* 0 not tried, 1 loaded, -1 failed */
	char why[256];
	LA_FUNCS(LA_MEMBER)
} la;

/* Loads libarchive once. Returns 0, or -1 with the reason in err. */
static int la_load(char *err, size_t errlen)
{
	if (la.state == 0) {
		la.state = -1;
		void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			snprintf(la.why, sizeof la.why, "%s", dlerror());
		} else {
			la.state = 1;
#define LA_LOAD(f) \
			if (la.state == 1 && !(*(void **)&la.f = dlsym(h, #f))) { \
				snprintf(la.why, sizeof la.why, "libarchive lacks %s", #f); \
				la.state = -1; \
			}
			LA_FUNCS(LA_LOAD)
#undef LA_LOAD
		}
	}
	if (la.state < 0) {
		snprintf(err, errlen, "importing images needs libarchive (Debian's libarchive13): %s",
		         la.why);
		return -1;
	}
	return 0;
}

#define IMG_MAX_JSON (1u << 20)       /* index, manifest, config */
#define IMG_MAX_LAYERS 128
#define IMG_MAX_ARGS 256               /* entrypoint + cmd strings; env entries */
#define IMG_MAX_ARG_BYTES 4096
#define IMG_MAX_ARGV_TOTAL 65536
#define IMG_MAX_ENV_BYTES 8192
#define IMG_MAX_NAME 4095

static void set_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

void image_opts_from_config(const struct config *c, struct image_opts *o, char *dir, size_t n)
{
	if (c->image_dir && *c->image_dir)
		snprintf(dir, n, "%s", c->image_dir);
	else
		snprintf(dir, n, "%s/images", c->sandbox_lock_dir && *c->sandbox_lock_dir ?
		         c->sandbox_lock_dir : "/run/arbiter-sandbox");
	*o = (struct image_opts){ .dir = dir,
	                          .max_archive_bytes = (uint64_t)c->image_max_mb << 20,
	                          .max_unpacked_bytes = (uint64_t)c->image_max_unpacked_mb << 20 };
}

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[64] == '\0';
}

bool image_digest_ok(const char *s)
{
	return s && !strncmp(s, "sha256:", 7) && is_hex64(s + 7);
}

static const char *store_dir(const struct image_opts *o)
{
	return o && o->dir && *o->dir ? o->dir : "/run/arbiter-sandbox/images";
}

static uint64_t opt_or(uint64_t v, uint64_t d)
{
	return v ? v : d;
}

/* ---- file-system helpers ----------------------------------------------------------- */

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -1;
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/* Removes name in dirfd, recursively, never following a link. 0 or -1 (errno). */
static int rm_at(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0);
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && rm_at(dirfd(d), e->d_name) < 0)
			rc = -1;
	closedir(d);
	if (rc < 0)
		return -1;
	return unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Empties the directory fd (an opaque whiteout). */
static int empty_dir(int fd)
{
	int d2 = dup(fd);
	if (d2 < 0)
		return -1;
	DIR *d = fdopendir(d2);
	if (!d) {
		close(d2);
		return -1;
	}
	rewinddir(d);
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && rm_at(fd, e->d_name) < 0)
			rc = -1;
	closedir(d);
	return rc;
}

/* Opens path (relative, normalised) as a directory resolved inside root: links are
 * followed as if root were "/", never out of it. */
static int open_in_root(int root, const char *path, int flags)
{
	if (!*path)
		return fcntl(root, F_DUPFD_CLOEXEC, 3);
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

/* Opens the directory holding path's last component (each missing directory on the
 * way created 0755 when create is set) and points *leaf at that component. path is
 * restored before returning. */
static int open_parent(int root, char *path, const char **leaf, bool create)
{
	char *slash = strrchr(path, '/');
	if (!slash) {
		*leaf = path;
		return fcntl(root, F_DUPFD_CLOEXEC, 3);
	}
	*leaf = slash + 1;
	*slash = '\0';
	int fd = open_in_root(root, path, O_RDONLY | O_DIRECTORY);
	if (fd < 0 && errno == ENOENT && create) {
		/* Walk down from the root, creating what is missing. */
		int cur = fcntl(root, F_DUPFD_CLOEXEC, 3);
		char *p = path;
		while (cur >= 0) {
			char *end = strchr(p, '/');
			if (end)
				*end = '\0';
			if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST) {
				close(cur);
				cur = -1;
			} else {
				close(cur);
				cur = open_in_root(root, path, O_RDONLY | O_DIRECTORY);
			}
			if (!end)
				break;
			*end = '/';
			p = end + 1;
		}
		fd = cur;
	}
	*slash = '/';
	return fd;
}

/* ---- names ------------------------------------------------------------------------- */

/* Normalises a tar member name into out: "./" prefixes, "." components, repeated and
 * trailing slashes go; absolute names, ".." and NUL-free-but-oversized names are
 * refused (-1 with why). The root itself normalises to "". */
static int norm_name(const char *in, char *out, size_t n, const char **why)
{
	if (!in) {
		*why = "an entry without a name";
		return -1;
	}
	if (in[0] == '/') {
		*why = "an absolute path";
		return -1;
	}
	size_t o = 0;
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t l = (size_t)(p - s);
		if (l == 0 || (l == 1 && s[0] == '.'))
			continue;
		if (l == 2 && s[0] == '.' && s[1] == '.') {
			*why = "a '..' component";
			return -1;
		}
		if (l > 255 || o + l + 2 > n || o + l + 1 > IMG_MAX_NAME) {
			*why = "a name too long";
			return -1;
		}
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, l);
		o += l;
	}
	out[o] = '\0';
	return 0;
}

/* True when a symlink at name (normalised) with a relative target stays inside the
 * root read lexically ("a/b" -> "../../x" leaves it). */
static bool link_stays_in(const char *name, const char *target)
{
	if (target[0] == '/')
		return true;   /* absolute: resolved against the image root when used */
	long depth = 0;
	for (const char *p = name; *p; p++)
		if (*p == '/')
			depth++;
	const char *p = target;
	while (*p) {
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t l = (size_t)(p - s);
		if (l == 2 && s[0] == '.' && s[1] == '.') {
			if (--depth < 0)
				return false;
		} else if (l && !(l == 1 && s[0] == '.')) {
			depth++;
		}
		while (*p == '/')
			p++;
	}
	return true;
}

/* ---- a set of names (duplicate entries within a layer) ------------------------------ */

struct nameset {
	char **slot;
	size_t cap, n;
};

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* 1 when s was already there, 0 added, -1 out of memory. */
static int nameset_add(struct nameset *ns, const char *s)
{
	if ((ns->n + 1) * 2 > ns->cap) {
		size_t nc = ns->cap ? ns->cap * 2 : 1024;
		char **nslot = calloc(nc, sizeof *nslot);
		if (!nslot)
			return -1;
		for (size_t i = 0; i < ns->cap; i++)
			if (ns->slot[i]) {
				size_t j = fnv(ns->slot[i]) & (nc - 1);
				while (nslot[j])
					j = (j + 1) & (nc - 1);
				nslot[j] = ns->slot[i];
			}
		free(ns->slot);
		ns->slot = nslot;
		ns->cap = nc;
	}
	size_t j = fnv(s) & (ns->cap - 1);
	while (ns->slot[j]) {
		if (!strcmp(ns->slot[j], s))
			return 1;
		j = (j + 1) & (ns->cap - 1);
	}
	if (!(ns->slot[j] = strdup(s)))
		return -1;
	ns->n++;
	return 0;
}

static void nameset_clear(struct nameset *ns)
{
	for (size_t i = 0; i < ns->cap; i++)
		free(ns->slot[i]);
	free(ns->slot);
	*ns = (struct nameset){ 0 };
}

/* ---- the import -------------------------------------------------------------------- */

struct imp {
	const struct image_opts *o;
	char *err;
	size_t errlen;
	char tmp[4096];          /* the temporary directory */
	int blobs;               /* its blobs/ directory */
	int root;                /* its rootfs/ directory */
	json_t *index_json;
	bool have_layout;
	uint64_t archive_bytes, unpacked, entries;
	struct image_report *rep;
	/* docker-archive: every other regular member spooled into others/ under its SHA-256,
	 * its name kept (onames[i] -> ohex[i]); symbolic and hard links among the members
	 * (lnames[i] -> ltargets[i], archive-relative); manifest.json. */
	int others;
	char **onames, (*ohex)[65];
	size_t no;
	char **lnames, **ltargets;
	size_t nl;
	struct nameset members;
	json_t *docker_manifest;
};

static void hex(const unsigned char *d, char out[65])
{
	static const char x[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = x[d[i] >> 4];
		out[2 * i + 1] = x[d[i] & 15];
	}
	out[64] = '\0';
}

/* Reads the current entry's data into a new buffer (at most max bytes). */
static char *read_entry_small(struct archive *a, size_t max, size_t *len)
{
	char *buf = malloc(max + 1);
	size_t n = 0;
	if (!buf)
		return NULL;
	for (;;) {
		la_ssize_t r = la.archive_read_data(a, buf + n, max + 1 - n);
		if (r < 0) {
			free(buf);
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			free(buf);
			errno = EFBIG;
			return NULL;
		}
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Copies the current entry into dirfd: when want is set, as want (its SHA-256 must be
 * want); else under a temporary name renamed to its SHA-256, written into got. */
static int spool(struct imp *im, struct archive *a, int dirfd, const char *want, char got[65])
{
	char tmpname[32];
	snprintf(tmpname, sizeof tmpname, ".spool-%llu", (unsigned long long)im->archive_bytes);
	const char *fname = want ? want : tmpname;
	int fd = openat(dirfd, fname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST && want)
			set_err(im->err, im->errlen, "duplicate entry blobs/sha256/%s in the archive", want);
		else
			set_err(im->err, im->errlen, "spooling %s: %s", fname, strerror(errno));
		return -1;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		close(fd);
		EVP_MD_CTX_free(md);
		set_err(im->err, im->errlen, "SHA-256 unavailable");
		return -1;
	}
	static char buf[1 << 16];
	int rc = 0;
	for (;;) {
		la_ssize_t r = la.archive_read_data(a, buf, sizeof buf);
		if (r < 0) {
			set_err(im->err, im->errlen, "reading the archive: %s", la.archive_error_string(a));
			rc = -1;
			break;
		}
		if (r == 0)
			break;
		im->archive_bytes += (uint64_t)r;
		if (im->archive_bytes > opt_or(im->o->max_archive_bytes, 4ull << 30)) {
			set_err(im->err, im->errlen, "the archive is larger than the bound of %llu bytes",
			        (unsigned long long)opt_or(im->o->max_archive_bytes, 4ull << 30));
			rc = -1;
			break;
		}
		EVP_DigestUpdate(md, buf, (size_t)r);
		for (la_ssize_t off = 0; off < r;) {
			ssize_t w = write(fd, buf + off, (size_t)(r - off));
			if (w < 0) {
				set_err(im->err, im->errlen, "spooling %s: %s", fname, strerror(errno));
				rc = -1;
				break;
			}
			off += w;
		}
		if (rc)
			break;
	}
	unsigned char d[32];
	char h[65];
	if (!rc) {
		EVP_DigestFinal_ex(md, d, NULL);
		hex(d, h);
		if (want && strcmp(h, want)) {
			set_err(im->err, im->errlen, "blob sha256:%s has the digest sha256:%s", want, h);
			rc = -1;
		}
	}
	EVP_MD_CTX_free(md);
	close(fd);
	if (!want) {
		/* Two members with the same content share one file. */
		if (!rc && renameat(dirfd, tmpname, dirfd, h) < 0) {
			set_err(im->err, im->errlen, "spooling a member: %s", strerror(errno));
			rc = -1;
		}
		if (rc)
			(void)unlinkat(dirfd, tmpname, 0);
		else
			memcpy(got, h, 65);
	}
	return rc;
}

static int spool_blob(struct imp *im, struct archive *a, const char *hexname)
{
	return spool(im, a, im->blobs, hexname, NULL);
}

#define IMG_MAX_MEMBERS 10000         /* docker-archive: members other than blobs */

/* Resolves a relative name lexically into out: "." and empty components go, ".." takes the
 * previous one away (-1 with why when there is none: the name leaves the archive). */
static int resolve_lexical(const char *in, char *out, size_t n, const char **why)
{
	size_t o = 0;
	const char *p = in;
	while (*p) {
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t l = (size_t)(p - s);
		while (*p == '/')
			p++;
		if (l == 0 || (l == 1 && s[0] == '.'))
			continue;
		if (l == 2 && s[0] == '.' && s[1] == '.') {
			if (o == 0) {
				*why = "it leaves the archive";
				return -1;
			}
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;   /* the slash before it */
			continue;
		}
		if (o + l + 2 > n) {
			*why = "a name too long";
			return -1;
		}
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, l);
		o += l;
	}
	out[o] = '\0';
	if (!o) {
		*why = "it names the archive's root";
		return -1;
	}
	return 0;
}

/* A member of a docker-archive (or any other file of the archive): spooled into others/,
 * or, a link, remembered. Names are normalised; a name given twice is refused. */
static int other_member(struct imp *im, struct archive *a, struct archive_entry *e,
                        const char *name, mode_t t)
{
	const char *hl = la.archive_entry_hardlink(e);
	if (t != AE_IFREG && t != AE_IFLNK && !hl)
		return 0;   /* (devices and the like: nothing of an image) */
	if (im->no + im->nl >= IMG_MAX_MEMBERS) {
		set_err(im->err, im->errlen, "more than %d members in the archive", IMG_MAX_MEMBERS);
		return -1;
	}
	int dup = nameset_add(&im->members, name);
	if (dup != 0) {
		set_err(im->err, im->errlen, dup < 0 ? "out of memory" : "duplicate entry '%s' in the "
		        "archive", name);
		return -1;
	}
	if (hl || t == AE_IFLNK) {
		/* A link: its target as an archive-relative name (a hard link's is one already; a
		 * symbolic link's is relative to the link's directory), resolved lexically. */
		const char *tg = hl ? hl : la.archive_entry_symlink(e);
		char joined[2 * IMG_MAX_NAME + 2], norm[IMG_MAX_NAME + 1];
		const char *why = "an empty target";
		const char *slash = strrchr(name, '/');
		if (!tg || !*tg || tg[0] == '/')
			why = "an absolute or empty target";
		else if (!hl && slash)
			snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - name), name, tg);
		else
			snprintf(joined, sizeof joined, "%s", tg);
		if (!tg || !*tg || tg[0] == '/' || resolve_lexical(joined, norm, sizeof norm, &why) < 0) {
			set_err(im->err, im->errlen, "archive member '%s' links to '%s': %s", name,
			        tg ? tg : "", why);
			return -1;
		}
		im->lnames = realloc(im->lnames, (im->nl + 1) * sizeof *im->lnames);
		im->ltargets = realloc(im->ltargets, (im->nl + 1) * sizeof *im->ltargets);
		if (!im->lnames || !im->ltargets)
			abort();   /* out of memory aborts (as xmalloc) */
		im->lnames[im->nl] = strdup(name);
		im->ltargets[im->nl] = strdup(norm);
		if (!im->lnames[im->nl] || !im->ltargets[im->nl])
			abort();
		im->nl++;
		return 0;
	}
	char h[65];
	if (spool(im, a, im->others, NULL, h) < 0)
		return -1;
	im->onames = realloc(im->onames, (im->no + 1) * sizeof *im->onames);
	im->ohex = realloc(im->ohex, (im->no + 1) * sizeof *im->ohex);
	if (!im->onames || !im->ohex || !(im->onames[im->no] = strdup(name)))
		abort();
	memcpy(im->ohex[im->no], h, 65);
	im->no++;
	return 0;
}

/* The SHA-256 of the docker-archive member name (a file, or a link to one). */
static const char *member_hex(const struct imp *im, const char *name)
{
	for (int hop = 0; hop < 2; hop++) {
		for (size_t i = 0; i < im->no; i++)
			if (!strcmp(im->onames[i], name))
				return im->ohex[i];
		size_t i = 0;
		while (i < im->nl && strcmp(im->lnames[i], name))
			i++;
		if (i == im->nl)
			return NULL;
		name = im->ltargets[i];   /* one link to a file; a link to a link is not followed */
	}
	return NULL;
}

/* A docker-archive (`docker save`: manifest.json naming a config file and layer tars) is
 * turned into the OCI layout the rest of the import reads: the image's OCI manifest is
 * written for it (config and layers as they are in the archive, layers as uncompressed
 * tars), in others/ beside its blobs, and index.json names it. So every rule of the import
 * applies alike, and the digest printed is that manifest's. */
static int docker_to_oci(struct imp *im)
{
	json_t *m = im->docker_manifest;
	if (!json_is_array(m) || json_array_size(m) != 1) {
		set_err(im->err, im->errlen, "docker-archive: manifest.json must list exactly one image"
		        " (it lists %zu; save one image per archive)", json_is_array(m) ? json_array_size(m) : 0);
		return -1;
	}
	json_t *img = json_array_get(m, 0);
	const char *cfg = json_string_value(json_object_get(img, "Config"));
	json_t *layers = json_object_get(img, "Layers");
	if (!cfg || !json_is_array(layers) || json_array_size(layers) > IMG_MAX_LAYERS) {
		set_err(im->err, im->errlen, "docker-archive: manifest.json needs Config and Layers (at"
		        " most %d)", IMG_MAX_LAYERS);
		return -1;
	}
	json_t *om = json_object(), *ls = json_array();
	json_object_set_new(om, "schemaVersion", json_integer(2));
	json_object_set_new(om, "mediaType", json_string("application/vnd.oci.image.manifest.v1+json"));
	size_t i;
	json_t *l;
	int rc = -1;
	char *text = NULL;
	for (i = 0; i <= json_array_size(layers); i++) {
		bool is_cfg = i == json_array_size(layers);
		const char *raw = is_cfg ? cfg : json_string_value(json_array_get(layers, i));
		char name[IMG_MAX_NAME + 1];
		const char *why, *h;
		struct stat st;
		if (!raw || norm_name(raw, name, sizeof name, &why) < 0 || !(h = member_hex(im, name)) ||
		    fstatat(im->others, h, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			set_err(im->err, im->errlen, "docker-archive: %s%s '%s' is not a file of the archive",
			        is_cfg ? "Config" : "Layers[", is_cfg ? "" : "]", raw ? raw : "(not a string)");
			goto out;
		}
		l = json_object();
		json_object_set_new(l, "mediaType", json_string(is_cfg ? "application/vnd.oci.image.config.v1+json"
		                                                        : "application/vnd.oci.image.layer.v1.tar"));
		json_object_set_new(l, "digest", json_sprintf("sha256:%s", h));
		json_object_set_new(l, "size", json_integer((json_int_t)st.st_size));
		if (is_cfg)
			json_object_set_new(om, "config", l);
		else
			json_array_append_new(ls, l);
	}
	json_object_set_new(om, "layers", ls);
	ls = NULL;
	/* Key order as written above (jansson keeps insertion order), no spaces: the same
	 * archive always gives the same manifest, hence the same digest. */
	text = json_dumps(om, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text) {
		set_err(im->err, im->errlen, "out of memory");
		goto out;
	}
	size_t len = strlen(text);
	unsigned char d[32];
	char h[65];
	EVP_Digest(text, len, d, NULL, EVP_sha256(), NULL);
	hex(d, h);
	int fd = openat(im->others, h, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	bool wrote = fd >= 0 && write(fd, text, len) == (ssize_t)len;
	if (fd >= 0)
		close(fd);
	if (!wrote) {
		set_err(im->err, im->errlen, "docker-archive: writing its manifest: %s", strerror(errno));
		goto out;
	}
	im->index_json = json_pack("{s:i, s:[{s:s, s:s, s:I}]}", "schemaVersion", 2, "manifests",
	                           "mediaType", "application/vnd.oci.image.manifest.v1+json",
	                           "digest", "", "size", (json_int_t)len);
	json_object_set_new(json_array_get(json_object_get(im->index_json, "manifests"), 0), "digest",
	                    json_sprintf("sha256:%s", h));
	/* From here on the blobs are others/. */
	int t = im->blobs;
	im->blobs = im->others;
	im->others = t;
	im->have_layout = true;
	im->rep->docker = true;
	rc = 0;
out:
	free(text);
	json_decref(ls);
	json_decref(om);
	return rc;
}

static int read_archive(struct imp *im, const char *path)
{
	struct archive *a = la.archive_read_new();
	if (!a) {
		set_err(im->err, im->errlen, "out of memory");
		return -1;
	}
	la.archive_read_support_format_tar(a);
	la.archive_read_support_filter_none(a);
	la.archive_read_support_filter_gzip(a);
	int rc = -1;
	if (la.archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		set_err(im->err, im->errlen, "%s: %s", path, la.archive_error_string(a));
		goto out;
	}
	struct archive_entry *e;
	int r;
	while ((r = la.archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		char name[IMG_MAX_NAME + 1];
		const char *why;
		if (norm_name(la.archive_entry_pathname(e), name, sizeof name, &why) < 0) {
			set_err(im->err, im->errlen, "archive member '%s': %s",
			        la.archive_entry_pathname(e) ? la.archive_entry_pathname(e) : "", why);
			goto out;
		}
		mode_t t = la.archive_entry_filetype(e);
		if (t == AE_IFDIR)
			continue;
		if (!strncmp(name, "blobs/sha256/", 13)) {
			if (t != AE_IFREG || !is_hex64(name + 13)) {
				set_err(im->err, im->errlen, "archive member '%s' is not a blob", name);
				goto out;
			}
			if (spool_blob(im, a, name + 13) < 0)
				goto out;
		} else if (!strcmp(name, "index.json") || !strcmp(name, "oci-layout")) {
			size_t len;
			if (t != AE_IFREG) {
				set_err(im->err, im->errlen, "archive member '%s' is not a file", name);
				goto out;
			}
			char *s = read_entry_small(a, IMG_MAX_JSON, &len);
			if (!s) {
				set_err(im->err, im->errlen, "%s: unreadable or larger than 1 MiB", name);
				goto out;
			}
			json_error_t je;
			json_t *j = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
			free(s);
			if (!json_is_object(j)) {
				json_decref(j);
				set_err(im->err, im->errlen, "%s: not a JSON object", name);
				goto out;
			}
			if (name[0] == 'i') {
				if (im->index_json) {
					json_decref(j);
					set_err(im->err, im->errlen, "duplicate entry index.json in the archive");
					goto out;
				}
				im->index_json = j;
			} else {
				if (im->have_layout) {
					json_decref(j);
					set_err(im->err, im->errlen, "duplicate entry oci-layout in the archive");
					goto out;
				}
				const char *v = json_string_value(json_object_get(j, "imageLayoutVersion"));
				im->have_layout = v && !strncmp(v, "1.", 2);
				json_decref(j);
				if (!im->have_layout) {
					set_err(im->err, im->errlen, "oci-layout: imageLayoutVersion is not 1.x");
					goto out;
				}
			}
		} else if (!strcmp(name, "manifest.json") && t == AE_IFREG &&
		         !la.archive_entry_hardlink(e)) {
			/* A docker-archive's (used only when there is no OCI layout). */
			size_t len;
			char *s = read_entry_small(a, IMG_MAX_JSON, &len);
			json_error_t je;
			if (!s || im->docker_manifest ||
			    !(im->docker_manifest = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je))) {
				free(s);
				set_err(im->err, im->errlen, "manifest.json: %s", im->docker_manifest ?
				        "duplicate entry in the archive" : "unreadable, larger than 1 MiB or not"
				        " JSON");
				goto out;
			}
			free(s);
		} else if (other_member(im, a, e, name, t) < 0) {
			/* Any other member: a docker-archive's config and layers, or stray files. */
			goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		set_err(im->err, im->errlen, "reading %s: %s", path, la.archive_error_string(a));
		goto out;
	}
	if (!im->have_layout && !im->index_json && im->docker_manifest) {
		if (docker_to_oci(im) < 0)
			goto out;
	} else if (!im->have_layout || !im->index_json) {
		set_err(im->err, im->errlen, "%s is not an OCI image archive (oci-layout and "
		        "index.json) nor a docker-archive (manifest.json)", path);
		goto out;
	}
	rc = 0;
out:
	la.archive_read_free(a);
	return rc;
}

/* Checks a descriptor (mediaType, digest, size) and loads its blob as JSON when want_json. */
static int descriptor(struct imp *im, json_t *d, const char *what, char hexout[65], json_t **jout)
{
	const char *dg = json_string_value(json_object_get(d, "digest"));
	json_t *sz = json_object_get(d, "size");
	if (!json_is_object(d) || !image_digest_ok(dg) || !json_is_integer(sz) ||
	    json_integer_value(sz) < 0) {
		set_err(im->err, im->errlen, "%s: a descriptor without a sha256 digest and a size", what);
		return -1;
	}
	memcpy(hexout, dg + 7, 65);
	struct stat st;
	if (fstatat(im->blobs, hexout, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		set_err(im->err, im->errlen, "%s: blob %s is not in the archive", what, dg);
		return -1;
	}
	if ((uint64_t)st.st_size != (uint64_t)json_integer_value(sz)) {
		set_err(im->err, im->errlen, "%s: blob %s has %lld bytes, its descriptor says %lld", what,
		        dg, (long long)st.st_size, (long long)json_integer_value(sz));
		return -1;
	}
	if (!jout)
		return 0;
	if (st.st_size > IMG_MAX_JSON) {
		set_err(im->err, im->errlen, "%s: larger than 1 MiB", what);
		return -1;
	}
	int fd = openat(im->blobs, hexout, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		set_err(im->err, im->errlen, "%s: %s", what, strerror(errno));
		return -1;
	}
	json_error_t je;
	*jout = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	close(fd);
	if (!json_is_object(*jout)) {
		json_decref(*jout);
		*jout = NULL;
		set_err(im->err, im->errlen, "%s: not a JSON object (%s)", what, je.text);
		return -1;
	}
	return 0;
}

static const char *host_arch(void)
{
	static struct utsname u;
	if (uname(&u) < 0)
		return "";
	if (!strcmp(u.machine, "x86_64"))
		return "amd64";
	if (!strcmp(u.machine, "aarch64"))
		return "arm64";
	return u.machine;
}

/* Validates a config string array (Entrypoint, Cmd: args; Env: KEY=VALUE). */
static int check_strings(struct imp *im, json_t *a, const char *what, bool env)
{
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a) || json_array_size(a) > IMG_MAX_ARGS) {
		set_err(im->err, im->errlen, "config %s: not an array of at most %d strings", what,
		        IMG_MAX_ARGS);
		return -1;
	}
	size_t total = 0, i;
	json_t *v;
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(v);
		size_t l = s ? json_string_length(v) : 0;
		if (!s || strlen(s) != l || l > (env ? IMG_MAX_ENV_BYTES : IMG_MAX_ARG_BYTES) ||
		    (env && (s[0] == '=' || !strchr(s, '=')))) {
			set_err(im->err, im->errlen, "config %s[%zu]: %s", what, i,
			        env ? "not a KEY=VALUE string of at most 8 KiB"
			            : "not a string of at most 4 KiB without NUL");
			return -1;
		}
		total += l + 1;
	}
	if (total > IMG_MAX_ARGV_TOTAL) {
		set_err(im->err, im->errlen, "config %s: more than 64 KiB in all", what);
		return -1;
	}
	return 0;
}

/* Checks the image config; returns the normalised run description (image.json). */
static json_t *check_config(struct imp *im, json_t *cfg, size_t nlayers, json_t **diff_ids)
{
	const char *os = json_string_value(json_object_get(cfg, "os"));
	const char *arch = json_string_value(json_object_get(cfg, "architecture"));
	if (os && strcmp(os, "linux")) {
		set_err(im->err, im->errlen, "config: os '%s' (only linux runs here)", os);
		return NULL;
	}
	if (arch && strcmp(arch, host_arch())) {
		set_err(im->err, im->errlen, "config: architecture '%s' (this machine runs %s)", arch,
		        host_arch());
		return NULL;
	}
	json_t *rootfs = json_object_get(cfg, "rootfs");
	*diff_ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_array(*diff_ids) || json_array_size(*diff_ids) != nlayers) {
		set_err(im->err, im->errlen, "config: rootfs.diff_ids must list one digest per layer (%zu)",
		        nlayers);
		return NULL;
	}
	json_t *c = json_object_get(cfg, "config");
	if (c && !json_is_null(c) && !json_is_object(c)) {
		set_err(im->err, im->errlen, "config: 'config' is not an object");
		return NULL;
	}
	json_t *ep = json_object_get(c, "Entrypoint"), *cmd = json_object_get(c, "Cmd");
	json_t *env = json_object_get(c, "Env"), *wd = json_object_get(c, "WorkingDir");
	if (check_strings(im, ep, "Entrypoint", false) < 0 || check_strings(im, cmd, "Cmd", false) < 0 ||
	    check_strings(im, env, "Env", true) < 0)
		return NULL;
	char wdn[IMG_MAX_NAME + 2] = "/";
	if (wd && !json_is_null(wd) && !(json_is_string(wd) && json_string_length(wd) == 0)) {
		const char *s = json_string_value(wd), *why = "not a string";
		if (!s || strlen(s) != json_string_length(wd) || s[0] != '/' || json_string_length(wd) > 1024 ||
		    norm_name(s + 1, wdn + 1, sizeof wdn - 1, &why) < 0) {
			set_err(im->err, im->errlen, "config WorkingDir: %s", s && s[0] != '/' ?
			        "not an absolute path" : why);
			return NULL;
		}
	}
	json_t *out = json_object();
	json_object_set_new(out, "entrypoint", json_is_array(ep) ? json_deep_copy(ep) : json_array());
	json_object_set_new(out, "cmd", json_is_array(cmd) ? json_deep_copy(cmd) : json_array());
	json_object_set_new(out, "env", json_is_array(env) ? json_deep_copy(env) : json_array());
	json_object_set_new(out, "workdir", json_string(wdn));
	return out;
}

/* First pass over a layer: decompress, hash, bound. */
static int layer_hash(struct imp *im, const char *blob, const char *diff_id, unsigned idx)
{
	int fd = openat(im->blobs, blob, O_RDONLY | O_CLOEXEC);
	struct archive *a = la.archive_read_new();
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int rc = -1;
	if (fd < 0 || !a || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		set_err(im->err, im->errlen, "layer %u: cannot read it", idx);
		goto out;
	}
	la.archive_read_support_filter_all(a);
	la.archive_read_support_format_raw(a);
	struct archive_entry *e;
	if (la.archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK ||
	    la.archive_read_next_header(a, &e) != ARCHIVE_OK) {
		set_err(im->err, im->errlen, "layer %u: %s", idx, la.archive_error_string(a));
		goto out;
	}
	uint64_t max = opt_or(im->o->max_unpacked_bytes, 8ull << 30);
	static char buf[1 << 16];
	for (;;) {
		la_ssize_t r = la.archive_read_data(a, buf, sizeof buf);
		if (r < 0) {
			set_err(im->err, im->errlen, "layer %u: %s", idx, la.archive_error_string(a));
			goto out;
		}
		if (r == 0)
			break;
		im->unpacked += (uint64_t)r;
		if (im->unpacked > max) {
			set_err(im->err, im->errlen, "layer %u: the layers decompress to more than the bound"
			        " of %llu bytes", idx, (unsigned long long)max);
			goto out;
		}
		EVP_DigestUpdate(md, buf, (size_t)r);
	}
	unsigned char d[32];
	char h[65];
	EVP_DigestFinal_ex(md, d, NULL);
	hex(d, h);
	if (!image_digest_ok(diff_id) || strcmp(diff_id + 7, h)) {
		set_err(im->err, im->errlen, "layer %u: its content is sha256:%s, the config's diff_id %s",
		        idx, h, diff_id ? diff_id : "(none)");
		goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	if (a)
		la.archive_read_free(a);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Writes the current entry's data into a new file leaf in dirfd. */
static int write_file(struct imp *im, struct archive *a, int dirfd, const char *leaf, mode_t mode)
{
	int fd = openat(dirfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	static char buf[1 << 16];
	for (;;) {
		la_ssize_t r = la.archive_read_data(a, buf, sizeof buf);
		if (r < 0) {
			set_err(im->err, im->errlen, "%s", la.archive_error_string(a));
			close(fd);
			errno = EIO;
			return -1;
		}
		if (r == 0)
			break;
		for (la_ssize_t off = 0; off < r;) {
			ssize_t w = write(fd, buf + off, (size_t)(r - off));
			if (w < 0) {
				close(fd);
				return -1;
			}
			off += w;
		}
		im->rep->bytes += (uint64_t)r;
	}
	int rc = fchmod(fd, mode);
	close(fd);
	return rc;
}

/* Applies one tar entry to the root. Returns 0, or -1 with err set. */
static int apply_entry(struct imp *im, struct archive *a, struct archive_entry *e, unsigned idx,
                       struct nameset *seen)
{
	char name[IMG_MAX_NAME + 1];
	const char *why, *raw = la.archive_entry_pathname(e);
	if (norm_name(raw, name, sizeof name, &why) < 0) {
		set_err(im->err, im->errlen, "layer %u: entry '%s': %s", idx, raw ? raw : "", why);
		return -1;
	}
	if (++im->entries > opt_or(im->o->max_entries, 1000000)) {
		set_err(im->err, im->errlen, "layer %u: more than %llu entries in all", idx,
		        (unsigned long long)opt_or(im->o->max_entries, 1000000));
		return -1;
	}
	int dup = nameset_add(seen, name);
	if (dup < 0) {
		set_err(im->err, im->errlen, "out of memory");
		return -1;
	}
	if (dup) {
		set_err(im->err, im->errlen, "layer %u: duplicate entry '%s'", idx, name);
		return -1;
	}
	if (!*name)
		return 0;   /* the root itself: its mode is ours */
	mode_t t = la.archive_entry_filetype(e);
	mode_t perm = la.archive_entry_perm(e);
	if (perm & 07000) {
		im->rep->stripped_modes++;
		perm &= 0777;
	}
	const char *leaf;
	int pfd = open_parent(im->root, name, &leaf, true);
	if (pfd < 0) {
		set_err(im->err, im->errlen, "layer %u: entry '%s': its directory %s", idx, name,
		        errno == ELOOP || errno == EXDEV ? "is a link that leaves the root or loops"
		                                          : strerror(errno));
		return -1;
	}
	int rc = -1;
	if (!strncmp(leaf, ".wh.", 4)) {
		const char *victim = leaf + 4;
		if (!strcmp(victim, ".wh..opq")) {
			if (empty_dir(pfd) < 0)
				goto sys;
		} else if (!*victim || !strcmp(victim, ".") || !strcmp(victim, "..") ||
		           !strncmp(victim, ".wh.", 4)) {
			set_err(im->err, im->errlen, "layer %u: whiteout '%s' names nothing removable", idx, name);
			goto out;
		} else if (rm_at(pfd, victim) < 0) {
			goto sys;
		}
		rc = 0;
		goto out;
	}
	struct stat old;
	bool exists = fstatat(pfd, leaf, &old, AT_SYMLINK_NOFOLLOW) == 0;
	if (t == AE_IFDIR && exists && S_ISDIR(old.st_mode)) {
		if (fchmodat(pfd, leaf, perm | 0700, 0) < 0)
			goto sys;
		rc = 0;
		goto out;
	}
	if (exists && rm_at(pfd, leaf) < 0)
		goto sys;
	if (la.archive_entry_hardlink(e))
		t = AE_IFREG;   /* libarchive gives hard links no type of their own */
	switch (t) {
	case AE_IFDIR:
		if (mkdirat(pfd, leaf, 0700) < 0 || fchmodat(pfd, leaf, perm | 0700, 0) < 0)
			goto sys;
		break;
	case AE_IFREG:
		if (la.archive_entry_hardlink(e)) {
			char target[IMG_MAX_NAME + 1] = "";
			int nr = norm_name(la.archive_entry_hardlink(e), target, sizeof target, &why);
			if (nr < 0 || !*target) {
				/* target is not written when the name is refused: the reason is why */
				set_err(im->err, im->errlen, "layer %u: hard link '%s' -> '%s': %s", idx, name,
				        la.archive_entry_hardlink(e), nr < 0 ? why : "the root");
				goto out;
			}
			const char *tleaf;
			int tfd = open_parent(im->root, target, &tleaf, false);
			struct stat ts;
			if (tfd < 0 || fstatat(tfd, tleaf, &ts, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(ts.st_mode)) {
				if (tfd >= 0)
					close(tfd);
				set_err(im->err, im->errlen, "layer %u: hard link '%s' -> '%s': not a file of"
				        " the image", idx, name, target);
				goto out;
			}
			int lr = linkat(tfd, tleaf, pfd, leaf, 0);
			close(tfd);
			if (lr < 0)
				goto sys;
			break;
		}
		if (write_file(im, a, pfd, leaf, perm) < 0)
			goto sys;
		break;
	case AE_IFLNK: {
		const char *target = la.archive_entry_symlink(e);
		if (!target || !*target || strlen(target) > IMG_MAX_NAME) {
			set_err(im->err, im->errlen, "layer %u: symlink '%s' without a usable target", idx, name);
			goto out;
		}
		if (!link_stays_in(name, target)) {
			set_err(im->err, im->errlen, "layer %u: symlink '%s' -> '%s' leaves the root", idx, name,
			        target);
			goto out;
		}
		if (symlinkat(target, pfd, leaf) < 0)
			goto sys;
		break;
	}
	case AE_IFCHR:
	case AE_IFBLK:
		set_err(im->err, im->errlen, "layer %u: entry '%s' is a device node", idx, name);
		goto out;
	default:
		set_err(im->err, im->errlen, "layer %u: entry '%s' is a %s (only files, directories and"
		        " links)", idx, name, t == AE_IFIFO ? "FIFO" : t == AE_IFSOCK ? "socket" : "special file");
		goto out;
	}
	rc = 0;
	goto out;
sys:
	if (!im->err[0] || errno != EIO)
		set_err(im->err, im->errlen, "layer %u: entry '%s': %s", idx, name, strerror(errno));
out:
	close(pfd);
	return rc;
}

/* Second pass over a layer: apply its entries. */
static int layer_apply(struct imp *im, const char *blob, unsigned idx)
{
	int fd = openat(im->blobs, blob, O_RDONLY | O_CLOEXEC);
	struct archive *a = la.archive_read_new();
	struct nameset seen = { 0 };
	int rc = -1;
	if (fd < 0 || !a) {
		set_err(im->err, im->errlen, "layer %u: cannot read it", idx);
		goto out;
	}
	la.archive_read_support_filter_all(a);
	la.archive_read_support_format_tar(a);
	if (la.archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		set_err(im->err, im->errlen, "layer %u: %s", idx, la.archive_error_string(a));
		goto out;
	}
	struct archive_entry *e;
	int r;
	while ((r = la.archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN)
		if (apply_entry(im, a, e, idx, &seen) < 0)
			goto out;
	if (r != ARCHIVE_EOF) {
		set_err(im->err, im->errlen, "layer %u: not a tar archive (%s)", idx, la.archive_error_string(a));
		goto out;
	}
	rc = 0;
out:
	nameset_clear(&seen);
	if (a)
		la.archive_read_free(a);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The mount points a run needs, as empty directories: whatever the image had there
 * goes (a run mounts over them anyway). */
static int mount_points(struct imp *im)
{
	static const char *const dirs[] = { "dev", "proc", "tmp", "submission", "output" };
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		struct stat st;
		if (fstatat(im->root, dirs[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			continue;
		if (rm_at(im->root, dirs[i]) < 0 || mkdirat(im->root, dirs[i], 0755) < 0) {
			set_err(im->err, im->errlen, "creating /%s in the image: %s", dirs[i], strerror(errno));
			return -1;
		}
	}
	return fchmod(im->root, 0755);
}

static int pick_manifest(struct imp *im, json_t **desc)
{
	json_t *ms = json_object_get(im->index_json, "manifests");
	if (!json_is_array(ms) || json_array_size(ms) == 0 || json_array_size(ms) > 64) {
		set_err(im->err, im->errlen, "index.json: 'manifests' must list 1 to 64 descriptors");
		return -1;
	}
	size_t i;
	json_t *m;
	*desc = NULL;
	json_array_foreach(ms, i, m) {
		json_t *p = json_object_get(m, "platform");
		const char *arch = json_string_value(json_object_get(p, "architecture"));
		if (json_array_size(ms) == 1 || (arch && !strcmp(arch, host_arch()))) {
			*desc = m;
			break;
		}
	}
	if (!*desc) {
		set_err(im->err, im->errlen, "index.json: no manifest for %s", host_arch());
		return -1;
	}
	const char *mt = json_string_value(json_object_get(*desc, "mediaType"));
	if (mt && strcmp(mt, "application/vnd.oci.image.manifest.v1+json")) {
		set_err(im->err, im->errlen, "index.json: manifest media type '%s' (an image manifest"
		        " is needed; nested indexes are not followed)", mt);
		return -1;
	}
	return 0;
}

static int build(struct imp *im, char digest[IMAGE_DIGEST_LEN + 1], json_t **run)
{
	json_t *mdesc, *manifest = NULL, *cfg = NULL, *diff_ids;
	char mhex[65], chex[65];
	int rc = -1;
	if (pick_manifest(im, &mdesc) < 0 || descriptor(im, mdesc, "manifest", mhex, &manifest) < 0)
		goto out;
	snprintf(digest, IMAGE_DIGEST_LEN + 1, "sha256:%s", mhex);
	json_t *layers = json_object_get(manifest, "layers");
	if (json_integer_value(json_object_get(manifest, "schemaVersion")) != 2 ||
	    !json_is_array(layers) || json_array_size(layers) > IMG_MAX_LAYERS) {
		set_err(im->err, im->errlen, "manifest: schemaVersion 2 with at most %d layers needed",
		        IMG_MAX_LAYERS);
		goto out;
	}
	if (descriptor(im, json_object_get(manifest, "config"), "config", chex, &cfg) < 0)
		goto out;
	if (!(*run = check_config(im, cfg, json_array_size(layers), &diff_ids)))
		goto out;
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l) {
		char lhex[65];
		char what[32];
		snprintf(what, sizeof what, "layer %zu", i);
		const char *mt = json_string_value(json_object_get(l, "mediaType"));
		if (descriptor(im, l, what, lhex, NULL) < 0)
			goto out;
		if (mt && strncmp(mt, "application/vnd.oci.image.layer.v1.tar", 38)) {
			set_err(im->err, im->errlen, "layer %zu: media type '%s' is not a tar layer", i, mt);
			goto out;
		}
		if (layer_hash(im, lhex, json_string_value(json_array_get(diff_ids, i)), (unsigned)i) < 0)
			goto out;
	}
	json_array_foreach(layers, i, l) {
		const char *dg = json_string_value(json_object_get(l, "digest"));
		if (layer_apply(im, dg + 7, (unsigned)i) < 0)
			goto out;
	}
	im->rep->layers = (unsigned)json_array_size(layers);
	im->rep->entries = im->entries;
	if (mount_points(im) < 0)
		goto out;
	rc = 0;
out:
	json_decref(manifest);
	json_decref(cfg);
	return rc;
}

int image_import(const struct image_opts *o, const char *path,
                 char digest[IMAGE_DIGEST_LEN + 1], struct image_report *rep,
                 char *err, size_t errlen)
{
	struct image_report dummy;
	struct imp im = { .o = o, .err = err, .errlen = errlen, .blobs = -1, .root = -1,
	                  .others = -1, .rep = rep ? rep : &dummy };
	*im.rep = (struct image_report){ 0 };
	err[0] = '\0';
	if (la_load(err, errlen) < 0)
		return -1;
	json_t *run = NULL;
	const char *dir = store_dir(o);
	int rc = -1, tmpfd = -1;
	mode_t um = umask(022);
	if (mkdir_p(dir, 0711) < 0) {
		set_err(err, errlen, "image store %s: %s", dir, strerror(errno));
		goto out_umask;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(im.tmp, sizeof im.tmp, "%s/.tmp-%d-%ld", dir, (int)getpid(), (long)ts.tv_nsec);
	if (mkdir(im.tmp, 0700) < 0 || (tmpfd = open(im.tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    mkdirat(tmpfd, "blobs", 0700) < 0 || mkdirat(tmpfd, "rootfs", 0755) < 0 ||
	    mkdirat(tmpfd, "others", 0700) < 0 ||
	    (im.blobs = openat(tmpfd, "blobs", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (im.others = openat(tmpfd, "others", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (im.root = openat(tmpfd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		set_err(err, errlen, "image store %s: %s", dir, strerror(errno));
		goto out;
	}
	if (read_archive(&im, path) < 0 || build(&im, digest, &run) < 0)
		goto out;
	json_object_set_new(run, "digest", json_string(digest));
	json_object_set_new(run, "layers", json_integer(im.rep->layers));
	json_object_set_new(run, "entries", json_integer((json_int_t)im.rep->entries));
	json_object_set_new(run, "bytes", json_integer((json_int_t)im.rep->bytes));
	json_object_set_new(run, "imported_at", json_integer((json_int_t)time(NULL)));
	char *text = json_dumps(run, JSON_INDENT(1) | JSON_SORT_KEYS);
	int jf = text ? openat(tmpfd, "image.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
	size_t tl = text ? strlen(text) : 0;
	bool wrote = jf >= 0 && write(jf, text, tl) == (ssize_t)tl && fsync(jf) == 0;
	if (jf >= 0)
		close(jf);
	free(text);
	if (!wrote) {
		set_err(err, errlen, "writing image.json: %s", strerror(errno));
		goto out;
	}
	if (rm_at(tmpfd, "blobs") < 0 || rm_at(tmpfd, "others") < 0) {
		set_err(err, errlen, "removing the spooled blobs: %s", strerror(errno));
		goto out;
	}
	char final[4200];
	snprintf(final, sizeof final, "%s/sha256-%s", dir, digest + 7);
	if (rename(im.tmp, final) < 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			set_err(err, errlen, "renaming into %s: %s", final, strerror(errno));
			goto out;
		}
		im.rep->existed = true;   /* imported concurrently or before: same content */
	} else {
		im.tmp[0] = '\0';
	}
	rc = 0;
out:
	json_decref(run);
	json_decref(im.index_json);
	json_decref(im.docker_manifest);
	for (size_t i = 0; i < im.no; i++)
		free(im.onames[i]);
	for (size_t i = 0; i < im.nl; i++) {
		free(im.lnames[i]);
		free(im.ltargets[i]);
	}
	free(im.onames);
	free(im.ohex);
	free(im.lnames);
	free(im.ltargets);
	nameset_clear(&im.members);
	if (im.others >= 0)
		close(im.others);
	if (im.blobs >= 0)
		close(im.blobs);
	if (im.root >= 0)
		close(im.root);
	if (tmpfd >= 0)
		close(tmpfd);
	if (im.tmp[0]) {
		const char *base = strrchr(im.tmp, '/') + 1;
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			(void)rm_at(dfd, base);
			close(dfd);
		}
	}
out_umask:
	umask(um);
	return rc;
}

/* ---- reading the store ------------------------------------------------------------- */

static char **strv_from(json_t *a)
{
	size_t n = json_is_array(a) ? json_array_size(a) : 0;
	char **v = calloc(n + 1, sizeof *v);
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(a, i));
		if (!s || !(v[i] = strdup(s))) {
			for (size_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return NULL;
		}
	}
	return v;
}

static void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

void image_free(struct image *im)
{
	if (!im)
		return;
	free(im->rootfs);
	strv_free(im->entrypoint);
	strv_free(im->cmd);
	strv_free(im->env);
	free(im->workdir);
	free(im);
}

int image_meta_path(const struct image_opts *o, const char *digest, char *buf, size_t n)
{
	if (!image_digest_ok(digest))
		return -1;
	int l = snprintf(buf, n, "%s/sha256-%s/image.json", store_dir(o), digest + 7);
	return l < 0 || (size_t)l >= n ? -1 : 0;
}

int image_open(const struct image_opts *o, const char *digest, struct image **out,
               char *err, size_t errlen)
{
	*out = NULL;
	if (!image_digest_ok(digest)) {
		set_err(err, errlen, "'%s' is not an image digest (sha256:<64 hex digits>)",
		        digest ? digest : "");
		return -1;
	}
	char path[4200];
	snprintf(path, sizeof path, "%s/sha256-%s/image.json", store_dir(o), digest + 7);
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		if (access(path, F_OK) < 0 && errno == ENOENT) {
			set_err(err, errlen, "image %s is not in the image store %s (import it with"
			        " `arbiter image import`)", digest, store_dir(o));
			return IMAGE_NOT_FOUND;
		}
		set_err(err, errlen, "%s: %s", path, je.text);
		return -1;
	}
	struct image *im = calloc(1, sizeof *im);
	const char *wd = json_string_value(json_object_get(j, "workdir"));
	if (im) {
		snprintf(im->digest, sizeof im->digest, "%s", digest);
		snprintf(path, sizeof path, "%s/sha256-%s/rootfs", store_dir(o), digest + 7);
		im->rootfs = strdup(path);
		im->entrypoint = strv_from(json_object_get(j, "entrypoint"));
		im->cmd = strv_from(json_object_get(j, "cmd"));
		im->env = strv_from(json_object_get(j, "env"));
		im->workdir = strdup(wd ? wd : "/");
	}
	json_decref(j);
	if (!im || !im->rootfs || !im->entrypoint || !im->cmd || !im->env || !im->workdir) {
		image_free(im);
		set_err(err, errlen, "image %s: unreadable image.json or out of memory", digest);
		return -1;
	}
	*out = im;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int image_list(const struct image_opts *o, char ***out, char *err, size_t errlen)
{
	*out = NULL;
	size_t n = 0, cap = 16;
	char **v = calloc(cap + 1, sizeof *v);
	DIR *d = opendir(store_dir(o));
	if (!v) {
		if (d)
			closedir(d);
		set_err(err, errlen, "out of memory");
		return -1;
	}
	if (!d) {
		if (errno == ENOENT) {
			*out = v;
			return 0;
		}
		free(v);
		set_err(err, errlen, "image store %s: %s", store_dir(o), strerror(errno));
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "sha256-", 7) || !is_hex64(e->d_name + 7))
			continue;
		if (n == cap) {
			char **nv = realloc(v, (cap * 2 + 1) * sizeof *v);
			if (!nv)
				break;
			v = nv;
			cap *= 2;
		}
		char buf[IMAGE_DIGEST_LEN + 1];
		snprintf(buf, sizeof buf, "sha256:%s", e->d_name + 7);
		if (!(v[n] = strdup(buf)))
			break;
		v[++n] = NULL;
	}
	closedir(d);
	v[n] = NULL;
	qsort(v, n, sizeof *v, cmp_str);
	*out = v;
	return 0;
}

int image_rm(const struct image_opts *o, const char *digest, char *err, size_t errlen)
{
	if (!image_digest_ok(digest)) {
		set_err(err, errlen, "'%s' is not an image digest (sha256:<64 hex digits>)",
		        digest ? digest : "");
		return -1;
	}
	const char *dir = store_dir(o);
	char from[4200], to[4200];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(from, sizeof from, "%s/sha256-%s", dir, digest + 7);
	snprintf(to, sizeof to, ".rm-%d-%ld", (int)getpid(), (long)ts.tv_nsec);
	char tof[4300];
	snprintf(tof, sizeof tof, "%s/%s", dir, to);
	if (rename(from, tof) < 0) {
		if (errno == ENOENT) {
			set_err(err, errlen, "image %s is not in the image store %s", digest, dir);
			return IMAGE_NOT_FOUND;
		}
		set_err(err, errlen, "%s: %s", from, strerror(errno));
		return -1;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || rm_at(dfd, to) < 0) {
		set_err(err, errlen, "removing %s: %s", tof, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	close(dfd);
	return 0;
}
