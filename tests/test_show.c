/* test_show.c - `ppv show FILE --svg OUT` as a user reads the picture:
 * overlapped F+B cells show both parts, every cell has a tooltip, the time
 * axis reaches the makespan, the width follows the makespan up to a cap, and
 * the idle the bubble ratio leaves out is drawn apart from the idle it
 * counts. Runs the built ppv (PPV_BIN) in a fresh temporary directory. */
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"




/* Makes a fresh directory under $TMPDIR (or /tmp) for one test; *state
 * holds its malloc'd path. Returns 0. */
static int make_temp_dir(void **state) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char *dir = malloc(strlen(base) + 32);
    assert_non_null(dir);
    sprintf(dir, "%s/ppv_show_XXXXXX", base);
    assert_non_null(mkdtemp(dir));
    *state = dir;
    return 0;
}

/* Removes the test's directory and the files in it. Returns 0. */
static int remove_temp_dir(void **state) {
    char *dir = *state;
    DIR *d = opendir(dir);
    assert_non_null(d);
    char path[4096];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
    return 0;
}

/* "dir/name" in a static buffer (one of four, so a few can be alive). */
static const char *in_dir(const char *dir, const char *name) {
    static char bufs[4][4096];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* Writes `ppv gen KIND -p P -m M` into dir/name. Returns the file's path. */
static const char *gen_schedule(const char *dir, const char *kind, const char *p, const char *m,
                                const char *name) {
    const char *path = in_dir(dir, name);
    run_result r = RUN("gen", kind, "-p", p, "-m", m, "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    return path;
}

/* The SVG `ppv show schedule --svg` writes (malloc'd). */
static char *show_svg(const char *dir, const char *schedule) {
    const char *svg = in_dir(dir, "show.svg");
    run_result r = RUN("show", schedule, "--svg", svg);
    if (r.code != 0) fprintf(stderr, "%s", r.err);
    assert_int_equal(r.code, 0);
    run_free(&r);
    return slurp(svg);
}

/* A number field of `ppv check schedule --json`. */
static double check_field(const char *schedule, const char *field) {
    run_result r = RUN("check", schedule, "--json");
    assert_int_equal(r.code, 0);
    json_object *o = json_tokener_parse(r.out), *v;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, field, &v));
    double value = json_object_get_double(v);
    json_object_put(o);
    run_free(&r);
    return value;
}

/* Occurrences of needle in [text, end) (end NULL: to the terminator). */
static int count_in(const char *text, const char *end, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) && (!end || p < end); p += strlen(needle))
        n++;
    return n;
}

/* Actions a PyTorch CSV names: one per non-empty cell, and one per part of
 * an overlapped cell "(0F7;7B3)OVERLAP_F_B". */
static int csv_action_count(const char *csv) {
    int n = 0, cell_empty = 1;
    for (const char *c = csv;; c++) {
        if (*c == ',' || *c == '\n' || *c == '\0') {
            n += !cell_empty;
            cell_empty = 1;
            if (!*c) return n;
        } else if (*c != '\r' && *c != ' ') {
            cell_empty = 0;
            if (*c == ';') n++;
        }
    }
}

/* The width attribute of the SVG's root element (its first line). */
static double svg_width(const char *svg) {
    const char *w = strstr(svg, " width=\"");
    assert_non_null(w);
    assert_true(w < strchr(svg, '\n'));
    return atof(w + 8);
}

/* Cell rects that carry a <title> naming their rank, each on one line. */
static int titled_cells(const char *svg) {
    int titled = 0;
    for (const char *p = svg; (p = strstr(p, "<rect class=\"cell ")); p++) {
        const char *close = strstr(p, "</rect>"), *title = strstr(p, "><title>rank ");
        titled += title && title < close && close < strchr(p, '\n');
    }
    return titled;
}

