// Runtime helpers shared by every phase: the diagnostics registry and renderer, number formatting.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>

#include "runtime/diagnostics.h"
#include "runtime/json_text.h"
#include "runtime/numfmt.h"
#include "runtime/shared_library.h"

using namespace remit;

TEST_CASE("diagnostics: the registry has unique, well-formed codes") {
    std::set<std::string_view> seen;
    for (DiagCode code : allDiagCodes()) {
        const DiagInfo& info = diagInfo(code);
        CHECK(info.code.size() == 5);
        CHECK(seen.insert(info.code).second);
        CHECK(parseDiagCode(info.code) == code);
        CHECK_FALSE(info.summary.empty());
    }
    CHECK_FALSE(parseDiagCode("E9999"));
}

TEST_CASE("diagnostics: text rendering is the prototype's layout") {
    SourceFile source("prog.rmt", "program p\nfn main() {\n  let x = 1 < 2 < 3\n}\n");
    Diagnostic d;
    d.code = DiagCode::E0100;
    d.message = "comparisons cannot be chained";
    d.file = "prog.rmt";
    d.span = Span{3, 17, 3, 18};
    d.notes = {"first note"};
    d.hint = "use 'and': a < b and b < c";
    CHECK(renderText(d, &source) ==
          "prog.rmt:3:17: error[E0100]: comparisons cannot be chained\n"
          "   3 |   let x = 1 < 2 < 3\n"
          "                       ^\n"
          "  note: first note\n"
          "  hint: use 'and': a < b and b < c");
    d.code = DiagCode::W0201;
    d.span = Span{2, 4, 2, 8};
    d.notes.clear();
    d.hint.clear();
    CHECK(renderText(d, &source) ==
          "prog.rmt:2:4: warning[W0201]: comparisons cannot be chained\n"
          "   2 | fn main() {\n"
          "          ^^^^");
    d.code = DiagCode::R0101;
    d.span = {};
    CHECK(renderText(d, nullptr) == "prog.rmt: runtime error[R0101]: comparisons cannot be chained");
}

TEST_CASE("diagnostics: JSON shape and de-duplication") {
    Diagnostic d;
    d.code = DiagCode::E0001;
    d.message = "m";
    d.file = "f.rmt";
    d.span = Span{1, 2, 1, 4};
    Json j = toJson(d);
    CHECK(j["code"] == "E0001");
    CHECK(j["severity"] == "error");
    CHECK(j["line"] == 1);
    CHECK(j["col"] == 2);
    CHECK(j["end_line"] == 1);
    CHECK(j["end_col"] == 4);
    CHECK(j["hint"].is_null());
    CHECK(j["notes"].is_array());
    CHECK_FALSE(j.contains("details"));
    DiagnosticList list(2);
    CHECK(list.add(d));
    CHECK_FALSE(list.add(d));
    d.span.col = 5;
    CHECK(list.add(d));
    d.span.col = 6;
    CHECK_FALSE(list.add(d));  // over the cap
    CHECK(list.errorCount() == 2);
}

TEST_CASE("numfmt: floats print as Python's repr") {
    CHECK(formatFloatRepr(612.0) == "612.0");
    CHECK(formatFloatRepr(0.1) == "0.1");
    CHECK(formatFloatRepr(1e16) == "1e+16");
    CHECK(formatFloatRepr(1e-5) == "1e-05");
    CHECK(formatFloatRepr(0.0001) == "0.0001");
    CHECK(formatFloatRepr(1.5e300) == "1.5e+300");
    CHECK(formatFloatRepr(-0.0) == "-0.0");
    CHECK(formatFloatRepr(123456789012345680.0) == "1.2345678901234568e+17");
    CHECK(formatFloatRepr(9999999999999998.0) == "9999999999999998.0");
    CHECK(formatFloatRepr(2.5) == "2.5");
    CHECK(formatFloatRepr(-3.75) == "-3.75");
    CHECK(formatFloatRepr(1.0 / 3) == "0.3333333333333333");
}

TEST_CASE("numfmt: dollar amounts show the digits they need") {
    CHECK(formatUsd(0) == "0.0000");
    CHECK(formatUsd(0.1) == "0.1000");
    CHECK(formatUsd(0.123456) == "0.1235");  // the prototype's 4 decimals, from a cent up
    CHECK(formatUsd(12.5) == "12.5000");
    CHECK(formatUsd(0.01) == "0.0100");
    CHECK(formatUsd(0.000036) == "0.000036");  // the prototype printed $0.0000
    CHECK(formatUsd(0.00003) == "0.00003");
    CHECK(formatUsd(0.0000361) == "0.000036");
    CHECK(formatUsd(0.00012) == "0.00012");
    CHECK(formatUsd(0.0012) == "0.0012");
    CHECK(formatUsd(0.1 + 0.2) == "0.3000");
    CHECK(formatUsd(3 * 0.000012) == "0.000036");
    CHECK(formatUsd(1e-9) == "0.000000001");
}

