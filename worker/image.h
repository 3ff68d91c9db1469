/*
 * The image store of the container evaluator: OCI images (from an OCI archive or a
 * docker-archive) imported once by the operator (`arbiter image import FILE`),
 * unpacked into a content-addressed directory and used read-only as the root of
 * sandboxed runs.
 *
 * Layout under the store directory (ARBITER_IMAGE_DIR):
 *   sha256-<hex>/rootfs       the image's file system, every layer applied
 *   sha256-<hex>/image.json   what a run needs from the config (entrypoint, cmd,
 *                             env, working directory) plus import figures
 *   .tmp-* / .rm-*            imports and removals under way
 * <hex> is the manifest's digest. An import builds everything in a .tmp-
 * directory and renames it into place, a removal renames it away first, so a
 * reader sees a whole image or none.
 *
 * Layers are hostile input: absolute names, "..", links leaving the root,
 * device nodes, duplicate entries, whiteouts outside the layer's tree, bad
 * digests and oversized or compression-bomb layers are refused; setuid,
 * setgid and sticky bits, owners and extended attributes are dropped. Every
 * file operation resolves names inside the root being built (openat2
 * RESOLVE_IN_ROOT), never through a link to the host.
 */
#ifndef ARBITER_IMAGE_H
#define ARBITER_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMAGE_DIGEST_LEN 71          /* "sha256:" + 64 hex digits */
#define IMAGE_NOT_FOUND (-2)         /* image_open: the store lacks the image */

struct image_opts {
	const char *dir;              /* the store; NULL: /run/arbiter-sandbox/images */
	uint64_t max_archive_bytes;   /* the archive file; 0: 4 GiB */
	uint64_t max_unpacked_bytes;  /* all layers decompressed; 0: 8 GiB */
	uint64_t max_entries;         /* tar entries of all layers; 0: 1,000,000 */
};

/* What an import did beyond the digest (for its summary line). */
struct image_report {
	bool existed;                 /* the store had the image already: nothing changed */
	bool docker;                  /* the archive was a docker-archive (`docker save`) */
	unsigned layers;
	uint64_t entries, bytes;
	uint64_t stripped_modes;      /* setuid/setgid/sticky bits removed */
};

/* An imported image, as a run needs it. Free with image_free. */
struct image {
	char digest[IMAGE_DIGEST_LEN + 1];
	char *rootfs;                 /* absolute host path of the unpacked root */
	char **entrypoint, **cmd, **env;   /* NULL-terminated, never NULL themselves */
	char *workdir;                /* absolute; "/" when the config has none */
};

struct config;

/* The store and bounds of the settings in c: ARBITER_IMAGE_DIR, else
 * <ARBITER_SANDBOX_LOCK_DIR>/images (written into dir, n bytes, which o->dir then
 * borrows); ARBITER_IMAGE_MAX_MB and ARBITER_IMAGE_MAX_UNPACKED_MB. */
void image_opts_from_config(const struct config *c, struct image_opts *o, char *dir, size_t n);

/* True when s is "sha256:" followed by 64 lowercase hex digits. */
bool image_digest_ok(const char *s);

/* Imports the image archive at path into the store, creating the store if needed: an OCI
 * image archive (a tar of an OCI image layout), or a docker-archive (`docker save`:
 * manifest.json naming one image's config and layer tars), whose OCI manifest is written
 * for it (config and layers as they are; the digest is that manifest's, the same for the
 * same archive), under the same rules. Safe to run concurrently with other imports, removals
 * and runs. On success returns 0 and writes the manifest digest ("sha256:<hex>") into
 * digest; otherwise -1 with the first rule that failed in err. */
int image_import(const struct image_opts *o, const char *path,
                 char digest[IMAGE_DIGEST_LEN + 1], struct image_report *rep,
                 char *err, size_t errlen) __attribute__((warn_unused_result));

/* The path of the image.json of the image named digest in the store (whether the store has
 * the image is whether that file exists: it is renamed into place with the image), written
 * into buf (n bytes). Returns 0, or -1 when digest is not an image digest or buf is short. */
int image_meta_path(const struct image_opts *o, const char *digest, char *buf, size_t n);

/* Loads the image named digest. Returns 0 and *out (the caller frees it with
 * image_free), IMAGE_NOT_FOUND when the store lacks it, or -1 with err. */
int image_open(const struct image_opts *o, const char *digest, struct image **out,
               char *err, size_t errlen) __attribute__((warn_unused_result));

void image_free(struct image *im);   /* NULL ok */

/* The digests in the store, sorted; *out is a NULL-terminated array the caller frees
 * (each string, then the array). Returns 0, or -1 with err. */
int image_list(const struct image_opts *o, char ***out, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Removes an image from the store; runs that use it keep their mounts. Returns 0,
 * IMAGE_NOT_FOUND, or -1 with err. */
int image_rm(const struct image_opts *o, const char *digest, char *err, size_t errlen)
	__attribute__((warn_unused_result));

#endif
