// A fresh directory under /tmp for one unit test, removed with everything in it when the test
// ends: for tests whose subject writes files (adapter processes, MCP servers, their logs).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace remit::test {

struct TempDir {
    std::string path;
    TempDir() {
        char pattern[] = "/tmp/remit-unit-XXXXXX";
        const char* made = ::mkdtemp(pattern);
        path = made ? made : "";
    }
    ~TempDir() {
        std::error_code ec;
        if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return path + "/" + name; }
};

}  // namespace remit::test
