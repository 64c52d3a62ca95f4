// The HTTP client (broker/http_client.h) against a local server (tests/e2e/adapters/fake_http.py):
// the exact request a server receives, responses of any status, connection reuse, the deadline,
// the size caps, broken and refused connections, invalid requests, concurrent use, and that no
// error message ever holds a header value, the URL's credentials or query, or the body.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "broker/http_client.h"
#include "fake_http.h"

using namespace remit;
using remit::testing::FakeHttp;

namespace {

// A port nothing listens on: bound, then closed.
int closedPort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("http client: a GET and a POST arrive exactly as sent") {
    FakeHttp server;
    HttpClient client;
    HttpRequest get;
    get.url = server.url("/v1/models?limit=2");
    get.headers = {{"X-Custom", "one two"}};
    HttpResult got = client.perform(get);
    REQUIRE_MESSAGE(got.ok(), got.error.message);
    CHECK(got.response->status == 200);
    REQUIRE(got.response->header("content-type"));
    CHECK(*got.response->header("Content-Type") == "application/json");

    HttpRequest post;
    post.method = "POST";
    post.url = server.url("/v1/chat/completions");
    post.headers = {{"Content-Type", "application/json"}, {"Authorization", "Bearer k"}};
    post.body = std::string(2 << 20, 'a');  // large enough that curl would ask for 100-continue
    HttpResult posted = client.perform(post);
    REQUIRE_MESSAGE(posted.ok(), posted.error.message);

    Json seen = server.requests();
    REQUIRE(seen.size() == 2);
    CHECK(seen[0]["method"] == "GET");
    CHECK(seen[0]["path"] == "/v1/models");
    CHECK(seen[0]["query"] == "limit=2");
    CHECK(seen[0]["headers"]["x-custom"] == "one two");
    CHECK(seen[0]["headers"]["user-agent"] == "remit");
    CHECK_FALSE(seen[0]["headers"].contains("content-type"));
    CHECK(seen[1]["method"] == "POST");
    CHECK(seen[1]["body"].get<std::string>().size() == post.body.size());
    CHECK(seen[1]["headers"]["content-type"] == "application/json");
    CHECK(seen[1]["headers"]["authorization"] == "Bearer k");
    CHECK_FALSE(seen[1]["headers"].contains("expect"));
}

TEST_CASE("http client: any status is a response, with its headers") {
    FakeHttp server;
    HttpClient client;
    server.script(Json::array({{{"status", 429}, {"headers", {{"Retry-After", "3"}}}, {"body", "slow down"}},
                               {{"status", 503}, {"json", {{"error", "overloaded"}}}}}));
    HttpRequest request;
    request.url = server.url("/x");
    HttpResult first = client.perform(request);
    REQUIRE(first.ok());
    CHECK(first.response->status == 429);
    CHECK(first.response->body == "slow down");
    REQUIRE(first.response->header("RETRY-AFTER"));
    CHECK(parseRetryAfter(*first.response->header("retry-after")) == 3000);
    HttpResult second = client.perform(request);
    REQUIRE(second.ok());
    CHECK(second.response->status == 503);
    CHECK(Json::parse(second.response->body)["error"] == "overloaded");
}

TEST_CASE("http client: connections are reused between requests") {
    FakeHttp server;
    HttpClient client;
    HttpRequest request;
    request.url = server.url("/a");
    HttpResult first = client.perform(request);
    HttpResult second = client.perform(request);
    HttpResult third = client.perform(request);
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    REQUIRE(third.ok());
    CHECK(first.response->newConnections == 1);
    CHECK(second.response->newConnections == 0);
    CHECK(third.response->newConnections == 0);
    Json seen = server.requests();
    REQUIRE(seen.size() == 3);
    CHECK(seen[0]["client_port"] == seen[1]["client_port"]);
    CHECK(seen[1]["client_port"] == seen[2]["client_port"]);
}

TEST_CASE("http client: the deadline covers the whole exchange") {
    FakeHttp server;
    HttpClient client;
    server.script(Json::array({{{"delay_ms", 3000}}}));
    HttpRequest request;
    request.url = server.url("/slow");
    request.timeoutMs = 200;
    HttpResult result = client.perform(request);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error.kind == HttpError::Kind::Timeout);
    CHECK(result.error.message == "GET " + server.url("/slow") + ": no complete response within 200 ms");
}

