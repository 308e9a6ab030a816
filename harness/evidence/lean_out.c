/* capcheck emit-lean: the capsules the gate upgraded, as a TorchLean module that a TorchLean
 * tree or a Lake package can import and hand to its planner (docs/torchlean.md;
 * harness/evidence/lean_out.h).
 *
 * The module targets one TorchLean commit (core/torchlean.h: every constructor, field,
 * namespace and module name it writes is in that commit's data, which
 * tests/check_lean_module.py checks) and holds:
 *   - a `KernelCapsule` per capsule with a checked dtype whose op, provider and device TorchLean
 *     names: trustLevel .checked; vjpMode the mode the provider ran (the results say; never the
 *     catalog's); shape and layout evidence TorchLean's own runtimeGuard where TorchLean's
 *     executor for that provider and device has one, else this report's testSuite; value and
 *     VJP evidence the testSuite "capcheck report sha256:<hex>" (the sealed report; for a run
 *     whose signature was verified, "capcheck run signed by SHA256:<key> manifest sha256:<hex>",
 *     who vouched for it, and the header says so); summaries
 *     that state the dtypes, platforms, case counts and worst bound ratios. Its name is
 *     "capcheck." + the catalog name (TorchLean's maintained capsule keeps its own identity);
 *   - `capsuleModule`, the CapsuleModule of them, and per device a profile that admits them:
 *     the profile TorchLean maintains for the device (BackendProfile.maintainedForDevice?) named
 *     "<its name>+capcheck", with the module added by BackendProfile.withCapsuleModules and its
 *     availability widened to the capsules' providers where the maintained one lacks them;
 *   - `notEmitted`: every upgraded capsule that is not a TorchLean capsule, with why (an op
 *     TorchLean's BackendOp lacks at that commit, capcheck's oracle checking itself, a VJP mode
 *     the results do not state, a layout whose guard admits other dtypes), and in comments the
 *     capsules the report does not upgrade, TorchLean-checked ones flagged.
 *
 * The text passes TorchLean's repository lint at either commit (tests/lean_lint.py restates
 * it): no line over LEAN_WIDTH columns (comments are word-wrapped, string literals continue on
 * the next line through a string gap, identifiers are bounded), no trailing space, tab or CR.
 * Text capcheck does not choose (capsule, provider and file names, a provider's description)
 * is escaped twice over: for Lean (string escapes; in comments no "/-" or "-/", which would
 * open or close one) and for the lint's own patterns, which read the raw text: no backquote
 * (a quoted `NN/x.lean` must exist in TorchLean's tree), no brace (`.nativeSymbol {...}`
 * provenance), no em-dash (banned at 3447b74), no character Python counts as a line break, and
 * in comments no "\(", "\[" or "$$" (DocGen math). Identifiers are an injective mangling into
 * [a-z0-9_] behind a fixed prefix ("a-b" and "a_b" stay apart, "2fast" is no problem, and no
 * capsule name makes one of the removed names 3447b74's lint bans); a very long name gets a
 * digest instead. */
#define _POSIX_C_SOURCE 200809L
#include "harness/evidence/lean_out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/files.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "core/text.h"
#include "harness/evidence/signature.h"
#include "harness/report/report_out.h"

#define SHAPES cc_shape_class_names
#define LAYOUTS cc_layout_names
#define EDGES cc_edge_class_names

/* TorchLean's lint: "line exceeds 100 characters; wrap it" (characters: Unicode code points) */
#define LEAN_WIDTH 100
/* "def " + identifier + " : KernelCapsule where" stays within LEAN_WIDTH */
#define IDENT_MAX 72

/* ---- text capcheck does not choose ------------------------------------------------------- */

/* The Unicode code point of the well-formed character at s (n bytes), for the few that need
 * their own treatment. */
static unsigned code_point(const unsigned char *s, size_t n)
{
    if (n == 1)
        return s[0];
    if (n == 2)
        return (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu);
    if (n == 3)
        return (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
    return (s[0] & 0x07u) << 18 | (s[1] & 0x3fu) << 12 | (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
}

/* A character Python's str.splitlines() breaks a line at (the lint reads lines that way), the
 * em-dash 3447b74's lint bans, or another control character. */
static int awkward(unsigned cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || cp == 0x2014 ||
           cp == 0x2028 || cp == 0x2029;
}

/* Untrusted text made safe inside a Lean comment: a stray byte or an awkward character becomes
 * '?' (the em-dash '-'), a backquote '\'', a brace a parenthesis. The pairs that would still
 * mean something ("/-", "-/", "$$", "\(", "\[") are split when the whole comment is written
 * (put_comment), since they can also form where two pieces meet. */
static void comment_text(cc_strbuf *b, const char *text)
{
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        size_t n = cc_utf8_char_len(s, strlen((const char *)s));
        unsigned cp = n ? code_point(s, n) : 0;
        if (n == 0 || (awkward(cp) && cp != 0x2014))
            cc_strbuf_putc(b, '?');
        else if (cp == 0x2014)
            cc_strbuf_putc(b, '-');
        else if (cp == '`')
            cc_strbuf_putc(b, '\'');
        else if (cp == '{' || cp == '}')
            cc_strbuf_putc(b, cp == '{' ? '(' : ')');
        else
            cc_strbuf_put(b, (const char *)s, n);
        s += n ? n : 1;
    }
}

/* comment_text into a fixed buffer (for a reason or a list item built with snprintf). */
static const char *comment_safe(const char *text, char *buf, size_t n)
{
    cc_strbuf b = {0};
    comment_text(&b, text);
    snprintf(buf, n, "%s", b.failed || !b.data ? "?" : b.data);
    cc_strbuf_free(&b);
    return buf;
}

/* ---- comments -------------------------------------------------------------------------------- */

static size_t columns(const char *s, size_t n) /* Unicode code points */
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* The byte length of s's longest prefix of at most `cols` code points (at least one). */
static size_t prefix_bytes(const char *s, size_t n, size_t cols)
{
    size_t i = 0, c = 0;
    while (i < n && (c < cols || c == 0)) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
            i++;
        c++;
    }
    return i;
}

/* The indent a wrapped line continues at: a list item's text ("* "), the value of a header
 * line ("Key:   value"), or the line's own indent. */
static size_t hang(const char *line, size_t n)
{
    size_t lead = strspn(line, " ");
    if (n >= lead + 2 && line[lead] == '*' && line[lead + 1] == ' ')
        return lead + 2;
    const char *colon = memchr(line, ':', n < 11 ? n : 11);
    if (colon && n > 11 && line[11] != ' ' &&
        strspn(colon + 1, " ") == (size_t)(line + 11 - colon - 1))
        return 11; /* the header's "Key:" column */
    return lead;
}

