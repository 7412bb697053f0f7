/* render.c - pictures of a simulated schedule: an SVG timeline (ranks as
 * rows, compute coloured by kind, an overlapped F+B cell as two bands,
 * messages grey, idle time pink where the bubble ratio counts it and grey
 * where it does not, a time axis in cost units), a Chrome-trace JSON that
 * Perfetto and chrome://tracing open, and a text timeline for the terminal.
 * Under each rank's lane (and as a counter track in the trace) the
 * activations it holds over time, by the checker's memory model.
 * The SVG is a pure function of the report: same input, same bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Fill colour of an action kind in the SVG legend and cells. */
static const char *kind_colour(ppv_action_kind k) {
    switch (k) {
    case PPV_ACT_F:
        return "#4e79a7";
    case PPV_ACT_I:
        return "#f28e2b";
    case PPV_ACT_B:
        return "#e15759";
    case PPV_ACT_W:
        return "#59a14f";
    case PPV_ACT_R:
        return "#b07aa1";
    case PPV_ACT_GEN:
        return "#76b7b2";
    default:
        return "#bab0ac";
    }
}

/* The SVG's horizontal scale: SVG_PX_PER_UNIT pixels per cost unit, so the
 * picture grows with the makespan, with the plot (up to the last tick)
 * clamped to [SVG_MIN_PLOT_PX, SVG_MAX_PLOT_PX]: 720 px (24 units at full
 * scale) leaves room for the title and legend, 6000 px (200 units) keeps a
 * huge schedule openable; past that cells shrink and keep their tooltips. */
enum { SVG_PX_PER_UNIT = 30, SVG_MIN_PLOT_PX = 720, SVG_MAX_PLOT_PX = 6000 };
/* Margins and lane heights in pixels: rank names on the left, three title
 * lines on top, the axis and legend below; under each rank's timeline
 * lane (SVG_ROW) its memory track (SVG_MEM). */
enum {
    SVG_LEFT = 70,
    SVG_RIGHT = 40,
    SVG_TOP = 52,
    SVG_ROW = 28,
    SVG_MEM = 22,
    SVG_PITCH = SVG_ROW + SVG_MEM,
    SVG_AXIS = 34,
    SVG_LEGEND = 24
};
#define SVG_CHAR_PX 6.0      /* advance of one character of the 10 px monospace font */
#define SVG_BUBBLE "#f4d6d6" /* idle counted by the bubble ratio */
#define SVG_OFFSET "#e3e3e3" /* start-up/drain idle the bubble ratio leaves out */
#define SVG_MEMORY "#d9cdea" /* the memory track's fill */

typedef struct svg_layout {
    double step;   /* cost units between axis ticks */
    int32_t ticks; /* intervals: the last tick is ticks * step >= makespan */
    double scale;  /* pixels per cost unit */
} svg_layout;

/* The part of a rank's lane the bubble ratio counts: as long as the longest
 * first-to-last compute span of any rank, and holding this rank's own. */
typedef struct svg_window {
    double start, end;
} svg_window;

/* The tick step for an axis from 0 to makespan: the smallest 1, 2 or 5 x
 * 10^k that gives at most 20 intervals (so 9 to 21 ticks once the makespan
 * reaches 8 units). */
static double axis_step(double makespan) {
    double base = pow(10.0, floor(log10(makespan / 20.0)));
    static const double mult[] = {1, 2, 5, 10};
    for (size_t k = 0; k < sizeof mult / sizeof mult[0]; k++)
        if (makespan / (mult[k] * base) <= 20.0 + 1e-9) return mult[k] * base;
    return 10.0 * base;
}

/* Scale and ticks for a timeline of the given makespan (0 draws one unit). */
static svg_layout svg_layout_for(double makespan) {
    svg_layout l;
    double span = makespan > 0 ? makespan : 1.0;
    l.step = axis_step(span);
    l.ticks = (int32_t)ceil(span / l.step - 1e-9);
    double extent = l.ticks * l.step;
    double plot = extent * SVG_PX_PER_UNIT;
    if (plot < SVG_MIN_PLOT_PX) plot = SVG_MIN_PLOT_PX;
    if (plot > SVG_MAX_PLOT_PX) plot = SVG_MAX_PLOT_PX;
    l.scale = plot / extent;
    return l;
}