TEST_CASE("http client: bodies and headers over their caps are errors, decoded bodies included") {
    FakeHttp server;
    HttpClient client;
    server.script(Json::array({{{"big", 5000}}, {{"big", 5000}, {"gzip", true}}, {{"header_bytes", 300000}},
                               {{"big", 1000}}}));
    HttpRequest request;
    request.url = server.url("/big");
    request.maxResponseBytes = 1000;
    HttpResult plain = client.perform(request);
    REQUIRE_FALSE(plain.ok());
    CHECK(plain.error.kind == HttpError::Kind::TooLarge);
    CHECK(plain.error.message.find("larger than 1000 bytes") != std::string::npos);
    HttpResult zipped = client.perform(request);  // 5000 bytes decoded from a few dozen on the wire
    REQUIRE_FALSE(zipped.ok());
    CHECK(zipped.error.kind == HttpError::Kind::TooLarge);
    HttpResult headers = client.perform(request);
    REQUIRE_FALSE(headers.ok());
    CHECK(headers.error.kind == HttpError::Kind::TooLarge);
    HttpResult exact = client.perform(request);  // exactly at the cap is fine
    REQUIRE_MESSAGE(exact.ok(), exact.error.message);
    CHECK(exact.response->body.size() == 1000);
}

TEST_CASE("http client: truncated, closed and garbled responses are transfer errors") {
    FakeHttp server;
    HttpClient client;
    server.script(Json::array({{{"truncate", true}, {"body", "{\"partial\": "}}, {{"close", true}}, {{"garbage", true}},
                               {{"body", "fine"}}}));
    HttpRequest request;
    request.url = server.url("/broken");
    for (int i = 0; i < 3; ++i) {
        HttpResult result = client.perform(request);
        REQUIRE_FALSE(result.ok());
        CHECK(result.error.kind == HttpError::Kind::Transfer);
    }
    HttpResult after = client.perform(request);  // the client recovers: a fresh connection
    REQUIRE_MESSAGE(after.ok(), after.error.message);
    CHECK(after.response->body == "fine");
}

TEST_CASE("http client: a refused connection, and requests that are refused before sending") {
    HttpClient client;
    HttpRequest request;
    request.url = "http://127.0.0.1:" + std::to_string(closedPort()) + "/v1";
    HttpResult refused = client.perform(request);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error.kind == HttpError::Kind::Connect);

    for (std::string url : {"ftp://example.com/x", "file:///etc/passwd", "example.com/x", "http:///nohost"}) {
        request.url = url;
        HttpResult result = client.perform(request);
        REQUIRE_FALSE(result.ok());
        CHECK(result.error.kind == HttpError::Kind::Invalid);
    }
    request.url = "http://127.0.0.1:1/";
    request.headers = {{"X-Injected", "a\r\nHost: evil"}};
    CHECK(client.perform(request).error.kind == HttpError::Kind::Invalid);
    request.headers = {{"Bad Name", "x"}};
    CHECK(client.perform(request).error.kind == HttpError::Kind::Invalid);
    request.headers = {};
    request.method = "GET\r\n";
    CHECK(client.perform(request).error.kind == HttpError::Kind::Invalid);
}