/* One line of comment text word-wrapped into LEAN_WIDTH columns, the first starting at column
 * col; a word wider than a line is cut. Runs of spaces inside a line are kept (the header's
 * alignment), the one a break falls on is dropped, and no line ends in a space. Returns the
 * column the last line ends at. */
static size_t wrap_line(FILE *f, const char *line, size_t n, size_t col)
{
    size_t indent = hang(line, n), i = 0;
    while (i < n) {
        size_t sp = strspn(line + i, " "); /* the spaces before the next word */
        if (sp > n - i)
            sp = n - i;
        size_t w = strcspn(line + i + sp, " ");
        if (w > n - i - sp)
            w = n - i - sp;
        if (w == 0)
            break; /* trailing spaces: dropped */
        size_t need = columns(line + i, sp) + columns(line + i + sp, w);
        if (col + need > LEAN_WIDTH && col > indent && col > 0) { /* the word to the next line */
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
            i += sp;
            continue;
        }
        fwrite(line + i, 1, sp, f);
        col += columns(line + i, sp);
        i += sp;
        while (col + columns(line + i, w) > LEAN_WIDTH) { /* too wide for any line: cut */
            size_t room = LEAN_WIDTH > col ? LEAN_WIDTH - col : 1;
            size_t cut = prefix_bytes(line + i, w, room);
            fwrite(line + i, 1, cut, f);
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
            i += cut;
            w -= cut;
        }
        fwrite(line + i, 1, w, f);
        col += columns(line + i, w);
        i += w;
    }
    return col;
}

/* A comment: `open` ("/-- ", "/-! ", or "/-\n"), the body (lines separated by '\n', each
 * wrapped), then " -/" on the last line when it fits, else on a line of its own. The pairs that
 * would open or close a comment or start DocGen math are split here by a space, so no "/-",
 * "-/", "$$", "\(" or "\[" is left in the body. */
static void put_comment(FILE *f, const char *open, const char *body, int close_alone)
{
    cc_strbuf b = {0};
    for (const char *s = body; *s; s++) {
        cc_strbuf_putc(&b, *s);
        if ((s[0] == '/' && s[1] == '-') || (s[0] == '-' && s[1] == '/') ||
            (s[0] == '$' && s[1] == '$') || (s[0] == '\\' && (s[1] == '(' || s[1] == '[')))
            cc_strbuf_putc(&b, ' ');
    }
    fputs(open, f);
    size_t col = open[strlen(open) - 1] == '\n' ? 0 : columns(open, strlen(open));
    const char *text = b.data ? b.data : "";
    for (const char *line = text;;) {
        size_t n = strcspn(line, "\n");
        col = wrap_line(f, line, n, col);
        if (!line[n])
            break;
        fputc('\n', f);
        col = 0;
        line += n + 1;
    }
    if (close_alone || col + 3 > LEAN_WIDTH)
        fputs(col ? "\n-/\n" : "-/\n", f);
    else
        fputs(col ? " -/\n" : "-/\n", f);
    cc_strbuf_free(&b);
}

/* ---- string literals ----------------------------------------------------------------------- */

typedef struct {
    char text[12]; /* the unit as written: a character or an escape */
    size_t width; /* its columns */
    int space;    /* a plain space (a string gap would swallow it at a line's start) */
} str_unit;

/* The next unit of a Lean string literal of s (n bytes left); returns the bytes it consumed.
 * Escaped besides what Lean needs (\" \\ \n \t and control bytes as \xHH, a stray byte as the
 * code point of its value): the characters the lint reads as line breaks or bans (\uHHHH), and
 * the ones its raw-text patterns look for in a literal: '`' (a quoted path), '{' and '}'
 * (contract provenance). */
static size_t next_unit(const unsigned char *s, size_t n, str_unit *u)
{
    size_t len = cc_utf8_char_len(s, n);
    unsigned cp = len ? code_point(s, len) : s[0];
    u->space = cp == ' ';
    if (cp == '"' || cp == '\\')
        snprintf(u->text, sizeof u->text, "\\%c", (char)cp);
    else if (cp == '\n' || cp == '\t')
        snprintf(u->text, sizeof u->text, "\\%c", cp == '\n' ? 'n' : 't');
    else if (len == 0 || cp < 0x20 || cp == 0x7f || cp == '`' || cp == '{' || cp == '}')
        snprintf(u->text, sizeof u->text, "\\x%02x", len == 0 ? s[0] : cp);
    else if (awkward(cp))
        snprintf(u->text, sizeof u->text, "\\u%04x", cp);
    else {
        memcpy(u->text, s, len);
        u->text[len] = 0;
    }
    u->width = columns(u->text, strlen(u->text));
    return len ? len : 1;
}

/* A Lean string literal of text that starts at column col. Where it would pass LEAN_WIDTH it
 * continues on the next line, `indent` columns in, through a string gap (a '\' ending the
 * line: Lean skips it, the line break and the indent), after a space where there is one; a
 * continuation that starts with a space writes it \x20, which the gap leaves. The last line
 * keeps `tail` columns free after the closing quote. */
static void lean_string(FILE *f, const char *text, size_t col, size_t indent, size_t tail)
{
    size_t n = strlen(text), cap = n + 1, count = 0;
    str_unit *u = malloc(cap * sizeof *u);
    if (!u) {
        fputs("\"?\"", f); /* out of memory: still a literal; ferror is not set, so say it */
        return;
    }
    for (size_t i = 0; i < n;)
        i += next_unit((const unsigned char *)text + i, n - i, &u[count++]);
    fputc('"', f);
    size_t cur = col + 1, start = 0, pos = 0, w = 0, brk = 0;
    while (pos < count) {
        int at_start = pos == start && start > 0 && u[pos].space; /* written \x20 */
        size_t uw = at_start ? 4 : u[pos].width;
        size_t need = cur + w + uw + 1 + (pos + 1 == count ? tail : 0);
        if (need > LEAN_WIDTH && pos > start) {
            size_t cut = brk > start ? brk : pos;
            for (size_t k = start; k < cut; k++)
                fputs(k == start && start > 0 && u[k].space ? "\\x20" : u[k].text, f);
            fprintf(f, "\\\n%*s", (int)indent, "");
            cur = indent;
            start = pos = cut;
            w = brk = 0;
            continue;
        }
        w += uw;
        if (u[pos].space && pos + 1 < count && !u[pos + 1].space)
            brk = pos + 1;
        pos++;
    }
    for (size_t k = start; k < count; k++)
        fputs(k == start && start > 0 && u[k].space ? "\\x20" : u[k].text, f);
    fputc('"', f);
    free(u);
}

