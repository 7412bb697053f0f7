/* test_commands.c - every command behaves as a user expects: its own help
 * (listing only options it takes), version, standard input, record honouring
 * run's options, bounds before work, the user's umask, OS reasons in errors,
 * progress only on a terminal, JUnit XML, manual pages, and a full disk
 * or a closed standard output reported, never a crash or a lost result. */
#include <json-c/json.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "testutil.h"
#include "tools/options.h"

static const char *const commands[] = {"gen",    "check",  "show", "run",  "verify-recompute",
                                       "pp", "fuzz", "record", "replay", "diff", "conform", "launch", "demo", "version",
                                       "help",   "man",    NULL};

/* Counts the occurrences of needle in hay. */
static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The help and option tests start some 150 ppv processes that only parse
 * options and print help: natively (gcc, clang, and ASan+UBSan builds) they
 * take seconds, under valgrind three minutes; the parsers' memory is
 * checked there by the other tests' commands. */
static int skip_under_valgrind(void) {
    return RUNNING_ON_VALGRIND;
}

/* The integer member key of the JSON object in text. */
static long long json_int(const char *text, const char *key) {
    json_object *o = json_tokener_parse(text);
    assert_non_null(o);
    long long v = json_object_get_int64(json_object_object_get(o, key));
    json_object_put(o);
    return v;
}

static void test_every_command_has_its_own_help_three_ways(void **state) {
    (void)state;
    if (skip_under_valgrind()) skip();
    run_result all = RUN("help");
    assert_int_equal(all.code, 0);
    for (int k = 0; commands[k]; k++) {
        char line[64], usage[64];
        snprintf(line, sizeof line, "\n  %s ", commands[k]);
        assert_non_null(strstr(all.out, line));
        snprintf(usage, sizeof usage, "usage: ppv %s", commands[k]);
        run_result a = RUN("help", commands[k]), b = RUN(commands[k], "--help"),
               c = RUN(commands[k], "-h");
        assert_int_equal(a.code, 0);
        assert_int_equal(b.code, 0);
        assert_int_equal(c.code, 0);
        assert_memory_equal(a.out, usage, strlen(usage));
        assert_non_null(strstr(a.out, "\noptions:\n"));
        assert_non_null(strstr(a.out, "\nexamples:\n  ppv "));
        assert_string_equal(a.out, b.out);
        assert_string_equal(a.out, c.out);
        assert_string_equal(b.err, "");
        run_free(&a), run_free(&b), run_free(&c);
    }
    run_free(&all);
    /* demo --help prints help, it does not run the demo */
    run_result d = RUN("demo", "--help");
    assert_null(strstr(d.out, "ppv demo: every generator"));
    run_free(&d);
}

/* A valid value for each option a help text lists; NULL for a flag. */
static const char *sample_value(const char *opt) {
    static const char *const table[][2] = {
        {"--ranks", "4"},           {"--microbatches", "8"}, {"--stages-per-rank", "2"},
        {"--output", "o.csv"},      {"--format", "native"},  {"--semantics", "eager"},
        {"--costs", "1,2,1,0"},     {"--mem", "1"},          {"--msg-bytes", "1024"},
        {"--dialect", "legacy"},    {"--junit", "j.xml"},    {"--lowered-out", "l.csv"},
        {"--max-memory", "1G"},     {"--svg", "s.svg"},      {"--chrome-trace", "t.json"},
        {"--policy", "random"},     {"--seed", "3"},         {"--recompute", "all"},
        {"--trace-out", "t.trace"}, {"--replay", "t.trace"}, {"--layers", "4"},
        {"--width", "32"},          {"--watchdog", "100"},   {"--tolerance", "ulp:2"},
        {"--nan", "differ"},        {"--max-report", "3"},   {"--threads", "2"},
        {"--ignore-attr", "seed"},  {"--exclude", "/x"},     {"--fail-after", "1"},
        {"--term-after", "1"},      {"--mesh", "2"},         {"--chunks", "4"},
        {"--steps", "2"},           {"--kv", "recompute"},   {"--recompute-every", "2"},
        {"--kv-window", "6"},       {"--d-in", "2"},         {"--d-out", "1"},
        {"--hard-cut-at", "2"},     {"--inject", "OM-03"},   {"--watchdog-steps", "100"},
        {"--record", "r.h5"},       {"--runs", "3"},         {"--time", "1"},
        {"--strategy", "pct"},      {"--pct-depth", "3"},    {"--out", "o"},
        {"--faults", "drop"},       {"--jobs", "2"},         {"--cap", "3"},
        {"--budget", "100"},        {"--time-limit", "5"},    {"--target", "pytorch"},
        {"--model", "layers=4,hidden=64,heads=4,seq=128"},
        {"--mem-cap", "1G"},        {"--device", "cpu"},     {"--gemm", "reference"},
        {"--transport", "mock"},    {"--timeout", "5"},      {"--generator", "builtin"},
        {"--generator-params", "layers=1"},                   {"--frame", "32x48"},
        {"--envelope-digest", "off"},   {"--fingerprint-every", "2"},
        {"--seed-bug", "decode-first"}, {"--cost", "decode=1,call=2"},  {"--heartbeat", "0.5"},
        {"--worker-watchdog", "3"}, {"--idle", "2"},           {"--call-timeout", "60"},
        {"--ranks-as", "threads"},  {"--kind-shape", "v"},
        {"--repeat", "2"}};
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (strcmp(table[k][0], opt) == 0) return table[k][1];
    return NULL;
}

/* s with every run of white space (a wrapped line's break and indent) as
 * one space, in a new string. */
static char *collapsed(const char *s) {
    char *out = malloc(strlen(s) + 1), *q = out;
    assert_non_null(out);
    for (const char *p = s; *p; p++) {
        if (*p == ' ' || *p == '\n') {
            if (q > out && q[-1] != ' ') *q++ = ' ';
        } else {
            *q++ = *p;
        }
    }
    *q = 0;
    return out;
}

/* Every option's text, of every list in tools/options.h, with its default. */
#define TEXT_OF(ID, SHORT, NAME, ARG, VALUE, TEXT, DEFAULT) {NAME, ARG, TEXT, DEFAULT, VALUE},
static const struct {
    const char *name, *arg, *text, *def;
    option_value value;
} option_texts[] = {
    GEN_OPTIONS(TEXT_OF) CHECK_OPTIONS(TEXT_OF) CHECK_ONLY_OPTIONS(TEXT_OF) SHOW_OPTIONS(TEXT_OF)
    RUN_OPTIONS(TEXT_OF) TRANSPORT_OPTIONS(TEXT_OF) GEMM_OPTIONS(TEXT_OF) TRACE_OPTIONS(TEXT_OF)
    JUNIT_OPTIONS(TEXT_OF) RECORD_ONLY_OPTIONS(TEXT_OF) DIFF_OPTIONS(TEXT_OF)
    DIFF_ONLY_OPTIONS(TEXT_OF) IGNORE_ATTR_OPTIONS(TEXT_OF) EXCLUDE_OPTIONS(TEXT_OF)
    CONFORM_OPTIONS(TEXT_OF) REPLAY_ONLY_OPTIONS(TEXT_OF) REPLAY_TRANSPORT_OPTIONS(TEXT_OF)
    PP_OPTIONS(TEXT_OF, TEXT_OF) PP_TRANSPORT_OPTIONS(TEXT_OF) FUZZ_OPTIONS(TEXT_OF)
    FUZZ_SCHEDULE_OPTIONS(TEXT_OF) FUZZ_PY_OPTIONS(TEXT_OF) LAUNCH_OPTIONS(TEXT_OF)};

/* The help prints every option's whole text and default, however long
 * (fuzz's --faults is over 500 bytes). */
