// Every registered diagnostic code is documented and tested (docs/diagnostics.md, "Coverage"),
// and so is every habit of another language (compiler/habits.def).
// For each code in runtime/diagnostics.def:
//   - docs/diagnostics.md names it in a heading or a table row;
//   - some test under tests/ mentions it: a golden .out file, an expectation comment in the checker
//     corpus (`# expect CODE`, `# expect-file CODE` in tests/check/**.rmt), an end-to-end script
//     (tests/e2e/*.py) or a unit test (tests/unit/*.cpp other than this file);
//   - some golden .out file under tests/golden/ shows it rendered, as `error[CODE]` (E codes; R
//     codes as `runtime error[CODE]`) or `warning[CODE]` (W codes): the text a model reads is
//     pinned for every code (tests/golden/render/ has one case per code).
// Runtime codes arrive with the VM and the broker. Until their tests exist they are listed below in
// kPendingRuntimeCodes, so the exemption is explicit and shrinks as the VM lands.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/habits.h"
#include "runtime/diagnostics.h"

using namespace remit;

namespace {

namespace fs = std::filesystem;

// Runtime codes without a test yet. Only R codes may be listed. When a code's tests land, remove
// it here: the test then requires its coverage like any other code's.
const std::set<std::string> kPendingRuntimeCodes = {};  // every runtime code is tested now

constexpr const char* kThisFile = "test_diagnostic_coverage.cpp";

fs::path sourceDir() { return fs::path(REMIT_SOURCE_DIR); }

std::string readFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::vector<std::string> splitLines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// `code` occurs in `text` as a whole word: not inside a longer code or identifier (E0100 is not
// found in E01000 or XE0100).
bool mentions(const std::string& text, const std::string& code) {
    auto isWordChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = text.find(code); at != std::string::npos; at = text.find(code, at + 1)) {
        bool startOk = at == 0 || !isWordChar(text[at - 1]);
        size_t end = at + code.size();
        bool endOk = end >= text.size() || !isWordChar(text[end]);
        if (startOk && endOk) return true;
    }
    return false;
}

// Codes that docs/diagnostics.md names in a heading (`### E0100 — ...`) or a table row
// (`| E0100 | ...`).
std::set<std::string> documentedCodes(const std::string& markdown) {
    static const std::regex codePattern("[EWR][0-9]{4}");
    std::set<std::string> out;
    for (const std::string& line : splitLines(markdown)) {
        size_t first = line.find_first_not_of(' ');
        if (first == std::string::npos || (line[first] != '#' && line[first] != '|')) continue;
        for (auto it = std::sregex_iterator(line.begin(), line.end(), codePattern); it != std::sregex_iterator(); ++it)
            if (mentions(line, it->str())) out.insert(it->str());
    }
    return out;
}

// Codes named by the checker corpus's expectation comments, as tests/check/run_corpus.py reads them.
std::set<std::string> expectedCodes(const std::string& text) {
    static const std::regex expectation(R"(#\s*expect(-file)?\s+((?:[EWR][0-9]{4}\s*,?\s*)+)\s*$)");
    static const std::regex codePattern("[EWR][0-9]{4}");
    std::set<std::string> out;
    for (const std::string& raw : splitLines(text)) {
        std::string line = raw;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::smatch m;
        if (!std::regex_search(line, m, expectation)) continue;
        std::string list = m[2].str();
        for (auto it = std::sregex_iterator(list.begin(), list.end(), codePattern); it != std::sregex_iterator(); ++it)
            out.insert(it->str());
    }
    return out;
}

bool hasExtension(const fs::path& path, const char* extension) { return path.extension() == extension; }

// Every test source that may show a code is covered, keyed by its path relative to the repository
// (so a failure can say where to look), with the text to search: for the checker corpus only its
// expectation comments count, elsewhere any mention does.
std::map<std::string, std::string> testSources() {
    std::map<std::string, std::string> out;
    const fs::path tests = sourceDir() / "tests";
    auto relative = [&](const fs::path& p) { return fs::relative(p, sourceDir()).generic_string(); };
    auto addFlat = [&](const fs::path& dir, const char* extension) {
        if (!fs::is_directory(dir)) return;
        for (const fs::directory_entry& e : fs::directory_iterator(dir))
            if (e.is_regular_file() && hasExtension(e.path(), extension) && e.path().filename() != kThisFile)
                out[relative(e.path())] = readFile(e.path());
    };
    auto addTree = [&](const fs::path& dir, const char* extension, bool onlyExpectations) {
        if (!fs::is_directory(dir)) return;
        for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
            if (!e.is_regular_file() || !hasExtension(e.path(), extension)) continue;
            std::string text = readFile(e.path());
            if (onlyExpectations) {
                std::string codes;
                for (const std::string& c : expectedCodes(text)) codes += c + "\n";
                text = codes;
            }
            out[relative(e.path())] = std::move(text);
        }
    };
    addTree(tests / "golden", ".out", false);
    addTree(tests / "check", ".rmt", true);
    addFlat(tests / "e2e", ".py");
    addFlat(tests / "unit", ".cpp");
    return out;
}

