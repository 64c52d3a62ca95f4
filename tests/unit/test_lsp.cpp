// Unit tests for the language server (session/lsp_text.h, session/lsp_server.h,
// session/lsp_analysis.h): the mapping between byte offsets, compiler spans and LSP positions in
// every position encoding, the base protocol's framing on malformed input, file URIs, the server's
// answers to messages that are not what they should be, and the checker facts hover and code lenses
// show. The server as an editor meets it is tested by tests/editor/test_lsp.mjs.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/driver.h"
#include "session/lsp_analysis.h"
#include "session/lsp_server.h"
#include "session/lsp_text.h"

#ifndef REMIT_SOURCE_DIR
#define REMIT_SOURCE_DIR "/work/main"
#endif

using namespace remit;
using namespace remit::lsp;

namespace {

// "a😀b\r\nçx\rz\n": a surrogate pair in UTF-16, a two-byte letter, a CRLF and a lone CR (a line
// break for LSP, not for the compiler).
const std::string kMixed = "a\xF0\x9F\x98\x80" "b\r\n\xC3\xA7x\rz\n";

// A byte source over a string, `chunk` bytes at a time (framing must not depend on read sizes).
ReadBytes stringReader(std::string text, size_t chunk = 7) {
    auto state = std::make_shared<std::pair<std::string, size_t>>(std::move(text), 0);
    return [state, chunk](char* buffer, size_t size) -> size_t {
        size_t n = std::min({size, chunk, state->first.size() - state->second});
        std::copy_n(state->first.data() + state->second, n, buffer);
        state->second += n;
        return n;
    };
}

std::string framed(const std::string& body) { return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body; }

// Runs the server on `input` and returns every message it wrote, parsed, and its exit code.
std::vector<Json> serve(const std::string& input, int* exitCode = nullptr) {
    std::string output;
    int code = runServer(stringReader(input, 13), [&](std::string_view bytes) {
        output.append(bytes);
        return true;
    });
    if (exitCode) *exitCode = code;
    std::vector<Json> messages;
    FrameReader reader(stringReader(output, 4096));
    for (Frame f = reader.next(); f.kind != Frame::Kind::End; f = reader.next()) {
        REQUIRE(f.kind == Frame::Kind::Message);
        messages.push_back(Json::parse(f.body));
    }
    return messages;
}

const Json* replyTo(const std::vector<Json>& messages, const Json& id) {
    for (const Json& m : messages)
        if (m.contains("id") && m["id"] == id && !m.contains("method")) return &m;
    return nullptr;
}

std::string request(int id, const std::string& method, const Json& params = Json::object()) {
    return framed(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump());
}
std::string notification(const std::string& method, const Json& params = Json::object()) {
    return framed(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}}.dump());
}

}  // namespace

TEST_CASE("lsp positions: UTF-16 by default, UTF-8 and UTF-32 when negotiated") {
    DocumentText doc(kMixed);
    CHECK(doc.lspLineCount() == 4);  // CRLF and the lone CR both end a line
    // 'b' is after one BMP character and one surrogate pair.
    size_t b = kMixed.find('b');
    CHECK(doc.positionOf(b, PositionEncoding::Utf16) == Position{0, 3});
    CHECK(doc.positionOf(b, PositionEncoding::Utf8) == Position{0, 5});
    CHECK(doc.positionOf(b, PositionEncoding::Utf32) == Position{0, 2});
    CHECK(doc.offsetOf({0, 3}, PositionEncoding::Utf16) == b);
    CHECK(doc.offsetOf({0, 5}, PositionEncoding::Utf8) == b);
    CHECK(doc.offsetOf({0, 2}, PositionEncoding::Utf32) == b);
    // 'x' after the two-byte ç on line 1.
    size_t x = kMixed.find('x');
    CHECK(doc.positionOf(x, PositionEncoding::Utf16) == Position{1, 1});
    CHECK(doc.positionOf(x, PositionEncoding::Utf8) == Position{1, 2});
    // 'z' is on LSP line 2 (after the lone CR) but on the compiler's line 2 too only by '\n'.
    size_t z = kMixed.find('z');
    CHECK(doc.positionOf(z, PositionEncoding::Utf16) == Position{2, 0});
    uint32_t line = 0, col = 0;
    doc.spanPointOf({2, 0}, PositionEncoding::Utf16, line, col);
    CHECK(line == 2);
    CHECK(col == 4);  // ç, x, the CR (whitespace to the lexer), z
    CHECK(doc.offsetOfSpanPoint(2, 4) == z);
}

