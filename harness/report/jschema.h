/* A validator for the subset of JSON Schema (2020-12) that reports/schema.json and
 * reports/evidence.schema.json use: type (a name or a list), properties, required,
 * additionalProperties (true, false or a schema), items, enum, const, minimum, maximum,
 * minLength, pattern (POSIX extended regular expressions), minItems, maxItems, anyOf, $ref to
 * "#/$defs/NAME", and the annotations $schema, $id, $defs, title, description, $comment. A
 * schema using any other keyword is itself an error, so a schema cannot promise more than is
 * checked. */
#ifndef CAPCHECK_JSCHEMA_H
#define CAPCHECK_JSCHEMA_H

#include <stddef.h>

#include "core/json.h"

/* 0: doc conforms; 1: it does not (msg names the first place, "$.rows[3].op: ..."); 2: the
 * schema is malformed or uses an unsupported keyword. */
int cc_jschema_validate(const cc_json *schema, const cc_json *doc, char *msg, size_t len);
/* The same for two files; 2 also when a file cannot be read or is not JSON (text that is not
 * UTF-8 included). schema_path NULL: the report schema built into capcheck (reports/schema.json
 * at build time). */
#define CC_SCHEMA_BUILT_IN "built-in:reports/schema.json"
int cc_jschema_validate_files(const char *schema_path, const char *doc_path, char *msg,
                              size_t len);

#endif