/* <lead> then the literal of text. Where lead leaves the literal too little room the literal
 * starts on the next line, `indent` in: when it then fits whole (a report hash is not cut),
 * or when fewer than 24 columns are left. Continuations are `indent` in; the last line keeps
 * `tail` columns free. */
static void string_field(FILE *f, const char *lead, const char *text, size_t indent,
                         size_t tail)
{
    const char *last = strrchr(lead, '\n');
    last = last ? last + 1 : lead;
    size_t col = columns(last, strlen(last)), w = 2;
    for (size_t i = 0, n = strlen(text); i < n;) {
        str_unit u;
        i += next_unit((const unsigned char *)text + i, n - i, &u);
        w += u.width;
    }
    int here = col + w + tail <= LEAN_WIDTH || col <= indent ||
               (indent + w + tail > LEAN_WIDTH && col + 24 <= LEAN_WIDTH);
    if (here) {
        fputs(lead, f);
        lean_string(f, text, col, indent, tail);
        return;
    }
    size_t keep = strlen(lead);
    while (keep && lead[keep - 1] == ' ')
        keep--;
    fprintf(f, "%.*s\n%*s", (int)keep, lead, (int)indent, "");
    lean_string(f, text, indent, indent, tail);
}

/* ---- identifiers --------------------------------------------------------------------------- */

/* A Lean identifier for a capsule name: "cap_" and the name with lowercase letters and digits
 * kept, '_' doubled and any other byte (uppercase letters too) as '_' and two lowercase hex
 * digits. Injective (the code is prefix-free), never a keyword, never starting with a digit,
 * never ending in a capitalized word (3447b74's lint bans names such as "...ModuleSpec"). A
 * mangling longer than IDENT_MAX is cut at a code boundary and ends in "_z" and 16 hex digits of
 * the name's sha256: "_z" is no code, so no full mangling equals it. */
static void lean_ident(const char *name, char *buf, size_t n)
{
    char full[4 * 96 + 8];
    size_t k = (size_t)snprintf(full, sizeof full, "cap_"), cut = k;
    for (const unsigned char *s = (const unsigned char *)name; *s && k + 4 < sizeof full; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9'))
            full[k++] = (char)*s;
        else if (*s == '_')
            k += (size_t)snprintf(full + k, sizeof full - k, "__");
        else
            k += (size_t)snprintf(full + k, sizeof full - k, "_%02x", *s);
        if (k <= IDENT_MAX - 18)
            cut = k;
    }
    if (k <= IDENT_MAX) {
        snprintf(buf, n, "%.*s", (int)k, full);
        return;
    }
    char hex[65];
    cc_sha256_hex(name, strlen(name), hex);
    snprintf(buf, n, "%.*s_z%.16s", (int)cut, full, hex);
}

/* ---- what each capsule becomes ------------------------------------------------------------- */

#define MAX_V (CC_DTYPE_COUNT * CC_MAX_PLATFORMS) /* a capsule's verdicts: dtype x platform */

typedef struct {
    const cc_capsule *c;
    const cc_verdict *v[MAX_V];
    size_t nv;
    int upgraded;       /* some dtype checked */
    long vjp_checks;    /* passing VJP checks over the checked dtypes */
    char dtypes[64];    /* the checked dtypes */
    char ran[24];       /* the VJP mode the checked dtypes' results state ("mixed": they differ) */
    char mode[24];      /* the mode claimed: ran, or none when no VJP check passed */
    char platforms[256];
    char why_not[640];  /* "" when it becomes a KernelCapsule; comment-safe */
    char name[96];      /* the KernelCapsule's name */
    char ident[IDENT_MAX + 8];
} lean_capsule;

static int is_mode(const char *m)
{
    return !strcmp(m, "none") || !strcmp(m, "torchLeanTape") || !strcmp(m, "backendVJP");
}

/* Whether the checked dtypes include one the capsule's layout admits at TorchLean tl. */
static int layout_holds(const cc_torchlean *tl, const lean_capsule *e)
{
    for (size_t i = 0; i < e->nv; i++)
        if (e->v[i]->checked &&
            cc_tl_layout_admits(tl, e->c->layout, cc_dtype_name(e->v[i]->dtype)))
            return 1;
    return 0;
}

static void classify(const cc_torchlean *tl, lean_capsule *e)
{
    const cc_capsule *c = e->c;
    e->ran[0] = 0;
    for (size_t i = 0; i < e->nv; i++) {
        if (!e->v[i]->checked)
            continue;
        const cc_capsule_stats *s = e->v[i]->stats;
        cc_list_add(e->dtypes, sizeof e->dtypes, cc_dtype_name(e->v[i]->dtype));
        cc_list_add(e->platforms, sizeof e->platforms, e->v[i]->platform);
        if (!e->ran[0])
            snprintf(e->ran, sizeof e->ran, "%s", s->vjp_mode);
        else if (strcmp(e->ran, s->vjp_mode) != 0)
            snprintf(e->ran, sizeof e->ran, "mixed");
        e->upgraded = 1;
        e->vjp_checks += s->vjp_passing;
    }
    /* no VJP claim without a passing VJP check: TorchLean then plans it for inference only */
    snprintf(e->mode, sizeof e->mode, "%s", e->vjp_checks ? e->ran : "none");
    snprintf(e->name, sizeof e->name, "%s%s", strncmp(c->name, "capcheck.", 9) ? "capcheck." : "",
             c->name);
    lean_ident(e->name, e->ident, sizeof e->ident);
    char t[16], op[96], provider[96], device[96], ran[96], layout[96], dtypes[128];
    snprintf(t, sizeof t, "%.7s", tl->commit);
    comment_safe(c->op, op, sizeof op);
    comment_safe(c->provider, provider, sizeof provider);
    comment_safe(c->device, device, sizeof device);
    comment_safe(e->ran[0] ? e->ran : "none given", ran, sizeof ran);
    comment_safe(c->layout, layout, sizeof layout);
    int has_op = cc_tl_has_ctor(tl, "BackendOp", c->op);
    const cc_tl_row *lrow = NULL;
    for (int i = 0; i < tl->n && !lrow; i++) {
        const char *dot = strrchr(tl->rows[i].name, '.');
        if (!strcmp(tl->rows[i].kind, "layout") && dot && !strcmp(dot + 1, c->layout))
            lrow = &tl->rows[i];
    }
    cc_tl_item(lrow ? lrow->value : "", "dtypes", dtypes, sizeof dtypes);
    if (strcmp(c->source, "oracle") == 0 && has_op)
        snprintf(e->why_not, sizeof e->why_not,
                 "capcheck's float64 oracle checked against itself: a self-check of the harness, "
                 "not evidence for TorchLean's reference.%s capsule (TorchLean's Lean reference "
                 "runtime, which capcheck does not run)",
                 ref_op_find(c->op) ? ref_op_find(c->op)->report_name : op);
    else if (strcmp(c->source, "oracle") == 0)
        snprintf(e->why_not, sizeof e->why_not,
                 "capcheck's float64 oracle checked against itself: a self-check of the harness; "
                 "BackendOp has no constructor %s at TorchLean %s either",
                 op, t);
    else if (!has_op)
        snprintf(e->why_not, sizeof e->why_not,
                 "BackendOp has no constructor %s at TorchLean %s: no KernelCapsule can name the "
                 "op",
                 op, t);
    else if (strcmp(c->op, "custom") == 0) /* one name, two meanings (spec/ops.md, section L) */
        snprintf(e->why_not, sizeof e->why_not,
                 "capcheck's custom capsule holds the custom=NAME ops a plugin ships, each "
                 "checked against that plugin's own reference; BackendOp.custom at TorchLean %s "
                 "stands for any custom computation, which this evidence does not cover",
                 t);
    else if (!cc_tl_has_ctor(tl, "Provider", c->provider))
        snprintf(e->why_not, sizeof e->why_not,
                 "Provider has no constructor \"%s\" at TorchLean %s", provider, t);
    else if (!cc_tl_has_ctor(tl, "Device", c->device))
        snprintf(e->why_not, sizeof e->why_not,
                 "Device has no constructor \"%s\" at TorchLean %s", device, t);
    else if (!is_mode(e->ran))
        snprintf(e->why_not, sizeof e->why_not,
                 "the results state no single VJP mode the provider ran (%s): the catalog's %s "
                 "was not what was tested",
                 ran, c->vjp_mode);
    else if (!layout_holds(tl, e))
        snprintf(e->why_not, sizeof e->why_not,
                 "the runtime guard of TorchLean %s's %s layout admits %s tensors only, and this "
                 "report checks the capsule for %s only",
                 t, layout, dtypes, e->dtypes);
}