/* x pixel of time t. */
static double svg_x(const svg_layout *l, double t) {
    return SVG_LEFT + t * l->scale;
}

static int is_compute(const ppv_action *a) {
    return (ppv_action_flags(a->kind) & PPV_AF_COMPUTE) != 0;
}

/* Index just past the overlapped cell (or the single action) starting at i. */
static int32_t cell_end(const ppv_program *p, int32_t i) {
    int32_t j = i + 1;
    if (p->acts[i].overlap)
        while (j < p->n && p->acts[j].overlap == p->acts[i].overlap)
            j++;
    return j;
}

/* 1 if the simulation ran action i of rank r. A deadlocked report leaves the
 * spans of actions never reached at [0, 0); a finished one ran them all. */
static int was_run(const ppv_check_report *rep, int32_t r, int32_t i) {
    ppv_span sp = rep->spans[r][i];
    return !rep->deadlock || sp.end > sp.start;
}

/* First compute start and last compute end of rank r, as the checker's
 * bubble ratio measures them. Returns 0 when the rank computed nothing. */
static int rank_compute_extent(const ppv_check_report *rep, int32_t r, double *first,
                               double *last) {
    const ppv_program *p = &rep->checked->prog[r];
    int found = 0;
    for (int32_t i = 0; i < p->n; i++) {
        if (!is_compute(&p->acts[i]) || !was_run(rep, r, i)) continue;
        ppv_span sp = rep->spans[r][i];
        if (!found || sp.start < *first) *first = sp.start;
        if (!found || sp.end > *last) *last = sp.end;
        found = 1;
    }
    return found;
}

/* The longest first-to-last compute span of any rank (the bubble ratio's
 * denominator per rank). */
static double longest_compute_span(const ppv_check_report *rep) {
    double longest = 0;
    for (int32_t r = 0; r < rep->checked->nranks; r++) {
        double first = 0, last = 0;
        if (rank_compute_extent(rep, r, &first, &last) && last - first > longest)
            longest = last - first;
    }
    return longest;
}

/* Rank r's counted window: it starts at the rank's first compute, or
 * earlier when a window that long would run past the makespan. */
static svg_window rank_window(const ppv_check_report *rep, int32_t r, double longest) {
    double first = 0, last = 0;
    if (!rank_compute_extent(rep, r, &first, &last)) first = 0;
    double start = fmin(first, rep->makespan - longest);
    if (start < 0) start = 0;
    return (svg_window){start, start + longest};
}

/* Draws (when f is not NULL) one idle stretch [t0, t1) of rank r at lane
 * top y, as a bubble rect or an offset rect. Returns its length. */
static double draw_idle_piece(FILE *f, const svg_layout *l, int32_t r, int y, double t0, double t1,
                              int counted) {
    if (t1 - t0 <= 1e-12) return 0;
    if (f)
        fprintf(f,
                "<rect class=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                "fill=\"%s\"><title>rank %d idle, t=%.10g..%.10g: %s</title></rect>\n",
                counted ? "bubble" : "offset", svg_x(l, t0), y + 2, (t1 - t0) * l->scale,
                SVG_ROW - 4, counted ? SVG_BUBBLE : SVG_OFFSET, r, t0, t1,
                counted ? "bubble, counted in the bubble ratio"
                        : "start-up/drain offset, not counted in the bubble ratio");
    return t1 - t0;
}

/* Splits the idle stretch [t0, t1) at the window's edges and draws the
 * pieces; adds their lengths to *counted and *offset. */
static void draw_idle(FILE *f, const svg_layout *l, int32_t r, int y, svg_window w, double t0,
                      double t1, double *counted, double *offset) {
    *offset += draw_idle_piece(f, l, r, y, t0, fmin(t1, w.start), 0);
    *counted += draw_idle_piece(f, l, r, y, fmax(t0, w.start), fmin(t1, w.end), 1);
    *offset += draw_idle_piece(f, l, r, y, fmax(t0, w.end), t1, 0);
}

/* Draws (when f is not NULL) every stretch of [0, makespan) in which rank r
 * computes nothing, pink inside its window and grey outside; adds the
 * lengths to *counted and *offset. */