TEST_CASE("lsp positions: out-of-range and split positions are clamped, never trusted") {
    DocumentText doc(kMixed);
    // Past the end of a line: the line's end (before its CRLF).
    CHECK(doc.offsetOf({0, 999}, PositionEncoding::Utf16) == kMixed.find('\r'));
    // Past the last line: the end of the document.
    CHECK(doc.offsetOf({99, 0}, PositionEncoding::Utf16) == kMixed.size());
    // Inside the surrogate pair (UTF-16 unit 2 of 1..2) or inside the emoji's UTF-8 bytes: its start.
    CHECK(doc.offsetOf({0, 2}, PositionEncoding::Utf16) == 1);
    CHECK(doc.offsetOf({0, 3}, PositionEncoding::Utf8) == 1);
    // An offset inside a sequence, or between CR and LF, maps to a real position.
    CHECK(doc.positionOf(2, PositionEncoding::Utf16) == Position{0, 1});
    CHECK(doc.positionOf(kMixed.find('\n'), PositionEncoding::Utf16) == Position{0, 4});
    CHECK(doc.positionOf(kMixed.size() + 5, PositionEncoding::Utf16) == Position{3, 0});
    // Empty text.
    DocumentText empty;
    CHECK(empty.offsetOf({3, 3}, PositionEncoding::Utf16) == 0);
    CHECK(empty.positionOf(0, PositionEncoding::Utf8) == Position{0, 0});
    CHECK(empty.rangeOf(Span{1, 1, 1, 5}, PositionEncoding::Utf16) == Range{{0, 0}, {0, 0}});
}

TEST_CASE("lsp positions: compiler spans count code points and map to ranges") {
    DocumentText doc("let s = \"\xF0\x9F\x98\x80\"\nlet t = 1\n");
    // The string literal spans columns 9..12 (3 code points: quote, emoji, quote).
    Range r = doc.rangeOf(Span{1, 9, 1, 12}, PositionEncoding::Utf16);
    CHECK(r == Range{{0, 8}, {0, 12}});
    CHECK(doc.rangeOf(Span{1, 9, 1, 12}, PositionEncoding::Utf8) == Range{{0, 8}, {0, 14}});
    // A multi-line span, and one whose end column runs past its line.
    CHECK(doc.rangeOf(Span{1, 1, 2, 4}, PositionEncoding::Utf16) == Range{{0, 0}, {1, 3}});
    CHECK(doc.rangeOf(Span{2, 5, 2, 99}, PositionEncoding::Utf16) == Range{{1, 4}, {1, 9}});
    CHECK(doc.rangeOf(Span{}, PositionEncoding::Utf16) == Range{});
}

TEST_CASE("lsp positions: incremental edits") {
    DocumentText doc("fn main() {\n  return 1\n}\n");
    size_t begin = doc.offsetOf({1, 9}, PositionEncoding::Utf16);
    size_t end = doc.offsetOf({1, 10}, PositionEncoding::Utf16);
    doc.replace(begin, end, "\"\xC3\xA9t\xC3\xA9\"");
    CHECK(doc.text() == "fn main() {\n  return \"\xC3\xA9t\xC3\xA9\"\n}\n");
    CHECK(doc.positionOf(doc.text().find('}'), PositionEncoding::Utf16) == Position{2, 0});
    doc.replace(100, 5, "x");  // clamped: appended at the end
    CHECK(doc.text().back() == 'x');
}

TEST_CASE("lsp framing: messages split at any byte, headers in any case, blank lines between") {
    std::string a = R"({"jsonrpc":"2.0","method":"a"})", b = R"({"jsonrpc":"2.0","method":"é"})";
    std::string input = framed(a) + "\r\n\r\ncontent-length: " + std::to_string(b.size()) +
                        "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\nX-Other: 1\r\n\r\n" + b;
    for (size_t chunk : {1, 3, 64}) {
        FrameReader reader(stringReader(input, chunk));
        Frame f1 = reader.next(), f2 = reader.next(), f3 = reader.next();
        CHECK(f1.kind == Frame::Kind::Message);
        CHECK(f1.body == a);
        CHECK(f2.kind == Frame::Kind::Message);
        CHECK(f2.body == b);
        CHECK(f3.kind == Frame::Kind::End);
    }
}