std::string codeOf(DiagCode code) { return std::string(diagInfo(code).code); }

}  // namespace

TEST_CASE("diagnostic coverage: the pending list holds only registered runtime codes") {
    for (const std::string& code : kPendingRuntimeCodes) {
        INFO("pending code " << code);
        std::optional<DiagCode> parsed = parseDiagCode(code);
        REQUIRE(parsed);
        CHECK(diagInfo(*parsed).severity == Severity::Runtime);
    }
}

TEST_CASE("diagnostic coverage: every registered code has a golden rendering") {
    std::string goldens;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(sourceDir() / "tests" / "golden"))
        if (e.is_regular_file() && hasExtension(e.path(), ".out")) goldens += readFile(e.path());
    REQUIRE_FALSE(goldens.empty());
    for (DiagCode code : allDiagCodes()) {
        const DiagInfo& info = diagInfo(code);
        std::string rendered =
            fmt::format("{}[{}]", info.severity == Severity::Warning ? "warning" : "error", info.code);
        CHECK_MESSAGE(goldens.find(rendered) != std::string::npos,
                      codeOf(code) << " (" << info.name << ") has no golden .out file under tests/golden/ showing '"
                                   << rendered << "'; add a case to tests/golden/render/");
    }
}

TEST_CASE("diagnostic coverage: docs/diagnostics.md documents every registered code") {
    const fs::path docPath = sourceDir() / "docs" / "diagnostics.md";
    REQUIRE_MESSAGE(fs::is_regular_file(docPath), "missing " << docPath.generic_string());
    std::set<std::string> documented = documentedCodes(readFile(docPath));
    std::set<std::string> registered;
    for (DiagCode code : allDiagCodes()) {
        std::string name = codeOf(code);
        registered.insert(name);
        CHECK_MESSAGE(documented.count(name),
                      name << " has no heading or table row in docs/diagnostics.md");
    }
    // The other way round: a documented code that is not registered is a typo or a stale section.
    for (const std::string& name : documented)
        CHECK_MESSAGE(registered.count(name),
                      "docs/diagnostics.md names " << name << ", which runtime/diagnostics.def does not register");
}

TEST_CASE("diagnostic coverage: every E and W code, and every R code not pending, has a test") {
    std::map<std::string, std::string> sources = testSources();
    REQUIRE_FALSE(sources.empty());
    for (DiagCode code : allDiagCodes()) {
        std::string name = codeOf(code);
        bool pending = kPendingRuntimeCodes.count(name) > 0;
        std::vector<std::string> where;
        for (const auto& [path, text] : sources)
            if (mentions(text, name)) where.push_back(path);
        if (pending) {
            // Not a failure: the list is the visible record of what the VM still owes.
            if (!where.empty())
                MESSAGE(name << " is pending, but " << where.front()
                             << " mentions it; remove it from kPendingRuntimeCodes once it is really tested");
            continue;
        }
        CHECK_MESSAGE(!where.empty(), name << " (" << diagInfo(code).name
                                           << ") is not mentioned by any golden .out file, tests/check expectation, "
                                              "tests/e2e script or unit test");
    }
}

// Habits from other languages (compiler/habits.def, docs/diagnostics.md "Habits from other
// languages"): every habit has a golden case tests/golden/check/habit_<id>.rmt (its id in
// snake_case) whose rendering shows the habit's code, and a row in the docs' table naming it.
TEST_CASE("diagnostic coverage: every habit of another language has a golden rendering and a docs row") {
    auto snake = [](std::string_view id) {
        std::string out;
        for (char c : id) {
            if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out += '_';
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        return out;
    };
    const std::string docs = readFile(sourceDir() / "docs" / "diagnostics.md");
    const fs::path goldens = sourceDir() / "tests" / "golden" / "check";
    for (const HabitInfo& h : allHabits()) {
        std::string name = "habit_" + snake(h.name);
        CAPTURE(name);
        CHECK(fs::exists(goldens / (name + ".rmt")));
        std::string out = readFile(goldens / (name + ".out"));
        bool shown = mentions(out, fmt::format("error[{}]", diagInfo(habitCode(h.trigger)).code)) ||
                     mentions(out, fmt::format("error[{}]", diagInfo(habitCode(h.trigger, true)).code)) ||
                     // a call habit as a statement (`print x`) or with a lambda (`filter(x => ...)`)
                     (h.trigger == HabitTrigger::Call && mentions(out, "error[E0100]"));
        CHECK(shown);
        CHECK(docs.find(fmt::format("| `{}` |", name)) != std::string::npos);
    }
}