static void draw_rank_idle(FILE *f, const ppv_check_report *rep, const svg_layout *l, int32_t r,
                           svg_window w, double *counted, double *offset) {
    const ppv_program *p = &rep->checked->prog[r];
    int y = SVG_TOP + r * SVG_PITCH;
    double t = 0;
    for (int32_t i = 0; i < p->n; i++) {
        ppv_span sp = rep->spans[r][i];
        if (!is_compute(&p->acts[i]) || !was_run(rep, r, i) || sp.end <= sp.start) continue;
        if (sp.start > t) draw_idle(f, l, r, y, w, t, sp.start, counted, offset);
        if (sp.end > t) t = sp.end;
    }
    if (rep->makespan > t) draw_idle(f, l, r, y, w, t, rep->makespan, counted, offset);
}

/* Writes a cell's tooltip into buf: "rank 2 5F3: stage 5 F mb 3, t=12..13",
 * naming the other parts of an overlapped cell [first, end). */
static void cell_title(const ppv_check_report *rep, int32_t r, int32_t i, int32_t first,
                       int32_t end, char *buf, size_t n) {
    const ppv_schedule *s = rep->checked;
    const ppv_action *a = &s->prog[r].acts[i];
    unsigned fl = ppv_action_flags(a->kind);
    char name[64];
    ppv_action_format(s, a, name, sizeof name);
    size_t len = (size_t)snprintf(buf, n, "rank %d %s", r, name);
    if ((fl & PPV_AF_STAGE) && len < n)
        len += (size_t)snprintf(buf + len, n - len, ": stage %d %s", a->stage,
                                ppv_action_token(a->kind));
    if ((fl & PPV_AF_MB) && len < n) len += (size_t)snprintf(buf + len, n - len, " mb %d", a->mb);
    int others = 0;
    for (int32_t k = first; k < end; k++) {
        if (k == i || len >= n) continue;
        ppv_action_format(s, &s->prog[r].acts[k], name, sizeof name);
        len += (size_t)snprintf(buf + len, n - len, "%s%s", others++ ? " + " : ", overlapped with ",
                                name);
    }
    ppv_span sp = rep->spans[r][i];
    if (len < n) snprintf(buf + len, n - len, ", t=%.10g..%.10g", sp.start, sp.end);
}

/* Draws action i of rank r as a rect of the given height from y, with its
 * tooltip, and its name on it where the name fits. [first, end) is the
 * overlapped cell it belongs to (just i when none). */
static void draw_action(FILE *f, const ppv_check_report *rep, const svg_layout *l, int32_t r,
                        int32_t i, int32_t first, int32_t end, int y, int height) {
    const ppv_action *a = &rep->checked->prog[r].acts[i];
    ppv_span sp = rep->spans[r][i];
    double x = svg_x(l, sp.start), width = (sp.end - sp.start) * l->scale;
    char title[512], name[64];
    cell_title(rep, r, i, first, end, title, sizeof title);
    fprintf(f,
            "<rect class=\"cell %s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
            "fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"0.5\"><title>",
            is_compute(a) ? ppv_action_token(a->kind) : "comm", x, y, width, height,
            kind_colour(a->kind));
    xml_text(f, title);
    fputs("</title></rect>\n", f);
    ppv_action_format(rep->checked, a, name, sizeof name);
    if (is_compute(a) && height >= 10 && width >= SVG_CHAR_PX * (double)strlen(name) + 4) {
        fprintf(f, "<text class=\"label\" x=\"%.2f\" y=\"%.1f\" fill=\"#ffffff\">", x + 2,
                y + height / 2.0 + 3.5);
        xml_text(f, name);
        fputs("</text>\n", f);
    }
}

/* Draws rank r's actions: computes fill the lane, an overlapped cell is
 * split into one band per part (F above B), messages are a thin bar at the
 * lane's foot. Actions that took no time are not drawn. */
