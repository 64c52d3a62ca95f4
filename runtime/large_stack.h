// Runs work that recurses over user programs (the checker walks call chains in context) on a
// thread with a large stack, so a deep but legal program cannot overflow the default 8 MiB one.
// Only the pages actually touched are committed, so a large reservation costs nothing extra.
#pragma once

#include <cstddef>
#include <functional>

namespace remit {

constexpr size_t kLargeStackBytes = size_t(256) << 20;

// Calls `work` on a new thread with `stackBytes` of stack and waits for it; an exception thrown
// by `work` is rethrown here. Falls back to calling it directly if no thread can be created.
void runOnLargeStack(const std::function<void()>& work, size_t stackBytes = kLargeStackBytes);

// Recursion over an input of `size` units (AST nodes, declarations) nests at most about that deep.
// Small inputs run on the current stack: handing work to a thread and joining it costs more than
// checking a small program, and a start-up of a few milliseconds is the budget for `remitvm run`.
constexpr size_t kInlineRecursionUnits = 2000;
inline void runDeep(size_t size, const std::function<void()>& work) {
    if (size <= kInlineRecursionUnits) work();
    else runOnLargeStack(work);
}

}  // namespace remit