/* The capsules of the gate, classified; *n set. NULL when out of memory. */
static lean_capsule *capsules_of(const cc_gate *g, const cc_torchlean *tl, size_t *n)
{
    lean_capsule *e = calloc(g->n ? g->n : 1, sizeof *e);
    *n = 0;
    if (!e)
        return NULL;
    for (size_t i = 0; i < g->n; i++) {
        e[*n].nv = cc_gate_capsule(g, i, e[*n].v, MAX_V);
        if (!e[*n].nv)
            continue;
        e[*n].c = &e[*n].v[0]->capsule;
        classify(tl, &e[*n]);
        (*n)++;
    }
    return e;
}

static int emitted(const lean_capsule *e)
{
    return e->upgraded && !e->why_not[0];
}

size_t cc_lean_capsule_count(const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                             char *why, size_t len)
{
    size_t n, count = 0, upgraded = 0;
    lean_capsule *e = capsules_of(g, tl, &n);
    if (!e) {
        snprintf(why, len, "out of memory");
        return 0;
    }
    const lean_capsule *first = NULL;
    for (size_t i = 0; i < n; i++) {
        count += emitted(&e[i]);
        upgraded += e[i].upgraded;
        if (e[i].upgraded && e[i].why_not[0] && !first)
            first = &e[i];
    }
    int own_policy = strcmp(pol->name, CC_POLICY_BUILT_IN) != 0;
    if (count == 0 && upgraded == 0)
        snprintf(why, len, "the gate upgrades none of this report's %zu capsules, so there is no "
                           "evidence for TorchLean to import (capcheck gate %s%s%s --all says "
                           "what each one lacks)",
                 n, g->source, own_policy ? " --policy " : "", own_policy ? pol->name : "");
    else if (count == 0)
        snprintf(why, len, "the gate upgrades %zu capsule%s, none of them a TorchLean capsule at "
                           "%.7s (%s: %s)",
                 upgraded, upgraded == 1 ? "" : "s", tl->commit, first->c->name, first->why_not);
    free(e);
    return count;
}

/* The classes the checked dtypes' passing cases cover, as "a, b" ("none" if none). */
static void covered(const lean_capsule *e, char what, char *buf, size_t n)
{
    buf[0] = 0;
    int count = what == 's' ? CC_SHAPE_COUNT : what == 'l' ? CC_LAYOUT_COUNT : CC_EDGE_COUNT;
    const char *const *names = what == 's' ? SHAPES : what == 'l' ? LAYOUTS : EDGES;
    for (int k = 0; k < count; k++) {
        long any = 0;
        for (size_t i = 0; i < e->nv; i++) {
            const cc_capsule_stats *s = e->v[i]->stats;
            if (e->v[i]->checked)
                any += what == 's' ? s->shape_n[k] : what == 'l' ? s->layout_n[k] : s->edge_n[k];
        }
        if (any)
            cc_list_add(buf, n, names[k]);
    }
    if (!buf[0])
        snprintf(buf, n, "none");
}

/* "f32: 12 of 12 cases passing, VJP 12, worst bound ratio 0.489; f64: ..." */
static void counts(const lean_capsule *e, char *buf, size_t n)
{
    buf[0] = 0;
    for (size_t i = 0; i < e->nv; i++) {
        const cc_capsule_stats *s = e->v[i]->stats;
        if (!e->v[i]->checked)
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s%s%s: %ld of %ld cases passing, VJP checked in %ld, "
                                       "worst bound ratio %.4g",
                 used ? "; " : "", cc_dtype_name(e->v[i]->dtype),
                 e->v[i]->platform[0] ? " on " : "", e->v[i]->platform, s->counts[CC_RES_PASS],
                 s->cases, s->vjp_passing, s->worst_ratio);
    }
}

/* One contract field: { claim := ..., summary := "...", evidence := ... }; `name` the
 * evidence's string argument (NULL: none). */
static void descriptor(FILE *f, const char *field, const char *claim, const char *summary,
                       const char *evidence, const char *name)
{
    fprintf(f, "  %s :=\n    { claim := %s\n", field, claim);
    string_field(f, "      summary := ", summary, 8, 0);
    if (name) {
        char lead[64];
        snprintf(lead, sizeof lead, "\n      evidence := %s ", evidence);
        string_field(f, lead, name, 8, 2);
    } else
        fprintf(f, "\n      evidence := %s", evidence);
    fputs(" }\n", f);
}

