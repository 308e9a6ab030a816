#include "harness/report/results_read.h"

#include <math.h>

#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "harness/run/witness.h"
#include "core/torchlean.h"

int cc_result_status_parse(const char *s, cc_result_status *out)
{
    for (int k = 0; k < CC_RES_COUNT; k++)
        if (strcmp(s, cc_result_status_name((cc_result_status)k)) == 0) {
            *out = (cc_result_status)k;
            return 0;
        }
    return -1;
}

int cc_layout_parse(const char *s, cc_layout *out)
{
    for (int k = 0; k < CC_LAYOUT_COUNT; k++)
        if (strcmp(s, cc_layout_name((cc_layout)k)) == 0) {
            *out = (cc_layout)k;
            return 0;
        }
    return -1;
}

/* Copy string member `key` into buf; missing is an error only when `required`. */
static int get_text(const cc_json *o, const char *key, char *buf, size_t n, int required,
                    char *msg, size_t len)
{
    const char *s;
    if (cc_json_string(o, key, &s)) {
        if (!required && !cc_json_get(o, key))
            return 0;
        snprintf(msg, len, "\"%s\" is %s", key, cc_json_get(o, key) ? "not a string" : "missing");
        return -1;
    }
    if (strlen(s) >= n) {
        snprintf(msg, len, "\"%s\" is longer than %zu characters", key, n - 1);
        return -1;
    }
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

static int get_num(const cc_json *o, const char *key, double *x, char *msg, size_t len)
{
    if (!cc_json_get(o, key))
        return 0;
    if (cc_json_double(o, key, x)) {
        snprintf(msg, len, "\"%s\" is not a number", key);
        return -1;
    }
    return 0;
}

/* "placement_sensitive": true with its "placement" {"output", "index", "first", "moved"} (the
 * runner's repeat check, runner.h), or neither. */
static int get_placement(const cc_json *o, cc_result *r, char *msg, size_t len)
{
    const cc_json *pl = cc_json_get(o, "placement");
    if (cc_json_get(o, "placement_sensitive") &&
        cc_json_bool(o, "placement_sensitive", &r->placement_sensitive)) {
        snprintf(msg, len, "\"placement_sensitive\" is not true/false");
        return -1;
    }
    if (!r->placement_sensitive != !pl) {
        snprintf(msg, len, "\"placement_sensitive\": true and \"placement\" come together");
        return -1;
    }
    if (!pl)
        return 0;
    if (pl->type != CC_JSON_OBJECT ||
        !cc_json_get(pl, "first") || !cc_json_get(pl, "moved")) {
        snprintf(msg, len, "\"placement\" is not {\"output\", \"index\", \"first\", "
                           "\"moved\"}");
        return -1;
    }
    return get_text(pl, "output", r->placement_output, sizeof r->placement_output, 1, msg, len) ||
                   get_text(pl, "index", r->placement_index, sizeof r->placement_index, 1, msg,
                            len) ||
                   get_num(pl, "first", &r->placement_first, msg, len) ||
                   get_num(pl, "moved", &r->placement_moved, msg, len)
               ? -1
               : 0;
}

/* "bias" (harness/run/compare.h): the rounding-bias test of largest |z|; its verdict is
 * decided again from the counts (z and biased are what they give). */
static int get_bias(const cc_json *b, cc_result *r, char *msg, size_t len)
{
    cc_bias t = {0, 0, 0, 0.0, 0.0, 0};
    if (b->type != CC_JSON_OBJECT ||
        get_text(b, "output", r->bias_output, sizeof r->bias_output, 1, msg, len) ||
        cc_json_i64(b, "n", &t.n) || cc_json_i64(b, "toward_zero", &t.toward_zero) ||
        cc_json_i64(b, "below", &t.below) || cc_json_double(b, "mean_ulp", &t.mean_ulp) ||
        t.n < 1 || t.toward_zero < 0 || t.toward_zero > t.n || t.below < 0 || t.below > t.n) {
        snprintf(msg, len, "\"bias\" is not {\"output\", \"n\" >= 1, \"toward_zero\" and "
                           "\"below\" in 0 .. n, \"mean_ulp\", \"z\"}");
        return -1;
    }
    cc_bias_decide(&t);
    r->bias = t;
    return 0;
}

/* "witnesses" and "verdict" (harness/run/witness.h): both or neither; 1 .. CC_MAX_WITNESSES. */
static int get_witnesses(const cc_json *o, cc_result *r, char *msg, size_t len)
{
    const cc_json *list = cc_json_get(o, "witnesses"), *v = cc_json_get(o, "verdict");
    if (!list && !v)
        return 0;
    if (!list || !v) {
        snprintf(msg, len, "\"witnesses\" and \"verdict\" come together");
        return -1;
    }
    if (list->type != CC_JSON_ARRAY || !list->child) {
        snprintf(msg, len, "\"witnesses\" is not a non-empty list");
        return -1;
    }
    const char *verdict;
    if (cc_json_string(o, "verdict", &verdict) || cc_verdict_parse(verdict, &r->verdict)) {
        snprintf(msg, len, "\"verdict\" is not a known verdict");
        return -1;
    }
    for (const cc_json *e = list->child; e; e = e->next) {
        if (r->n_witnesses == CC_MAX_WITNESSES) {
            snprintf(msg, len, "more than %d witnesses", CC_MAX_WITNESSES);
            return -1;
        }
        cc_witness *w = &r->witnesses[r->n_witnesses++];
        char status[24]; /* "nondeterministic" and its NUL are 17 */
        if (e->type != CC_JSON_OBJECT) {
            snprintf(msg, len, "a witness is not an object");
            return -1;
        }
        if (get_text(e, "provider", w->provider, sizeof w->provider, 1, msg, len) ||
            get_text(e, "status", status, sizeof status, 1, msg, len) ||
            get_text(e, "message", w->message, sizeof w->message, 0, msg, len) ||
            get_num(e, "worst_ratio", &w->worst_ratio, msg, len) ||
            get_num(e, "got", &w->got, msg, len) ||
            get_num(e, "agree_ratio", &w->agree_ratio, msg, len))
            return -1;
        if (cc_result_status_parse(status, &w->status)) {
            snprintf(msg, len, "unknown witness status \"%s\"", status);
            return -1;
        }
        w->has_value = cc_json_get(e, "got") != NULL;
        if (w->has_value != (cc_json_get(e, "agree_ratio") != NULL)) {
            snprintf(msg, len, "a witness's \"got\" and \"agree_ratio\" come together");
            return -1;
        }
    }
    return 0;
}

int cc_result_from_json(const cc_json *o, cc_result *r, char *msg, size_t len)
{
    memset(r, 0, sizeof *r);
    if (!o || o->type != CC_JSON_OBJECT) {
        snprintf(msg, len, "a result record is a JSON object");
        return -1;
    }
    char dtype[16], device[16], layout[16], status[24]; /* "nondeterministic": 17 */
    if (get_text(o, "case", r->line, sizeof r->line, 1, msg, len) ||
        get_text(o, "op", r->op, sizeof r->op, 1, msg, len) ||
        get_text(o, "dtype", dtype, sizeof dtype, 1, msg, len) ||
        get_text(o, "device", device, sizeof device, 1, msg, len) ||
        get_text(o, "layout", layout, sizeof layout, 1, msg, len) ||
        get_text(o, "provider", r->provider, sizeof r->provider, 1, msg, len) ||
        get_text(o, "platform", r->platform, sizeof r->platform, 0, msg, len) ||
        get_text(o, "vjp_mode", r->vjp_mode, sizeof r->vjp_mode, 0, msg, len) ||
        get_text(o, "status", status, sizeof status, 1, msg, len) ||
        get_text(o, "message", r->message, sizeof r->message, 0, msg, len))
        return -1;
    if (cc_dtype_parse(dtype, &r->dtype)) {
        snprintf(msg, len, "unknown dtype \"%s\"", dtype);
        return -1;
    }
    if (cc_device_parse(device, &r->device)) {
        cc_device_unknown_msg(device, msg, len);
        return -1;
    }
    if (cc_layout_parse(layout, &r->layout)) {
        snprintf(msg, len, "unknown layout \"%s\"", layout);
        return -1;
    }
    if (cc_result_status_parse(status, &r->status)) {
        snprintf(msg, len, "unknown status \"%s\"", status);
        return -1;
    }
    if ((cc_json_get(o, "checked_fwd") && cc_json_bool(o, "checked_fwd", &r->checked_fwd)) ||
        (cc_json_get(o, "checked_vjp") && cc_json_bool(o, "checked_vjp", &r->checked_vjp)) ||
        (cc_json_get(o, "retried") && cc_json_bool(o, "retried", &r->retried))) {
        snprintf(msg, len, "\"checked_fwd\", \"checked_vjp\" or \"retried\" is not true/false");
        return -1;
    }
    if (get_num(o, "fwd_ratio", &r->fwd_ratio, msg, len) ||
        get_num(o, "vjp_ratio", &r->vjp_ratio, msg, len) ||
        get_num(o, "worst_ratio", &r->worst_ratio, msg, len) ||
        get_num(o, "seconds", &r->seconds, msg, len))
        return -1;
    char acc[16] = "strict"; /* a record without it predates relaxed judging */
    if (get_text(o, "accumulation", acc, sizeof acc, 0, msg, len) ||
        get_num(o, "suspect_ratio", &r->suspect_ratio, msg, len))
        return -1;
    if (cc_accumulation_parse(acc, &r->accumulation)) {
        snprintf(msg, len, "unknown accumulation \"%s\"", acc);
        return -1;
    }
    if ((cc_json_get(o, "suspect") && cc_json_bool(o, "suspect", &r->suspect)) ||
        (cc_json_get(o, "vacuous") && cc_json_bool(o, "vacuous", &r->vacuous))) {
        snprintf(msg, len, "\"suspect\"/\"vacuous\" are not true/false");
        return -1;
    }
    if (get_text(o, "vacuous_outputs", r->vacuous_outputs, sizeof r->vacuous_outputs, 0, msg,
                 len))
        return -1;
    if (r->vacuous_outputs[0] && !r->vacuous) {
        snprintf(msg, len, "\"vacuous_outputs\" names outputs of a case not \"vacuous\"");
        return -1;
    }
    if (get_placement(o, r, msg, len))
        return -1;
    const cc_json *pw = cc_json_get(o, "power");
    if (pw) {
        r->has_power = 1;
        cc_power_init(&r->power);
        if (pw->type != CC_JSON_OBJECT || get_num(pw, "k", &r->power.k_fail, msg, len) ||
            get_num(pw, "k_suspect", &r->power.k_suspect, msg, len) ||
            get_num(pw, "ulp", &r->power.ulp_fail, msg, len) ||
            get_num(pw, "ulp_suspect", &r->power.ulp_suspect, msg, len) ||
            get_num(pw, "trunc_bound", &r->power.trunc_bound, msg, len) ||
            get_num(pw, "trunc", &r->power.trunc, msg, len)) {
            if (pw->type != CC_JSON_OBJECT)
                snprintf(msg, len, "\"power\" is not an object");
            return -1;
        }
    }
    if (!(r->seconds >= 0 && isfinite(r->seconds))) { /* a duration; written as a plain number */
        snprintf(msg, len, "\"seconds\" is not a finite duration");
        return -1;
    }
    if (cc_json_get(o, "elements") && cc_json_i64(o, "elements", &r->elements)) {
        snprintf(msg, len, "\"elements\" is not an integer");
        return -1;
    }
    const cc_json *sm = cc_json_get(o, "sampled");
    if (sm) {
        const cc_json *win = cc_json_get(sm, "window");
        const cc_json *tr = win && win->type == CC_JSON_ARRAY ? win->child : NULL;
        const cc_json *tc = tr ? tr->next : NULL;
        r->sampled = 1;
        if (sm->type != CC_JSON_OBJECT || cc_json_double(sm, "fraction", &r->checked_fraction) ||
            !(r->checked_fraction > 0 && r->checked_fraction <= 1) || !tc || tc->next ||
            tr->type != CC_JSON_NUMBER || tc->type != CC_JSON_NUMBER || !(tr->num >= 1) ||
            !(tc->num >= 1)) {
            snprintf(msg, len, "\"sampled\" is not {\"fraction\": (0, 1], \"window\": "
                               "[rows, columns]}");
            return -1;
        }
        r->window_rows = (int64_t)tr->num;
        r->window_cols = (int64_t)tc->num;
    }
    int64_t repeat = 1;
    if (cc_json_get(o, "repeat") &&
        (cc_json_i64(o, "repeat", &repeat) || repeat < 2 || repeat > 1000)) {
        snprintf(msg, len, "\"repeat\" is not a count of calls from 2 to 1000");
        return -1;
    }
    r->repeat = cc_json_get(o, "repeat") ? (int)repeat : 0;
    const cc_json *w = cc_json_get(o, "worst");
    if (w) {
        if (w->type != CC_JSON_OBJECT) {
            snprintf(msg, len, "\"worst\" is not an object");
            return -1;
        }
        if (get_text(w, "output", r->worst_output, sizeof r->worst_output, 1, msg, len) ||
            get_text(w, "index", r->worst_index, sizeof r->worst_index, 0, msg, len) ||
            get_text(w, "inputs", r->worst_inputs, sizeof r->worst_inputs, 0, msg, len) ||
            get_num(w, "expected", &r->expected, msg, len) ||
            get_num(w, "got", &r->got, msg, len) || get_num(w, "bound", &r->bound, msg, len))
            return -1;
        if (cc_json_get(w, "probabilistic") &&
            cc_json_bool(w, "probabilistic", &r->worst_by_prob)) {
            snprintf(msg, len, "\"probabilistic\" is not true/false");
            return -1;
        }
    }
    if (cc_json_get(o, "prob_judged") &&
        (cc_json_i64(o, "prob_judged", &r->prob_judged) || r->prob_judged < 1)) {
        snprintf(msg, len, "\"prob_judged\" is not a count of elements");
        return -1;
    }
    const cc_json *bias = cc_json_get(o, "bias");
    if (bias && get_bias(bias, r, msg, len))
        return -1;
    return get_witnesses(o, r, msg, len);
}

int cc_result_parse_line(const char *line, size_t len, cc_result *r, int64_t *index, char *msg,
                         size_t msg_len)
{
    char why[256];
    cc_json *o = cc_json_parse(line, len, why, sizeof why);
    if (!o) {
        snprintf(msg, msg_len, "not JSON (%s)", why);
        return -1;
    }
    int rc = cc_result_from_json(o, r, msg, msg_len);
    *index = -1;
    if (rc == 0 && cc_json_get(o, "index") && cc_json_i64(o, "index", index)) {
        snprintf(msg, msg_len, "\"index\" is not an integer");
        rc = -1;
    }
    cc_json_free(o);
    return rc;
}
