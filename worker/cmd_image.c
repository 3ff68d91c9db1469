/*
 * `arbiter image import FILE | list | rm DIGEST`: the operator's side of the
 * image store (worker/image.h). The store is ARBITER_IMAGE_DIR; the bounds are
 * ARBITER_IMAGE_MAX_MB (the archive) and ARBITER_IMAGE_MAX_UNPACKED_MB (all
 * layers decompressed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "image.h"

/* Reads a size in MiB from the environment; 0 when unset. -1 when malformed. */
static int env_mb(const char *name, uint64_t *out)
{
	const char *v = getenv(name);
	*out = 0;
	if (!v || !*v)
		return 0;
	char *end;
	errno = 0;
	unsigned long long mb = strtoull(v, &end, 10);
	if (errno || *end || mb == 0 || mb > (1ull << 30)) {
		fprintf(stderr, "arbiter image: %s=%s is not a size in MiB (1..2^30)\n", name, v);
		return -1;
	}
	*out = (uint64_t)mb << 20;
	return 0;
}

int image_opts_from_env(struct image_opts *o)
{
	*o = (struct image_opts){ .dir = image_default_dir() };
	if (env_mb("ARBITER_IMAGE_MAX_MB", &o->max_archive_bytes) < 0 ||
	    env_mb("ARBITER_IMAGE_MAX_UNPACKED_MB", &o->max_unpacked_bytes) < 0)
		return -1;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: arbiter image import FILE   (an OCI image archive)\n"
	                "       arbiter image list\n"
	                "       arbiter image rm DIGEST\n");
}

int cmd_image(int argc, char **argv)
{
	struct image_opts o;
	char err[1024];
	if (argc < 2) {
		usage();
		return 2;
	}
	if (image_opts_from_env(&o) < 0)
		return 2;
	if (!strcmp(argv[1], "import") && argc == 3) {
		char digest[IMAGE_DIGEST_LEN + 1];
		struct image_report rep;
		if (image_import(&o, argv[2], digest, &rep, err, sizeof err) < 0) {
			fprintf(stderr, "arbiter image import: %s: refused: %s\n", argv[2], err);
			return 1;
		}
		fprintf(stderr, "%s: %u layers, %llu entries, %llu bytes%s%s\n", argv[2], rep.layers,
		        (unsigned long long)rep.entries, (unsigned long long)rep.bytes,
		        rep.stripped_modes ? ", setuid/setgid/sticky bits dropped" : "",
		        rep.existed ? " (already in the store)" : "");
		printf("%s\n", digest);
		return 0;
	}
	if (!strcmp(argv[1], "list") && argc == 2) {
		char **v;
		if (image_list(&o, &v, err, sizeof err) < 0) {
			fprintf(stderr, "arbiter image list: %s\n", err);
			return 1;
		}
		for (char **p = v; *p; p++) {
			printf("%s\n", *p);
			free(*p);
		}
		free(v);
		return 0;
	}
	if (!strcmp(argv[1], "rm") && argc == 3) {
		int rc = image_rm(&o, argv[2], err, sizeof err);
		if (rc < 0) {
			fprintf(stderr, "arbiter image rm: %s\n", err);
			return rc == IMAGE_NOT_FOUND ? 3 : 1;
		}
		return 0;
	}
	usage();
	return 2;
}
