/* plot.c -- the pictures of :plot: a sweep of one size drawn as a text chart for the
 * terminal or as an SVG file, with the measured and the predicted rate of a function
 * against the host's roofline, and marks where the schedule's chosen variant changes.
 * commands.c measures; this file only draws, from a PlotData, with no dependency: the SVG
 * is plain text that any browser or image viewer opens.
 */
#include "config.h"
#include "dyn_int.h"

#include <math.h>
#include <string.h>

/* The rate drawn at a point: GFLOP/s when the function computes, else GB/s (a copy or a
 * transpose); the roof at that point is the compute peak or the bandwidth times the
 * point's intensity, whichever binds. */
static bool plot_flops(const PlotData *d) {
  for (int i = 0; i < d->n; i++)
    if (d->pt[i].flops > 0) return true;
  return false;
}

static double rate(const PlotData *d, const PlotPoint *p, double secs) {
  if (secs <= 0) return 0;
  return (plot_flops(d) ? p->flops : p->bytes) / secs * 1e-9;
}

static double roof(const PlotData *d, const PlotPoint *p) {
  if (!plot_flops(d)) return d->bw_gbs;
  double mem = p->bytes > 0 ? p->flops / p->bytes * d->bw_gbs : d->peak_gflops;
  return d->peak_gflops > 0 && d->peak_gflops < mem ? d->peak_gflops : mem;
}

/* The x axis is logarithmic when the sweep spans a factor of 8 or more. */
static bool log_x(const PlotData *d) {
  return d->n > 1 && d->pt[0].x > 0 && d->pt[d->n - 1].x >= 8 * d->pt[0].x;
}

/* Position of x in [0, 1] along the axis. */
static double xpos(const PlotData *d, int64_t x) {
  double lo = (double)d->pt[0].x, hi = (double)d->pt[d->n - 1].x;
  if (hi <= lo) return 0.5;
  if (log_x(d)) return (log((double)x) - log(lo)) / (log(hi) - log(lo));
  return ((double)x - lo) / (hi - lo);
}

static double ymax(const PlotData *d) {
  double m = 0;
  for (int i = 0; i < d->n; i++) {
    const PlotPoint *p = &d->pt[i];
    double v[3] = {rate(d, p, p->measured_s), rate(d, p, p->predicted_s), roof(d, p)};
    for (int k = 0; k < 3; k++)
      if (isfinite(v[k]) && v[k] > m) m = v[k];
  }
  return m > 0 ? m * 1.05 : 1;
}

static const char *unit(const PlotData *d) { return plot_flops(d) ? "GFLOP/s" : "GB/s"; }

/* The table under either picture's caption: one row a point. */
static void plot_table(const PlotData *d, Buf *out) {
  buf_printf(out, "  %10s  %12s  %12s  %10s  %10s  %s\n", d->xname, "measured ms", "predicted ms", unit(d), "roof", "variant");
  for (int i = 0; i < d->n; i++) {
    const PlotPoint *p = &d->pt[i];
    buf_printf(out, "  %10lld  %12.4f  %12.4f  %10.1f  %10.1f  %c\n", (long long)p->x, p->measured_s * 1e3,
               p->predicted_s * 1e3, rate(d, p, p->measured_s), roof(d, p), 'A' + p->variant % 26);
  }
  for (int v = 0; v < d->nvariants; v++) buf_printf(out, "  %c: %s\n", 'A' + v % 26, d->variants[v]);
}

