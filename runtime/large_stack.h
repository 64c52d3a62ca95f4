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

}  // namespace remit
