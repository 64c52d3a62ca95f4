// The colour decision and styles of cli/terminal.h.
#include "cli/terminal.h"

#include <unistd.h>

#include <cstdlib>

namespace remit::cli {

namespace {

enum class Choice { Auto, Always, Never };
Choice gChoice = Choice::Auto;

bool envSet(const char* name) {
    const char* value = std::getenv(name);
    return value && *value;
}

}  // namespace

void chooseColor(const std::string* when) {
    gChoice = !when || *when == "auto" ? Choice::Auto : *when == "always" ? Choice::Always : Choice::Never;
}

bool isTerminal(Stream stream) { return ::isatty(stream == Stream::Out ? STDOUT_FILENO : STDERR_FILENO) == 1; }

bool colorOn(Stream stream) {
    if (gChoice != Choice::Auto) return gChoice == Choice::Always;
    if (envSet("NO_COLOR")) return false;  // no-color.org
    if (const char* force = std::getenv("CLICOLOR_FORCE"); force && *force && std::string_view(force) != "0")
        return true;
    if (const char* term = std::getenv("TERM"); term && std::string_view(term) == "dumb") return false;
    return isTerminal(stream);
}

std::string paint(Stream stream, TextStyle style, std::string_view text) {
    return colorOn(stream) ? styledText(style, text) : std::string(text);
}

}  // namespace remit::cli