static void draw_rank_actions(FILE *f, const ppv_check_report *rep, const svg_layout *l,
                              int32_t r) {
    const ppv_program *p = &rep->checked->prog[r];
    int y = SVG_TOP + r * SVG_PITCH + 2, lane = SVG_ROW - 4;
    for (int32_t i = 0; i < p->n;) {
        int32_t end = cell_end(p, i);
        ppv_span sp = rep->spans[r][i];
        if (sp.end <= sp.start) {
            i = end;
            continue;
        }
        if (end - i > 1) {
            int band = lane / (end - i);
            fputs("<g class=\"overlap\">\n", f);
            for (int32_t k = i; k < end; k++)
                draw_action(f, rep, l, r, k, i, end, y + (k - i) * band, band);
            fputs("</g>\n", f);
        } else if (is_compute(&p->acts[i])) {
            draw_action(f, rep, l, r, i, i, end, y, lane);
        } else {
            draw_action(f, rep, l, r, i, i, end, y + lane - lane / 3, lane / 3);
        }
        i = end;
    }
}

/* Each change of rank r's live activations that the simulation reached:
 * calls fn with the time (the end of the action that made it) and the new
 * level, after a first call at time 0 with level 0. */
static void memory_steps(const ppv_check_report *rep, int32_t r,
                         void (*fn)(void *ctx, double t, double level), void *ctx) {
    const ppv_program *p = &rep->checked->prog[r];
    double cur = 0;
    fn(ctx, 0, 0);
    for (int32_t i = 0; i < p->n; i++) {
        if (!was_run(rep, r, i)) break;
        if (rep->live[r][i] == cur) continue;
        cur = rep->live[r][i];
        fn(ctx, rep->spans[r][i].end, cur);
    }
}

typedef struct svg_track {
    FILE *f;
    const svg_layout *l;
    double base, height, top; /* baseline y, full height in px, level drawn at full height */
} svg_track;

static void svg_track_step(void *ctx, double t, double level) {
    svg_track *k = ctx;
    double x = svg_x(k->l, t), y = k->base - (k->top > 0 ? level / k->top * k->height : 0);
    if (t == 0 && level == 0)
        fprintf(k->f, "M%.2f,%.2f", x, y);
    else
        fprintf(k->f, " H%.2f V%.2f", x, y);
}

/* Draws rank r's memory track under its lane: the activations it holds
 * over time as a filled step curve, scaled so that the largest peak of any
 * rank (top) fills the track, with its own peak named in the tooltip and
 * in the margin. Nothing when the report has no levels or top is 0. */
static void draw_rank_memory(FILE *f, const ppv_check_report *rep, const svg_layout *l, int32_t r,
                             double top) {
    if (!rep->live || !(top > 0)) return;
    int y = SVG_TOP + r * SVG_PITCH + SVG_ROW;
    svg_track k = {f, l, y + SVG_MEM - 4.0, SVG_MEM - 6.0, top};
    char at[64] = "nowhere"; /* the action after which the level first is the peak */
    const ppv_program *p = &rep->checked->prog[r];
    for (int32_t i = 0; i < p->n && was_run(rep, r, i); i++)
        if (rep->live[r][i] == rep->peak_activation[r]) {
            ppv_action_format(rep->checked, &p->acts[i], at, sizeof at);
            break;
        }
    fprintf(f, "<text class=\"mempeak\" x=\"4\" y=\"%d\" fill=\"#555555\">peak %.4g</text>\n",
            y + SVG_MEM - 6, rep->peak_activation[r]);
    fprintf(f, "<path class=\"memory\" d=\"");
    memory_steps(rep, r, svg_track_step, &k);
    fprintf(f,
            " H%.2f V%.2f Z\" fill=\"%s\" stroke=\"#6b4c9a\" stroke-width=\"0.8\"><title>rank "
            "%d activations held (check's memory model): peak %.10g, first at ",
            svg_x(l, rep->makespan), k.base, SVG_MEMORY, r, rep->peak_activation[r]);
    xml_text(f, at);
    fputs("</title></path>\n", f);
}

/* Draws the time axis under the lanes: a tick and its number every
 * l->step cost units from 0 to the first tick at or past the makespan. */
static void draw_axis(FILE *f, const svg_layout *l, int32_t nranks) {
    int y = SVG_TOP + nranks * SVG_PITCH + 4;
    fprintf(f,
            "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#444444\"/>\n",
            SVG_LEFT, y, svg_x(l, l->ticks * l->step), y);
    fprintf(f, "<text x=\"4\" y=\"%d\">cost units</text>\n", y + 16);
    for (int32_t k = 0; k <= l->ticks; k++) {
        double x = svg_x(l, k * l->step);
        fprintf(f,
                "<line class=\"tick\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
                "stroke=\"#444444\"/><text class=\"tick\" x=\"%.2f\" y=\"%d\" "
                "text-anchor=\"middle\">%.10g</text>\n",
                x, y, x, y + 5, x, y + 16, k * l->step);
    }
}

