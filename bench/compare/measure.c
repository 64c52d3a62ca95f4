/* measure: runs one command and reports its CPU time and peak resident set size; run.py compiles
 * and uses it for every timed run.
 *
 *     measure OUT TIMEOUT_SECONDS COMMAND [ARG...]
 *
 * writes "utime_us stime_us maxrss_kib wait_status" to OUT once COMMAND has ended (killed after
 * TIMEOUT_SECONDS). Why not Python's own wait4: Linux keeps a process's peak RSS across execve,
 * and a child forked (or vforked) from the Python runner starts with the runner's memory, so every
 * program would seem to need at least the runner's 10-17 MiB. This program is a few hundred KiB, so
 * the child it forks starts below any interpreter measured. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child = 0;

static void onAlarm(int sig) {
    (void)sig;
    if (child > 0) kill(child, SIGKILL);
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: measure OUT TIMEOUT_SECONDS COMMAND [ARG...]\n");
        return 2;
    }
    FILE* out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 2;
    }
    unsigned timeout = (unsigned)strtoul(argv[2], NULL, 10);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        fclose(out);
        execvp(argv[3], argv + 3);
        perror(argv[3]);
        _exit(127);
    }
    child = pid;
    struct sigaction sa = {0};
    sa.sa_handler = onAlarm;
    sigaction(SIGALRM, &sa, NULL);
    if (timeout > 0) alarm(timeout);
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("wait4");
            return 2;
        }
    }
    fprintf(out, "%lld %lld %ld %d\n", (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss, status);
    return fclose(out) == 0 ? 0 : 2;
}