static void test_every_option_text_is_printed_whole(void **state) {
    (void)state;
    if (skip_under_valgrind()) skip();
    size_t cap = 1, len = 0;
    char *all = calloc(1, cap);
    assert_non_null(all);
    for (int k = 0; commands[k]; k++) {
        run_result h = RUN("help", commands[k]);
        assert_int_equal(h.code, 0);
        size_t n = strlen(h.out);
        assert_non_null(all = realloc(all, cap = len + n + 2));
        memcpy(all + len, h.out, n);
        len += n;
        all[len++] = '\n';
        all[len] = 0;
        run_free(&h);
    }
    char *flat = collapsed(all);
    size_t longest = 0;
    for (size_t k = 0; k < sizeof option_texts / sizeof option_texts[0]; k++) {
        char whole[2048];
        snprintf(whole, sizeof whole, "%s%s%s%s", option_texts[k].text,
                 option_texts[k].def ? " (default: " : "",
                 option_texts[k].def ? option_texts[k].def : "", option_texts[k].def ? ")" : "");
        char *want = collapsed(whole);
        if (!strstr(flat, want))
            fail_msg("--%s's help is not printed whole: '%s'", option_texts[k].name, want);
        if (strlen(want) > longest) longest = strlen(want);
        free(want);
    }
    assert_true(longest > 512); /* the case that was cut */
    free(flat);
    free(all);
}

static void test_every_option_a_help_lists_is_taken_by_its_command(void **state) {
    (void)state;
    if (skip_under_valgrind()) skip();
    static const char *const flags[] = {"--comms",      "--json",         "--perturb",
                                        "--all-attributes", "--help",   "--compare-kv",
                                        "--control-only", "--poll", "--allow-unsafe", "--overlap",
                                        "--strict", "--plan", "--model-costs", "--optimal", NULL};
    int checked = 0;
    const char *costs = tmp_path("stages.csv"); /* --cost-file reads its file as it parses */
    write_text(costs, "ppv-costs,1\nstage,f,b,w\n0,1,2,1\n1,1,2,1\n");
    for (int k = 0; commands[k]; k++) {
        run_result h = RUN("help", commands[k]);
        const char *p = strstr(h.out, "\noptions:\n");
        assert_non_null(p);
        const char *end = strstr(p, "\nexamples:");
        for (p = strchr(p + 1, '\n'); p && p < end; p = strchr(p + 1, '\n')) {
            if (strncmp(p + 1, "  -", 3) != 0) continue;
            /* the long spelling: "--name", after "-x, " if there is a short one */
            const char *dd = strstr(p + 1, "--");
            char name[64];
            size_t n = strcspn(dd, " \n");
            snprintf(name, sizeof name, "%.*s", (int)n, dd);
            int flag = 0;
            for (int f = 0; flags[f]; f++)
                flag |= strcmp(flags[f], name) == 0;
            const char *v = flag ? NULL : sample_value(name);
            if (!strcmp(commands[k], "pp") && !strcmp(name, "--model")) /* the built-in's sizes */
                v = "layers=4,d_model=32,dtype=bf16";
            if (!strcmp(commands[k], "pp") && !strcmp(name, "--sweep")) v = "d=1,2";
            if (!strcmp(name, "--cost-file")) v = costs;
            if (!strcmp(commands[k], "pp") && !strcmp(name, "--memory-svg"))
                v = tmp_path("memory.svg");
            if (!flag && !v)
                fail_msg("%s lists %s: add a sample value to this test", commands[k], name);
            /* parsed, then --help: exit 0 only if the command knows the option */
            const char *args[8] = {commands[k]};
            int a = 1;
            if (strcmp(commands[k], "record") == 0) args[a++] = "out.h5";
            args[a++] = name;
            if (v) args[a++] = v;
            if (strcmp(name, "--help") != 0) args[a++] = "--help";
            args[a] = NULL;
            run_result r = run_in(NULL, args);
            if (r.code != 0)
                fail_msg("ppv %s %s %s --help: exit %d: %s", commands[k], name, v ? v : "", r.code,
                         r.err);
            run_free(&r);
            checked++;
        }
        run_free(&h);
    }
    assert_true(checked > 60);
}

/* The declaration of the option called name (without "--") that the
 * help of a command lists: the one whose text the help prints. NULL if
 * none. Two lists declaring it differently for one help fail the test. */
static const option_value *declared(const char *name, const char *flat_help) {
    const option_value *found = NULL;
    for (size_t k = 0; k < sizeof option_texts / sizeof option_texts[0]; k++) {
        if (strcmp(option_texts[k].name, name) != 0) continue;
        char *text = collapsed(option_texts[k].text);
        int listed = strstr(flat_help, text) != NULL;
        free(text);
        if (!listed) continue;
        if (found && memcmp(found, &option_texts[k].value, sizeof *found) != 0)
            fail_msg("--%s is declared twice, differently, in one command", name);
        found = &option_texts[k].value;
    }
    return found;
}

typedef struct spelling {
    char text[4200];
    int good;
} spelling;

static int add(spelling *s, int n, int good, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int add(spelling *s, int n, int good, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s[n].text, sizeof s[n].text, fmt, ap);
    va_end(ap);
    s[n].good = good;
    return n + 1;
}

/* Every spelling of a number of kind k in v's range this test tries: the
 * limits (good), one past each, and each malformed spelling (bad). */
static int number_spellings(const option_value *v, option_kind k, spelling *s) {
    int n = 0;
    if (k == OV_INT || k == OV_BYTES) {
        n = add(s, n, 1, "%lld", v->lo);
        n = add(s, n, 1, "%lld", v->hi);
        if (v->lo > INT64_MIN) n = add(s, n, 0, "%lld", v->lo - 1);
        if (v->hi < INT64_MAX) n = add(s, n, 0, "%lld", v->hi + 1);
        else n = add(s, n, 0, "9223372036854775808");
        static const char *const bad[] = {"18446744073709551616", "1e3", "0x10", "2.5", "-0",
                                          "2,", "", "1T", "1k"};
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) n = add(s, n, 0, "%s", bad[b]);
        n = add(s, n, 0, " %lld", v->lo);
        n = add(s, n, 0, "%lld ", v->lo);
        n = add(s, n, 0, "+%lld", v->lo);
        if (k == OV_BYTES && v->hi >= 2048) {
            n = add(s, n, 1, "2K");
            n = add(s, n, 0, "1.5K");
        }
    } else {
        if (v->open_lo) n = add(s, n, 0, "%g", v->flo);
        else n = add(s, n, 1, "%g", v->flo);
        n = add(s, n, 1, "%.0f", v->fhi);
        n = add(s, n, 0, "%.0f", v->fhi * 10);
        n = add(s, n, 0, "%g", v->flo - 1);
        static const char *const bad[] = {"inf", "nan", "0x10", " 1", "1 ", "1,", "+1", "",
                                          ".5",  "5.",  "1e400", "-0", "1e", "1K"};
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) n = add(s, n, 0, "%s", bad[b]);
        if (v->fhi >= 1) n = add(s, n, 1, "1e0");
    }
    return n;
}

/* What each option takes comes from its declaration in tools/options.h,
 * and so do this test's cases: every option of every command, at its
 * limits (taken) and past them and in every malformed spelling (exit 2,
 * naming the option and the value, before any work: the command line
 * ends with --help). A new option is covered without an edit here. */