/* Rects drawn for F, I, B and W actions. */
static int compute_cells(const char *svg) {
    return count_in(svg, NULL, "<rect class=\"cell F\"") +
           count_in(svg, NULL, "<rect class=\"cell I\"") +
           count_in(svg, NULL, "<rect class=\"cell B\"") +
           count_in(svg, NULL, "<rect class=\"cell W\"");
}

/* Sums the lengths (from each title's "t=A..B") of the rects of the given
 * class; *count gets how many there are. */
static double idle_total(const char *svg, const char *cls, int *count) {
    char needle[64];
    snprintf(needle, sizeof needle, "<rect class=\"%s\"", cls);
    double total = 0;
    *count = 0;
    for (const char *p = svg; (p = strstr(p, needle)); p++) {
        const char *t = strstr(p, ", t=");
        assert_non_null(t);
        const char *dots = strstr(t, "..");
        assert_non_null(dots);
        double a = strtod(t + 4, NULL), b = strtod(dots + 2, NULL);
        assert_true(b > a);
        total += b - a;
        (*count)++;
    }
    return total;
}

static void test_overlap_cell_draws_forward_and_backward_bands(void **state) {
    const char *dir = *state;
    const char *path = interop_path("dualpipev_4rank_10mb.csv");
    char *csv = slurp(path);
    int overlaps = count_in(csv, NULL, "OVERLAP_F_B");
    assert_int_equal(overlaps, 41);
    char *svg = show_svg(dir, path);
    assert_int_equal(count_in(svg, NULL, "<g class=\"overlap\">"), overlaps);
    int both = 0;
    for (const char *g = svg; (g = strstr(g, "<g class=\"overlap\">")); g++) {
        const char *end = strstr(g, "</g>");
        assert_non_null(end);
        const char *f = strstr(g, "<rect class=\"cell F\""),
                   *b = strstr(g, "<rect class=\"cell B\"");
        int fy = 0, by = 0, fh = 0, bh = 0;
        if (f && b && f < end && b < end) {
            assert_int_equal(
                sscanf(strstr(f, " y="), " y=\"%d\" width=\"%*f\" height=\"%d\"", &fy, &fh), 2);
            assert_int_equal(
                sscanf(strstr(b, " y="), " y=\"%d\" width=\"%*f\" height=\"%d\"", &by, &bh), 2);
            /* two bands of one lane: F on top, B below, neither hides the other */
            both += fh == 12 && bh == 12 && by == fy + 12;
        }
    }
    assert_int_equal(both, overlaps);
    assert_non_null(strstr(svg, "<title>rank 0 0F7: stage 0 F mb 7, overlapped with 7B3, t="));
    assert_non_null(strstr(svg, "<title>rank 0 7B3: stage 7 B mb 3, overlapped with 0F7, t="));
    free(svg);
    free(csv);
}

static void test_every_cell_has_a_title(void **state) {
    const char *dir = *state;
    const char *path = interop_path("dualpipev_4rank_10mb.csv");
    char *csv = slurp(path);
    int actions = csv_action_count(csv);
    assert_int_equal(actions, 182); /* 141 cells, 41 of them F+B pairs */
    char *svg = show_svg(dir, path);
    assert_int_equal(compute_cells(svg), actions);
    /* and the receives that waited: every drawn cell has its tooltip */
    int cells = count_in(svg, NULL, "<rect class=\"cell ");
    assert_true(cells > actions);
    assert_int_equal(titled_cells(svg), cells);
    assert_non_null(strstr(svg, "<title>rank 0 0F0: stage 0 F mb 0, t=0..1</title>"));
    free(svg);
    free(csv);
}

