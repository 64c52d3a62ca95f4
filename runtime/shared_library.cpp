// See shared_library.h.
#include "runtime/shared_library.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace remit {

SharedLibrary::SharedLibrary(const char* what, std::initializer_list<const char*> names, const char* package) {
    for (const char* name : names) {
        handle_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (handle_) return;
    }
    const char* why = ::dlerror();
    error_ = fmt::format("{} is not installed ({}); install the {} package", what, why ? why : "not found", package);
}

void* SharedLibrary::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

}  // namespace remit
