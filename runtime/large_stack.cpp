#include "runtime/large_stack.h"

#include <exception>
#include <mutex>

#include <pthread.h>
#include <sys/mman.h>

namespace remit {

namespace {

struct Job {
    const std::function<void()>* work;
    std::exception_ptr error;
};

void* runJob(void* arg) {
    Job* job = static_cast<Job*>(arg);
    try {
        (*job->work)();
    } catch (...) {
        job->error = std::current_exception();
    }
    return nullptr;
}

// One reserved stack of kLargeStackBytes, kept for the life of the process: letting pthreads map
// and unmap 256 MiB for every check cost milliseconds (the unmap alone), a large share of a short
// `remitvm run`. Pages are committed only when touched; the lowest page is a guard.
struct CachedStack {
    std::mutex busy;  // one user at a time; others get a stack of their own
    void* base = nullptr;
    bool tried = false;
};

CachedStack& cachedStack() {
    static CachedStack stack;
    return stack;
}

void* reserveStack(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                   -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (mprotect(p, 4096, PROT_NONE) != 0) {
        munmap(p, bytes);
        return nullptr;
    }
    return p;
}

}  // namespace

void runOnLargeStack(const std::function<void()>& work, size_t stackBytes) {
    Job job{&work, nullptr};
    pthread_attr_t attr;
    pthread_t thread;
    CachedStack& cached = cachedStack();
    std::unique_lock<std::mutex> lock(cached.busy, std::defer_lock);
    bool useCached = stackBytes == kLargeStackBytes && lock.try_lock();
    if (useCached && !cached.tried) {
        cached.tried = true;
        cached.base = reserveStack(kLargeStackBytes);
    }
    useCached = useCached && cached.base;
    bool started = pthread_attr_init(&attr) == 0 &&
                   (useCached ? pthread_attr_setstack(&attr, cached.base, kLargeStackBytes)
                              : pthread_attr_setstacksize(&attr, stackBytes)) == 0 &&
                   pthread_create(&thread, &attr, runJob, &job) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        work();
        return;
    }
    pthread_join(thread, nullptr);
    if (job.error) std::rethrow_exception(job.error);
}

}  // namespace remit
