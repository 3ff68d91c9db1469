/*
 * A fast reader of JSON text into jansson values, for the documents the worker parses per
 * evaluation (answers, metadata, ground truths): jansson's own reader takes the text one byte
 * at a time through a callback, copies every token and validates as it goes (about 60 MB/s
 * here); this one scans strings and numbers in place (several times faster) and builds the
 * same values with jansson's constructors. It reads only what it can read exactly as
 * json_loadb(text, len, JSON_DECODE_ANY) would; anything else (an error, an integer beyond
 * 64 bits, "\u0000", nesting deeper than JLOAD_MAX_DEPTH, a locale whose decimal point is not
 * '.') is left to jansson, which then gives the value or the error. Pure: no I/O.
 */
#ifndef ARBITER_JLOAD_H
#define ARBITER_JLOAD_H

#include <jansson.h>
#include <stddef.h>

/* Containers nested deeper than this are left to jansson (which allows 2048). */
#define JLOAD_MAX_DEPTH 256

/* Reads text[0..len) (any JSON value, whitespace around it). Returns a new reference equal to
 * what json_loadb(text, len, JSON_DECODE_ANY, ...) returns (same types, same object member
 * order, same numbers bit for bit), or NULL when it leaves the text to json_loadb (invalid
 * JSON, or one of the cases above). */
json_t *jload(const char *text, size_t len);

#endif
