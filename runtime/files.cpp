// Reading regular files with a size limit (files.h).
#include "runtime/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace remit {

namespace {

std::string kindOf(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

FileProblem notRegular(const std::string& path, mode_t mode) {
    // Keep the wording short for the common mistake of naming a folder.
    if (S_ISDIR(mode)) return FileProblem{fmt::format("{} is a directory, not a file", path)};
    return FileProblem{fmt::format("{} is {}, not a regular file", path, kindOf(mode))};
}

}  // namespace

std::string nonRegularKind(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return {};
    return kindOf(st.st_mode);
}

std::optional<FileProblem> readRegularFile(const std::string& path, size_t maxBytes, std::string& text) {
    text.clear();
    // stat first, so that nothing special is even opened (opening some devices has effects);
    // then fstat the descriptor, since the path may have been replaced in between.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return FileProblem{fmt::format("no such file: {}", path), true};
        return FileProblem{fmt::format("cannot read {}: {}", path, std::strerror(errno))};
    }
    if (!S_ISREG(st.st_mode)) return notRegular(path, st.st_mode);
    // O_NONBLOCK: should a FIFO take the file's place after the stat, opening it does not wait
    // for a writer (the fstat below then refuses it).
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return FileProblem{fmt::format("no such file: {}", path), true};
        return FileProblem{fmt::format("cannot read {}: {}", path, std::strerror(errno))};
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    if (::fstat(fd, &st) != 0) return FileProblem{fmt::format("cannot read {}: {}", path, std::strerror(errno))};
    if (!S_ISREG(st.st_mode)) return notRegular(path, st.st_mode);
    // Reserve for the size the file has now, but never trust it for the limit: it may grow.
    if (st.st_size > 0) text.reserve(std::min<size_t>(static_cast<size_t>(st.st_size), maxBytes) + 1);
    char buffer[1 << 16];
    while (text.size() <= maxBytes) {
        size_t want = std::min(sizeof buffer, maxBytes + 1 - text.size());
        ssize_t n = ::read(fd, buffer, want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return FileProblem{fmt::format("cannot read {}: {}", path, std::strerror(errno))};
        if (n == 0) break;
        text.append(buffer, static_cast<size_t>(n));
    }
    return std::nullopt;
}

std::string tooLargeMessage(const std::string& path, size_t maxBytes, const std::string& what) {
    std::string limit = maxBytes % (size_t(1) << 20) == 0 ? fmt::format("{} MiB", maxBytes >> 20)
                                                          : fmt::format("{} bytes", maxBytes);
    return fmt::format("{} is larger than {}, the limit for {}", path, limit, what);
}

}  // namespace remit