TEST_CASE("json text: lone surrogate escapes become U+FFFD, everything else is kept") {
    size_t n = 0;
    CHECK(remit::replaceLoneSurrogates(R"({"a": "x\ud83c"})", &n) == R"({"a": "x\ufffd"})");
    CHECK(n == 1);
    CHECK(remit::replaceLoneSurrogates(R"(["\ud83c\udf75", "\udc00\ud800"])", &n) ==
          R"(["\ud83c\udf75", "\ufffd\ufffd"])");
    CHECK(n == 2);
    // An escaped backslash is not an escape; a surrogate outside a string is left to the parser.
    CHECK(remit::replaceLoneSurrogates(R"(["\\ud83c"] \ud83c)", &n) == R"(["\\ud83c"] \ud83c)");
    CHECK(n == 0);
    // A high half at the very end, and a pair written with upper-case hex.
    CHECK(remit::replaceLoneSurrogates(R"("\uD83C)") == R"("\ufffd)");
    CHECK(remit::replaceLoneSurrogates(R"("\uD83C\uDF75")") == R"("\uD83C\uDF75")");
    CHECK(remit::replaceLoneSurrogates(R"("\ud83")") == R"("\ud83")");  // not an escape: the parser decides
    CHECK(remit::Json::parse(remit::replaceLoneSurrogates(R"("a\ud83cb")")) == "a\xef\xbf\xbd" "b");
}

TEST_CASE("json text: a raw NUL byte is not JSON") {
    std::string error;
    CHECK_FALSE(remit::parseJsonText("the inputs", std::string_view("{\"a\": 1}\0{", 10), error));
    CHECK(error == "invalid JSON in the inputs: it contains a NUL byte");
    CHECK(remit::parseJsonText("the inputs", "{\"a\": \"\\u0000\"}", error));  // an escaped NUL is fine
}

TEST_CASE("json text: a number no double can hold is an error, not an exception") {
    // nlohmann throws out_of_range (406) for `1e999`, not parse_error; it escaped every reader
    // (found by tests/fuzz/fuzz_model_reply.cpp and fuzz_approvals.cpp).
    std::string error;
    CHECK_FALSE(remit::parseJsonText("the inputs", R"({"a": 1e999})", error));
    CHECK(error == "invalid JSON in the inputs: a number is too large for a 64-bit float");
    CHECK_FALSE(remit::parseOrderedJsonText("the model output", "-1e400", error));
    CHECK(error == "invalid JSON in the model output: a number is too large for a 64-bit float");
    CHECK(remit::parseJsonText("the inputs", "[1e308, 18446744073709551616, 1e-999]", error));  // these fit

    // tests/fuzz/regressions/model_reply-* and approvals-*: the reproducers, read as text.
    const std::filesystem::path dir = std::filesystem::path(REMIT_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
    size_t replayed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        if (name.rfind("model_reply-", 0) != 0 && name.rfind("approvals-", 0) != 0) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CAPTURE(name);
        std::optional<remit::Json> parsed = remit::parseOrderedJsonText("a regression", text, error);
        if (!parsed) CHECK(error.rfind("invalid JSON in a regression", 0) == 0);
        ++replayed;
    }
    CHECK(replayed >= 2);
}

TEST_CASE("json text: the id of a message that does not parse") {
    CHECK(remit::recoverMessageId(R"({"jsonrpc": "2.0", "id": 41, "method": tru})") == 41);
    CHECK(remit::recoverMessageId(R"({"id" : "a\"b", "x": })") == "a\"b");
    CHECK(remit::recoverMessageId(R"({"params": {"id": 5}, "id": -3, )") == -3);
    CHECK(remit::recoverMessageId(R"({"params": {"id": 5}, "method": )").is_null());
    CHECK(remit::recoverMessageId(R"({"x": "\"id\": 9", "id": 2)") == 2);  // a string that looks like the key
    CHECK(remit::recoverMessageId(R"({"id": 1.5})").is_null());              // not an integer
    CHECK(remit::recoverMessageId(R"({"id": {"a": 1}})").is_null());
    CHECK(remit::recoverMessageId(R"([{"id": 1}])").is_null());               // a batch has no one id
    CHECK(remit::recoverMessageId("").is_null());
}

TEST_CASE("shared library: a missing one says what to install; a present one binds its functions") {
    remit::SharedLibrary missing("libnothing", {"libremit-no-such-library.so.0", "libremit-no-such-library.so"},
                                 "nothing-dev");
    CHECK_FALSE(missing.loaded());
    CHECK(missing.error().starts_with("libnothing is not installed ("));
    CHECK(missing.error().ends_with("); install the nothing-dev package"));
    int (*fn)(const char*) = reinterpret_cast<int (*)(const char*)>(1);
    CHECK_FALSE(missing.bind("atoi", fn));
    CHECK((fn == nullptr));

    remit::SharedLibrary libc("libc", {"libremit-no-such-library.so.0", "libc.so.6"}, "libc6");
    REQUIRE(libc.loaded());
    CHECK(libc.error().empty());
    REQUIRE(libc.bind("atoi", fn));
    CHECK(fn("42") == 42);
    CHECK_FALSE(libc.bind("remit_no_such_function", fn));

    // A table of functions: loaded when every one binds, else why not.
    struct LibcApi : remit::SharedLibraryApi {
        int (*atoi)(const char*) = nullptr;
    };
    auto bindAtoi = [](const remit::SharedLibrary& lib, LibcApi& api) { return lib.bind("atoi", api.atoi); };
    LibcApi api = remit::loadSharedLibraryApi<LibcApi>("libc", {"libc.so.6"}, "libc6", bindAtoi);
    REQUIRE(api.loaded());
    CHECK(api.atoi("7") == 7);
    LibcApi absent = remit::loadSharedLibraryApi<LibcApi>("libnothing", {"libremit-no-such-library.so.0"}, "nothing-dev",
                                                          bindAtoi);
    CHECK_FALSE(absent.loaded());
    CHECK(absent.error.ends_with("); install the nothing-dev package"));
    LibcApi older = remit::loadSharedLibraryApi<LibcApi>(
        "libc", {"libc.so.6"}, "libc6", [](const remit::SharedLibrary& lib, LibcApi& a) {
            return lib.bind("atoi", a.atoi) && lib.bind("remit_no_such_function", a.atoi);
        });
    CHECK_FALSE(older.loaded());
    CHECK(older.error == "the installed libc lacks a function Remit needs (an older version?); install the current "
                         "libc6 package");
}