TEST_CASE("lsp framing: bad headers are problems, and the reader finds the next message") {
    std::string good = R"({"jsonrpc":"2.0","method":"ok"})";
    SUBCASE("no Content-Length") {
        FrameReader reader(stringReader("Content-Type: x\r\n\r\n" + framed(good)));
        Frame f = reader.next();
        CHECK(f.kind == Frame::Kind::Problem);
        CHECK(f.problem == "a message header without Content-Length");
        CHECK(reader.next().body == good);
    }
    SUBCASE("a body sent without a header, then a good message") {
        FrameReader reader(stringReader(good + "\r\n" + framed(good)));
        Frame f = reader.next();
        CHECK(f.kind == Frame::Kind::Problem);
        CHECK(f.problem.find("is not a header line") != std::string::npos);
        Frame g = reader.next();
        CHECK(g.kind == Frame::Kind::Message);
        CHECK(g.body == good);
    }
    SUBCASE("junk glued to the next header") {
        FrameReader reader(stringReader("garbage" + framed(good)));
        CHECK(reader.next().kind == Frame::Kind::Problem);
        CHECK(reader.next().body == good);
    }
    SUBCASE("a Content-Length that is not a number") {
        FrameReader reader(stringReader("Content-Length: -5\r\n\r\n" + framed(good)));
        Frame f = reader.next();
        CHECK(f.kind == Frame::Kind::Problem);
        CHECK(f.problem.find("is not a number of bytes") != std::string::npos);
        CHECK(reader.next().body == good);
    }
    SUBCASE("an over-long header line") {
        FrameReader reader(stringReader("X: " + std::string(100000, 'a') + "\r\n" + framed(good)));
        Frame f = reader.next();
        CHECK(f.kind == Frame::Kind::Problem);
        CHECK(f.problem.find("longer than") != std::string::npos);
        CHECK(reader.next().body == good);
    }
    SUBCASE("a message over the limit is read past; its id is still named") {
        std::string big = R"({"jsonrpc":"2.0","id":77,"method":"x","params":")" + std::string(5000, 'a') + "\"}";
        FrameReader reader(stringReader(framed(big) + framed(good), 1000), 1024);
        Frame f = reader.next();
        CHECK(f.kind == Frame::Kind::Problem);
        CHECK(f.problem.find("over the limit of 1024 bytes") != std::string::npos);
        CHECK(f.id == 77);
        CHECK(reader.next().body == good);
    }
    SUBCASE("the input ends inside a body") {
        FrameReader reader(stringReader("Content-Length: 50\r\n\r\n{\"a\":"));
        Frame f = reader.next();
        CHECK(f.kind == Frame::Kind::Problem);
        CHECK(f.problem == "the input ended inside a message body");
        CHECK(reader.next().kind == Frame::Kind::End);
    }
}

TEST_CASE("lsp uris: file URIs to paths and back") {
    CHECK(pathOfUri("file:///tmp/a%20b/h%C3%A9llo.rmt") == "/tmp/a b/héllo.rmt");
    CHECK(pathOfUri("file://localhost/x/../y.rmt") == "/y.rmt");
    CHECK(pathOfUri("FILE:///a#frag") == "/a");
    CHECK_FALSE(pathOfUri("untitled:Untitled-1"));
    CHECK_FALSE(pathOfUri("file://server/share/a.rmt"));
    CHECK_FALSE(pathOfUri("file:///a%00b"));
    CHECK_FALSE(pathOfUri("file:"));
    CHECK(uriOfPath("/tmp/a b/héllo.rmt") == "file:///tmp/a%20b/h%C3%A9llo.rmt");
    CHECK(pathOfUri(uriOfPath("/tmp/x:y/[z]%.rmt")) == "/tmp/x:y/[z]%.rmt");
}