/* Draws the legend: a swatch and a word for each colour, left to right. */
static void draw_legend(FILE *f, int32_t nranks) {
    static const ppv_action_kind kinds[] = {PPV_ACT_F, PPV_ACT_I, PPV_ACT_B,
                                            PPV_ACT_W, PPV_ACT_R, PPV_ACT_SEND_F};
    enum { NKINDS = sizeof kinds / sizeof kinds[0] };
    int y = SVG_TOP + nranks * SVG_PITCH + SVG_AXIS + 12;
    double x = SVG_LEFT;
    for (size_t k = 0; k < NKINDS + 2; k++) {
        const char *colour = k < NKINDS    ? kind_colour(kinds[k])
                             : k == NKINDS ? SVG_BUBBLE
                                           : SVG_OFFSET;
        const char *word = k < NKINDS
                               ? (kinds[k] == PPV_ACT_SEND_F ? "comm" : ppv_action_token(kinds[k]))
                           : k == NKINDS ? "bubble (counted)"
                                         : "start-up/drain offset (not counted)";
        fprintf(f,
                "<rect x=\"%.0f\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%d\">%s</text>\n",
                x, y - 10, colour, x + 16, y, word);
        x += 16 + SVG_CHAR_PX * (double)strlen(word) + 16;
    }
}

/* Draws the title: the makespan and bubble ratio, and what the pink and
 * grey idle stretches add up to. */
static void draw_title(FILE *f, const ppv_check_report *rep, double longest, double counted,
                       double offset) {
    int32_t P = rep->checked->nranks;
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\">", SVG_LEFT);
    xml_text(f, rep->checked->name);
    if (rep->deadlock) {
        fprintf(f, ": DEADLOCK, drawn up to where the ranks block (t=%.10g)</text>\n",
                rep->makespan);
        return;
    }
    fprintf(f, ": makespan %.10g, bubble ratio %.4f</text>\n", rep->makespan, rep->bubble_ratio);
    fprintf(f,
            "<text x=\"%d\" y=\"32\">bubble ratio = pink idle / (ranks x longest "
            "first-to-last compute span) = %.10g / (%d x %.10g)</text>\n",
            SVG_LEFT, counted, P, longest);
    double whole = rep->makespan > 0 ? (counted + offset) / (P * rep->makespan) : 0.0;
    fprintf(f,
            "<text x=\"%d\" y=\"44\">grey: start-up/drain offset, %.10g units, not counted; "
            "idle share of the whole step %.4f</text>\n",
            SVG_LEFT, offset, whole);
}

int render_svg(const ppv_check_report *rep, FILE *f) {
    const ppv_schedule *s = rep->checked;
    if (!s || !rep->spans) return -1;
    svg_layout l = svg_layout_for(rep->makespan);
    double longest = longest_compute_span(rep), counted = 0, offset = 0;
    for (int32_t r = 0; r < s->nranks; r++)
        draw_rank_idle(NULL, rep, &l, r, rank_window(rep, r, longest), &counted, &offset);
    double width = SVG_LEFT + l.ticks * l.step * l.scale + SVG_RIGHT, top = 0;
    for (int32_t r = 0; r < s->nranks && rep->live; r++)
        if (rep->peak_activation[r] > top) top = rep->peak_activation[r];
    int height = SVG_TOP + s->nranks * SVG_PITCH + SVG_AXIS + SVG_LEGEND;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%d\" "
            "font-family=\"monospace\" font-size=\"10\">\n",
            width, height);
    draw_title(f, rep, longest, counted, offset);
    for (int32_t r = 0; r < s->nranks; r++) {
        fprintf(f, "<text x=\"4\" y=\"%d\">rank %d</text>\n", SVG_TOP + r * SVG_PITCH + 17, r);
        double drawn_counted = 0, drawn_offset = 0; /* summed above already */
        draw_rank_idle(f, rep, &l, r, rank_window(rep, r, longest), &drawn_counted, &drawn_offset);
        draw_rank_actions(f, rep, &l, r);
        draw_rank_memory(f, rep, &l, r, top);
    }
    draw_axis(f, &l, s->nranks);
    draw_legend(f, s->nranks);
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

