/* cli.h - shared by the ppv command's source files (tools/ only). */
#ifndef PPV_CLI_H
#define PPV_CLI_H

#include <stdio.h>

#include "ppv_engine.h"

/* A file written to a temporary name beside its target and renamed into
 * place on success, so a failed run never leaves a partial file. */
typedef struct atomic_file {
    FILE *f;
    char path[4096];
    char tmp[4096];
} atomic_file;

int atomic_open(atomic_file *af, const char *path);
/* Flushes, syncs and renames; on failure removes the temporary file. */
int atomic_commit(atomic_file *af);
void atomic_abort(atomic_file *af);

/* show's outputs, from a checked report with its timeline. */
int render_svg(const ppv_check_report *rep, FILE *f);
int render_chrome_trace(const ppv_check_report *rep, FILE *f);
void render_text(const ppv_check_report *rep, FILE *f);

#endif