static void test_short_cells_keep_a_tooltip_without_a_label(void **state) {
    const char *dir = *state;
    /* 909 units in at most 6000 px: a 1-unit F is under 7 px, too narrow for "0F0" */
    const char *path = gen_schedule(dir, "1f1b", "4", "300", "long.csv");
    char *svg = show_svg(dir, path);
    assert_int_equal(compute_cells(svg), 4 * 2 * 300);
    assert_int_equal(titled_cells(svg), count_in(svg, NULL, "<rect class=\"cell "));
    assert_int_equal(count_in(svg, NULL, "<text class=\"label\""), 0);
    assert_non_null(strstr(svg, "<title>rank 3 3B299: stage 3 B mb 299, t="));
    free(svg);
    svg = show_svg(dir, gen_schedule(dir, "1f1b", "4", "8", "short.csv"));
    assert_int_equal(count_in(svg, NULL, "<text class=\"label\""), 4 * 2 * 8);
    free(svg);
}

static void test_axis_ticks_step_1_2_5_and_reach_the_makespan(void **state) {
    const char *dir = *state;
    const char *path = interop_path("dualpipev_4rank_10mb.csv");
    double makespan = check_field(path, "makespan");
    assert_true(makespan == 66);
    char *svg = show_svg(dir, path);
    int ticks = count_in(svg, NULL, "<text class=\"tick\"");
    double last = -1, step = 0;
    int i = 0;
    for (const char *p = svg; (p = strstr(p, "<text class=\"tick\"")); p++, i++) {
        double v = atof(strchr(p, '>') + 1);
        if (i == 0) assert_true(v == 0);
        if (i == 1) step = v;
        if (i >= 1) assert_true(fabs(v - i * step) < 1e-9);
        last = v;
    }
    /* 66 units: steps 1 and 2 give over 20 intervals, 5 gives 14 */
    assert_true(step == 5);
    assert_int_equal(ticks, 15);
    assert_true(last >= makespan && last - step < makespan);
    free(svg);
}

static void test_width_grows_with_the_makespan_up_to_a_cap(void **state) {
    const char *dir = *state;
    /* 30 px per unit up to the last tick, plot clamped to [720, 6000] px, plus
     * 110 px of margins: 1f1b -p 4 has makespan 3(m+3) */
    char *svg = show_svg(dir, gen_schedule(dir, "1f1b", "4", "8", "m8.csv"));
    double w8 = svg_width(svg); /* 33 units, axis to 34 */
    free(svg);
    svg = show_svg(dir, gen_schedule(dir, "1f1b", "4", "32", "m32.csv"));
    double w32 = svg_width(svg); /* 105 units, axis to 110 */
    free(svg);
    svg = show_svg(dir, gen_schedule(dir, "1f1b", "4", "1000", "m1000.csv"));
    double w1000 = svg_width(svg); /* 3009 units */
    free(svg);
    assert_true(w8 == 34 * 30 + 110);
    assert_true(w32 == 110 * 30 + 110);
    assert_true(w1000 == 6000 + 110);
    assert_true(w8 < w32 && w32 < w1000);
}

static void test_zbv_idle_outside_the_ratio_is_drawn_as_offset(void **state) {
    const char *dir = *state;
    const char *path = gen_schedule(dir, "zbv", "4", "8", "zbv.csv");
    assert_true(check_field(path, "bubble_ratio") == 0);
    assert_true(check_field(path, "makespan") == 51);
    char *svg = show_svg(dir, path);
    int nbubble, noffset;
    double bubble = idle_total(svg, "bubble", &nbubble),
           offset = idle_total(svg, "offset", &noffset);
    /* every rank computes 48 units without a gap, rank r from t=r: the 3
     * units of start-up or drain on each rank are outside the ratio */
    assert_int_equal(nbubble, 0);
    assert_true(bubble == 0);
    assert_int_equal(noffset, 6);
    assert_true(offset == 4 * 3);
    assert_non_null(strstr(svg, "bubble ratio 0.0000</text>"));
    assert_non_null(strstr(svg, "= 0 / (4 x 48)</text>"));
    assert_non_null(strstr(svg, "offset, 12 units, not counted; idle share of the whole step "
                                "0.0588</text>"));
    assert_non_null(strstr(svg, "<title>rank 0 idle, t=48..51: start-up/drain offset, not counted "
                                "in the bubble ratio</title>"));
    free(svg);
}

