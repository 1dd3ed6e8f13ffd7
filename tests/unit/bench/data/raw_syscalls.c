/* A CPython extension module that is nothing but raw system calls, for the sandbox tests.
 *
 * What a hostile answer can build: written into its scratch directory and loaded under a
 * name the audit hook allows, its PyInit_ runs native code that no audit event sees. It
 * reads "cmds" (one call per line: label, number, up to six arguments, each an integer,
 * s:<string>, b:<size> for a zeroed buffer, or h:<hex bytes>) and writes "results" (label,
 * return value, errno). A number written i386:<n> is made through the 32-bit ABI (int
 * 0x80, x86_64 only, three integer arguments). Needs no Python.h: it returns NULL, and the import fails after the
 * calls were made, which is all an attacker needs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long argument(const char *tok, char **owned, int *count) {
    if (tok[0] == 's' && tok[1] == ':') {
        char *p = strdup(tok + 2);
        owned[(*count)++] = p;
        return (long)p;
    }
    if (tok[0] == 'b' && tok[1] == ':') {
        size_t n = strtoul(tok + 2, NULL, 0);
        char *p = calloc(1, n ? n : 1);
        owned[(*count)++] = p;
        return (long)p;
    }
    if (tok[0] == 'h' && tok[1] == ':') {
        size_t n = strlen(tok + 2) / 2;
        unsigned char *p = calloc(1, n + 1);
        for (size_t i = 0; i < n; i++) {
            unsigned v = 0;
            sscanf(tok + 2 + 2 * i, "%2x", &v);
            p[i] = (unsigned char)v;
        }
        owned[(*count)++] = (char *)p;
        return (long)p;
    }
    return strtol(tok, NULL, 0);
}

static long call(const char *number, const long *a) {
#if defined(__x86_64__)
    if (strncmp(number, "i386:", 5) == 0) {
        long r;
        __asm__ volatile("int $0x80"
                         : "=a"(r)
                         : "a"(strtol(number + 5, NULL, 0)), "b"(a[0]), "c"(a[1]), "d"(a[2])
                         : "memory");
        if (r < 0 && r > -4096) {
            errno = (int)-r;
            return -1;
        }
        return r;
    }
#endif
    return syscall(strtol(number, NULL, 0), a[0], a[1], a[2], a[3], a[4], a[5]);
}

void *PyInit_helper(void) {
    FILE *in = fopen("cmds", "r");
    FILE *out = fopen("results", "w");
    char line[4096];
    while (in && out && fgets(line, sizeof line, in)) {
        char *save = NULL;
        char *label = strtok_r(line, " \n", &save);
        char *number = label ? strtok_r(NULL, " \n", &save) : NULL;
        if (!number)
            continue;
        long a[6] = {0};
        char *owned[6];
        int count = 0;
        for (int i = 0; i < 6; i++) {
            char *tok = strtok_r(NULL, " \n", &save);
            if (!tok)
                break;
            a[i] = argument(tok, owned, &count);
        }
        errno = 0;
        long r = call(number, a);
        fprintf(out, "%s %ld %d\n", label, r, r < 0 ? errno : 0);
        fflush(out);
        for (int i = 0; i < count; i++)
            free(owned[i]);
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    return NULL;
}
