/* Result fields that the pages (report.html, the history page) read by name from results.jsonl
 * when a writer puts them there, and do without when it does not: "platform" (the platform key
 * of the kernels that ran, e.g. cpu:avx512 or cuda:sm90) and the flags below. Adding a flag is
 * one entry of FLAGS in result_extras.c and one enum name here. */
#ifndef CAPCHECK_RESULT_EXTRAS_H
#define CAPCHECK_RESULT_EXTRAS_H

#include <stddef.h>

enum {
    CC_RESULT_VACUOUS, /* "vacuous": true: a check that could not fail */
    CC_RESULT_SUSPECT, /* "suspect": true: passed, but the verdict is in doubt */
    CC_RESULT_RETRIED, /* "retried": true: the worker died from outside; the case ran again */
    CC_RESULT_PLACEMENT, /* "placement_sensitive": true: its bits depend on the buffers' place */
    CC_RESULT_FLAG_COUNT
};

const char *cc_result_flag_name(int flag);    /* its JSON key */
const char *cc_result_flag_meaning(int flag); /* one phrase for people */

#define CC_EXTRAS_MAX_PLATFORMS 64

typedef struct {
    size_t n;               /* results (by case index) */
    unsigned char *flags;   /* per result: bit k set when flag k is true */
    signed char *platform;  /* per result: index into platforms, -1 when none is named */
    char platforms[CC_EXTRAS_MAX_PLATFORMS][48];
    int n_platforms;
    int have_flag[CC_RESULT_FLAG_COUNT]; /* some record carries the key at all */
} cc_result_extras;

/* Read dir/results.jsonl (records with an "index" below n; results.jsonl was already checked by
 * cc_run_load). Returns 0, or -1 with a sentence in msg. */
int cc_result_extras_read(const char *dir, size_t n, cc_result_extras *x, char *msg, size_t len);
void cc_result_extras_free(cc_result_extras *x);
/* The platform of result i, or NULL. */
const char *cc_result_extras_platform(const cc_result_extras *x, size_t i);
int cc_result_extras_flag(const cc_result_extras *x, size_t i, int flag);

#endif