/* Rank r's memory track in the SVG as (time, level) steps: times from
 * the x coordinates (the track closes at the makespan), levels in units
 * of the first step up. Returns the number of steps after the start. */
static int svg_memory_steps(const char *svg, int32_t r, double makespan, double *t, double *level) {
    const char *p = svg;
    for (int32_t k = 0; k <= r; k++) {
        p = strstr(p, "<path class=\"memory\" d=\"M");
        assert_non_null(p);
        p += strlen("<path class=\"memory\" d=\"M");
    }
    double x0, base, x, y, up = 0, xs[64], ys[64];
    int n = 0, used = 0;
    assert_int_equal(sscanf(p, "%lf,%lf%n", &x0, &base, &used), 2);
    p += used;
    while (sscanf(p, " H%lf V%lf%n", &x, &y, &used) == 2 && n < 64) {
        xs[n] = x, ys[n++] = y;
        p += used;
    }
    assert_true(strncmp(p, " Z\"", 3) == 0);
    /* the last two steps close the area: to the makespan, down to the base */
    n -= 1;
    assert_true(ys[n] == base);
    double scale = (xs[n] - x0) / makespan;
    for (int k = 0; k < n; k++) {
        if (up == 0 && base - ys[k] > 0) up = base - ys[k];
        t[k] = (xs[k] - x0) / scale;
        level[k] = (base - ys[k]) / up;
    }
    return n;
}

/* The memory track by hand for 1F1B p=2 m=3 at the default costs (F 1,
 * B 2): rank 0 runs F0 [0,1] F1 [1,2] B0 [4,6] F2 [6,7] B1 [7,9] B2
 * [10,12], rank 1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10];
 * an F adds one activation when it ends, a B frees it. */
static void test_memory_track_follows_the_order(void **state) {
    const char *dir = *state;
    const char *path = gen_schedule(dir, "1f1b", "2", "3", "m.csv");
    /* from the start (0, 0) on */
    static const double t0[] = {0, 1, 2, 6, 7, 9, 12}, l0[] = {0, 1, 2, 1, 2, 1, 0};
    static const double t1[] = {0, 2, 4, 5, 7, 8, 10}, l1[] = {0, 1, 0, 1, 0, 1, 0};
    char *svg = show_svg(dir, path);
    double t[64], level[64];
    assert_int_equal(svg_memory_steps(svg, 0, 12, t, level), 6);
    for (int k = 0; k < 6; k++) {
        assert_true(fabs(t[k] - t0[k + 1]) < 1e-9);
        assert_true(fabs(level[k] - l0[k + 1]) < 1e-9);
    }
    assert_int_equal(svg_memory_steps(svg, 1, 12, t, level), 6);
    for (int k = 0; k < 6; k++) {
        assert_true(fabs(t[k] - t1[k + 1]) < 1e-9);
        assert_true(fabs(level[k] - l1[k + 1]) < 1e-9);
    }
    assert_non_null(strstr(svg, "<title>rank 0 activations held (check's memory model): peak 2, "
                                "first at 0F1</title>"));
    assert_non_null(strstr(svg, "<title>rank 1 activations held (check's memory model): peak 1, "
                                "first at 1F0</title>"));
    free(svg);

    /* the same steps as counter events in the Chrome trace, from t=0 */
    const char *trace = in_dir(dir, "m.json");
    run_result r = RUN("show", path, "--chrome-trace", trace);
    assert_int_equal(r.code, 0);
    run_free(&r);
    char *text = slurp(trace);
    json_object *o = json_tokener_parse(text), *ev;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, "traceEvents", &ev));
    int seen[2] = {0, 0};
    for (size_t i = 0; i < json_object_array_length(ev); i++) {
        json_object *e = json_object_array_get_idx(ev, i), *v, *args, *held;
        assert_true(json_object_object_get_ex(e, "ph", &v));
        if (strcmp(json_object_get_string(v), "C") != 0) continue;
        assert_true(json_object_object_get_ex(e, "name", &v));
        int32_t rank = strcmp(json_object_get_string(v), "rank 0 activations") == 0   ? 0
                       : strcmp(json_object_get_string(v), "rank 1 activations") == 0 ? 1
                                                                                       : -1;
        assert_true(rank >= 0);
        int k = seen[rank]++;
        assert_true(k < 7);
        assert_true(json_object_object_get_ex(e, "ts", &v));
        assert_true(json_object_object_get_ex(e, "args", &args));
        assert_true(json_object_object_get_ex(args, "held", &held));
        double want_t = (rank ? t1 : t0)[k], want_l = (rank ? l1 : l0)[k];
        assert_true(fabs(json_object_get_double(v) - want_t * 1000.0) < 1e-6);
        assert_true(fabs(json_object_get_double(held) - want_l) < 1e-12);
    }
    assert_int_equal(seen[0], 7);
    assert_int_equal(seen[1], 7);
    json_object_put(o);
    free(text);
}