static void emit_capsule(FILE *f, const cc_gate *g, const cc_torchlean *tl, const lean_capsule *e)
{
    const cc_capsule *c = e->c;
    const ref_op *op = ref_op_find(c->op);
    char suite[CC_GATE_SUITE_NAME_MAX], shapes[128], layouts[128], edges[160], cnt[1024],
        text[2048];
    cc_gate_suite_name(g, suite, sizeof suite);
    covered(e, 's', shapes, sizeof shapes);
    covered(e, 'l', layouts, sizeof layouts);
    covered(e, 'e', edges, sizeof edges);
    counts(e, cnt, sizeof cnt);
    const char *platforms = e->platforms[0] ? e->platforms : "not recorded in the results";
    const char *handler = cc_tl_handler(tl, c->provider, c->device);

    cc_strbuf b = {0};
    comment_text(&b, c->name);
    cc_strbuf_printf(&b, " (%s, %s, %s), checked for %s. ", c->op, c->provider, c->device,
                     e->dtypes);
    if (strcmp(c->source, "torchlean") == 0 && strcmp(c->trust, "checked") == 0)
        cc_strbuf_puts(&b, "TorchLean's catalog already marks it checked; this capsule adds "
                           "capcheck's evidence under its own name. ");
    else
        cc_strbuf_printf(&b, "Upgraded from %s (the catalog) to checked. ", c->trust);
    cc_strbuf_printf(&b, "VJP mode the provider ran: %s (the catalog states %s)%s. ", e->ran,
                     c->vjp_mode,
                     strcmp(e->mode, e->ran) ? "; no VJP check passed, so no VJP claim" : "");
    if (handler)
        cc_strbuf_printf(&b, "TorchLean runs it with its executor \"%s\". ", handler);
    else
        cc_strbuf_printf(&b, "TorchLean %.7s links no executor for %s on %s: the planner "
                             "selects it, the eager runtime cannot run it yet.",
                         tl->commit, c->provider, c->device);
    for (size_t i = 0; i < e->nv; i++)
        if (!e->v[i]->checked) {
            cc_strbuf_printf(&b, " Not checked for %s%s", cc_dtype_name(e->v[i]->dtype),
                             e->v[i]->platform[0] ? " on " : "");
            comment_text(&b, e->v[i]->platform);
            cc_strbuf_puts(&b, ": ");
            comment_text(&b, e->v[i]->n_reasons ? e->v[i]->reasons[0] : "see capcheck gate");
            cc_strbuf_puts(&b, ".");
        }
    put_comment(f, "/-- ", b.data ? b.data : "", 0);
    cc_strbuf_free(&b);
    fprintf(f, "def %s : KernelCapsule where\n", e->ident);
    string_field(f, "  name := ", e->name, 4, 0);
    fprintf(f, "\n  op := .%s\n  provider := .%s\n  device := .%s\n  trustLevel := .checked\n"
               "  supportsForward := true\n  vjpMode := .%s\n",
            c->op, c->provider, c->device, e->mode);

    char claim[160];
    const char *guard = cc_tl_guard(tl, c->provider, c->device, c->op, "shape");
    snprintf(claim, sizeof claim, ".shapeSafety .%s", c->op);
    snprintf(text, sizeof text, "%scapcheck: outputs had the shapes the float64 reference's shape "
                                "rule derives, shape classes %s (%s)",
             guard ? "TorchLean's runtime guard; also " : "", shapes, e->dtypes);
    descriptor(f, "shapeContract", claim, text, guard ? ".runtimeGuard" : ".testSuite",
               guard ? guard : suite);
    guard = cc_tl_guard(tl, c->provider, c->device, c->op, "layout");
    snprintf(claim, sizeof claim, ".layoutCompatibility .%s .%s", c->op, c->layout);
    snprintf(text, sizeof text, "%scapcheck: inputs read as %s views (%s)",
             guard ? "TorchLean's runtime guard admits only its layout; also " : "", layouts,
             e->dtypes);
    descriptor(f, "layoutContract", claim, text, guard ? ".runtimeGuard" : ".testSuite",
               guard ? guard : suite);
    snprintf(claim, sizeof claim, ".valueRefinement .%s", c->op);
    snprintf(text, sizeof text, "capcheck: forward within the error model of the float64 "
                                "reference (%s); edge classes %s; platforms %s; provider %s",
             cnt, edges, platforms, g->run.provider_description);
    descriptor(f, "valueContract", claim, text, ".testSuite", suite);
    if (strcmp(e->mode, "none") == 0) {
        snprintf(claim, sizeof claim, ".vjpUnavailable .%s", c->op);
        descriptor(f, "vjpContract", claim,
                   op && !op->requires_vjp ? "no reverse rule: the op is not differentiated"
                                           : "no reverse rule: no VJP check passed",
                   ".notApplicable", NULL);
    } else {
        snprintf(claim, sizeof claim, ".vjpRefinement .%s .%s", c->op, e->mode);
        snprintf(text, sizeof text, "capcheck: the VJP as the provider ran it (%s: %s) within the "
                                    "error model of the float64 reference, %ld passing VJP checks",
                 e->mode,
                 strcmp(e->mode, "backendVJP") == 0 ? "its own backward routine, e.g. an ATen "
                                                      "backward kernel"
                                                    : "composed from forward primitives",
                 e->vjp_checks);
        descriptor(f, "vjpContract", claim, text, ".testSuite", suite);
    }
    fprintf(f, "  numericalPolicy := { reduction := .%s }\n\n", c->reduction);
}

/* ---- the module ---------------------------------------------------------------------------- */

static const char *or_none(const char *s)
{
    return s && s[0] ? s : "none";
}

/* The module's name parts: Report_<sha16>, its namespace Capcheck.Evidence.Report_<sha16>, and
 * the module name (the namespace, or NN.Tests.<namespace> in TorchLean's tree). */
typedef struct {
    char name[32], ns[64], module[96], path[128];
} lean_names;

static void names_of(const cc_gate *g, int in_torchlean, lean_names *nm)
{
    snprintf(nm->name, sizeof nm->name, "Report_%.16s", g->report_sha256);
    snprintf(nm->ns, sizeof nm->ns, "Capcheck.Evidence.%s", nm->name);
    snprintf(nm->module, sizeof nm->module, "%s%s", in_torchlean ? "NN.Tests." : "", nm->ns);
    snprintf(nm->path, sizeof nm->path, "%s", nm->module);
    for (char *p = nm->path; *p; p++)
        if (*p == '.')
            *p = '/';
    size_t used = strlen(nm->path);
    snprintf(nm->path + used, sizeof nm->path - used, ".lean");
}

