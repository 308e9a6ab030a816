/* custom (ops.md L). Proposal (not in TorchLean): TorchLean's BackendOp vocabulary is closed;
 * `custom` is capcheck's opaque plugin op, compared against the plugin's own reference only,
 * requiresVJP true unless the plugin declares otherwise. See ref_custom.h for the design:
 * built-ins in a static const table, plugin references in a registry the caller owns, and the
 * `custom` table entry dispatching to the built-ins by params->custom_name. */
#include "ref_custom.h"

#include "ref_families.h"

#include <math.h>
#include <string.h>

/* ---- built-in demonstration op: demo_cube ------------------------------------------------- */

static ref_status cube_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                             ref_err *e)
{
    (void)p;
    if (n != 1)
        return ref_err_set(e, "demo_cube takes 1 tensor input but got %d", n);
    if (in[0].rank < 0 || in[0].rank > REF_MAX_RANK)
        return ref_err_set(e, "input 0 has rank %d (must be 0..%d)", in[0].rank, REF_MAX_RANK);
    for (int d = 0; d < in[0].rank; d++)
        if (in[0].dim[d] < 0)
            return ref_err_set(e, "input 0 has negative size %lld on axis %d",
                               (long long)in[0].dim[d], d);
    *out = in[0];
    return REF_OK;
}

/* demo_cube: y = (x * x) * x. Two roundings: m = |y|, c_fwd = 4. */
static ref_status cube_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                           const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)p;
    (void)n;
    int64_t N = ref_numel(&out->shape);
    for (int64_t i = 0; i < N; i++) {
        double x = in[0].v[i];
        out->v[i] = (x * x) * x;
        if (mag)
            mag[i] = fabs(out->v[i]);
    }
    return REF_OK;
}

/* demo_cube VJP: dx = ((3 x) x) g. Three roundings: m = |dx|, c_vjp = 4. */
static ref_status cube_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                           const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    int64_t N = ref_numel(&in[0].shape);
    for (int64_t i = 0; i < N; i++) {
        double x = in[0].v[i];
        grad[0].v[i] = ((3.0 * x) * x) * g->v[i];
        if (gmag && gmag[0].worst)
            gmag[0].worst[i] = fabs(grad[0].v[i]);
    }
    return REF_OK;
}

static ref_status cube_sample(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    (void)p;
    return ref_sample_same_shapes(r, req, 1, n, in);
}

static const ref_op builtin_ops[] = {
    {.name = "demo_cube", .report_name = "demo_cube", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .requires_vjp = 1, .c_fwd = 4, .c_vjp = 4,
     .note = "built-in demonstration custom op: y = x^3, VJP 3 x^2 g", .shape = cube_shape,
     .forward = cube_fwd, .vjp = cube_vjp, .sample = cube_sample},
};
#define N_BUILTIN ((int)(sizeof builtin_ops / sizeof builtin_ops[0]))

int ref_custom_builtin_count(void)
{
    return N_BUILTIN;
}

const ref_op *ref_custom_builtin_at(int i)
{
    return (i >= 0 && i < N_BUILTIN) ? &builtin_ops[i] : NULL;
}

/* ---- the caller-owned registry -------------------------------------------------------------- */

void ref_custom_registry_init(ref_custom_registry *reg)
{
    if (reg)
        memset(reg, 0, sizeof *reg);
}

const ref_op *ref_custom_find(const ref_custom_registry *reg, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (int i = 0; i < N_BUILTIN; i++)
        if (strcmp(builtin_ops[i].name, name) == 0)
            return &builtin_ops[i];
    if (reg)
        for (int i = 0; i < reg->count && i < REF_CUSTOM_MAX; i++)
            if (reg->ops[i] && strcmp(reg->ops[i]->name, name) == 0)
                return reg->ops[i];
    return NULL;
}

