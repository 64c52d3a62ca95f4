// fmt's implementation, compiled once (REMIT_STATIC_DEPS builds; see the top-level CMakeLists.txt).
//
// Debian's libfmt-dev ships only the shared library, and linking it costs start-up time
// (relocations). Header-only fmt (FMT_HEADER_ONLY) avoids that but compiles fmt's implementation
// (format-inl.h) into every translation unit that includes <fmt/format.h>, which made a clean
// build slow. So every other file uses fmt's headers in the ordinary, non-header-only mode — they
// see declarations and `extern template`s — and this one file supplies the definitions: the
// non-template functions of format-inl.h (FMT_FUNC is empty outside header-only mode, so they get
// external linkage here) and the explicit instantiations that the headers declare extern, as
// fmt's own src/format.cc does for the installed version (9.x).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

#ifndef FMT_STATIC_THOUSANDS_SEPARATOR
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
#endif

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                                 locale_ref);

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
template FMT_API void buffer<wchar_t>::append(const wchar_t*, const wchar_t*);

}  // namespace detail
FMT_END_NAMESPACE