TEST_CASE("http client: no error message holds a header value, credentials, the query or the body") {
    FakeHttp server;
    HttpClient client;
    const std::vector<std::string> secrets = {"sk-live-0123456789abcdef", "hunter2pass", "q-secret-777",
                                              "frag-secret-888", "body-secret-999", "xapikey-424242"};
    auto leaks = [&](const std::string& message) {
        for (const std::string& s : secrets)
            if (message.find(s) != std::string::npos) return true;
        return false;
    };
    HttpRequest request;
    request.method = "POST";
    request.headers = {{"Authorization", "Bearer sk-live-0123456789abcdef"}, {"x-api-key", "xapikey-424242"}};
    request.body = "{\"prompt\": \"body-secret-999\"}";
    request.timeoutMs = 300;
    const std::string tail = "/v1/x?key=q-secret-777#frag-secret-888";
    // Every way a request can fail.
    std::vector<std::string> urls = {
        "http://user:hunter2pass@127.0.0.1:" + std::to_string(closedPort()) + tail,
        "http://user:hunter2pass@127.0.0.1:" + std::to_string(server.port()) + tail,  // timeout
        "http://user:hunter2pass@127.0.0.1:" + std::to_string(server.port()) + tail,  // truncated
        "http://user:hunter2pass@127.0.0.1:" + std::to_string(server.port()) + tail,  // too large
        "gopher://user:hunter2pass@127.0.0.1" + tail,
        "http://user:hunter2pass@no-such-host.invalid" + tail,
    };
    server.script(Json::array({{{"delay_ms", 2000}}, {{"truncate", true}, {"body", "sk-live-0123456789abcdef"}},
                               {{"big", 100}}}));
    request.maxResponseBytes = 10;
    for (const std::string& url : urls) {
        request.url = url;
        HttpResult result = client.perform(request);
        REQUIRE_FALSE(result.ok());
        CHECK_MESSAGE(!leaks(result.error.message), result.error.message);
        CHECK(result.error.message.find("?") == std::string::npos);
    }
    CHECK(redactedUrl("https://u:p@api.example.com:8443/v1/messages?key=abc#f") ==
          "https://api.example.com:8443/v1/messages");
    CHECK(redactedUrl("not a url") == "<url>");
}

TEST_CASE("http client: urlHost is the host alone") {
    CHECK(urlHost("https://u:p@API.Example.com:8443/v1?key=abc#f") == "api.example.com");
    CHECK(urlHost("http://127.0.0.1:8000") == "127.0.0.1");
    CHECK(urlHost("http://[::1]:8000/v1") == "[::1]");
    CHECK(urlHost("http://[::1]/v1") == "[::1]");
    CHECK(urlHost("https://a@b@host.example/") == "host.example");
    CHECK(urlHost("not a url").empty());
    CHECK(urlHost("https:///path").empty());
}

TEST_CASE("http client: concurrent requests each get a connection") {
    FakeHttp server;
    HttpClient client;
    server.script(Json::array({{{"delay_ms", 200}}, {{"delay_ms", 200}}, {{"delay_ms", 200}}, {{"delay_ms", 200}}}));
    std::vector<int> statuses(4, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
        threads.emplace_back([&, i] {
            HttpRequest request;
            request.url = server.url("/c" + std::to_string(i));
            HttpResult result = client.perform(request);
            statuses[i] = result.ok() ? static_cast<int>(result.response->status) : -1;
        });
    for (std::thread& t : threads) t.join();
    CHECK(statuses == std::vector<int>{200, 200, 200, 200});
    CHECK(server.requests().size() == 4);
}

TEST_CASE("http client: Retry-After as seconds and as an HTTP date") {
    CHECK(parseRetryAfter("2") == 2000);
    CHECK(parseRetryAfter(" 0.5 ") == 500);
    CHECK(parseRetryAfter("0") == 0);
    CHECK(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT") == 0);  // in the past
    std::optional<uint64_t> future = parseRetryAfter("Fri, 01 Jan 2100 00:00:00 GMT");
    REQUIRE(future);
    CHECK(*future > 1000);
    CHECK_FALSE(parseRetryAfter("soon"));
    CHECK_FALSE(parseRetryAfter("-1"));
    CHECK_FALSE(parseRetryAfter(""));
    CHECK_FALSE(parseRetryAfter("3 seconds"));
}
