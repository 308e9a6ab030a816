#include "harness/case/values.h"

#include <math.h>
#include <stdlib.h>

uint64_t cc_input_key(uint64_t seed, int input_index)
{
    return ref_splitmix64(seed ^ ref_splitmix64(0xc0ffee00ULL + (uint64_t)input_index));
}

double cc_uniform_at(uint64_t key, int64_t j)
{
    return (double)(ref_splitmix64(key + (uint64_t)j) >> 11) * (1.0 / 9007199254740992.0);
}

/* Box-Muller on two counter draws; u1 is kept away from 0 so log stays finite. */
double cc_normal_at(uint64_t key, int64_t j)
{
    double u1 = cc_uniform_at(key, 2 * j) + 1.0 / 9007199254740992.0;
    double u2 = cc_uniform_at(key, 2 * j + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

typedef struct {
    uint64_t key;
    int64_t j;
} shuffle_key;

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const shuffle_key *)a)->key, y = ((const shuffle_key *)b)->key;
    return x < y ? -1 : x > y;
}

/* Element j gets the quarter-step of its rank under a hash ordering: distinct values in a
 * reproducible random order. */
static void draw_distinct(uint64_t key, int64_t n, double *out)
{
    shuffle_key *k = malloc(sizeof *k * (size_t)(n > 0 ? n : 1));
    if (!k) { /* fall back to ordered distinct values */
        for (int64_t j = 0; j < n; j++)
            out[j] = ((double)j - (double)(n / 2)) / 4.0;
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        k[j].key = ref_splitmix64(key + (uint64_t)j);
        k[j].j = j;
    }
    qsort(k, (size_t)n, sizeof *k, by_key);
    for (int64_t r = 0; r < n; r++)
        out[k[r].j] = ((double)r - (double)(n / 2)) / 4.0;
    free(k);
}

void cc_draw_values(const ref_domain *d, uint64_t key, int64_t n, double *out)
{
    if (d->kind == REF_DOM_DISTINCT) {
        draw_distinct(key, n, out);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        double x;
        switch (d->kind) {
        case REF_DOM_POSITIVE:
            x = exp(0.5 * cc_normal_at(key, j));
            break;
        case REF_DOM_UNIT:
            x = cc_uniform_at(key, j);
            if (x == 0.0)
                x = 0.5;
            break;
        case REF_DOM_INDEX:
            x = d->hi >= 1 ? floor(cc_uniform_at(key, j) * floor(d->hi)) : 0.0;
            break;
        case REF_DOM_MASK:
            x = cc_uniform_at(key, j) < d->lo ? 1.0 : 0.0;
            break;
        default:
            x = cc_normal_at(key, j);
            break;
        }
        /* keep off the op's kinks: push a value within gap of a kink to kink +- 2 gap */
        for (int a = 0; a < d->n_avoid && a < 2; a++)
            if (fabs(x - d->avoid[a]) < d->gap)
                x = d->avoid[a] + (x >= d->avoid[a] ? 2.0 : -2.0) * d->gap;
        out[j] = x;
    }
}