TEST_CASE("lsp server: malformed and out-of-order messages get the error they call for") {
    std::string input;
    input += "Content-Type: nothing\r\n\r\n";                                       // no Content-Length
    input += framed("{not json");                                                     // not JSON
    input += framed(R"({"jsonrpc":"2.0","id":5,"method":tru})");                     // not JSON, id readable
    input += framed(std::string(300, '[') + std::string(300, ']'));                  // nested too deep
    input += request(1, "textDocument/hover");                                       // before initialize
    input += request(2, "initialize", {{"capabilities", Json::object()}});
    input += request(2, "initialize", {{"capabilities", Json::object()}});           // twice
    input += framed("[1, 2]");                                                       // a batch
    input += framed(R"({"jsonrpc":"2.0","id":3})");                                  // no method
    input += framed(R"({"jsonrpc":"1.0","id":4,"method":"shutdown"})");             // wrong version
    input += framed(R"({"jsonrpc":"2.0","id":{"a":1},"method":"shutdown"})");       // bad id
    input += framed(R"({"jsonrpc":"2.0","id":null,"method":"shutdown"})");          // null id
    input += request(6, "no/such/method");
    input += request(7, "textDocument/hover", {{"textDocument", {{"uri", "file:///nowhere.rmt"}}}});
    input += request(8, "textDocument/hover", {{"textDocument", 3}});
    input += framed(R"({"jsonrpc":"2.0","id":9,"method":"textDocument/hover","params":[1]})");
    input += notification("textDocument/didOpen", {{"textDocument", {{"uri", 42}}}});  // logged, not answered
    input += notification("$/unknownNotification");
    input += request(10, "shutdown");
    input += request(11, "textDocument/documentSymbol", {{"textDocument", {{"uri", "file:///a.rmt"}}}});
    input += notification("exit");
    int code = -1;
    std::vector<Json> out = serve(input, &code);
    CHECK(code == 0);  // exit after shutdown
    auto errorOf = [&](const Json& id) -> int {
        const Json* reply = replyTo(out, id);
        REQUIRE(reply);
        return reply->contains("error") ? (*reply)["error"]["code"].get<int>() : 0;
    };
    int parseErrors = 0;
    for (const Json& m : out)
        if (m.contains("error") && m["error"]["code"] == -32700) ++parseErrors;
    CHECK(parseErrors == 4);
    CHECK(errorOf(5) == -32700);
    CHECK(errorOf(1) == -32002);
    int initializeReplies = 0;
    for (const Json& m : out)
        if (m.contains("id") && m["id"] == 2) ++initializeReplies;
    CHECK(initializeReplies == 2);
    CHECK(errorOf(4) == -32600);
    CHECK(errorOf(3) == -32600);
    CHECK(errorOf(6) == -32601);
    CHECK(errorOf(7) == -32602);
    CHECK(errorOf(8) == -32602);
    CHECK(errorOf(9) == -32602);
    CHECK(errorOf(10) == 0);
    CHECK(errorOf(11) == -32600);  // after shutdown
    bool logged = false;
    for (const Json& m : out)
        if (m.value("method", "") == "window/logMessage" &&
            m["params"]["message"].get<std::string>().find("didOpen") != std::string::npos)
            logged = true;
    CHECK(logged);
}

TEST_CASE("lsp server: the end of input without shutdown exits 1; the encoding is negotiated") {
    int code = -1;
    std::vector<Json> out = serve(
        request(1, "initialize", {{"capabilities", {{"general", {{"positionEncodings", {"utf-16", "utf-8"}}}}}}}),
        &code);
    CHECK(code == 1);
    const Json* reply = replyTo(out, 1);
    REQUIRE(reply);
    CHECK((*reply)["result"]["capabilities"]["positionEncoding"] == "utf-8");
    out = serve(request(1, "initialize", {{"capabilities", Json::object()}}) + notification("exit"), &code);
    CHECK(code == 1);  // exit without shutdown
    CHECK((*replyTo(out, 1))["result"]["capabilities"]["positionEncoding"] == "utf-16");
}