void plot_text(const PlotData *d, int width, int height, Buf *out) {
  if (width < 20) width = 20;
  if (height < 6) height = 6;
  double top = ymax(d);
  char *grid = xmalloc((size_t)width * (size_t)height);
  memset(grid, ' ', (size_t)width * (size_t)height);
  /* roof first, then predicted, then measured on top; '#' where the two rates meet */
  for (int c = 0; c < width && d->n; c++) {
    /* the roof between points: the nearest point's roof (it is flat or steps with intensity) */
    double best = 2;
    const PlotPoint *near = &d->pt[0];
    for (int i = 0; i < d->n; i++) {
      double dist = fabs(xpos(d, d->pt[i].x) - (double)c / (width - 1));
      if (dist < best) best = dist, near = &d->pt[i];
    }
    int r = (int)lround(roof(d, near) / top * (height - 1));
    if (r >= 0 && r < height) grid[(size_t)(height - 1 - r) * (size_t)width + (size_t)c] = '-';
  }
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < d->n; i++) {
      const PlotPoint *p = &d->pt[i];
      double v = rate(d, p, pass ? p->measured_s : p->predicted_s);
      int c = (int)lround(xpos(d, p->x) * (width - 1)), r = (int)lround(v / top * (height - 1));
      if (r < 0 || r >= height || c < 0 || c >= width) continue;
      char *g = &grid[(size_t)(height - 1 - r) * (size_t)width + (size_t)c];
      *g = pass == 0 ? 'o' : *g == 'o' ? '#' : '*';
    }
  buf_printf(out, "%s\n", d->title);
  for (int r = 0; r < height; r++) {
    double label = top * (height - 1 - r) / (height - 1);
    if (r == 0 || r == height - 1 || r == (height - 1) / 2)
      buf_printf(out, "%8.1f |", label);
    else
      buf_puts(out, "         |");
    buf_printf(out, "%.*s\n", width, grid + (size_t)r * (size_t)width);
  }
  /* the axis, with the variant's letter under each point where it changes */
  char *axis = xmalloc((size_t)width + 1);
  memset(axis, '-', (size_t)width);
  axis[width] = 0;
  for (int i = 0; i < d->n; i++)
    if (i == 0 || d->pt[i].variant != d->pt[i - 1].variant) {
      int c = (int)lround(xpos(d, d->pt[i].x) * (width - 1));
      axis[c] = (char)('A' + d->pt[i].variant % 26);
    }
  buf_printf(out, "         +%s\n", axis);
  char lo[32], hi[32];
  snprintf(lo, sizeof lo, "%lld", (long long)d->pt[0].x);
  snprintf(hi, sizeof hi, "%lld", (long long)d->pt[d->n - 1].x);
  int gap = width - (int)strlen(lo) - (int)strlen(hi);
  buf_printf(out, "          %s%*s%s  %s%s\n", lo, gap > 0 ? gap : 1, "", hi, d->xname, log_x(d) ? " (log scale)" : "");
  buf_printf(out, "%s: * measured  o predicted  # both  - roofline  A, B...: the chosen variant from there on\n", unit(d));
  plot_table(d, out);
  free(axis);
  free(grid);
}

/* Text in SVG: the five characters XML reserves, escaped. */
static void svg_text(Buf *out, const char *s) {
  for (; *s; s++) switch (*s) {
    case '<': buf_puts(out, "&lt;"); break;
    case '>': buf_puts(out, "&gt;"); break;
    case '&': buf_puts(out, "&amp;"); break;
    case '"': buf_puts(out, "&quot;"); break;
    case '\'': buf_puts(out, "&apos;"); break;
    default: buf_putc(out, *s);
  }
}

enum { SVG_W = 720, SVG_H = 440, SVG_L = 70, SVG_R = 20, SVG_T = 40, SVG_B = 110 };

static double svg_x(const PlotData *d, int64_t x) { return SVG_L + xpos(d, x) * (SVG_W - SVG_L - SVG_R); }
static double svg_y(double v, double top) { return SVG_T + (1 - v / top) * (SVG_H - SVG_T - SVG_B); }

static void svg_series(const PlotData *d, Buf *out, int which, double top, const char *style) {
  buf_printf(out, "<polyline fill=\"none\" %s points=\"", style);
  for (int i = 0; i < d->n; i++) {
    const PlotPoint *p = &d->pt[i];
    double v = which == 0 ? roof(d, p) : rate(d, p, which == 1 ? p->measured_s : p->predicted_s);
    buf_printf(out, "%s%.1f,%.1f", i ? " " : "", svg_x(d, p->x), svg_y(v, top));
  }
  buf_puts(out, "\"/>\n");
}

