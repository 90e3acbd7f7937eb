/* Plain SVG charts written by the program (no plotting dependency): grouped bars for bench, lines for
 * cache-sim. Every plotted value is also in the element's data-value attribute and <title> (hover),
 * so a test can read the numbers back. See cli.h. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 720
#define H 420
#define ML 70   /* margins: left (y labels), right (legend), top (title), bottom (x labels) */
#define MR 170
#define MT 40
#define MB 60

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
    }
}

/* a "nice" axis maximum (1, 2 or 5 times a power of ten) and its tick step */
static double nice_max(double v, double *step) {
    if (!(v > 0)) v = 1;
    double p = pow(10, floor(log10(v))), m = v / p;
    double top = m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10;
    *step = top * p / 5;
    return top * p;
}

static void header(FILE *f, const char *title, const char *xlabel, const char *ylabel, double ymax, double step,
                   const char *yfmt) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            W, H, W, H, W, H);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">", (W - MR + ML) / 2);
    xml_text(f, title);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (W - MR + ML) / 2, H - 12);
    xml_text(f, xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">", (H - MB + MT) / 2);
    xml_text(f, ylabel);
    fprintf(f, "</text>\n");
    for (double y = 0; y <= ymax * 1.0001; y += step) {
        double py = H - MB - y / ymax * (H - MB - MT);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, py, W - MR, py);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 6, py + 4);
        fprintf(f, yfmt, y);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, H - MB, W - MR, H - MB);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, MT, ML, H - MB);
}

static void legend(FILE *f, int i, const char *name, int dashed) {
    int y = MT + 10 + 18 * i;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"%s/>\n", W - MR + 12, y,
            W - MR + 36, y, colors[i % 10], dashed ? " stroke-dasharray=\"6 4\"" : "");
    fprintf(f, "<text x=\"%d\" y=\"%d\">", W - MR + 42, y + 4);
    xml_text(f, name);
    fprintf(f, "</text>\n");
}

static int finish(FILE *f, const char *path) {
    fprintf(f, "</svg>\n");
    if (ferror(f) | fclose(f)) { fprintf(stderr, "error: cannot write %s\n", path); return -1; }
    return 0;
}

int mr_svg_bars(const char *path, const char *title, const char *ylabel, const char *const *cats, int ncat,
                const char *const *series, int nser, const double *vals, const char *unit) {
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "error: cannot write %s\n", path); return -1; }
    double vmax = 0, step;
    for (int i = 0; i < ncat * nser; i++) vmax = vals[i] > vmax ? vals[i] : vmax;
    const double ymax = nice_max(vmax, &step);
    header(f, title, "", ylabel, ymax, step, "%g");
    const double gw = (double)(W - MR - ML) / (ncat > 0 ? ncat : 1), bw = gw * 0.8 / (nser > 0 ? nser : 1);
    for (int c = 0; c < ncat; c++) {
        const double gx = ML + gw * c + gw * 0.1;
        for (int s = 0; s < nser; s++) {
            double v = vals[c * nser + s], h = v / ymax * (H - MB - MT);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" data-value=\"%.6g\">"
                       "<title>", gx + bw * s, H - MB - h, bw * 0.95, h, colors[s % 10], v);
            xml_text(f, cats[c]);
            fputs(", ", f);
            xml_text(f, series[s]);
            fprintf(f, ": %.6g %s</title></rect>\n", v, unit);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", ML + gw * (c + 0.5), H - MB + 16);
        xml_text(f, cats[c]);
        fprintf(f, "</text>\n");
    }
    for (int s = 0; s < nser; s++) legend(f, s, series[s], 0);
    return finish(f, path);
}

int mr_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel, const mr_svg_series *ser,
                 int nser, double ymax_fixed) {
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "error: cannot write %s\n", path); return -1; }
    double xmax = 0, ymax = ymax_fixed, step, xstep;
    for (int s = 0; s < nser; s++)
        for (int i = 0; i < ser[s].n; i++) {
            xmax = ser[s].x[i] > xmax ? ser[s].x[i] : xmax;
            if (ymax_fixed <= 0) ymax = ser[s].y[i] > ymax ? ser[s].y[i] : ymax;
        }
    if (ymax_fixed > 0) step = ymax_fixed / 5; else ymax = nice_max(ymax, &step);
    xmax = nice_max(xmax, &xstep);
    header(f, title, xlabel, ylabel, ymax, step, "%g");
    for (double x = 0; x <= xmax * 1.0001; x += xstep)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", ML + x / xmax * (W - MR - ML),
                H - MB + 16, x);
    for (int s = 0; s < nser; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", colors[s % 10],
                ser[s].dashed ? " stroke-dasharray=\"6 4\"" : "");
        for (int i = 0; i < ser[s].n; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", ML + ser[s].x[i] / xmax * (W - MR - ML),
                    H - MB - ser[s].y[i] / ymax * (H - MB - MT));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < ser[s].n; i++) {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" data-series=\"", ML + ser[s].x[i] / xmax * (W - MR - ML),
                    H - MB - ser[s].y[i] / ymax * (H - MB - MT), colors[s % 10]);
            xml_text(f, ser[s].name);
            fprintf(f, "\" data-x=\"%.6g\" data-value=\"%.6g\"><title>", ser[s].x[i], ser[s].y[i]);
            xml_text(f, ser[s].name);
            fprintf(f, ": %.6g at %.6g</title></circle>\n", ser[s].y[i], ser[s].x[i]);
        }
        legend(f, s, ser[s].name, ser[s].dashed);
    }
    return finish(f, path);
}
