// See state_file.h.
#include "broker/state_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace remit {

StateFileLock::StateFileLock(const std::string& path, const std::string& what, std::string& error) {
    std::error_code ec;
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    std::string lockPath = path + ".lock";
    fd_ = ::open(lockPath.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    int rc = -1;
    if (fd_ >= 0)
        do rc = ::flock(fd_, LOCK_EX);
        while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        error = fmt::format("cannot lock {}: {} ({}); nothing was changed", what, lockPath, std::strerror(errno));
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
}

StateFileLock::~StateFileLock() {
    if (fd_ >= 0) ::close(fd_);
}

namespace {

bool writeAll(int fd, const std::string& text) {
    for (size_t done = 0; done < text.size();) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

}  // namespace

bool replaceStateFile(const std::string& path, const std::string& text, std::string& why) {
    std::filesystem::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    // One temporary name: writers are serialised by the lock, and one killed half-way leaves only
    // this file, which the next write truncates and reuses.
    std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && writeAll(fd, text) && ::fsync(fd) == 0;
    int savedErrno = errno;
    if (fd >= 0) ok = ::close(fd) == 0 && ok;
    if (ok) std::filesystem::rename(tmp, p, ec);
    if (!ok || ec) {
        std::filesystem::remove(tmp, ec);
        why = std::strerror(ok ? EIO : savedErrno);
        return false;
    }
    // Earlier versions used `<file>.tmp<pid>`; a killed writer left those behind.
    std::string stem = p.filename().string() + ".tmp";
    for (const auto& entry : std::filesystem::directory_iterator(p.has_parent_path() ? p.parent_path() : ".", ec)) {
        std::string name = entry.path().filename().string();
        if (name.size() > stem.size() && name.starts_with(stem) &&
            std::all_of(name.begin() + static_cast<std::ptrdiff_t>(stem.size()), name.end(),
                        [](char c) { return c >= '0' && c <= '9'; }))
            std::filesystem::remove(entry.path(), ec);
    }
    return true;
}

double unixNow() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace remit
