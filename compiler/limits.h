// Front-end limits (docs/diagnostics.md "Front-end limits (E0003)"): input that exceeds one is
// rejected with E0003 before it can cost a deep recursion or quadratic work.
#pragma once

#include <cstddef>

namespace remit {

struct FrontendLimits {
    size_t maxSourceBytes = 1 << 20;      // 1 MiB per file
    size_t maxLineBytes = 16 * 1024;      // 16 KiB per line
    size_t maxIdentifierLength = 256;     // characters
    size_t maxNesting = 128;              // open brackets and blocks, and prefix-operator chains
    size_t maxTokens = 1'000'000;
    size_t maxErrors = 20;                // syntax errors reported before the parser gives up
};

}  // namespace remit
