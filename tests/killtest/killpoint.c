/* Kill points for tests/killtest/killtest.py: a library preloaded into remitvm (LD_PRELOAD) that
 * counts the system calls by which remitvm makes its state durable — write(2) or writev(2) to a
 * regular file, fsync(2), rename(2) — and SIGKILLs the process at a chosen one. remitvm has no hook for this: the
 * shim sits between it and libc, so the kill points are chosen from outside, deterministically
 * (the same run makes the same calls in the same order).
 *
 *   REMIT_KILLPOINT=N:MODE     at the N-th counted call (1-based): MODE "before" kills before the
 *                              call, "after" right after it, "mid" (writes of 2 bytes or more)
 *                              after writing the first half of the bytes — a record cut short.
 *   REMIT_KILLPOINT_LOG=PATH   appends one letter per counted call to PATH as it happens
 *                              (w write or writev, s fsync, r rename), so a driver learns a run's
 *                              calls.
 *
 * Only a process whose executable is named remitvm is affected; the adapters it starts inherit the
 * environment and load this library too, and pass through untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static int active = -1; /* -1: not decided yet */
static long target = 0;
static char mode[8] = "";
static long counted = 0;
static int logFd = -1;

static ssize_t (*realWrite)(int, const void*, size_t);
static ssize_t (*realWritev)(int, const struct iovec*, int);
static int (*realFsync)(int);
static int (*realRename)(const char*, const char*);

static void setup(void) {
    if (active >= 0) return;
    active = 0;
    /* The POSIX idiom for a function pointer from dlsym (ISO C has no such conversion). */
    *(void**)&realWrite = dlsym(RTLD_NEXT, "write");
    *(void**)&realWritev = dlsym(RTLD_NEXT, "writev");
    *(void**)&realFsync = dlsym(RTLD_NEXT, "fsync");
    *(void**)&realRename = dlsym(RTLD_NEXT, "rename");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    const char* base = strrchr(exe, '/');
    if (strcmp(base ? base + 1 : exe, "remitvm") != 0) return;
    active = 1;
    const char* spec = getenv("REMIT_KILLPOINT");
    if (spec && *spec) {
        char* colon = NULL;
        target = strtol(spec, &colon, 10);
        if (colon && *colon == ':') snprintf(mode, sizeof mode, "%s", colon + 1);
    }
    const char* log = getenv("REMIT_KILLPOINT_LOG");
    if (log && *log) logFd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void die(void) {
    kill(getpid(), SIGKILL);
    _exit(137); /* not reached */
}

/* Counts one call; returns 1 when this is the one to kill at. */
static int count(char kind) {
    ++counted;
    if (logFd >= 0) realWrite(logFd, &kind, 1);
    return target > 0 && counted == target;
}

ssize_t write(int fd, const void* data, size_t size) {
    setup();
    struct stat st;
    if (active != 1 || fd == logFd || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return realWrite(fd, data, size);
    if (!count('w')) return realWrite(fd, data, size);
    if (strcmp(mode, "before") == 0) die();
    if (strcmp(mode, "mid") == 0 && size >= 2) {
        realWrite(fd, data, size / 2);
        die();
    }
    ssize_t n = realWrite(fd, data, size);
    die();
    return n;
}

/* The trace writes a fixture call's two records with one writev: one write, as kill points go;
 * "mid" writes the first half of all its bytes. */
ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
    setup();
    struct stat st;
    if (active != 1 || fd == logFd || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return realWritev(fd, iov, iovcnt);
    if (!count('w')) return realWritev(fd, iov, iovcnt);
    if (strcmp(mode, "before") == 0) die();
    size_t total = 0;
    for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
    if (strcmp(mode, "mid") == 0 && total >= 2) {
        size_t left = total / 2;
        for (int i = 0; i < iovcnt && left > 0; ++i) {
            size_t part = iov[i].iov_len < left ? iov[i].iov_len : left;
            realWrite(fd, iov[i].iov_base, part);
            left -= part;
        }
        die();
    }
    ssize_t n = realWritev(fd, iov, iovcnt);
    die();
    return n;
}

int fsync(int fd) {
    setup();
    if (active != 1 || !count('s')) return realFsync(fd);
    if (strcmp(mode, "before") == 0) die();
    int rc = realFsync(fd);
    die();
    return rc;
}

int rename(const char* from, const char* to) {
    setup();
    if (active != 1 || !count('r')) return realRename(from, to);
    if (strcmp(mode, "before") == 0) die();
    int rc = realRename(from, to);
    die();
    return rc;
}
