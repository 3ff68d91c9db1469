/*
 * Paths into JSON documents, as used by a scoring spec's `field`,
 * `ground_truth_field` and expression `vars` (common/README.md "Scoring spec"): `a.b[2].c`.
 * Grammar: segments separated by '.', each a key (any characters except
 * '.', '[', ']' and '"'; non-empty) optionally followed by indexes `[N]`
 * (N a non-negative decimal integer); a key may also be written `["any.key"]`
 * with JSON string escapes; a path may start with `[N]` or `["key"]`. A purely numeric dot segment (`items.0`) indexes an
 * array and looks up key "0" in an object. Pure: no I/O.
 */
#ifndef ARBITER_JPATH_H
#define ARBITER_JPATH_H

#include <jansson.h>
#include <stddef.h>

#define JPATH_MAX_LEN 1024      /* path text limit in bytes */
#define JPATH_MAX_SEGMENTS 64   /* keys + indexes */

struct jpath;
/* Parses a NUL-terminated path of length len. Returns 0 and *out (free with jpath_free), or -1
 * with *out = NULL and a message ("position P: <what>") in err. */
int jpath_parse(const char *s, size_t len, struct jpath **out, char *err, size_t errlen);
void jpath_free(struct jpath *p);                /* NULL ok */
/* The path text as given to jpath_parse (owned by p). */
const char *jpath_text(const struct jpath *p);
/* Resolves p in root (NULL root = missing). Returns the borrowed value, or NULL when a key is
 * missing, an index is out of range, or a segment meets the wrong type; then, if why is not
 * NULL, a short reason ("key 'b' not found", "index 5 out of range (length 3)", "'a' is a
 * string, not an object") is written there. */
const json_t *jpath_get(const struct jpath *p, const json_t *root, char *why, size_t whylen);

#endif
