// `remitc lsp`: starts the language server (session/lsp_server.h, docs/editors.md) on stdin and
// stdout. Only the transport is here: the bytes of file descriptors 0 and 1.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "cli/commands.h"
#include "session/lsp_server.h"

#ifndef REMIT_VERSION
#define REMIT_VERSION "0.1.0"
#endif

namespace remit::cli {

int lspCommand(std::string_view tool, Args& args) {
    // --stdio (declared in cli/command_table.cpp) is what editors' clients pass to ask for this
    // transport (vscode-languageclient does); it is the only one, so it changes nothing.
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: lsp takes no arguments; an editor starts it and speaks LSP on stdin and "
                           "stdout (docs/editors.md)\n",
                   tool);
        return kUsage;
    }
    std::signal(SIGPIPE, SIG_IGN);  // an editor that goes away ends the server at its next write
    lsp::ReadBytes read = [](char* buffer, size_t size) -> size_t {
        for (;;) {
            ssize_t n = ::read(STDIN_FILENO, buffer, size);
            if (n >= 0) return static_cast<size_t>(n);
            if (errno != EINTR) return 0;
        }
    };
    lsp::WriteBytes write = [](std::string_view bytes) {
        while (!bytes.empty()) {
            ssize_t n = ::write(STDOUT_FILENO, bytes.data(), bytes.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            bytes.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    };
    return lsp::runServer(read, write, lsp::ServerOptions{REMIT_VERSION});
}

}  // namespace remit::cli