static void test_every_option_reads_its_value_by_its_declaration(void **state) {
    (void)state;
    if (skip_under_valgrind()) skip();
    char *dir = tmp_path("a_dir"), *file = tmp_path("a_file");
    assert_int_equal(mkdir(dir, 0700), 0);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    int cases = 0, kinds[OV_DIR + 1] = {0};
    for (int c = 0; commands[c]; c++) {
        run_result h = RUN("help", commands[c]);
        char *flat = collapsed(h.out);
        const char *p = strstr(h.out, "\noptions:\n");
        const char *end = p ? strstr(p, "\nexamples:") : NULL;
        for (p = p ? strchr(p + 1, '\n') : NULL; p && p < end; p = strchr(p + 1, '\n')) {
            if (strncmp(p + 1, "  -", 3) != 0) continue;
            const char *dd = strstr(p + 1, "--");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(dd + 2, " \n"), dd + 2);
            if (!strcmp(name, "help")) continue;
            const option_value *v = declared(name, flat);
            if (!v) fail_msg("%s lists --%s, declared nowhere", commands[c], name);
            spelling *sp = calloc(64, sizeof *sp);
            assert_non_null(sp);
            int n = 0;
            switch (v->kind) {
            case OV_NONE: break;
            case OV_INT:
            case OV_BYTES:
            case OV_SECONDS:
            case OV_FRAC: n = number_spellings(v, v->kind, sp); break;
            case OV_FORM: {
                spelling inner[40];
                int m = number_spellings(v, v->inner, inner);
                for (int i = 0; i < m; i++) {
                    char text[4200];
                    snprintf(text, sizeof text, v->form, inner[i].text);
                    n = add(sp, n, inner[i].good, "%s", text);
                }
                n = add(sp, n, 0, "%s", ""); /* nothing at all */
                break;
            }
            case OV_WORD: n = add(sp, n, 0, "no-such-word"); n = add(sp, n, 0, "%s", ""); break;
            case OV_TEXT:
            case OV_IN: break; /* read by the command when it runs */
            case OV_OUT:
                n = add(sp, n, 1, "%s/new.out", dir);
                n = add(sp, n, 0, "%s", dir);
                n = add(sp, n, 0, "%s/no/such/x.out", dir);
                n = add(sp, n, 0, "%s/x.out", file);
                n = add(sp, n, 0, "%s", "");
                break;
            case OV_DIR:
                n = add(sp, n, 1, "%s", dir);
                n = add(sp, n, 1, "%s/new", dir);
                n = add(sp, n, 0, "%s", file);
                n = add(sp, n, 0, "%s/no/such", dir);
                n = add(sp, n, 0, "%s", "");
                break;
            }
            kinds[v->kind]++;
            if (v->kind == OV_FORM) kinds[v->inner]++;
            for (int i = 0; i < n; i++) {
                const char *args[8] = {commands[c]};
                int a = 1;
                if (!strcmp(commands[c], "record")) args[a++] = "out.h5";
                char opt[80];
                snprintf(opt, sizeof opt, "--%s", name);
                args[a++] = opt;
                args[a++] = sp[i].text;
                args[a++] = "--help";
                args[a] = NULL;
                run_result r = run_in(NULL, args);
                char quoted[4300];
                snprintf(quoted, sizeof quoted, v->kind == OV_OUT || v->kind == OV_DIR ? "%s" : "'%s'",
                         sp[i].text);
                if (sp[i].good && r.code != 0)
                    fail_msg("ppv %s %s '%s' --help: exit %d: %s", commands[c], opt, sp[i].text,
                             r.code, r.err);
                if (!sp[i].good && (r.code != 2 || !strstr(r.err, opt) ||
                                    (sp[i].text[0] && !strstr(r.err, quoted)) || r.out[0]))
                    fail_msg("ppv %s %s '%s' --help: exit %d (not 2 naming %s and the value): %s",
                             commands[c], opt, sp[i].text, r.code, opt, r.err);
                run_free(&r);
                cases++;
            }
            free(sp);
        }
        free(flat);
        run_free(&h);
    }
    /* every kind is declared somewhere, and the table is the size of the
     * one measured from outside (1,824 runs over about 95 option pairs) */
    for (int k = OV_INT; k <= OV_DIR; k++)
        if (!kinds[k]) fail_msg("no option of kind %d: a kind the test never tried", k);
    fprintf(stderr, "%d spellings tried\n", cases);
    assert_true(cases > 1500);
}

/* The check every --json output of the suite passes (testutil.h) refuses
 * what no parser reads: NaN, Infinity, two values, a cut object. And the
 * figures that once came out as Infinity and NaN are refused as input. */
static void test_json_is_checked_strictly_and_huge_costs_are_refused(void **state) {
    (void)state;
    char why[128];
    assert_int_equal(json_strict_ok("{\"a\":1.5,\"b\":[null,2]}\n", why, sizeof why), 0);
    static const char *const bad[] = {"{\"a\":NaN}", "{\"a\":Infinity}", "[-Infinity]",
                                      "{\"a\":1}{\"b\":2}", "{\"a\":1", ""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        if (json_strict_ok(bad[k], why, sizeof why) == 0) fail_msg("'%s' passed", bad[k]);
    char *s = gen_file("j.csv", "1f1b", "2", "4");
    run_result r = RUN("check", s, "--costs", "1e308,2,1", "--json");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "--costs needs F,B,W[,C], each with a number from 0 to 1e+06, "
                                  "not '1e308,2,1'"));
    run_free(&r);
    r = RUN("check", s, "--mem", "1e308", "--json");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("check", s, "--costs", "1000000,1000000,0,1000000", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"makespan\":"));
    run_free(&r);
}

/* One verdict per input across commands: a schedule file holding one
 * ',' (one rank, no stage) is refused by every command that reads a
 * schedule, never "result: OK"; costs the checker cannot use are refused
 * by gen and check alike, naming the rule. */
static void test_an_empty_schedule_and_unusable_costs_are_refused_everywhere(void **state) {
    (void)state;
    const char *comma = tmp_path("comma.csv");
    FILE *f = fopen(comma, "w");
    assert_non_null(f);
    fputs(",\n", f);
    fclose(f);
    const char *rec = tmp_path("rec.h5");
    const char *const cmds[][4] = {{"check", comma, NULL}, {"show", comma, NULL},
                                   {"run", comma, NULL},   {"fuzz", comma, "--runs", "2"},
                                   {"record", rec, comma, NULL}};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        const char *args[6] = {cmds[k][0], cmds[k][1], cmds[k][2], cmds[k][3], NULL};
        run_result r = run_in(NULL, args);
        if (r.code != 2 || strstr(r.out, "result: OK") || !strstr(r.err, "no stage or microbatch"))
            fail_msg("ppv %s ',': exit %d: %s%s", cmds[k][0], r.code, r.out, r.err);
        run_free(&r);
    }
    char *s = gen_file("c.csv", "1f1b", "2", "4");
    run_result g = RUN("gen", "1f1b", "-p", "2", "-m", "4", "--costs", "1,1,1");
    run_result c = RUN("check", s, "--costs", "1,1,1");
    assert_int_equal(g.code, 2);
    assert_int_equal(c.code, 2);
    const char *rule = "--costs needs F,B,W[,C] with F > 0 and B > W, each with a number from 0 "
                       "to 1e+06, not '1,1,1'\n";
    assert_non_null(strstr(g.err, rule));
    assert_non_null(strstr(c.err, rule));
    run_free(&g);
    run_free(&c);
}