typedef struct chrome_track {
    json_object *events;
    int32_t rank;
} chrome_track;

/* One counter event: Perfetto draws each name as its own track. */
static void chrome_track_step(void *ctx, double t, double level) {
    chrome_track *k = ctx;
    char name[48];
    snprintf(name, sizeof name, "rank %d activations", k->rank);
    json_object *e = json_object_new_object(), *args = json_object_new_object();
    json_object_object_add(args, "held", finite_json(level));
    json_object_object_add(e, "name", json_object_new_string(name));
    json_object_object_add(e, "ph", json_object_new_string("C"));
    json_object_object_add(e, "pid", json_object_new_int(0));
    json_object_object_add(e, "tid", json_object_new_int(k->rank));
    json_object_object_add(e, "ts", finite_json(t * 1000.0));
    json_object_object_add(e, "args", args);
    json_object_array_add(k->events, e);
}

int render_chrome_trace(const ppv_check_report *rep, FILE *f) {
    const ppv_schedule *s = rep->checked;
    if (!s || !rep->spans) return -1;
    json_object *root = json_object_new_object();
    json_object *events = json_object_new_array();
    json_object_object_add(root, "traceEvents", events);
    json_object_object_add(root, "displayTimeUnit", json_object_new_string("ms"));
    for (int32_t r = 0; r < s->nranks; r++) {
        json_object *meta = json_object_new_object();
        char tn[32];
        snprintf(tn, sizeof tn, "rank %d", r);
        json_object *args = json_object_new_object();
        json_object_object_add(args, "name", json_object_new_string(tn));
        json_object_object_add(meta, "name", json_object_new_string("thread_name"));
        json_object_object_add(meta, "ph", json_object_new_string("M"));
        json_object_object_add(meta, "pid", json_object_new_int(0));
        json_object_object_add(meta, "tid", json_object_new_int(r));
        json_object_object_add(meta, "args", args);
        json_object_array_add(events, meta);
        const ppv_program *p = &s->prog[r];
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            ppv_span sp = rep->spans[r][i];
            char name[64];
            ppv_action_format(s, a, name, sizeof name);
            json_object *e = json_object_new_object();
            json_object_object_add(e, "name", json_object_new_string(name));
            json_object_object_add(
                e, "cat",
                json_object_new_string((ppv_action_flags(a->kind) & PPV_AF_COMPUTE)
                                           ? ppv_action_token(a->kind)
                                           : "comm"));
            json_object_object_add(e, "ph", json_object_new_string("X"));
            json_object_object_add(e, "pid", json_object_new_int(0));
            json_object_object_add(e, "tid", json_object_new_int(r));
            /* one cost unit is drawn as one millisecond */
            json_object_object_add(e, "ts", finite_json(sp.start * 1000.0));
            json_object_object_add(e, "dur", finite_json((sp.end - sp.start) * 1000.0));
            json_object_array_add(events, e);
        }
    }
    for (int32_t r = 0; r < s->nranks && rep->live; r++) {
        chrome_track k = {events, r};
        memory_steps(rep, r, chrome_track_step, &k);
    }
    fputs(json_object_to_json_string_ext(root,
                                         JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
          f);
    fputc('\n', f);
    json_object_put(root);
    return ferror(f) ? -1 : 0;
}

void render_text(const ppv_check_report *rep, FILE *f) {
    const ppv_schedule *s = rep->checked;
    if (!s || !rep->spans) return;
    for (int32_t r = 0; r < s->nranks; r++) {
        fprintf(f, "rank %3d |", r);
        double t = 0;
        const ppv_program *p = &s->prog[r];
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            if (!(ppv_action_flags(a->kind) & PPV_AF_COMPUTE)) continue;
            ppv_span sp = rep->spans[r][i];
            if (sp.start > t + 1e-9) fprintf(f, " .%g.", sp.start - t);
            char name[64];
            ppv_action_format(s, a, name, sizeof name);
            fprintf(f, " %s%s", a->overlap ? "&" : "", name);
            t = sp.end;
        }
        fputc('\n', f);
    }
    fprintf(f, "(.N. = N units idle before the next compute; & = overlapped cell)\n");
}