static void header(FILE *f, const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                   const lean_names *nm, int in_torchlean)
{
    const cc_provenance *p = &g->run.prov;
    const cc_provider_identity *id = &p->provider;
    if (in_torchlean) /* TorchLean's lint wants this line in the first ten of a file under NN/ */
        fputs("/-\nCopyright (c) 2026 TorchLean\nReleased under MIT license as described in the "
              "file LICENSE.\nAuthors: generated by capcheck emit-lean\n-/\n\n",
              f);
    cc_strbuf b = {0};
    cc_strbuf_puts(&b, "capcheck evidence for TorchLean kernel capsules, as a TorchLean module.\n"
                       "Generated by `capcheck emit-lean`; do not edit.\n\n");
    const cc_tl_row *repo = cc_tl_find(tl, "repository", NULL);
    cc_strbuf_printf(&b, "TorchLean: %s at commit %s (the names used here: capcheck's "
                         "providers/torchlean/%s.tsv)\n",
                     repo ? repo->value : "TorchLean", tl->commit, tl->commit);
    if (in_torchlean)
        cc_strbuf_printf(&b, "Module:    %s, the file %s in a TorchLean checkout (its NNTests "
                             "library builds every module under NN/Tests)\n",
                         nm->module, nm->path);
    else
        cc_strbuf_printf(&b, "Module:    %s, the file %s under a Lake library's source "
                             "directory (capcheck emit-lean --package writes such a package)\n",
                         nm->module, nm->path);
    cc_strbuf_printf(&b, "Report:    sha256:%s (%ld cases), %s\n", g->report_sha256,
                     g->run.cases, g->run.prov.shard.present ? "a shard" : "sealed");
    if (g->signer[0]) /* who vouched for the run (harness/evidence/signature.h) */
        cc_strbuf_printf(&b, "Signed:    by the key %s; its manifest sha256:%s lists the "
                             "report's and the results' sha256 (ssh-keygen -Y verify, namespace "
                             "%s)\n",
                         g->signer, g->manifest_sha256, CC_SIGN_NAMESPACE);
    cc_strbuf_puts(&b, "Source:    ");
    comment_text(&b, g->source);
    cc_strbuf_puts(&b, "\nMade by:   capcheck ");
    comment_text(&b, p->capcheck_version);
    cc_strbuf_puts(&b, ", commit ");
    comment_text(&b, p->git_commit);
    cc_strbuf_puts(&b, "\nProvider:  ");
    if (!id->kind[0])
        cc_strbuf_puts(&b, "not recorded (a report made before capcheck recorded who ran)");
    else if (strcmp(id->kind, "plugin") == 0) {
        cc_strbuf_puts(&b, "plugin ");
        comment_text(&b, id->name);
        cc_strbuf_puts(&b, " loaded from ");
        comment_text(&b, id->library);
        cc_strbuf_printf(&b, " (sha256:%s)", id->sha256);
    } else {
        cc_strbuf_puts(&b, "built-in ");
        comment_text(&b, id->name);
    }
    cc_strbuf_puts(&b, "\n           ");
    comment_text(&b, g->run.provider_description);
    cc_strbuf_puts(&b, "\nMachine:   ");
    char machine[1024];
    snprintf(machine, sizeof machine, "cpu %s; gpu %s; cuda %s; cudnn %s; libtorch %s; tf32 %s; "
                                      "deterministic %s",
             p->cpu_model, or_none(p->gpu), or_none(p->cuda), or_none(p->cudnn),
             or_none(p->libtorch), p->tf32[0] ? p->tf32 : "not stated",
             p->deterministic[0] ? p->deterministic : "not stated");
    comment_text(&b, machine);
    if (!p->n_platforms)
        cc_strbuf_puts(&b, "\nPlatforms: not recorded in the results");
    for (int i = 0; i < p->n_platforms; i++) { /* what selected the kernels (run/platform.h) */
        char facts[512];
        cc_platform_summary(&p->platforms[i], facts, sizeof facts);
        cc_strbuf_puts(&b, "\nPlatform:  ");
        comment_text(&b, p->platforms[i].key);
        cc_strbuf_puts(&b, ": ");
        comment_text(&b, facts);
    }
    cc_strbuf_puts(&b, "\nCases:     ");
    comment_text(&b, g->run.case_files);
    cc_strbuf_printf(&b, "; base seed %llu", g->run.base_seed);
    for (int i = 0; i < p->n_files; i++) {
        cc_strbuf_puts(&b, "\n           ");
        comment_text(&b, p->files[i].path);
        cc_strbuf_printf(&b, " sha256:%s", p->files[i].sha256);
    }
    cc_strbuf_puts(&b, "\nPolicy:    ");
    comment_text(&b, pol->name);
    put_comment(f, "/-\n", b.data ? b.data : "", 1);
    cc_strbuf_free(&b);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->rows[i].kind, "header") == 0 && strcmp(tl->rows[i].value, "module") == 0)
            fprintf(f, "%s\n\n", tl->rows[i].value);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->rows[i].kind, "header") == 0 &&
            strncmp(tl->rows[i].value, "public import ", 14) == 0)
            fprintf(f, "%s\n", tl->rows[i].value);
}

/* "a,b" (constructor names) as the Lean array "#[.a, .b]". */
static void ctor_array(FILE *f, const char *list)
{
    fputs("#[", f);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        fprintf(f, "%s.%.*s", p == list ? "" : ", ", (int)l, p);
        p += l + (p[l] ? 1 : 0);
    }
    fputc(']', f);
}

/* The identifier of the profile admitting the module on a device: the maintained profile's
 * own short name + "WithEvidence" (checkedCpuWithEvidence, libTorchCudaWithEvidence). */
static int profile_ident(const cc_torchlean *tl, const char *device, char *buf, size_t n)
{
    const cc_tl_row *prof = cc_tl_profile(tl, device);
    if (!prof)
        return 0;
    const char *dot = strrchr(prof->name, '.');
    snprintf(buf, n, "%sWithEvidence", dot ? dot + 1 : prof->name);
    return 1;
}

/* The profile admitting the module on one device: the one TorchLean maintains for it, named
 * "<its name>+capcheck" (so TorchLean's reports say which planned), with the availability
 * widened to the capsules' providers when it lacks one. */
