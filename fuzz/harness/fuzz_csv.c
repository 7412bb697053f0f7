/* fuzz_csv.c - libFuzzer harness for the PyTorch CSV reader
 * (ppv_schedule_parse_csv), both forms, every dialect.
 *
 * The input is the file's bytes, unchanged (seeds are real CSV files). It
 * is read in each dialect (auto, current, legacy). A refusal must leave
 * *out NULL and name the file first in its message; a schedule read in
 * auto must then survive what `ppv check` does with it, and must be
 * written (today's dialect) and read back to the same programs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ppv_engine.h"

#define NAME "fuzz.csv"

/* Writes s as PyTorch's CSV and reads it back in today's dialect (the one
 * written; auto could take a B and W file without I for the older one). */
static void csv_round_trip(const ppv_schedule *s) {
    char err[1024] = "";
    size_t len = 0;
    char *text = harness_written(s, 1, &len, err, sizeof err);
    HARNESS_CHECK(text != NULL, "a schedule read from CSV cannot be written as CSV: %s", err);
    ppv_schedule *t = NULL;
    int rc =
        ppv_schedule_parse_csv(text, len, "written.csv", PPV_DIALECT_CURRENT, &t, err, sizeof err);
    HARNESS_CHECK(rc == 0, "ppv cannot read the CSV it wrote: %s\n%s", err, text);
    harness_same_schedule(s, t, text);
    ppv_schedule_free(t);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const ppv_dialect dialects[] = {PPV_DIALECT_AUTO, PPV_DIALECT_CURRENT,
                                           PPV_DIALECT_LEGACY};
    for (int d = 0; d < 3; d++) {
        ppv_schedule *s = (ppv_schedule *)1;
        char err[1024] = "";
        int rc = ppv_schedule_parse_csv((const char *)data, size, NAME, dialects[d], &s, err,
                                        sizeof err);
        if (rc != 0) {
            HARNESS_CHECK(rc == -1 && s == NULL, "rc %d", rc);
            HARNESS_CHECK(strncmp(err, NAME ":", sizeof NAME) == 0,
                          "the message does not name the file: '%s'", err);
            continue;
        }
        HARNESS_CHECK(s != NULL && s->nranks >= 1, "a schedule of no rank");
        if (dialects[d] == PPV_DIALECT_AUTO) {
            harness_check_schedule(s, size);
            csv_round_trip(s);
        }
        ppv_schedule_free(s);
    }
    return 0;
}
