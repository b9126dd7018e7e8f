// Python's str operations as templates call them (str methods, jinja2's string filters, `%` and
// str.format), on UTF-8 text by code points. Case mapping is ASCII's (Python maps all of Unicode;
// chat templates change the case of role names and keywords, not of other scripts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/jinja-builtins.h"

namespace hearth::jinja::text {

// side: 1 left, 2 right, 3 both; chars nullptr = Python's whitespace.
std::string strip(std::string_view s, const std::string* chars, int side);
// str.split / str.rsplit (sep nullptr: runs of whitespace, empty parts dropped).
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit,
                               bool right);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string swapcase(std::string_view s);
std::string capitalize(std::string_view s);
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // jinja2's title filter
size_t count(std::string_view s, std::string_view sub);
// Code-point index of the first (or last) occurrence, -1 if none.
int64_t find(std::string_view s, std::string_view sub, bool right);
// isdigit, isalpha, isalnum, isspace, isupper, islower, isnumeric, isdecimal.
bool is_class(std::string_view s, std::string_view cls);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// zfill, center, ljust, rjust to `width` code points.
std::string pad(std::string_view s, int64_t width, std::string_view fill, std::string_view how);
size_t word_count(std::string_view s);
std::optional<int64_t> parse_int(std::string_view s, int64_t base);
std::optional<double> parse_float(std::string_view s);
// str.format(*args, **kwargs).
std::string py_format(std::string_view fmt, const std::vector<value>& args, const kwargs_t& kwargs);
// fmt % args (a tuple, a dict, or one value).
std::string percent_format(std::string_view fmt, const value& args);

}  // namespace hearth::jinja::text
