/* render.c - pictures of a simulated schedule: an SVG timeline (ranks as
 * rows, compute coloured by kind, messages grey, idle time left blank and
 * shaded), a Chrome-trace JSON that Perfetto and chrome://tracing open, and
 * a text timeline for the terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int atomic_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    if (strlen(path) + 16 >= sizeof af->tmp) return -1;
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(af->tmp);
    if (fd < 0) return -1;
    af->f = fdopen(fd, "w");
    if (!af->f) {
        close(fd);
        unlink(af->tmp);
        return -1;
    }
    return 0;
}

int atomic_commit(atomic_file *af) {
    int bad = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    bad |= fclose(af->f) != 0;
    af->f = NULL;
    if (!bad && rename(af->tmp, af->path) == 0) return 0;
    unlink(af->tmp);
    return -1;
}

void atomic_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    unlink(af->tmp);
}

static const char *kind_colour(ppv_action_kind k) {
    switch (k) {
    case PPV_ACT_F: return "#4e79a7";
    case PPV_ACT_I: return "#f28e2b";
    case PPV_ACT_B: return "#e15759";
    case PPV_ACT_W: return "#59a14f";
    case PPV_ACT_R: return "#b07aa1";
    case PPV_ACT_GEN: return "#76b7b2";
    default: return "#bab0ac";
    }
}

int render_svg(const ppv_check_report *rep, FILE *f) {
    const ppv_schedule *s = rep->checked;
    if (!s || !rep->spans) return -1;
    double span = rep->makespan > 0 ? rep->makespan : 1;
    double scale = 1200.0 / span;
    if (scale > 40) scale = 40;
    int row = 28, left = 70, top = 30;
    double width = left + span * scale + 20;
    int height = top + s->nranks * row + 40;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%d\" "
            "font-family=\"monospace\" font-size=\"10\">\n",
            width, height);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\">%s: makespan %g, bubble ratio %.4f%s</text>\n",
            left, s->name, rep->makespan, rep->bubble_ratio, rep->deadlock ? ", DEADLOCK" : "");
    for (int32_t r = 0; r < s->nranks; r++) {
        int y = top + r * row;
        fprintf(f, "<text x=\"4\" y=\"%d\">rank %d</text>\n", y + 17, r);
        /* the whole lane shaded: whatever no action covers is a bubble */
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#f4d6d6\"/>\n",
                left, y + 2, span * scale, row - 4);
        const ppv_program *p = &s->prog[r];
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            ppv_span sp = rep->spans[r][i];
            int compute = (ppv_action_flags(a->kind) & PPV_AF_COMPUTE) != 0;
            if (sp.end <= sp.start) continue;
            int h = compute ? row - 4 : (row - 4) / 3;
            int yy = compute ? y + 2 : y + row - 2 - h;
            char name[64];
            ppv_action_format(s, a, name, sizeof name);
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                    "stroke=\"#ffffff\" stroke-width=\"0.5\"><title>rank %d %s [%g, %g)</title></rect>\n",
                    left + sp.start * scale, yy, (sp.end - sp.start) * scale, h,
                    kind_colour(a->kind), r, name, sp.start, sp.end);
            if (compute && (sp.end - sp.start) * scale >= 6.5 * strlen(name))
                fprintf(f, "<text x=\"%.2f\" y=\"%d\" fill=\"#ffffff\">%s</text>\n",
                        left + sp.start * scale + 2, y + 17, name);
        }
    }
    int ly = top + s->nranks * row + 20;
    static const ppv_action_kind legend[] = {PPV_ACT_F, PPV_ACT_I, PPV_ACT_B, PPV_ACT_W,
                                             PPV_ACT_R, PPV_ACT_SEND_F};
    for (size_t k = 0; k < sizeof legend / sizeof legend[0]; k++) {
        fprintf(f, "<rect x=\"%zu\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%zu\" y=\"%d\">%s</text>\n",
                left + k * 80, ly - 10, kind_colour(legend[k]), left + k * 80 + 16, ly,
                legend[k] == PPV_ACT_SEND_F ? "comm" : ppv_action_token(legend[k]));
    }
    fprintf(f, "<rect x=\"%zu\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#f4d6d6\"/>"
               "<text x=\"%zu\" y=\"%d\">bubble</text>\n</svg>\n",
            left + 6 * (size_t)80, ly - 10, left + 6 * (size_t)80 + 16, ly);
    return ferror(f) ? -1 : 0;
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
            json_object_object_add(e, "cat", json_object_new_string(
                (ppv_action_flags(a->kind) & PPV_AF_COMPUTE) ? ppv_action_token(a->kind) : "comm"));
            json_object_object_add(e, "ph", json_object_new_string("X"));
            json_object_object_add(e, "pid", json_object_new_int(0));
            json_object_object_add(e, "tid", json_object_new_int(r));
            /* one cost unit is drawn as one millisecond */
            json_object_object_add(e, "ts", json_object_new_double(sp.start * 1000.0));
            json_object_object_add(e, "dur", json_object_new_double((sp.end - sp.start) * 1000.0));
            json_object_array_add(events, e);
        }
    }
    fputs(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), f);
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
