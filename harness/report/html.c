#define _POSIX_C_SOURCE 200809L
#include "harness/report/html.h"

#include <math.h>
#include <string.h>

#include "core/files.h"

/* Nothing leaves the page: no fetch, image, font or frame from anywhere; inline style and the
 * one inline script only. A browser that meets a reference to anything else refuses it and says
 * so on its console (tests/html_check.py fails on that). */
#define CSP "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

/* Heat classes h0..h6, hx: passing cells from white (exact, far inside the bound) to green,
 * deeper as the worst ratio nears the bound (a clean run is all white and green, never a
 * warning colour); red beyond it (a failing case). hu: nothing compared (unsupported only). */
static const char STYLE[] =
    ":root{--ok:#1a7f37;--bad:#c62828;--mute:#6b7280;--line:#d9dde3}\n"
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
    "margin:0 auto;padding:12px 20px 40px;max-width:1400px;color:#1f2328}\n"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;"
    "border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}\n"
    "p.note,.mute{color:var(--mute)}p.note{margin:4px 0 10px;max-width:75em}\n"
    "code,.mono{font:12px/1.4 'DejaVu Sans Mono',Menlo,Consolas,monospace}\n"
    "code.repro{display:block;background:#f6f8fa;border:1px solid var(--line);border-radius:4px;"
    "padding:3px 6px;margin:3px 0;white-space:pre-wrap;word-break:break-all;user-select:all}\n"
    ".banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:10px 0}\n"
    ".banner.ok{background:#dafbe1;color:#116329}.banner.bad{background:#ffebe9;color:#a40e26}\n"
    ".tiles{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}\n"
    ".tile{border:1px solid var(--line);border-radius:6px;padding:6px 12px;min-width:90px}\n"
    ".tile b{display:block;font-size:20px}.tile.bad b{color:var(--bad)}.tile.ok b{color:var(--ok)}\n"
    "table{border-collapse:collapse}td,th{padding:2px 6px;text-align:left;vertical-align:top}\n"
    "table.kv td:first-child{color:var(--mute);white-space:nowrap}\n"
    "table.list th{border-bottom:1px solid var(--line)}table.list td{border-bottom:1px solid #eef0f3}\n"
    ".scroll{overflow-x:auto}\n"
    "table.heat td,table.heat th{border:1px solid #fff;text-align:center;font-size:12px;"
    "padding:0 4px;min-width:40px}\n"
    "table.heat th.group{border-left:6px solid #fff}table.heat td.dist{padding:0 2px;"
    "min-width:0}table.heat td.cell{border-left:6px solid #fff}\n"
    "table.heat th.op,table.heat td.op{text-align:right;position:sticky;left:0;background:#fff;"
    "font-weight:400;min-width:0}\n"
    "table.heat td.op{font-family:'DejaVu Sans Mono',Menlo,monospace}\n"
    ".h0{background:#ffffff;outline:1px solid #eef0f3;outline-offset:-1px}.h1{background:#f1f9f3}"
    ".h2{background:#dff1e4}.h3{background:#c6e7cf}.h4{background:#a6d9b4}.h5{background:#80c794}"
    ".h6{background:#57b270}"
    ".hx{background:#c62828;color:#fff;font-weight:700}"
    ".hu{background:repeating-linear-gradient(45deg,#eee,#eee 3px,#fff 3px,#fff 6px);"
    "color:var(--mute)}\n"
    ".legend span{display:inline-block;padding:1px 8px;margin:0 2px;font-size:12px}\n"
    ".st{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;font-weight:600;"
    "white-space:nowrap}\n"
    ".st.ok{background:#dafbe1;color:#116329}.st.bad{background:#ffebe9;color:#a40e26}"
    ".st.skip{background:#eef0f3;color:#57606a}.st.warn{background:#fff8c5;color:#7d4e00}\n"
    "ul.fails{list-style:none;padding-left:0}ul.fails>li{margin:6px 0 10px;padding-left:8px;"
    "border-left:3px solid var(--bad)}\n"
    "svg.hist,svg.spark{vertical-align:middle}\n"
    "nav{font-size:13px;margin-bottom:4px}a{color:#0b5cad;text-decoration:none}\n"
    "p.chips a{display:inline-block;border:1px solid #f1c0bd;background:#fff5f4;border-radius:4px;"
    "padding:0 6px;margin:2px 2px;color:#1f2328;font-size:13px}\n"
    "table.list ul{margin:0;padding-left:16px}\n"
    "@media print{nav{display:none}body{font-size:10px;max-width:none;padding:0}.scroll{overflow:visible}"
    "h2{break-after:avoid}li,tr{break-inside:avoid}table.heat td,table.heat th{min-width:0}"
    "*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}\n";

void cc_html_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(c < 0x20 && c != '\n' && c != '\t' ? ' ' : c, f);
        }
    }
}

void cc_html_begin(FILE *f, const char *title)
{
    fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"" CSP "\">\n"
          "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>",
          f);
    cc_html_text(f, title);
    fprintf(f, "</title>\n<style>\n%s</style></head>\n<body>\n<h1>", STYLE);
    cc_html_text(f, title);
    fputs("</h1>\n", f);
}

void cc_html_end(FILE *f)
{
    fputs("<script>addEventListener('beforeprint',function(){"
          "document.querySelectorAll('details').forEach(function(d){d.open=true})})</script>\n"
          "</body></html>\n",
          f);
}

void cc_html_format_ratio(double r, char *buf, size_t n)
{
    if (isnan(r))
        snprintf(buf, n, "NaN");
    else if (r == 0)
        snprintf(buf, n, "0");
    else if (r < 1e-3 || r >= 1e4)
        snprintf(buf, n, "%.1e", r);
    else
        snprintf(buf, n, "%.2g", r);
}

static const struct {
    double below; /* the class holds ratios under this (h6: at most 1) */
    const char *cls, *label;
} HEAT[] = {
    {0, "h0", "0 (exact)"},    {1e-4, "h1", "< 1e-4"}, {1e-3, "h2", "< 0.001"},
    {1e-2, "h3", "< 0.01"},    {1e-1, "h4", "< 0.1"},  {0.5, "h5", "< 0.5"},
    {1.0, "h6", "&le; 1"},
};
#define N_HEAT (sizeof HEAT / sizeof HEAT[0])

const char *cc_html_heat_class(double r)
{
    if (r == 0)
        return "h0";
    for (size_t k = 1; k + 1 < N_HEAT; k++)
        if (r < HEAT[k].below)
            return HEAT[k].cls;
    return r <= 1.0 ? "h6" : "hx"; /* NaN too */
}

void cc_html_heat_legend(FILE *f)
{
    fputs("<p class=\"legend\">worst bound ratio: ", f);
    for (size_t k = 0; k < N_HEAT; k++)
        fprintf(f, "<span class=\"%s\">%s</span>", HEAT[k].cls, HEAT[k].label);
    fputs("<span class=\"hx\">&gt; 1 or NaN: fails</span>"
          "<span class=\"hu\">nothing compared</span></p>\n",
          f);
}

int cc_write_file_with(const char *path, void (*fn)(FILE *f, const void *ctx), const void *ctx,
                       long *bytes)
{
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f)
        return -1;
    fn(f, ctx);
    long size = ftell(f);
    if (cc_write_atomic_close(&w, ferror(f), 0))
        return -1;
    if (bytes)
        *bytes = size;
    return 0;
}
