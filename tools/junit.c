/* junit.c - JUnit XML for CI systems: one <testsuite> per command run, one
 * <testcase> per check made, a <failure> for each check that failed.
 *
 * The format is the de-facto one that Jenkins, GitLab, GitHub Actions
 * reporters and ctest read; the file is written atomically like every
 * other output.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void junit_init(junit *j, const char *suite) {
    memset(j, 0, sizeof *j);
    snprintf(j->suite, sizeof j->suite, "%s", suite);
}

/* Copies fmt's expansion into a malloc'd string, NULL on failure. */
static char *vformat(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

int junit_add(junit *j, const char *name, const char *failure_fmt, ...) {
    if (j->n == j->cap) {
        int cap = j->cap ? 2 * j->cap : 16;
        junit_case *nc = realloc(j->cases, (size_t)cap * sizeof *nc);
        if (!nc) return -1;
        j->cases = nc;
        j->cap = cap;
    }
    junit_case *c = &j->cases[j->n];
    c->name = strdup(name);
    c->failure = NULL;
    if (failure_fmt) {
        va_list ap;
        va_start(ap, failure_fmt);
        c->failure = vformat(failure_fmt, ap);
        va_end(ap);
        j->failures++;
    }
    if (!c->name || (failure_fmt && !c->failure)) {
        free(c->name);
        free(c->failure);
        return -1;
    }
    j->n++;
    return 0;
}

void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(ch < 0x20 && ch != '\n' && ch != '\t' ? ' ' : ch, f);
        }
    }
}

int junit_write(const junit *j, const char *path, char *err, size_t errlen) {
    atomic_file af;
    if (atomic_open(&af, path) < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, af.why);
        return -1;
    }
    FILE *f = af.f;
    fprintf(
        f,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"%d\" failures=\"%d\">\n",
        j->n, j->failures);
    fputs("  <testsuite name=\"", f);
    xml_text(f, j->suite);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"0\">\n", j->n, j->failures);
    for (int k = 0; k < j->n; k++) {
        fputs("    <testcase classname=\"", f);
        xml_text(f, j->suite);
        fputs("\" name=\"", f);
        xml_text(f, j->cases[k].name);
        if (!j->cases[k].failure) {
            fputs("\"/>\n", f);
            continue;
        }
        const char *msg = j->cases[k].failure;
        const char *nl = strchr(msg, '\n');
        fputs("\">\n      <failure message=\"", f);
        char first[512];
        snprintf(first, sizeof first, "%.*s", nl ? (int)(nl - msg) : (int)strlen(msg), msg);
        xml_text(f, first);
        fputs("\">", f);
        xml_text(f, msg);
        fputs("</failure>\n    </testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (atomic_commit(&af) < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, af.why);
        return -1;
    }
    return 0;
}

void junit_free(junit *j) {
    for (int k = 0; k < j->n; k++) {
        free(j->cases[k].name);
        free(j->cases[k].failure);
    }
    free(j->cases);
    memset(j, 0, sizeof *j);
}
