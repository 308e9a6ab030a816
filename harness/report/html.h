/* What report.html (harness/report_html.h) and the history page (harness/history.h) share:
 * one self-contained page (no network: a Content-Security-Policy that allows inline style and
 * script only, inline SVG, no external file), escaping, the colour scale of a bound ratio and
 * how a ratio is printed. */
#ifndef CAPCHECK_HTML_H
#define CAPCHECK_HTML_H

#include <stdio.h>

/* <!doctype html> ... <body><h1>title</h1>: the style sheet for screen and print. */
void cc_html_begin(FILE *f, const char *title);
/* The closing tags, and the one inline script: before printing, every <details> opens. */
void cc_html_end(FILE *f);

/* Text and attribute values of HTML and XML (report.junit.xml too), escaped (& < > " ');
 * control characters but newline and tab become spaces. */
void cc_html_text(FILE *f, const char *s);

/* A bound ratio as a short string ("0", "4.2e-05", "0.031", "0.42", "17", "NaN"). */
void cc_html_format_ratio(double ratio, char *buf, size_t n);

/* The heat class of a worst bound ratio (style sheet: h0 exact .. h6 at the bound, hx over
 * it or NaN), and the legend that explains the classes. */
const char *cc_html_heat_class(double ratio);
void cc_html_heat_legend(FILE *f);

/* Write `path` all or nothing (core/files.h); fn writes it (a page, history.json). Returns 0
 * and the size in *bytes (may be NULL), or -1 (errno). */
int cc_write_file_with(const char *path, void (*fn)(FILE *f, const void *ctx), const void *ctx,
                       long *bytes);

#endif
