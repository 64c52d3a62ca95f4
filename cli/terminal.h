// Colour and terminals for the three tools: whether stdout and stderr get ANSI colour, and the few
// styles the tools use. Decided once per command (runTool) from --color auto|always|never, then
// NO_COLOR (any non-empty value turns colour off), then CLICOLOR_FORCE (any value but 0 turns it
// on where no terminal is), then whether the stream is a terminal (and TERM is not "dumb").
// Diagnostics are coloured by the renderer (RenderOptions::color); JSON is never coloured.
#pragma once

#include <string>
#include <string_view>

#include "runtime/diagnostics.h"

namespace remit::cli {

enum class Stream { Out, Err };

// `when` is --color's value (auto, always or never); null for auto.
void chooseColor(const std::string* when);
bool colorOn(Stream stream);
// Whether the stream is a terminal (for behaviour that only makes sense at one: --progress).
bool isTerminal(Stream stream);
// `text` in `style` when the stream is coloured, else unchanged.
std::string paint(Stream stream, TextStyle style, std::string_view text);

}  // namespace remit::cli
