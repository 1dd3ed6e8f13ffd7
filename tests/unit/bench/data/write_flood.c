/* A CPython extension module that writes as fast as C can, for the scratch budget test.
 *
 * What a hostile answer can build (issue 38, hole 3): loaded from its scratch directory,
 * its PyInit_ writes files "f0", "f1", ... of 1 MiB each (RLIMIT_FSIZE stops a file there)
 * until 1 GiB is written or a write fails, with no audit event for any of it, then holds
 * them for a second so that a watcher outside can see how much reached the disk. Needs no
 * Python.h: it returns NULL and the import fails after the writes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char block[1 << 16];

void *PyInit_flood(void) {
    char name[32];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < 1024; i++) {
        snprintf(name, sizeof name, "f%d", i);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            break;
        for (int j = 0; j < 16; j++)
            if (write(fd, block, sizeof block) != (ssize_t)sizeof block)
                break;
        close(fd);
    }
    struct timespec hold = {1, 0};
    nanosleep(&hold, NULL);
    return NULL;
}