TEST_CASE("lsp analysis: hover and code lenses show what the checker computed") {
    std::string dir = std::string(REMIT_SOURCE_DIR) + "/examples/hello";
    std::string path = dir + "/hello.rmt";
    std::string text;
    REQUIRE_FALSE(readSource(path, 1 << 20, text));
    std::unique_ptr<Analysis> a = analyse(path, path, text, [](const std::string&) { return nullptr; });
    REQUIRE(a->outcome.checked);
    const CheckResult& checked = *a->outcome.checked;
    const FunctionFacts& main = checked.facts.functions.at("main");
    CHECK(main.calls.at("web.fetch") == checked.manifest.resource("web.fetch")->maxCalls);
    CHECK(main.calls.at("llm") == checked.manifest.resource("llm")->maxCalls);
    CHECK(main.worstCaseCostUsd == checked.manifest.worstCaseCostUsd);
    CHECK(checked.facts.functions.at("greet").calls.empty());

    DocumentText doc(text);
    Query q{*a, doc, PositionEncoding::Utf16, "file:///hello.rmt", [](const std::string& f) { return "file://" + f; }};
    // Hover on `web.fetch` in `web.fetch(u) retry 1 else ""`.
    size_t at = text.find("web.fetch(u)");
    Json h = hover(q, doc.positionOf(at + 2, PositionEncoding::Utf16));
    std::string value = h["contents"]["value"];
    CHECK(value.find("capability web.fetch(url: Str deny private) -> Str") != std::string::npos);
    CHECK(value.find("**type** `Str`") != std::string::npos);
    CHECK(value.find("`untrusted` from") != std::string::npos);
    CHECK(value.find("web.fetch ≤ 2") != std::string::npos);
    // The lens over main: its worst case, and the budget.
    Json lenses = codeLenses(q);
    bool found = false;
    for (const Json& lens : lenses)
        if (lens["command"]["title"] == "worst case: llm ≤ 2, web.fetch ≤ 6 (agent Summarizer ≤ 2) · $0.0260 (budget $0.1000)")
            found = true;
    CHECK(found);
    // Go to definition of `web.fetch` lands in host.rmti.
    Json def = definition(q, doc.positionOf(at + 2, PositionEncoding::Utf16));
    CHECK(def["uri"].get<std::string>().find("host.rmti") != std::string::npos);
}

TEST_CASE("lsp analysis: facts are the union over calling contexts, and only recorded when asked") {
    const std::string host = "input secret tags private\n\ncapability web.fetch(url: Str) -> Str\n  tags untrusted\n"
                             "  cost 0.5\n  idempotent\n";
    const std::string program = "program p\nuses web.fetch\n\n"
                                "fn main(secret: Str) -> Str {\n"
                                "  let a = echo(secret)\n"
                                "  let b = echo(\"plain\")\n"
                                "  for i in range(3) {\n"
                                "    web.fetch(\"u\") retry 1 else \"\"\n"
                                "  }\n"
                                "  return a + b\n"
                                "}\n\n"
                                "fn echo(x: Str) -> Str {\n"
                                "  return x\n"
                                "}\n";
    CheckOptions options;
    CheckOutcome plain = checkSources("p.rmt", program, textSources("host.rmti", host), options);
    REQUIRE(plain.checked);
    CHECK(plain.checked->facts.exprs.empty());
    CHECK(plain.checked->facts.functions.empty());
    options.recordFacts = true;
    CheckOutcome o = checkSources("p.rmt", program, textSources("host.rmti", host), options);
    REQUIRE(o.checked);
    CHECK(o.diags.items().empty());
    const CheckFacts& facts = o.checked->facts;
    // `x` in echo is private in one context and untagged in the other: hover says it may be private.
    const ast::FnDecl* echo = o.program->findFn("echo");
    const ast::Expr& x = *echo->body->stmts[0]->value;
    REQUIRE(facts.exprs.count(static_cast<uint32_t>(x.id)));
    const auto& tags = facts.exprs.at(static_cast<uint32_t>(x.id)).tags;
    REQUIRE(tags.count("private"));
    CHECK(*tags.at("private").begin() == "input 'secret'");
    // Its use points at the parameter.
    REQUIRE(facts.definitions.count(static_cast<uint32_t>(x.id)));
    CHECK(facts.definitions.at(static_cast<uint32_t>(x.id)).line == 13);
    // The loop: 3 iterations of a call with one retry; main's worst case is the manifest's.
    const FunctionFacts& main = facts.functions.at("main");
    CHECK(main.calls.at("web.fetch") == 6);
    CHECK(main.calls.at("site:main#0") == 6);  // the one site makes them all
    CHECK(main.worstCaseCostUsd == o.checked->manifest.worstCaseCostUsd);
    CHECK(main.worstCaseCostUsd == 3.0);
    CHECK(facts.functions.at("echo").calls.empty());
    CHECK(worstCaseCostOf(o.checked->host, {{"web.fetch", 2}, {"agent:X", 9}, {"site:main#0", 2}, {"unknown", 4}}) == 1.0);
    // The manifest lists resources only.
    CHECK(o.checked->manifest.resources.size() == 1);
}
