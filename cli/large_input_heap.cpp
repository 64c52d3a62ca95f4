// The heap set-up of `remitc check` for a large input (see large_input_heap.h and
// docs/performance.md, "Front end and checker").
#include "cli/large_input_heap.h"

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <climits>
#include <cstdint>
#include <cstdlib>

namespace remit {

namespace {

// Stored through volatile pointers so that the compiler keeps the allocations, which matter only
// for where they put the heap's free top.
void* volatile heapProbe = nullptr;
void* volatile heapFiller = nullptr;

}  // namespace

// A large program's front end and checker touch about 50 times its size in small heap blocks (the
// 300 KB bench program of docs/performance.md about 14 MiB), each 4 KiB page once, and those page
// faults were about a third of the command's time. For such an input the heap is set up much as
// glibc's `glibc.malloc.hugetlb=1` tunable would (a tunable is read only at start-up, so it cannot
// be set from here): one arena for every thread (the checker's thread would otherwise get an arena
// of its own), large buffers such as the tokens from the heap too rather than from mappings of
// their own, nothing returned to the kernel, and the heap extended ahead in one step, its free part
// starting on a 2 MiB boundary and advised for transparent huge pages. Reserving address space
// commits no memory, and where huge pages are off the advice changes nothing. Small inputs keep
// glibc's defaults: for a 2 KB program a zeroed 2 MiB page costs more than its 150 page faults
// (1.1 -> 1.3 ms, peak RSS 4.4 -> 6.3 MiB), from an 18 KB one on it pays (2.9 -> 2.4 ms).
void prepareHeapForLargeInput(uintmax_t inputBytes) {
#if defined(__linux__) && defined(__GLIBC__) && defined(MADV_HUGEPAGE)
    constexpr uintmax_t kLargeInput = 16 << 10;
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    constexpr size_t kReserve = size_t(64) << 20;
    static bool prepared = false;
    if (inputBytes < kLargeInput || prepared) return;
    prepared = true;
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest; also stops it adjusting itself
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, static_cast<int>(kReserve));
    // A block larger than the heap's free top makes glibc extend the heap by the block and the pad;
    // freed, the block is the start of the free top again. glibc writes a header just past the
    // block, so that one 2 MiB stretch, 30 MiB on, cannot be a huge page: a large block puts it
    // beyond what a program of tens of thousands of lines uses.
    constexpr size_t kProbe = size_t(30) << 20;  // under the mmap threshold set above
    auto* before = static_cast<char*>(sbrk(0));
    heapProbe = malloc(kProbe);
    void* probe = heapProbe;
    auto* after = static_cast<char*>(sbrk(0));
    auto at = reinterpret_cast<uintptr_t>(probe);
    bool fromHeap = probe != nullptr && after >= before + kReserve && at + kProbe <= reinterpret_cast<uintptr_t>(after);
    free(probe);
    mallopt(M_TOP_PAD, 128 << 10);  // glibc's default: later extensions, if any, in small steps
    if (!fromHeap) return;  // the heap could not grow: glibc mapped the block on its own
    // Only whole aligned 2 MiB stretches can be huge pages, and only while none of their 4 KiB pages
    // has been touched, so the advice comes first. Then a block that is never freed (nor written,
    // so it costs no memory) takes the free top up to the first boundary, so that the blocks
    // allocated after it, the token buffer first, are all in huge pages.
    uintptr_t from = (at + kHuge - 1) & ~(kHuge - 1);
    uintptr_t to = reinterpret_cast<uintptr_t>(after) & ~(kHuge - 1);
    if (to <= from + kHuge) return;
    (void)madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
    if (from - at >= 64) heapFiller = malloc(from - at);
#else
    (void)inputBytes;
#endif
}

}  // namespace remit