static void emit_profile(FILE *f, const cc_torchlean *tl, const char *device,
                         const lean_capsule *e, size_t n)
{
    const cc_tl_row *prof = cc_tl_profile(tl, device);
    char ident[96];
    if (!prof || !profile_ident(tl, device, ident, sizeof ident))
        return;
    char avail_name[128], devices[128], providers[256], pname[64], assurance[32];
    cc_tl_item(prof->value, "availability", avail_name, sizeof avail_name);
    cc_tl_item(prof->value, "name", pname, sizeof pname);
    cc_tl_item(prof->value, "assurance", assurance, sizeof assurance);
    const cc_tl_row *avail = cc_tl_find(tl, "availability", avail_name);
    cc_tl_item(avail ? avail->value : "", "devices", devices, sizeof devices);
    cc_tl_item(avail ? avail->value : "", "providers", providers, sizeof providers);
    int widened = 0;
    for (size_t i = 0; i < n; i++) {
        if (!emitted(&e[i]) || strcmp(e[i].c->device, device) != 0)
            continue;
        char probe[300], want[40];
        snprintf(probe, sizeof probe, ",%s,", providers);
        snprintf(want, sizeof want, ",%s,", e[i].c->provider);
        if (!strstr(probe, want)) {
            size_t used = strlen(providers);
            snprintf(providers + used, sizeof providers - used, "%s%s", used ? "," : "",
                     e[i].c->provider);
            widened = 1;
        }
    }
    const char *in_ns = strncmp(prof->name, "NN.Backend.", 11) == 0 ? prof->name + 11 : prof->name;
    const char *in_avail =
        strncmp(avail_name, "NN.Backend.", 11) == 0 ? avail_name + 11 : avail_name;
    cc_strbuf b = {0};
    cc_strbuf_printf(&b, "The profile TorchLean maintains for %s, `%s` (`AssurancePolicy.%s`%s), "
                         "named \"%s+capcheck\" and with `capsuleModule` first, so the planner "
                         "picks these capsules for their ops on %s",
                     device, in_ns, assurance,
                     strcmp(assurance, "external") == 0
                         ? ": it also admits TorchLean's trustedExternal capsules; these are "
                           "checked"
                         : "",
                     pname, device);
    if (widened)
        cc_strbuf_printf(&b, "; its availability (`%s`) widened to the capsules' providers",
                         in_avail);
    cc_strbuf_puts(&b, ".");
    put_comment(f, "/-- ", b.data ? b.data : "", 0);
    cc_strbuf_free(&b);
    fprintf(f, "def %s : BackendProfile :=\n  BackendProfile.withCapsuleModules\n    { %s with\n",
            ident, in_ns);
    char plus[80];
    snprintf(plus, sizeof plus, "%s+capcheck", pname);
    string_field(f, "      name := ", plus, 8, widened ? 0 : 2);
    if (widened) {
        fputs("\n      availability :=\n        { devices := ", f);
        ctor_array(f, devices);
        fputs("\n          providers := ", f);
        ctor_array(f, providers);
        fputs(" } }\n", f);
    } else
        fputs(" }\n", f);
    fputs("    #[capsuleModule]\n\n", f);
}

int cc_lean_write_module(const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                         int in_torchlean, FILE *f)
{
    size_t n;
    lean_capsule *e = capsules_of(g, tl, &n);
    if (!e)
        return -1;
    lean_names nm;
    names_of(g, in_torchlean, &nm);
    header(f, g, pol, tl, &nm, in_torchlean);

    /* the module doc's example: the first profile this module has, and an op of its capsules
     * the planner picks (one with a VJP claim, or one TorchLean never differentiates) */
    static const char *const devices[] = {"cpu", "cuda"};
    char example_profile[96] = "", example_op[32] = "";
    for (int d = 0; d < 2 && !example_profile[0]; d++)
        for (size_t i = 0; i < n; i++)
            if (emitted(&e[i]) && strcmp(e[i].c->device, devices[d]) == 0 &&
                profile_ident(tl, devices[d], example_profile, sizeof example_profile)) {
                const ref_op *op = ref_op_find(e[i].c->op);
                if (!example_op[0] || strcmp(e[i].mode, "none") != 0 ||
                    (op && !op->requires_vjp))
                    snprintf(example_op, sizeof example_op, "%s", e[i].c->op);
                if (strcmp(e[i].mode, "none") != 0 || (op && !op->requires_vjp))
                    break;
            }
    cc_strbuf b = {0};
    cc_strbuf_printf(&b, "# capcheck evidence, report sha256:%.16s\n\n"
                         "`capsuleModule` holds a `KernelCapsule` (trustLevel .checked) for every "
                         "capsule this report upgrades whose op, provider and device TorchLean "
                         "%.7s names; its value and VJP evidence is `.testSuite \"capcheck %s\"`, "
                         "%s, and its vjpMode the mode the provider "
                         "ran. To admit them, import this module and plan with one of the "
                         "profiles below (TorchLean's maintained profile with "
                         "`BackendProfile.withCapsuleModules #[capsuleModule]`)",
                     g->report_sha256, tl->commit,
                     g->signer[0] ? "run signed by SHA256:... manifest sha256:..." : "report sha256:...",
                     g->signer[0] ? "who vouched for the run (the key that signed its manifest)"
                                  : "the sealed report");
    if (example_profile[0])
        cc_strbuf_printf(&b, ", e.g. `%s.planReport #[.%s]` shows the capsule the planner picks",
                         example_profile, example_op);
    cc_strbuf_puts(&b, ". `notEmitted` lists the upgraded capsules that are not TorchLean "
                       "capsules, with why.");
    fputc('\n', f);
    put_comment(f, "/-!\n", b.data ? b.data : "", 1);
    cc_strbuf_free(&b);
    fputc('\n', f);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->rows[i].kind, "header") == 0 && strstr(tl->rows[i].value, "section"))
            fprintf(f, "%s\n\n", tl->rows[i].value);
    fprintf(f, "namespace %s\n\nopen NN.Backend\n\n", nm.ns);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (emitted(&e[i])) {
            emit_capsule(f, g, tl, &e[i]);
            count++;
        }
    fprintf(f, "/-- The capsules this report upgrades, as one capsule module (%zu). -/\n"
               "def capsuleModule : Registry.CapsuleModule :=\n",
            count);
    char modname[96];
    snprintf(modname, sizeof modname, "capcheck:%.16s", g->report_sha256);
    string_field(f, "  { name := ", modname, 4, 0);
    fputs("\n    capsules := #[", f);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (emitted(&e[i]))
            fprintf(f, "%s%s", k++ ? ",\n      " : "", e[i].ident);
    fputs("] }\n\n", f);
    for (int d = 0; d < 2; d++) {
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= emitted(&e[i]) && strcmp(e[i].c->device, devices[d]) == 0;
        if (any)
            emit_profile(f, tl, devices[d], e, n);
    }

    cc_strbuf_puts(&b, "## Not emitted as TorchLean capsules\n\nUpgraded by this report, but not a "
                       "TorchLean capsule:");
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].upgraded && e[i].why_not[0]) {
            cc_strbuf_puts(&b, "\n* \"");
            comment_text(&b, e[i].c->name);
            cc_strbuf_printf(&b, "\" (checked for %s): %s", e[i].dtypes, e[i].why_not);
            k++;
        }
    if (!k)
        cc_strbuf_puts(&b, "\n(none)");
    cc_strbuf_puts(&b, "\n\nNot upgraded by this report (capcheck gate says why):");
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (emitted(&e[i]))
            continue;
        for (size_t j = 0; j < e[i].nv; j++) {
            const cc_verdict *v = e[i].v[j];
            if (v->checked)
                continue;
            cc_strbuf_puts(&b, "\n* \"");
            comment_text(&b, e[i].c->name);
            cc_strbuf_printf(&b, "\" %s%s", cc_dtype_name(v->dtype), v->platform[0] ? " on " : "");
            comment_text(&b, v->platform);
            if (strcmp(e[i].c->source, "torchlean") == 0 && strcmp(e[i].c->trust, "checked") == 0)
                cc_strbuf_puts(&b, " (TorchLean's catalog marks it checked; this report does "
                                   "not support that)");
            cc_strbuf_puts(&b, ": ");
            comment_text(&b, v->n_reasons ? v->reasons[0] : "not checked");
            k++;
        }
    }
    if (!k)
        cc_strbuf_puts(&b, "\n(none)");
    put_comment(f, "/-!\n", b.data ? b.data : "", 1);
    cc_strbuf_free(&b);
    fputs("\n/-- The upgraded capsules that are not TorchLean capsules, with why. -/\n"
          "def notEmitted : List (String × String) := [",
          f);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].upgraded && e[i].why_not[0]) {
            fputs(k++ ? ",\n" : "\n", f);
            string_field(f, "  (", e[i].c->name, 4, 1);
            fputs(",\n", f);
            string_field(f, "    ", e[i].why_not, 4, 1);
            fputc(')', f);
        }
    fprintf(f, "%s]\n\nend %s\n", k ? "\n" : "", nm.ns);
    free(e);
    return ferror(f) ? -1 : 0;
}