int ref_custom_register(ref_custom_registry *reg, const ref_op *impl)
{
    if (!reg || !impl || !impl->name || !*impl->name)
        return -1;
    if (strlen(impl->name) >= sizeof ((ref_params *)0)->custom_name)
        return -1; /* could not be named by custom=NAME */
    if (strcmp(impl->name, "custom") == 0 || ref_custom_find(reg, impl->name))
        return -1; /* reserved or duplicate */
    if (!impl->shape || !impl->forward || (impl->requires_vjp && !impl->vjp))
        return -1;
    if (impl->min_inputs < 0 || impl->min_inputs > impl->max_inputs ||
        impl->max_inputs > REF_MAX_INPUTS)
        return -1;
    if (reg->count < 0 || reg->count >= REF_CUSTOM_MAX)
        return -1; /* full */
    reg->ops[reg->count++] = impl;
    return 0;
}

/* ---- the `custom` table entry: dispatch to the built-in named by params->custom_name ----------- */

/* The name, or NULL when it is not a terminated string. */
static const char *custom_name_of(const ref_params *p)
{
    return memchr(p->custom_name, '\0', sizeof p->custom_name) ? p->custom_name : NULL;
}

static const ref_op *resolve(const ref_params *p)
{
    const char *name = custom_name_of(p);
    return name ? ref_custom_find(NULL, name) : NULL;
}

static ref_status custom_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    const char *name = custom_name_of(p);
    if (!name)
        return ref_err_set(e, "the custom op name is not a terminated string of at most %d "
                              "characters",
                           (int)sizeof p->custom_name - 1);
    if (!*name)
        return ref_err_set(e, "custom needs custom=NAME naming a registered custom op");
    const ref_op *impl = ref_custom_find(NULL, name);
    if (!impl)
        return ref_err_set(e, "no custom op named %s is registered", name);
    if (n < impl->min_inputs || n > impl->max_inputs)
        return ref_err_set(e, "custom op %s takes %d to %d tensor inputs but got %d", name,
                           impl->min_inputs, impl->max_inputs, n);
    return impl->shape(p, n, in, out, e);
}

static void custom_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    const ref_op *impl = resolve(p);
    if (impl)
        ref_default_domain(impl, p, n, in, i, d); /* the impl's input kinds and domain */
}

static ref_status custom_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mag)
{
    const ref_op *impl = resolve(p);
    return impl ? impl->forward(p, n, in, out, mag) : REF_EINVAL;
}

static ref_status custom_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                             const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    const ref_op *impl = resolve(p);
    if (!impl)
        return REF_EINVAL;
    if (!impl->vjp)
        return REF_ENOTAPPLICABLE;
    return impl->vjp(p, n, in, y, g, grad, gmag);
}

/* With no name given, the sampler picks the built-in demonstration op; a name that is not a
 * built-in cannot be sampled here (REF_ENOTAPPLICABLE). */
static ref_status custom_sample(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    const char *name = custom_name_of(p);
    if (!name)
        return REF_ENOTAPPLICABLE;
    if (!*name)
        strcpy(p->custom_name, builtin_ops[0].name);
    const ref_op *impl = resolve(p);
    if (!impl || !impl->sample)
        return REF_ENOTAPPLICABLE;
    char keep[sizeof p->custom_name];
    memcpy(keep, p->custom_name, sizeof keep);
    ref_status st = impl->sample(r, req, p, n, in);
    memcpy(p->custom_name, keep, sizeof keep); /* the impl's sampler must not rename the case */
    return st;
}

const ref_op ref_family_custom[] = {
    {.name = "custom", .report_name = "custom", .min_inputs = 0, .max_inputs = REF_MAX_INPUTS,
     .input_names = {"x", "x1", "x2", "x3", "x4", "x5", "x6", "x7"}, .params = REF_P_CUSTOM,
     .requires_vjp = 1, .c_fwd = 4, .c_vjp = 4,
     .note = "Proposal (not in TorchLean): a plugin op checked against its own reference; this "
             "entry serves the built-ins (demo_cube), plugins resolve via ref_custom_find",
     .shape = custom_shape, .domain = custom_domain, .forward = custom_fwd, .vjp = custom_vjp,
     .sample = custom_sample},
};
const int ref_family_custom_count = (int)(sizeof ref_family_custom /
                                          sizeof ref_family_custom[0]);