static void test_options_a_command_does_not_honour_are_refused(void **state) {
    (void)state;
    char *s = gen_file("r.csv", "1f1b", "2", "2");
    run_result r = RUN("verify-recompute", s, "--trace-out", tmp_path("t"));
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err,
                        "ppv verify-recompute: --trace-out is not an option of this command\n"
                        "(run 'ppv help verify-recompute' for usage)\n");
    run_free(&r);
    r = RUN("run", s, "--fail-after", "1");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("verify-recompute", s, "--term-after", "1");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err,
                        "ppv verify-recompute: --term-after is not an option of this command\n"
                        "(run 'ppv help verify-recompute' for usage)\n");
    run_free(&r);
    r = RUN("record", tmp_path("g.h5"), s, "--junit", tmp_path("j.xml"));
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("demo", "extra");
    assert_int_equal(r.code, 2);
    assert_string_equal(
        r.err, "ppv demo: takes no argument, not 'extra'\n(run 'ppv help demo' for usage)\n");
    run_free(&r);
}

static void test_version_has_three_spellings(void **state) {
    (void)state;
    char want[64];
    snprintf(want, sizeof want, "ppv %s\n", PPV_VERSION_STRING);
    const char *const spellings[] = {"version", "--version", "-V"};
    for (int k = 0; k < 3; k++) {
        run_result r = run_in(NULL, (const char *const[]){spellings[k], NULL});
        assert_int_equal(r.code, 0);
        assert_string_equal(r.out, want);
        run_free(&r);
    }
}

/* The golden layer is a module (libppv_golden.so, HDF5) that only the
 * commands that read or write golden files load: without it they exit 2
 * and say why, and the others run as before. */
static void test_golden_commands_load_their_module_and_others_do_not(void **state) {
    (void)state;
#ifndef PPV_GOLDEN_IS_MODULE
    skip(); /* this build links the layer into ppv (PPV_FAILINJECT) */
#endif
    setenv("PPV_GOLDEN_MODULE", "/nonexistent/libppv_golden.so", 1);
    run_result r = RUN("replay", PPV_GOLDEN_DIR "/train_1f1b_p4_m8.h5");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv: cannot load the golden-file module (libppv_golden.so, "
                                  "HDF5): /nonexistent/libppv_golden.so: cannot open shared "
                                  "object file"));
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "4");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "F0"));
    run_free(&r);
    r = RUN("run", "--help");
    assert_int_equal(r.code, 0);
    run_free(&r);
    unsetenv("PPV_GOLDEN_MODULE");
    r = RUN("replay", PPV_GOLDEN_DIR "/train_1f1b_p4_m8.h5");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "values compared (bitwise, NaN equals NaN): same\nresult: OK"));
    run_free(&r);
}

static void test_dash_reads_the_schedule_from_standard_input(void **state) {
    (void)state;
    char *s = gen_file("zbv.csv", "zbv", "2", "4");
    run_result f = RUN("check", s, "--json"), i = RUN_STDIN(s, "check", "-", "--json");
    assert_int_equal(f.code, 0);
    assert_int_equal(i.code, 0);
    /* the same report but for the name */
    json_object *a = json_tokener_parse(f.out), *b = json_tokener_parse(i.out);
    assert_string_equal(json_object_get_string(json_object_object_get(b, "file")), "<stdin>");
    json_object_object_del(a, "file");
    json_object_object_del(b, "file");
    assert_string_equal(json_object_to_json_string(a), json_object_to_json_string(b));
    json_object_put(a), json_object_put(b);
    run_free(&f), run_free(&i);
    /* run and errors in standard input name it */
    run_result r = RUN_STDIN(s, "run", "-");
    assert_int_equal(r.code, 0);
    assert_memory_equal(r.out, "<stdin>: 2 ranks", 16);
    run_free(&r);
    char *bad = tmp_path("bad.csv");
    FILE *fp = fopen(bad, "w");
    fputs("0F0,0Q0\n", fp);
    fclose(fp);
    r = RUN_STDIN(bad, "check", "-");
    assert_int_equal(r.code, 2);
    assert_memory_equal(r.err, "ppv check: <stdin>:1:5: ", 24);
    run_free(&r);
}

/* The value of a JSON object's member as text. */
static const char *member(json_object *o, const char *key) {
    json_object *v = json_object_object_get(o, key);
    assert_non_null(v);
    return json_object_get_string(v);
}

static void test_record_honours_json_trace_out_and_perturb(void **state) {
    (void)state;
    char *s = gen_file("rec.csv", "1f1b", "2", "4");
    char g[4200], t[4200], rt[4200], gp[4200];
    snprintf(g, sizeof g, "%s", tmp_path("g.h5"));
    snprintf(t, sizeof t, "%s", tmp_path("g.trace"));
    snprintf(rt, sizeof rt, "%s", tmp_path("run.trace"));
    snprintf(gp, sizeof gp, "%s", tmp_path("perturbed.h5"));
    run_result r = RUN("record", g, s, "--policy", "random", "--seed", "5", "--json", "--trace-out", t);
    assert_int_equal(r.code, 0);
    json_object *rec = json_tokener_parse(r.out);
    assert_non_null(rec);
    run_result run = RUN("run", s, "--policy", "random", "--seed", "5", "--json", "--trace-out", rt);
    assert_int_equal(run.code, 0);
    json_object *o = json_tokener_parse(run.out);
    /* the recorded run is the run: same gradients, same interleaving, same trace file */
    assert_string_equal(member(rec, "grad_digest"), member(o, "grad_digest"));
    assert_string_equal(member(rec, "trace_digest"), member(o, "trace_digest"));
    assert_string_equal(member(rec, "perturbed"), "false");
    char *ta = slurp(t), *tb = slurp(rt);
    assert_string_equal(ta, tb);
    free(ta), free(tb);
    json_object_put(rec), json_object_put(o);
    run_free(&r), run_free(&run);
    /* a perturbed recording holds the flipped bit, so its replay fails */
    r = RUN("record", gp, s, "--perturb");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "(perturbed: one gradient bit flipped, so its replay fails)"));
    run_free(&r);
    r = RUN("replay", gp);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "1 of "));
    run_free(&r);
    r = RUN("replay", g);
    assert_int_equal(r.code, 0);
    run_free(&r);
}

static void test_sizes_beyond_memory_are_refused_before_work(void **state) {
    (void)state;
    /* this once grew to 23 GB before it was killed */
    run_result r = RUN("gen", "1f1b", "-p", "4096", "-m", "100000");
    assert_int_equal(r.code, 2);
    assert_memory_equal(r.err, "ppv gen: a schedule of up to ", 29);
    assert_non_null(strstr(r.err, " GiB of memory, more than the limit of "));
    assert_string_equal(r.out, "");
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "64", "-m", "1024", "--max-memory", "1M");
    assert_int_equal(r.code, 2);
    assert_non_null(
        strstr(r.err, "needs about 60.0 MiB of memory, more than the limit of 1.0 MiB"));
    run_free(&r);
    char *s = gen_file("big.csv", "1f1b", "4", "64");
    r = RUN("check", s, "--max-memory", "4K");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "more than the limit of 4.0 KiB"));
    run_free(&r);
    r = RUN("run", s, "--max-memory", "64K");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("run", s, "--max-memory", "1G");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "4", "-m", "8", "--max-memory", "lots");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

/* gen auto from the command line: the schedule on standard output, what
 * it chose on standard error; its options are refused where they would be
 * ignored. */