/* ---- the Lake package ---------------------------------------------------------------------- */

/* dir/rel written whole from the text `body` (or, with body NULL, the module). */
static int write_file(const char *dir, const char *rel, const char *body, const cc_gate *g,
                      const cc_policy *pol, const cc_torchlean *tl, char *path, size_t plen,
                      char *msg, size_t len)
{
    snprintf(path, plen, "%s/%s", dir, rel);
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = 0;
    if (cc_make_dir(parent)) {
        snprintf(msg, len, "cannot make the folder %s: %s", parent, strerror(errno));
        return -1;
    }
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f) {
        snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    int failed = body ? fputs(body, f) < 0 : cc_lean_write_module(g, pol, tl, 0, f) != 0;
    if (cc_write_atomic_close(&w, failed, 0) || failed) {
        snprintf(msg, len, "cannot write %s: %s", path, errno ? strerror(errno) : "write failed");
        return -1;
    }
    return 0;
}

int cc_lean_write_package(const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                          const char *dir, char *module_path, size_t mp_len, char *msg,
                          size_t len)
{
    lean_names nm;
    names_of(g, 0, &nm);
    const cc_tl_row *repo = cc_tl_find(tl, "repository", NULL);
    const char *url = repo ? repo->value : "https://github.com/srirampc/TorchLean";
    char path[4096];
    cc_strbuf b = {0};
    /* TorchLean's own lakefile is lakefile.lean: the same form, and the same `require ... from
     * git "URL" @ "REV"` it uses for Mathlib */
    cc_strbuf_printf(&b, "/-\nThe Lake package of one capcheck evidence module, written by "
                         "`capcheck emit-lean --package`.\n`lake build` here builds %s\nagainst "
                         "TorchLean %.7s (README.md).\n-/\n\nimport Lake\nopen Lake DSL\n\n"
                         "package capcheck_evidence\n\nrequire TorchLean from git\n  \"%s\" @ "
                         "\"%s\"\n\n/-- capcheck's evidence modules, Capcheck/Evidence/*.lean. "
                         "-/\n@[default_target]\nlean_lib Capcheck where\n  roots := #[`%s]\n",
                     nm.module, tl->commit, url, tl->commit, nm.module);
    int rc = write_file(dir, "lakefile.lean", b.data, g, pol, tl, path, sizeof path, msg, len);
    cc_strbuf_free(&b);
    if (rc || write_file(dir, nm.path, NULL, g, pol, tl, module_path, mp_len, msg, len))
        return -1;
    char fetch[640];
    if (strncmp(url, "https://github.com/", 19) == 0) /* the raw file of that repository */
        snprintf(fetch, sizeof fetch,
                 "curl -fsSL https://raw.githubusercontent.com/%s/%s/lean-toolchain -o "
                 "lean-toolchain",
                 url + 19, tl->commit);
    else
        snprintf(fetch, sizeof fetch, "cp PATH-TO-TORCHLEAN-AT-%.7s/lean-toolchain .",
                 tl->commit);
    cc_strbuf_printf(
        &b,
        "# capcheck evidence for TorchLean %.7s\n\n"
        "`%s` is the module `capcheck emit-lean` wrote from the report sha256:%s: a "
        "`KernelCapsule` for every capsule the report upgrades, `capsuleModule` of them, and the "
        "profiles that admit them, for TorchLean (%s) at commit %s.\n\n"
        "Build it here (Lake fetches TorchLean at that commit, and Mathlib, which TorchLean "
        "requires; the toolchain must be TorchLean's own):\n\n"
        "    %s\n"
        "    lake exe cache get    # Mathlib's compiled files, instead of hours of building them\n"
        "    lake build            # builds %s\n\n"
        "`lakefile.lean` requires TorchLean at %s; its library `Capcheck` has one root, `%s`, "
        "the file `%s`, whose namespace is `%s`. Another Lake package uses it with `require "
        "capcheck_evidence from \"PATH-TO-THIS-FOLDER\"` and `import %s`.\n\n"
        "capcheck checked every name the module uses against TorchLean's sources at that commit "
        "(capcheck's providers/torchlean/%s.tsv) and every line against TorchLean's lint; no Lean "
        "toolchain ran where it was written.\n",
        tl->commit, nm.path, g->report_sha256, url, tl->commit, fetch, nm.module, tl->commit,
        nm.module, nm.path, nm.ns, nm.module, tl->commit);
    rc = write_file(dir, "README.md", b.data, g, pol, tl, path, sizeof path, msg, len);
    cc_strbuf_free(&b);
    return rc;
}
