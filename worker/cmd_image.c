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
#include "config.h"
#include "image.h"

int image_opts_load(const char *cmdname, struct image_opts *o, char *dir, size_t n)
{
	static const char *const names[] = { "ARBITER_IMAGE_DIR", "ARBITER_IMAGE_MAX_MB",
	                                     "ARBITER_IMAGE_MAX_UNPACKED_MB",
	                                     "ARBITER_SANDBOX_LOCK_DIR", NULL };
	struct config c;
	unsigned given;
	char err[512];
	if (config_load_some(names, NULL, &c, &given, err, sizeof err) < 0) {
		config_report(cmdname, err);
		return -1;
	}
	image_opts_from_config(&c, o, dir, n);
	config_free(&c);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: arbiter image import FILE   (an OCI image archive or a docker-archive)\n"
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
	char dir[4096];
	if (image_opts_load("image", &o, dir, sizeof dir) < 0)
		return 2;
	if (!strcmp(argv[1], "import") && argc == 3) {
		char digest[IMAGE_DIGEST_LEN + 1];
		struct image_report rep;
		if (image_import(&o, argv[2], digest, &rep, err, sizeof err) < 0) {
			fprintf(stderr, "arbiter image import: %s: refused: %s\n", argv[2], err);
			return 1;
		}
		fprintf(stderr, "%s: %s, %u layers, %llu entries, %llu bytes%s%s\n", argv[2],
		        rep.docker ? "docker-archive" : "OCI archive", rep.layers,
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
