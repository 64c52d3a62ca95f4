// The scriptable local HTTP server of tests/e2e/adapters/fake_http.py, started by a unit test:
// queue behaviours (status codes, delays, broken connections, provider-format answers), then read
// back the exact requests it received. Used by test_http_client.cpp and test_model_adapter.cpp.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/types.h>

#include <cstdio>
#include <string>

#include "broker/http_client.h"
#include "runtime/json_text.h"

namespace remit::testing {

class FakeHttp {
public:
    FakeHttp() {
        // exec: the shell is replaced by the server, so the pid it prints is the one to stop.
        std::string command = std::string("exec python3 ") + REMIT_SOURCE_DIR + "/tests/e2e/adapters/fake_http.py";
        pipe_ = ::popen(command.c_str(), "r");
        REQUIRE(pipe_);
        long pid = 0;
        REQUIRE(std::fscanf(pipe_, "%d %ld", &port_, &pid) == 2);
        pid_ = static_cast<pid_t>(pid);
    }
    ~FakeHttp() {
        if (pid_ > 0) ::kill(pid_, SIGTERM);
        if (pipe_) ::pclose(pipe_);
    }
    FakeHttp(const FakeHttp&) = delete;
    FakeHttp& operator=(const FakeHttp&) = delete;

    int port() const { return port_; }
    std::string url(const std::string& path = "/") const {
        return "http://127.0.0.1:" + std::to_string(port_) + path;
    }
    // Queues behaviours for the next requests (see fake_http.py).
    void script(const Json& behaviours) {
        HttpRequest request;
        request.method = "POST";
        request.url = url("/_script");
        request.headers = {{"Content-Type", "application/json"}};
        request.body = behaviours.dump();
        HttpResult result = control_.perform(request);
        REQUIRE_MESSAGE(result.ok(), result.error.message);
    }
    // The requests received since the last call.
    Json requests() {
        HttpRequest request;
        request.url = url("/_requests");
        HttpResult result = control_.perform(request);
        REQUIRE_MESSAGE(result.ok(), result.error.message);
        return Json::parse(result.response->body);
    }

private:
    FILE* pipe_ = nullptr;
    int port_ = 0;
    pid_t pid_ = -1;
    HttpClient control_;
};

}  // namespace remit::testing