static void test_gen_auto_command(void **state) {
    (void)state;
    run_result r = RUN("gen", "auto", "-p", "4", "-m", "8", "--cap", "3");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "ppv gen: auto: best of 36 candidates: v-half -v 2 (makespan "
                               "26.5); 0 improving swaps in 539 checks from 4 starts (no swap "
                               "left improves it): makespan 26.5, bubble ratio 0.094340, peak "
                               "activation 3\n");
    run_result v = RUN("gen", "v-half", "-p", "4", "-m", "8");
    assert_string_equal(r.out, v.out);
    run_free(&v);
    run_free(&r);
    r = RUN("gen", "auto", "-p", "2", "-m", "4", "--costs", "2,3,1,1", "--comms");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, ": cost-aware heuristic (cap 3) (makespan 24); 0 improving "
                                  "swaps in "));
    assert_non_null(strstr(r.out, "SEND_F"));
    run_free(&r);
    /* a named kind tuned to its costs: ZB-H2 at p=4 m=16 under 1,2,1,1 runs
     * in 60 units (the zero-bubble authors' scheduler: 60), the untuned
     * order in 61, both within 7 activations a rank */
    char tuned[4200], plain[4200];
    snprintf(tuned, sizeof tuned, "%s", tmp_path("tuned.csv"));
    snprintf(plain, sizeof plain, "%s", tmp_path("plain.csv"));
    r = RUN("gen", "zb-h2", "-p", "4", "-m", "16", "--costs", "1,2,1,1", "-o", tuned);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "ppv gen: zb-h2 tuned to --costs 1,2,1,1: best of 2 candidates: "
                               "cost-aware heuristic (cap 7) (makespan 60); 0 improving swaps in "
                               "323 checks from 2 starts (no swap left improves it): makespan "
                               "60, bubble ratio 0.200000, peak activation 7 (the kind's own: at "
                               "most 7)\n");
    run_free(&r);
    r = RUN("gen", "zb-h2", "-p", "4", "-m", "16", "-o", plain);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
    const struct {
        const char *file;
        const char *figures;
    } runs[] = {{tuned, "peak activation: 7 7 6 7\nmakespan: 60  bubble ratio: 0.200000\n"},
                {plain, "peak activation: 7 7 7 7\nmakespan: 61  bubble ratio: 0.213115\n"}};
    for (int k = 0; k < 2; k++) {
        r = RUN("check", runs[k].file, "--costs", "1,2,1,1");
        assert_int_equal(r.code, 0);
        if (!strstr(r.out, runs[k].figures)) fprintf(stderr, "got: %s\n", r.out);
        assert_non_null(strstr(r.out, runs[k].figures));
        run_free(&r);
    }
    r = RUN("gen", "auto", "-p", "4", "-m", "8", "--cap", "3", "--time-limit", "0.000001");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "(stopped by --time-limit: the result depends on this "
                                  "machine's speed)"));
    run_free(&r);
    static const char *const bad[][12] = {
        {"gen", "1f1b", "-p", "4", "-m", "8", "--cap", "3", NULL},
        {"gen", "1f1b", "-p", "4", "-m", "8", "--budget", "3", NULL},
        {"gen", "1f1b", "-p", "4", "-m", "8", "--time-limit", "3", NULL},
        {"gen", "auto", "-p", "4", "-m", "8", "-v", "2", NULL},
        {"gen", "auto", "-p", "4", "-m", "8", "--cap", "0", NULL},
        {"gen", "auto", "-p", "4", "-m", "8", "--cap", "0.4", NULL}};
    static const char *const why[] = {
        "--cap and --mem-cap are for 'auto', not 1f1b",
        "--budget and --time-limit bound the search of 'auto' or of a kind tuned with --costs; "
        "1f1b has neither",
        "--budget and --time-limit bound the search of 'auto' or of a kind tuned with --costs; "
        "1f1b has neither",
        "'auto' chooses the stages a rank itself; it takes no -v",
        "--cap needs a whole number from 1 to 16777216, not '0'",
        "--cap needs a whole number from 1 to 16777216, not '0.4'"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = run_in(NULL, bad[k]);
        assert_int_equal(r.code, 2);
        if (!strstr(r.err, why[k])) fprintf(stderr, "got: %s\n", r.err);
        assert_non_null(strstr(r.err, why[k]));
        assert_string_equal(r.out, "");
        run_free(&r);
    }
}

/* check --model and --mem-cap from the command line: the bytes per rank,
 * the gate passing and failing with the rank, the excess and the action,
 * caps per rank, a spec file with comments, and refusals. */
/* gen auto --model --mem-cap: the fastest schedule whose every rank fits
 * the bytes, which `check --model --mem-cap` (the gate users run) then
 * passes; the uncapped choice does not fit; a cap below anything ppv
 * builds is refused with the least it needs. */
static void test_gen_auto_mem_cap_in_bytes(void **state) {
    (void)state;
    const char *spec = "layers=32,hidden=4096,heads=32,seq=2048";
    char *free_choice = tmp_path("auto_free.csv"), *capped = tmp_path("auto_capped.csv");
    run_result r = RUN("gen", "auto", "-p", "4", "-m", "8", "--model", spec, "-o", free_choice);
    assert_int_equal(r.code, 0);
    /* PyTorch's interleaved zero bubble at 4 stages a rank ties ZB-H2's
     * makespan with fewer bytes */
    assert_non_null(strstr(r.err, ": pytorch-interleaved-zb -v 4 (makespan 24.75);"));
    assert_non_null(strstr(r.err, "ppv gen: auto: largest rank's memory 56512479232 bytes "
                                  "(52.6 GiB)\n"));
    run_free(&r);
    r = RUN("check", free_choice, "--model", spec, "--mem-cap", "40G");
    assert_int_equal(r.code, 1);
    run_free(&r);
    r = RUN("gen", "auto", "-p", "4", "-m", "8", "--model", spec, "--mem-cap", "40G", "-o",
            capped);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "makespan 29.5, bubble ratio 0.186441, peak activation 2\n"
                                  "ppv gen: auto: largest rank's memory 41211789312 bytes (38.4 "
                                  "GiB), within --mem-cap\n"));
    run_free(&r);
    r = RUN("check", capped, "--model", spec, "--mem-cap", "40G");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK\n"));
    run_free(&r);
    r = RUN("gen", "auto", "-p", "4", "-m", "8", "--model", spec, "--mem-cap", "30G");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "ppv gen: auto: no schedule fits a cap of 32212254720 bytes "
                               "(30.00 GiB) a rank: the least ppv builds for p=4 m=8 needs "
                               "33561247744 (31.26 GiB)\n");
    run_free(&r);
    r = RUN("gen", "auto", "-p", "4", "-m", "8", "--mem-cap", "40G");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mem-cap needs --model: bytes come from a model"));
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "4", "-m", "8", "--model", spec, "--mem-cap", "40G");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--cap and --mem-cap are for 'auto', not 1f1b"));
    run_free(&r);
}

