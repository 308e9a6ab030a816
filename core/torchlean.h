/* TorchLean's backend vocabulary at one commit, as data (providers/torchlean/<commit>.tsv; the
 * format: providers/torchlean/README.md; embedded at build time): the constructors, structure
 * fields, modules and namespaces `capcheck emit-lean` targets, the devices and providers TorchLean
 * names, its maintained profiles, the eager executors it links and the runtime guards its
 * capsules name. Several commits are embedded, ordered by the date each file states; emit-lean
 * writes for one of them, the newest by default.
 *
 * It also answers for capcheck's own device names: one capcheck does not run gets a sentence
 * that tells a device TorchLean knows (and no capcheck provider runs on) from an unknown one
 * (provider names: cc_provider_unknown_msg, harness/report/capsules.h, which needs the catalog). */
#ifndef CAPCHECK_TORCHLEAN_H
#define CAPCHECK_TORCHLEAN_H

#include <stddef.h>

#define CC_TL_MAX_ROWS 128

typedef struct {
    const char *kind, *name, *source, *value; /* the four columns (pointers into text) */
    int line;
} cc_tl_row;

typedef struct {
    char *text; /* owned copy of the file, cut into the rows' strings */
    cc_tl_row rows[CC_TL_MAX_ROWS];
    int n;
    const char *commit; /* the commit row's value */
    const char *date;   /* the date row's value, YYYY-MM-DD: the commit is no older */
    const char *date_source; /* the file that states it */
} cc_torchlean;

#define CC_TL_MAX_COMMITS 16

/* Parse signature text (`name` labels errors). Returns 0, or -1 with "name:line: ..." in msg. */
int cc_torchlean_parse(const char *text, const char *name, cc_torchlean *out, char *msg,
                       size_t len);
/* The embedded data of the commit starting with `prefix` (at least 7 hex digits), or of the newest
 * embedded commit (the latest date; the greater commit where two dates tie) when prefix is NULL.
 * Returns 0, or -1 with a sentence listing the embedded commits. */
int cc_torchlean_load(const char *prefix, cc_torchlean *out, char *msg, size_t len);
/* Every embedded commit's data, newest first, into out[0..max): the count, or -1 with msg. */
int cc_torchlean_load_all(cc_torchlean *out, int max, char *msg, size_t len);
void cc_torchlean_free(cc_torchlean *t);

/* The first row of `kind` named `name` (NULL name: any), or NULL. */
const cc_tl_row *cc_tl_find(const cc_torchlean *t, const char *kind, const char *name);
/* Whether `word` is one of the space-separated items of `list`, an item's "(...)" and "=" tails
 * ignored ("shapeSafety(BackendOp)" is the item shapeSafety). */
int cc_tl_has_word(const char *list, const char *word);
/* Whether `ctor` is a constructor of the inductive `type` (its last name component, e.g.
 * "Provider"). */
int cc_tl_has_ctor(const cc_torchlean *t, const char *type, const char *ctor);
/* The value of `key=` in a value of key=value items ("devices=cpu providers=x,y"), into buf
 * ("" when absent). */
void cc_tl_item(const char *value, const char *key, char *buf, size_t n);
/* The runtime guard TorchLean's capsules name for this provider, device, op and contract field
 * ("shape" or "layout"), or NULL when TorchLean has none there. */
const char *cc_tl_guard(const cc_torchlean *t, const char *provider, const char *device,
                        const char *op, const char *field);
/* The name of the eager executor TorchLean links for provider x device, or NULL. */
const char *cc_tl_handler(const cc_torchlean *t, const char *provider, const char *device);
/* The profile TorchLean maintains for a device (BackendProfile.maintainedForDevice?; value:
 * device=D availability=NAME name=STRING assurance=checked|external), or NULL. */
const cc_tl_row *cc_tl_profile(const cc_torchlean *t, const char *device);
/* Whether the TensorLayout constructor `layout` holds a tensor of dtype `dtype` (capcheck's
 * name, "f32"): its layout row says dtypes=any or lists the dtype. No row: any. */
int cc_tl_layout_admits(const cc_torchlean *t, const char *layout, const char *dtype);

/* One sentence for a device name capcheck does not run (cc_device_parse failed on it): a device
 * TorchLean knows but no capcheck provider runs on, or an unknown one, with both lists. */
void cc_device_unknown_msg(const char *name, char *buf, size_t n);

#endif
