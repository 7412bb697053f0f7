/* program_path.c - paths relative to the running program's folder, the
 * way every layer finds ppv's modules (ppv_path_beside_program,
 * ppv_module_open). */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ppv_kernels.h"

int ppv_path_beside_program(const char *rel, char *out, size_t n) {
    char self[PATH_MAX];
    if (n) out[0] = '\0';
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || !n) return -1;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    int w = snprintf(out, n, "%s/%s", self, rel);
    if (w < 0 || (size_t)w >= n) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

void *ppv_module_open(const char *env, const char *installed, const char *built,
                      const char *prefixed, const char *name, int flags, char *opened,
                      size_t openedlen, int *there, char *why, size_t whylen) {
    char beside[PATH_MAX], in_build[PATH_MAX];
    ppv_path_beside_program(installed ? installed : "", beside, sizeof beside);
    ppv_path_beside_program(built ? built : "", in_build, sizeof in_build);
    const char *places[] = {installed ? beside : "", built ? in_build : "", prefixed, name};
    const char *set = env ? getenv(env) : NULL;
    if (set && *set) places[0] = set, places[1] = places[2] = places[3] = NULL;
    int any = 0;
    if (whylen) why[0] = '\0';
    void *h = NULL;
    for (size_t i = 0; i < sizeof places / sizeof places[0] && !h; i++) {
        if (!places[i] || !*places[i]) continue;
        if ((h = dlopen(places[i], flags))) {
            if (opened && openedlen) snprintf(opened, openedlen, "%s", places[i]);
            break;
        }
        const char *reason = dlerror();
        int exists = access(places[i], F_OK) == 0;
        if (whylen && (!why[0] || (exists && !any)))
            snprintf(why, whylen, "%s", reason ? reason : places[i]);
        any |= exists;
    }
    if (there) *there = any;
    return h;
}