void plot_svg(const PlotData *d, Buf *out) {
  double top = ymax(d);
  int pw = SVG_W - SVG_L - SVG_R, ph = SVG_H - SVG_T - SVG_B;
  int height = SVG_H + 14 * (d->nvariants > 3 ? d->nvariants - 3 : 0);   /* a line a variant */
  buf_printf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
             SVG_W, height, SVG_W, height);
  buf_printf(out, "<text x=\"%d\" y=\"22\" font-size=\"14\">", SVG_L);
  svg_text(out, d->title);
  buf_puts(out, "</text>\n");
  /* grid and axes */
  for (int k = 0; k <= 4; k++) {
    double v = top * k / 4, y = svg_y(v, top);
    buf_printf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", SVG_L, y, SVG_L + pw, y);
    buf_printf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", SVG_L - 6, y + 4, v);
  }
  buf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"black\"/>\n", SVG_L, SVG_T, pw, ph);
  buf_printf(out, "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">%s</text>\n",
             SVG_T + ph / 2, SVG_T + ph / 2, unit(d));
  for (int i = 0; i < d->n; i++) {
    double x = svg_x(d, d->pt[i].x);
    if (d->n <= 12 || i == 0 || i == d->n - 1 || i % 2 == 0)
      buf_printf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%lld</text>\n", x, SVG_T + ph + 16,
                 (long long)d->pt[i].x);
    if (i > 0 && d->pt[i].variant != d->pt[i - 1].variant)
      buf_printf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\" stroke-dasharray=\"2,3\"/>\n", x,
                 SVG_T, x, SVG_T + ph);
    if (i == 0 || d->pt[i].variant != d->pt[i - 1].variant)
      buf_printf(out, "<text x=\"%.1f\" y=\"%d\" fill=\"#555\">%c</text>\n", x + 3, SVG_T + 14, 'A' + d->pt[i].variant % 26);
  }
  buf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", SVG_L + pw / 2, SVG_T + ph + 34);
  svg_text(out, d->xname);
  buf_printf(out, "%s</text>\n", log_x(d) ? " (log scale)" : "");
  svg_series(d, out, 0, top, "stroke=\"#999\" stroke-width=\"2\" stroke-dasharray=\"6,4\"");
  svg_series(d, out, 2, top, "stroke=\"#e07b00\" stroke-width=\"2\"");
  svg_series(d, out, 1, top, "stroke=\"#1f5fbf\" stroke-width=\"2\"");
  for (int i = 0; i < d->n; i++) {
    const PlotPoint *p = &d->pt[i];
    buf_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#1f5fbf\"/>\n", svg_x(d, p->x),
               svg_y(rate(d, p, p->measured_s), top));
  }
  /* legend and the variants */
  int ly = SVG_T + ph + 54;
  buf_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#1f5fbf\" stroke-width=\"2\"/>"
             "<text x=\"%d\" y=\"%d\">measured</text>\n", SVG_L, ly - 4, SVG_L + 24, ly - 4, SVG_L + 30, ly);
  buf_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#e07b00\" stroke-width=\"2\"/>"
             "<text x=\"%d\" y=\"%d\">predicted</text>\n", SVG_L + 110, ly - 4, SVG_L + 134, ly - 4, SVG_L + 140, ly);
  buf_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\" stroke-width=\"2\" stroke-dasharray=\"6,4\"/>"
             "<text x=\"%d\" y=\"%d\">roofline</text>\n", SVG_L + 230, ly - 4, SVG_L + 254, ly - 4, SVG_L + 260, ly);
  for (int v = 0; v < d->nvariants; v++) {
    buf_printf(out, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%c: ", SVG_L, ly + 18 + 14 * v, 'A' + v % 26);
    svg_text(out, d->variants[v]);
    buf_puts(out, "</text>\n");
  }
  buf_puts(out, "</svg>\n");
}
