// Sets glibc's heap up for a large front-end input: `remitc check` of a program of tens of
// thousands of lines touches about fifty times its size in small heap blocks, and those pages'
// faults were a third of the command's time (docs/performance.md, "Front end and checker").
#pragma once

#include <cstdint>

namespace remit {

// Does nothing below 16 KiB of input, after the first call, or off Linux/glibc; where a large block
// does not come from glibc's heap (a sanitizer's allocator) it stops before advising anything. It
// only ever changes where memory comes from, never what the program computes.
void prepareHeapForLargeInput(uintmax_t inputBytes);

}  // namespace remit