static void test_check_model_bytes_and_mem_cap(void **state) {
    (void)state;
    char *f = gen_file("mem.csv", "1f1b", "4", "8");
    const char *spec = "layers=24,hidden=2048,heads=16,seq=2048,vocab=50257";
    run_result r = RUN("check", f, "--model", spec);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "memory, rank 0: weights 818540544 gradients 818540544 "
                                  "optimizer 4911243264 activations 11475615744 (peak at 0F3) "
                                  "total 18023940096 bytes (16.8 GiB)\n"));
    assert_non_null(strstr(r.out, "memory, rank 3: weights 810160128 gradients 810160128 "
                                  "optimizer 4860960768 activations 2868903936 (peak at 3F0) "
                                  "total 9350184960 bytes (8.7 GiB)\nresult: OK\n"));
    run_free(&r);
    r = RUN("check", f, "--model", spec, "--mem-cap", "17G");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", f, "--model", spec, "--mem-cap", "16G");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "memory: rank 0 needs 16.8 GiB (18023940096 bytes), 844070912 "
                                  "bytes over its cap of 16.0 GiB; its activations peak at 0F3 "
                                  "(index 3)\nresult: PROBLEM\n"));
    run_free(&r);
    /* one cap a rank: rank 0 fits 17G, rank 2 does not fit 9G */
    r = RUN("check", f, "--model", spec, "--mem-cap", "17G,13G,9G,9G", "--json");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\"ok\":false"));
    assert_non_null(strstr(r.out, "\"rank\":2,\"parameters\":302149632"));
    assert_non_null(strstr(r.out, "\"cap\":9663676416,\"within_cap\":false"));
    run_free(&r);
    /* the spec from a file, with comments */
    char *sf = tmp_path("gpt.spec");
    FILE *fp = fopen(sf, "w");
    fputs("# a 1.3B GPT\nlayers=24\nhidden=2048  # h\nheads=16\nseq=2048\nvocab=50257\n", fp);
    fclose(fp);
    r = RUN("check", f, "--model", sf);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "activations 11475615744 (peak at 0F3)"));
    run_free(&r);
    static const char *const bad[][3] = {
        {"--mem-cap", "1G", "--mem-cap needs --model"},
        {"--model", "layers=24", "--model needs layers, hidden, heads and seq"},
        {"--model", "no-such-file", "--model no-such-file: no KEY=VALUE and no such file"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = RUN("check", f, bad[k][0], bad[k][1]);
        assert_int_equal(r.code, 2);
        assert_non_null(strstr(r.err, bad[k][2]));
        run_free(&r);
    }
    r = RUN("check", f, "--model", spec, "--mem-cap", "1G,2G");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mem-cap gives 2 caps for 4 ranks"));
    run_free(&r);
    /* show takes the model as check does, and prints what check says */
    r = RUN("show", f, "--model", spec, "--mem-cap", "9G");
    assert_int_equal(r.code, 1);
    run_result c = RUN("check", f, "--model", spec, "--mem-cap", "9G");
    assert_int_equal(c.code, 1);
    assert_non_null(strstr(c.out, "memory: rank 0 needs 16.8 GiB (18023940096 bytes)"));
    /* the check's report, then the timeline */
    assert_int_equal(strncmp(r.out, c.out, strlen(c.out)), 0);
    assert_non_null(strstr(r.out + strlen(c.out), "\nrank   3 | "));
    run_free(&c);
    run_free(&r);
    unlink(sf);
    unlink(f);
}

/* The permission bits of path. */
static int mode_of(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (int)(st.st_mode & 0777);
}

static void test_output_files_follow_the_umask(void **state) {
    (void)state;
    const mode_t masks[] = {022, 027};
    for (int k = 0; k < 2; k++) {
        mode_t old = umask(masks[k]); /* the child inherits it */
        int want = 0666 & ~(int)masks[k];
        char csv[4200], svg[4200], xml[4200], h5[4200];
        snprintf(csv, sizeof csv, "%s", tmp_path(k ? "m1.csv" : "m0.csv"));
        snprintf(svg, sizeof svg, "%s", tmp_path(k ? "m1.svg" : "m0.svg"));
        snprintf(xml, sizeof xml, "%s", tmp_path(k ? "m1.xml" : "m0.xml"));
        snprintf(h5, sizeof h5, "%s", tmp_path(k ? "m1.h5" : "m0.h5"));
        run_result r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", csv);
        assert_int_equal(r.code, 0);
        run_free(&r);
        r = RUN("show", csv, "--svg", svg);
        run_free(&r);
        r = RUN("check", csv, "--junit", xml);
        run_free(&r);
        r = RUN("record", h5, csv);
        assert_int_equal(r.code, 0);
        run_free(&r);
        umask(old);
        assert_int_equal(mode_of(csv), want);
        assert_int_equal(mode_of(svg), want);
        assert_int_equal(mode_of(xml), want);
        assert_int_equal(mode_of(h5), want);
    }
}

static void test_errors_start_with_ppv_and_give_the_os_reason(void **state) {
    (void)state;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.csv", tmp_dir());
    run_result r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", missing);
    assert_int_equal(r.code, 2);
    char want[4400];
    snprintf(want, sizeof want,
             "ppv gen: --output (-o): cannot write %s: No such file or directory\n(run 'ppv help gen' "
             "for usage)\n",
             missing);
    assert_string_equal(r.err, want);
    run_free(&r);
    r = RUN("check", missing);
    assert_int_equal(r.code, 2);
    snprintf(want, sizeof want, "ppv check: %s: cannot open: No such file or directory\n", missing);
    assert_string_equal(r.err, want);
    run_free(&r);
    char *s = gen_file("e.csv", "1f1b", "2", "2");
    r = RUN("show", s, "--svg", missing);
    assert_int_equal(r.code, 2);
    snprintf(want, sizeof want,
             "ppv show: --svg: cannot write %s: No such file or directory\n(run 'ppv help show' "
             "for usage)\n",
             missing);
    assert_string_equal(r.err, want);
    run_free(&r);
    r = RUN("check", s, "--bogus");
    assert_string_equal(
        r.err, "ppv check: unrecognized option '--bogus'\n(run 'ppv help check' for usage)\n");
    run_free(&r);
    r = RUN("frobnicate");
    assert_string_equal(r.err, "ppv: unknown command 'frobnicate'\n(run 'ppv help' for usage)\n");
    run_free(&r);
    /* a rank-level error has no action index: none is printed */
    char *bad = tmp_path("rank_level.csv");
    FILE *f = fopen(bad, "w");
    fputs("0F0,0B0\n1F0\n", f);
    fclose(f);
    r = RUN("run", bad);
    assert_int_equal(r.code, 2);
    assert_memory_equal(r.err, "ppv run: ", 9);
    assert_null(strstr(r.err, "-1"));
    assert_non_null(strstr(r.err, "(rank 1); run 'ppv check' for every error"));
    run_free(&r);
}

/* Runs ppv with args under a pseudo-terminal (stdout and stderr both on
 * it) and returns all it wrote there. */
static char *run_on_terminal(const char *const *args) {
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *argv[16] = {PPV_BIN};
        for (int k = 0; args[k]; k++)
            argv[k + 1] = args[k];
        execv(PPV_BIN, (char *const *)argv);
        _exit(127);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        struct pollfd p = {master, POLLIN, 0};
        if (poll(&p, 1, 60000) <= 0) break; /* bounded: a minute without output */
        ssize_t got = read(master, buf + n, cap - 1 - n);
        if (got <= 0) break; /* EIO once the child has closed the terminal */
        n += (size_t)got;
        if (n == cap - 1) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    close(master);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return buf;
}

static void test_progress_shows_only_on_a_terminal_and_not_with_json(void **state) {
    (void)state;
    char *s = gen_file("prog.csv", "1f1b", "4", "16");
    char *tty = run_on_terminal((const char *const[]){"run", s, NULL});
    /* 4 ranks x 16 microbatches x (F + B) + the sends and receives of 3 links */
    assert_non_null(strstr(tty, "run: 320 of 320 actions (100%)"));
    assert_non_null(strstr(tty, "result: OK"));
    free(tty);
    tty = run_on_terminal((const char *const[]){"run", s, "--json", NULL});
    assert_null(strstr(tty, " actions ("));
    free(tty);
    run_result r = RUN("run", s);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
    /* ppv pp counts the chunks stage 0 decoded */
    tty = run_on_terminal((const char *const[]){"pp", "--chunks", "3", NULL});
    assert_non_null(strstr(tty, "pp: 3 of 3 chunks (100%)"));
    assert_non_null(strstr(tty, "result: OK"));
    free(tty);
    tty = run_on_terminal((const char *const[]){"pp", "--chunks", "3", "--json", NULL});
    assert_null(strstr(tty, " chunks ("));
    free(tty);
    r = RUN("pp", "--chunks", "3");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
}

