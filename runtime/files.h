// Reading the files a check or a run depends on — programs, host interfaces, policies, inputs,
// fixtures, approval stores, traces, API keys — as hostile input: only regular files are read, and
// never more than a limit. A path that names a directory, a FIFO, a device or a socket is refused
// with a message that says so, without reading it (a FIFO would block forever, /dev/zero never
// ends); a symlink is followed and judged by what it points to.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace remit {

// Why a file was not read: one line naming the path ("no such file: fixtures/run.json",
// "fixtures/run.json is a FIFO (named pipe), not a regular file").
struct FileProblem {
    std::string message;
    bool missing = false;  // the path does not exist (callers may treat that as "none yet")
};

// Reads the regular file at `path` into `text`. At most `maxBytes + 1` bytes are read, so
// `text.size() > maxBytes` tells the caller the file is over its limit without holding all of it.
[[nodiscard]] std::optional<FileProblem> readRegularFile(const std::string& path, size_t maxBytes, std::string& text);

// What `path` is when it exists but is not a regular file, after following symlinks: "a
// directory", "a FIFO (named pipe)", "a character device", "a block device", "a socket" or "not
// a regular file"; empty for a regular file or a path that does not exist.
std::string nonRegularKind(const std::string& path);

// "PATH is larger than N MiB, the limit for WHAT" (N in MiB when whole, else bytes).
std::string tooLargeMessage(const std::string& path, size_t maxBytes, const std::string& what);

}  // namespace remit
