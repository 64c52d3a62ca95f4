// Optional shared libraries loaded on first use (dlopen) instead of linked: libcurl for the HTTP
// client (broker/http_client.cpp), libpq for the PostgreSQL store (session/pg.cpp) and OpenSSL's
// libcrypto for signed artifacts (bytecode/signature.cpp). Linking
// either one makes the dynamic loader map and relocate it and its dependencies (thirty libraries
// for libcurl, twenty for libpq) at every start of every tool, whether the run uses them or not;
// docs/performance.md ("Start-up") has the figures.
#pragma once

#include <initializer_list>
#include <string>

namespace remit {

// A loaded library, never unloaded (its functions are kept in process-wide tables).
class SharedLibrary {
public:
    // Opens the first of `names` that loads (RTLD_NOW | RTLD_LOCAL). When none does, the handle
    // is empty and error() says why: "`what` is not installed (…); install the `package` package".
    SharedLibrary(const char* what, std::initializer_list<const char*> names, const char* package);

    bool loaded() const { return handle_ != nullptr; }
    const std::string& error() const { return error_; }

    // Sets `out` to the function `name`; false (and `out` null) when the library lacks it.
    template <typename F>
    bool bind(const char* name, F& out) const {
        out = reinterpret_cast<F>(symbol(name));
        return out != nullptr;
    }

private:
    void* symbol(const char* name) const;

    void* handle_ = nullptr;
    std::string error_;
};

// The base of a table of one library's functions, loaded once per process by loadSharedLibraryApi
// (each user keeps it in a function-local static and never unloads it).
struct SharedLibraryApi {
    std::string error;  // why the library or one of its functions could not be loaded; empty when loaded

    bool loaded() const { return error.empty(); }
};

// Opens the library as SharedLibrary does, then lets `bindAll(lib, api)` bind every function of
// `Api` (derived from SharedLibraryApi); false from it means one is missing, which is reported as
// an older version of the package.
template <typename Api, typename BindAll>
Api loadSharedLibraryApi(const char* what, std::initializer_list<const char*> names, const char* package,
                         BindAll bindAll) {
    Api api;
    SharedLibrary lib(what, names, package);
    if (!lib.loaded())
        api.error = lib.error();
    else if (!bindAll(lib, api))
        api.error = std::string("the installed ") + what + " lacks a function Remit needs (an older version?); " +
                    "install the current " + package + " package";
    return api;
}

}  // namespace remit