static void test_junit_has_one_case_per_check_and_fails_what_failed(void **state) {
    (void)state;
    char *xml = tmp_path("check.xml");
    run_result r = RUN("check", data_path("rendezvous_only.csv"), "--junit", xml);
    assert_int_equal(r.code, 1);
    run_free(&r);
    char *x = slurp(xml);
    assert_memory_equal(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39);
    assert_int_equal(count(x, "<testcase "), 3); /* structure, rank 0, rank 1 */
    assert_int_equal(count(x, "<failure "), 2);
    assert_non_null(strstr(x, "<testsuite name=\"ppv check "));
    assert_non_null(strstr(x, "tests=\"3\" failures=\"2\""));
    assert_non_null(
        strstr(x, "name=\"deadlock-free: rank 1\">\n      <failure message=\"blocked at 1SEND_F0"));
    free(x);
    r = RUN("check", data_path("rendezvous_only.csv"), "--semantics", "eager", "--junit", xml);
    assert_int_equal(r.code, 0);
    run_free(&r);
    x = slurp(xml);
    assert_non_null(strstr(x, "tests=\"3\" failures=\"0\""));
    free(x);
    /* run: completes, deadlock per rank, memory per rank, gradients */
    char *s = gen_file("j.csv", "zbv", "2", "4");
    r = RUN("run", s, "--junit", xml, "--perturb");
    assert_int_equal(r.code, 1);
    run_free(&r);
    x = slurp(xml);
    assert_int_equal(count(x, "<testcase "), 1 + 2 + 2 + 1);
    assert_int_equal(count(x, "<failure "), 1);
    assert_non_null(strstr(x, "name=\"gradients equal the one-rank reference\">\n      <failure"));
    free(x);
    r = RUN("verify-recompute", s, "--junit", xml);
    assert_int_equal(r.code, 0);
    run_free(&r);
    x = slurp(xml);
    assert_int_equal(count(x, "<testcase "), 2 * (1 + 2 + 2) + 3);
    assert_int_equal(count(x, "<failure "), 0);
    assert_non_null(strstr(x, "name=\"recompute equals stash bit for bit\"/>"));
    assert_non_null(strstr(x, "name=\"forward passes as the schedule implies\"/>"));
    assert_non_null(strstr(x, "name=\"measured peak bytes equal the prediction\"/>"));
    free(x);
    /* zbv p=2 m=4: 16 forwards; recomputing stage 1 adds its 4 backwards' forwards */
    r = RUN("verify-recompute", s, "--recompute", "1");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "forward passes: stash 16, recompute 20 (the schedule implies 16 "
                                  "and 20)\nextra forward compute: 4 layer forwards beyond stash's "
                                  "16 (+25.0%), 4 stage forwards (cost units at F = 1)\nresult: "
                                  "OK\n"));
    run_free(&r);
    /* a policy per stage; a bad one is refused before anything runs */
    r = RUN("verify-recompute", s, "--recompute", "0:layers:1,3:mb:0", "--layers", "8");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "forward passes: stash 16, recompute 24 (the schedule implies 16 "
                                  "and 24)\n"));
    run_free(&r);
    /* selective on stage 1 (two layers): its 4 backwards rebuild 8 layers'
     * attention cores and run no forward again; stage 2 recomputes in full */
    r = RUN("verify-recompute", s, "--recompute", "1:selective,2:full", "--layers", "8");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "forward passes: stash 16, recompute 20 (the schedule implies 16 "
                                  "and 20)\nattention cores rebuilt: 8 layers (the schedule "
                                  "implies 8)\nextra forward compute: 8 layer forwards"));
    run_free(&r);
    r = RUN("verify-recompute", s, "--recompute", "selective", "--layers", "8", "--json");
    assert_int_equal(r.code, 0);
    assert_int_equal(json_int(r.out, "attention_core_rebuilds"), 2 * 16);
    assert_int_equal(json_int(r.out, "expected_attention_core_rebuilds"), 2 * 16);
    assert_int_equal(json_int(r.out, "recompute_forward_passes"), 16);
    assert_non_null(strstr(r.out, "\"ok\":true"));
    run_free(&r);
    /* several policies: each verified in turn, one verdict each */
    r = RUN("verify-recompute", s, "--recompute", "selective", "--recompute", "layers:1",
            "--recompute", "mb:0", "--layers", "8", "--json", "--junit", xml);
    assert_int_equal(r.code, 0);
    json_object *o = json_tokener_parse(r.out);
    assert_non_null(o);
    json_object *pols = json_object_object_get(o, "policies");
    assert_int_equal(json_object_array_length(pols), 3);
    assert_true(json_object_get_boolean(json_object_object_get(o, "ok")));
    static const char *const names[] = {"selective", "layers:1", "mb:0"};
    static const long long passes[] = {16, 32, 32}, cores[] = {32, 0, 0};
    for (int k = 0; k < 3; k++) {
        json_object *pk = json_object_array_get_idx(pols, k);
        assert_string_equal(json_object_get_string(json_object_object_get(pk, "policy")), names[k]);
        assert_int_equal(json_object_get_int64(json_object_object_get(pk, "recompute_forward_passes")),
                         passes[k]);
        assert_int_equal(json_object_get_int64(json_object_object_get(pk, "attention_core_rebuilds")),
                         cores[k]);
    }
    json_object_put(o);
    run_free(&r);
    x = slurp(xml);
    assert_int_equal(count(x, "<testcase "), 3 * (2 * (1 + 2 + 2) + 3));
    assert_non_null(strstr(x, "name=\"[layers:1] recompute equals stash bit for bit\"/>"));
    free(x);
    /* one failing policy fails the command; a bad one stops it before anything runs */
    r = RUN("verify-recompute", s, "--recompute", "selective", "--recompute", "full", "--perturb");
    assert_int_equal(r.code, 1);
    assert_int_equal(count(r.out, "result: PROBLEM\n"), 2);
    assert_non_null(strstr(r.out, "policy selective\n"));
    assert_non_null(strstr(r.out, "\nresult: PROBLEM (2 policies)\n"));
    run_free(&r);
    r = RUN("verify-recompute", s, "--recompute", "full", "--recompute", "1:often");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "");
    run_free(&r);
    r = RUN("run", s, "--recompute", "full", "--recompute", "none");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv run: takes one --recompute (verify-recompute takes several)"));
    run_free(&r);
    r = RUN("run", s, "--recompute", "2:layers");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "ppv run: --recompute '2:layers': layers needs a count of 1 or more "
                               "layers a segment\n(run 'ppv help run' for usage)\n");
    run_free(&r);
}

static void test_junit_of_a_comparison_has_one_case_per_dataset(void **state) {
    (void)state;
    char *xml = tmp_path("replay.xml");
    const char *golden = PPV_GOLDEN_DIR "/train_zbv_p2_m4_recompute.h5";
    run_result r = RUN("replay", golden, "--json", "--junit", xml);
    assert_int_equal(r.code, 0);
    long long datasets = json_int(r.out, "datasets");
    run_free(&r);
    assert_true(datasets > 10);
    char *x = slurp(xml);
    assert_int_equal(count(x, "<testcase "), datasets);
    assert_int_equal(count(x, "<failure "), 0);
    assert_non_null(strstr(x, "name=\"/training/loss\"/>"));
    free(x);
    /* one flipped bit: one dataset fails, and says how */
    r = RUN("replay", golden, "--perturb", "--junit", xml);
    assert_int_equal(r.code, 1);
    run_free(&r);
    x = slurp(xml);
    assert_int_equal(count(x, "<testcase "), datasets);
    assert_int_equal(count(x, "<failure "), 1);
    assert_non_null(strstr(x, "<failure message=\"1 of "));
    free(x);
    /* diff: every dataset, plus what differs in structure */
    char *s = gen_file("d.csv", "1f1b", "2", "2");
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s", tmp_path("a.h5"));
    snprintf(b, sizeof b, "%s", tmp_path("b.h5"));
    r = RUN("record", a, s, "--seed", "1");
    run_free(&r);
    r = RUN("record", b, s, "--seed", "2");
    run_free(&r);
    r = RUN("diff", a, b, "--json", "--junit", xml);
    assert_int_equal(r.code, 1);
    datasets = json_int(r.out, "datasets");
    run_free(&r);
    x = slurp(xml);
    assert_int_equal(count(x, "<testcase "), datasets + 1);
    assert_int_equal(count(x, "<failure "), 1);
    assert_non_null(strstr(
        x, "name=\"structure: /\">\n      <failure message=\"attribute policy_seed: 1 vs 2\""));
    free(x);
}

