/* program_path.c - paths relative to the running program's folder, the
 * way every layer finds ppv's modules (ppv_path_beside_program). */
#include <limits.h>
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
