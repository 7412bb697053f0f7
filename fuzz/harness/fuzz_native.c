/* fuzz_native.c - libFuzzer harness for ppv's native schedule reader
 * (ppv_schedule_parse_native, spec/schedule-format.md).
 *
 * The input is the file's bytes, unchanged. A refusal must leave *out NULL
 * and name the file first in its message; a schedule read must survive
 * what `ppv check` does with it, and must be written and read back to the
 * same programs and groups. ppv_schedule_parse_text, which picks the
 * format by the first word, must agree with the native reader.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ppv_engine.h"

#define NAME "fuzz.ppv"

/* Writes s in the native format and reads it back. */
static void native_round_trip(const ppv_schedule *s) {
    char err[1024] = "";
    size_t len = 0;
    char *text = harness_written(s, 0, &len, err, sizeof err);
    HARNESS_CHECK(text != NULL, "a schedule cannot be written in the native format");
    ppv_schedule *t = NULL;
    int rc = ppv_schedule_parse_native(text, len, "written.ppv", &t, err, sizeof err);
    HARNESS_CHECK(rc == 0, "ppv cannot read the native file it wrote: %s\n%s", err, text);
    harness_same_schedule(s, t, text);
    ppv_schedule_free(t);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ppv_schedule *s = (ppv_schedule *)1;
    char err[1024] = "";
    int rc = ppv_schedule_parse_native((const char *)data, size, NAME, &s, err, sizeof err);
    if (rc != 0) {
        HARNESS_CHECK(rc == -1 && s == NULL, "rc %d", rc);
        HARNESS_CHECK(strncmp(err, NAME ":", sizeof NAME) == 0,
                      "the message does not name the file: '%s'", err);
    } else {
        HARNESS_CHECK(s != NULL && s->nranks >= 1, "a schedule of no rank");
        harness_check_schedule(s, size);
        native_round_trip(s);
    }
    /* the loader's choice of format: native when the first word is
     * ppv-schedule, then it must say what the native reader said */
    ppv_schedule *u = NULL;
    char err2[1024] = "";
    size_t i = 0;
    while (i < size && isspace(data[i]))
        i++;
    if (size - i >= 12 && memcmp(data + i, "ppv-schedule", 12) == 0) {
        int rc2 = ppv_schedule_parse_text((const char *)data, size, NAME, PPV_DIALECT_AUTO, &u,
                                          err2, sizeof err2);
        HARNESS_CHECK(rc2 == rc && (rc == 0 || strcmp(err, err2) == 0),
                      "parse_text says %d '%s', parse_native %d '%s'", rc2, err2, rc, err);
        if (u) harness_same_schedule(s, u, "parse_text");
        ppv_schedule_free(u);
    }
    if (rc == 0) ppv_schedule_free(s);
    return 0;
}