static void test_pink_idle_adds_up_to_the_bubble_ratio(void **state) {
    const char *dir = *state;
    const char *path = interop_path("dualpipev_4rank_10mb.csv");
    double ratio = check_field(path, "bubble_ratio");
    char *svg = show_svg(dir, path);
    int nbubble, noffset;
    double bubble = idle_total(svg, "bubble", &nbubble);
    /* rank 0 computes from t=0 to the makespan, 66: no idle is left out */
    assert_true(nbubble > 0);
    assert_true(fabs(bubble / (4 * 66.0) - ratio) < 1e-12);
    assert_true(idle_total(svg, "offset", &noffset) == 0);
    assert_non_null(strstr(svg, "= 24 / (4 x 66)</text>"));
    free(svg);
    path = gen_schedule(dir, "1f1b", "4", "8", "a.csv");
    ratio = check_field(path, "bubble_ratio");
    svg = show_svg(dir, path);
    bubble = idle_total(svg, "bubble", &nbubble);
    assert_true(fabs(bubble / (4 * 33.0) - ratio) < 1e-12);
    assert_true(idle_total(svg, "offset", &noffset) == 0);
    free(svg);
}

static void test_svg_escapes_text_and_is_the_same_every_time(void **state) {
    const char *dir = *state;
    const char *path = gen_schedule(dir, "zb-h1", "2", "4", "a&<b>.csv");
    char *svg = show_svg(dir, path), *again = show_svg(dir, path);
    assert_string_equal(svg, again);
    assert_non_null(strstr(svg, "a&amp;&lt;b&gt;.csv"));
    for (const char *a = svg; (a = strchr(a, '&')); a++)
        assert_true(!strncmp(a, "&amp;", 5) || !strncmp(a, "&lt;", 4) || !strncmp(a, "&gt;", 4) ||
                    !strncmp(a, "&quot;", 6) || !strncmp(a, "&apos;", 6));
    assert_int_equal(count_in(svg, NULL, "<"), count_in(svg, NULL, ">"));
    free(again);
    free(svg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_overlap_cell_draws_forward_and_backward_bands,
                                        make_temp_dir, remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_every_cell_has_a_title, make_temp_dir,
                                        remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_short_cells_keep_a_tooltip_without_a_label,
                                        make_temp_dir, remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_axis_ticks_step_1_2_5_and_reach_the_makespan,
                                        make_temp_dir, remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_width_grows_with_the_makespan_up_to_a_cap,
                                        make_temp_dir, remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_zbv_idle_outside_the_ratio_is_drawn_as_offset,
                                        make_temp_dir, remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_memory_track_follows_the_order, make_temp_dir,
                                        remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_pink_idle_adds_up_to_the_bubble_ratio, make_temp_dir,
                                        remove_temp_dir),
        cmocka_unit_test_setup_teardown(test_svg_escapes_text_and_is_the_same_every_time,
                                        make_temp_dir, remove_temp_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