static void test_man_pages_come_from_the_help(void **state) {
    (void)state;
    run_result r = RUN("man", "check");
    assert_int_equal(r.code, 0);
    assert_memory_equal(r.out, ".TH PPV-CHECK 1 ", 16);
    assert_non_null(strstr(r.out, "\n.SH OPTIONS\n"));
    assert_non_null(strstr(r.out, "\\fB\\-\\-semantics\\fR \\fIS\\fR\n"));
    assert_non_null(strstr(r.out, "\n.SH EXIT STATUS\n"));
    run_free(&r);
    r = RUN("man");
    assert_int_equal(r.code, 0);
    for (int k = 0; commands[k]; k++) {
        char ref[64];
        snprintf(ref, sizeof ref, ".BR ppv\\-%s (1)\n", commands[k]);
        assert_non_null(strstr(r.out, ref));
    }
    run_free(&r);
    r = RUN("man", "nope");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

/* Standard output on a full disk (/dev/full): the output is lost, so the
 * command says so and exits 2, whether the loss shows while it writes (a
 * large output) or only when main flushes (a small one); a command that
 * had found a problem keeps its exit 1. */
static void test_lost_standard_output_is_exit_2_with_the_reason(void **state) {
    (void)state;
    if (access("/dev/full", W_OK) != 0) skip();
    char *s = gen_file("full.csv", "1f1b", "4", "8");
    const char *const gen_small[] = {"gen", "1f1b", "-p", "4", "-m", "8", NULL};
    const char *const gen_large[] = {"gen", "1f1b", "-p", "64", "-m", "512", NULL}; /* > buffer */
    const char *const gen_native[] = {"gen", "1f1b",     "-p",     "4", "-m",
                                      "8",   "--format", "native", NULL};
    const char *const check_json[] = {"check", s, "--json", NULL};
    const char *const show[] = {"show", s, NULL};
    const char *const version[] = {"version", NULL};
    const char *const *const cases[] = {gen_small,  gen_large, gen_native,
                                        check_json, show,      version};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_result r = run_io(NULL, "/dev/full", cases[k]);
        char want[128];
        snprintf(want, sizeof want,
                 "ppv %s: cannot write standard output: No space left on device\n", cases[k][0]);
        if (r.code != 2 || strcmp(r.err, want) != 0)
            fail_msg("case %zu, ppv %s > /dev/full: exit %d, stderr '%s'", k, cases[k][0], r.code,
                     r.err);
        run_free(&r);
    }
    run_result r = RUN_TO_FULL("check", data_path("rendezvous_only.csv"));
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err,
                        "ppv check: cannot write standard output: No space left on device\n");
    run_free(&r);
}

/* Runs `ppv record OUT SCHEDULE --layers 8 --width 64` with writes limited
 * to limit bytes per file (0: no limit; SIGXFSZ ignored, so a write past it
 * fails with EFBIG as on a full disk). Returns the exit status (-1 if it
 * died by a signal) and its stderr in err (malloc'd). */
static int record_limited(const char *out, const char *schedule, long limit, char **err) {
    char errp[4200];
    snprintf(errp, sizeof errp, "%s/record_errXXXXXX", tmp_dir());
    int fe = mkstemp(errp);
    assert_true(fe >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fe, 2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        signal(SIGXFSZ, SIG_IGN);
        if (limit) setrlimit(RLIMIT_FSIZE, &(struct rlimit){(rlim_t)limit, (rlim_t)limit});
        execl(PPV_BIN, PPV_BIN, "record", out, schedule, "--layers", "8", "--width", "64",
              (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(fe);
    *err = slurp(errp);
    unlink(errp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Entries of dir other than . and .. */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A golden that cannot be written (a full disk, a size limit) is exit 2
 * with the OS's reason and leaves nothing, never a crash: HDF5 1.10 used
 * to crash at exit after the failed close (exit 139). */
static void test_record_on_a_full_disk_is_exit_2_and_leaves_nothing(void **state) {
    (void)state;
    char *s = gen_file("full.csv", "1f1b", "4", "8");
    char dir[4200], out[4300], want[4500], *err = NULL;
    snprintf(dir, sizeof dir, "%s/limited", tmp_dir());
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(out, sizeof out, "%s/out.h5", dir);
    assert_int_equal(record_limited(out, s, 64 << 10, &err), 2);
    snprintf(want, sizeof want, "ppv record: %s: cannot write the golden file: File too large\n", out);
    assert_string_equal(err, want);
    free(err);
    assert_int_equal(entries(dir), 0);
    /* a real full disk, where this test may mount one (root in its own mount namespace) */
    snprintf(dir, sizeof dir, "%s/tmpfs", tmp_dir());
    assert_int_equal(mkdir(dir, 0700), 0);
    if (mount("ppv-test", dir, "tmpfs", 0, "size=1m") != 0) return; /* the limit above stands in */
    snprintf(out, sizeof out, "%s/out.h5", dir);
    int code = record_limited(out, s, 0, &err);
    int left = entries(dir);
    assert_int_equal(umount(dir), 0);
    assert_int_equal(code, 2);
    snprintf(want, sizeof want, "ppv record: %s: cannot write the golden file: No space left on device\n", out);
    assert_string_equal(err, want);
    free(err);
    assert_int_equal(left, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_command_has_its_own_help_three_ways),
        cmocka_unit_test(test_every_option_a_help_lists_is_taken_by_its_command),
        cmocka_unit_test(test_every_option_text_is_printed_whole),
        cmocka_unit_test(test_options_a_command_does_not_honour_are_refused),
        cmocka_unit_test(test_every_option_reads_its_value_by_its_declaration),
        cmocka_unit_test(test_json_is_checked_strictly_and_huge_costs_are_refused),
        cmocka_unit_test(test_an_empty_schedule_and_unusable_costs_are_refused_everywhere),
        cmocka_unit_test(test_version_has_three_spellings),
        cmocka_unit_test(test_golden_commands_load_their_module_and_others_do_not),
        cmocka_unit_test(test_dash_reads_the_schedule_from_standard_input),
        cmocka_unit_test(test_record_honours_json_trace_out_and_perturb),
        cmocka_unit_test(test_sizes_beyond_memory_are_refused_before_work),
        cmocka_unit_test(test_gen_auto_command),
        cmocka_unit_test(test_check_model_bytes_and_mem_cap),
        cmocka_unit_test(test_gen_auto_mem_cap_in_bytes),
        cmocka_unit_test(test_output_files_follow_the_umask),
        cmocka_unit_test(test_errors_start_with_ppv_and_give_the_os_reason),
        cmocka_unit_test(test_lost_standard_output_is_exit_2_with_the_reason),
        cmocka_unit_test(test_progress_shows_only_on_a_terminal_and_not_with_json),
        cmocka_unit_test(test_junit_has_one_case_per_check_and_fails_what_failed),
        cmocka_unit_test(test_junit_of_a_comparison_has_one_case_per_dataset),
        cmocka_unit_test(test_man_pages_come_from_the_help),
        cmocka_unit_test(test_record_on_a_full_disk_is_exit_2_and_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
