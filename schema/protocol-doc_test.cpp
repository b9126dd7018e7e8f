// schema/PROTOCOL.md checked against schema/messages.h: every message and every part of one that
// messages.h declares has a table in section 7 listing exactly its fields, each with the type and
// the "opt" that its fields() list gives it, and section 6 lists every message under its command
// code. The fields come from the same fields() lists that drive the codec, the JSON and the fuzz
// targets, so a field added to a message without its line in the document fails here.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "schema/messages.h"

namespace hearth::wire {
namespace {

// The structs that stand inside messages (section 7.1 and the parts in 7.3). A struct reached from
// a message that is not listed here fails the test (its type name is then empty).
// clang-format off
#define HEARTH_WIRE_PARTS(X) \
  X(gpu_heap) X(gpu_info) X(hardware_info) X(model_info) X(skipped_model) X(chat_message) \
  X(job_params) X(job_ref) X(job_summary) X(job_event) X(job_detail) X(node_loss) \
  X(node_summary) X(model_summary) X(node_skipped_models) X(metric_sample) X(metric_family) \
  X(api_key_info) X(model_file) X(transfer_peer) X(transfer_info) X(tool_call) X(token_bias) \
  X(api_params) X(model_layout) X(pipeline_stage) X(stage_op)
// clang-format on

template <class T>
constexpr std::string_view part_name = "";
#define HEARTH_PART_NAME(T) \
  template <>               \
  constexpr std::string_view part_name<T> = #T;
HEARTH_WIRE_PARTS(HEARTH_PART_NAME)
#undef HEARTH_PART_NAME

// A field's type as section 7 writes it: str, uint64, float32, [model_info], job_state, ...
template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, std::string>)
    return "str";
  else if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else if constexpr (std::is_same_v<T, job_state>)
    return "job_state";
  else if constexpr (std::is_same_v<T, error_code>)
    return "error_code";
  else if constexpr (std::is_integral_v<T>)
    return (std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  else if constexpr (requires {
                       typename T::value_type;
                       typename T::allocator_type;
                     })
    return "[" + type_name<typename T::value_type>() + "]";
  else
    return std::string(part_name<T>);
}

struct field_decl {
  std::string type;   // as type_name, with " opt" after an optional field's
  std::string where;  // the line of PROTOCOL.md, for the document's side
};
using field_table = std::map<std::string, field_decl>;

struct field_lister {
  field_table& out;
  template <class T>
  void operator()(const char* name, T&) {
    out[name] = {type_name<T>(), ""};
  }
  template <class T>
  void optional(const char* name, T&) {
    out[name] = {type_name<T>() + " opt", ""};
  }
};

struct declared_struct {
  field_table fields;
  int code = -1;  // the command code of a message; -1 for a part
};

template <class T>
declared_struct declared() {
  declared_struct d;
  T value;
  field_lister lister{d.fields};
  value.fields(lister);
  if constexpr (requires { T::cmd; }) d.code = int(T::cmd);
  return d;
}

std::map<std::string, declared_struct> declared_all() {
  std::map<std::string, declared_struct> all;
#define HEARTH_DECLARED(T) all[#T] = declared<T>();
  HEARTH_WIRE_MESSAGES(HEARTH_DECLARED)
  HEARTH_WIRE_PARTS(HEARTH_DECLARED)
#undef HEARTH_DECLARED
  return all;
}

// --- the document's side ---

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line.substr(1));
  std::string cell;
  while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
  return cells;
}

// "`name`" -> "name"; anything else -> "".
std::string code_span(const std::string& cell) {
  if (cell.size() < 3 || cell.front() != '`' || cell.back() != '`') return "";
  return cell.substr(1, cell.size() - 2);
}

struct documented_struct {
  field_table fields;
  int code = -1;  // the code written after the name ("**node_hello** 0x10"), -1 without
  std::string where;
};

struct document {
  std::map<std::string, documented_struct> structs;  // section 7's tables
  std::string section7_intro;                        // before its first table
  std::map<int, std::vector<std::string>> commands;  // section 6: code -> its row's cells
  std::set<std::string> error_codes;                 // section 8: the first column's names
  std::vector<std::string> problems;                 // rows that do not parse
};

document read_document(const std::string& path) {
  document doc;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::string line, section, current;
  bool table_seen = false;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string where = "PROTOCOL.md:" + std::to_string(n);
    if (line.starts_with("## ")) {
      section = line.substr(3, line.find('.') - 3);
      continue;
    }
    bool row = line.starts_with("|") && !line.starts_with("|--");
    if (section == "6" && row) {
      std::vector<std::string> cells = cells_of(line);
      if (cells.size() >= 4 && cells[0].starts_with("0x"))
        doc.commands[std::stoi(cells[0], nullptr, 16)] = cells;
    }
    if (section == "8" && row) {
      std::string name = code_span(cells_of(line).at(0));
      if (!name.empty()) doc.error_codes.insert(name);
    }
    if (section != "7") continue;
    if (!row) {
      if (!table_seen) doc.section7_intro += line + "\n";
      continue;
    }
    table_seen = true;
    std::vector<std::string> cells = cells_of(line);
    if (cells.size() < 4 || cells[0] == "struct" || cells[0] == "message") continue;
    if (cells[0].starts_with("**")) {
      size_t end = cells[0].find("**", 2);
      current = cells[0].substr(2, end - 2);
      documented_struct& s = doc.structs[current];
      if (!s.where.empty()) doc.problems.push_back(where + ": a second table of " + current);
      s.where = where;
      std::string rest = trim(cells[0].substr(end + 2));
      if (rest.starts_with("0x")) s.code = std::stoi(rest, nullptr, 16);
    } else if (!cells[0].empty() || current.empty()) {
      doc.problems.push_back(where + ": a row outside a struct's table");
      continue;
    }
    std::string field = code_span(cells[1]);
    if (field.empty()) {
      doc.problems.push_back(where + ": no `field` in the second column");
      continue;
    }
    doc.structs[current].fields[field] = {cells[2], where};
  }
  return doc;
}

std::string protocol_path() {
  return std::string(HEARTH_SOURCE_DIR) + "/schema/PROTOCOL.md";
}

TEST(ProtocolDoc, EveryRowOfSection7Parses) {
  document doc = read_document(protocol_path());
  EXPECT_FALSE(doc.structs.empty());
  for (const std::string& p : doc.problems) ADD_FAILURE() << p;
}

TEST(ProtocolDoc, EveryDeclaredFieldIsDocumentedWithItsType) {
  document doc = read_document(protocol_path());
  for (const auto& [name, decl] : declared_all()) {
    SCOPED_TRACE(name);
    for (const auto& [field, f] : decl.fields)
      EXPECT_FALSE(f.type.empty() || f.type.starts_with("[]") || f.type.starts_with(" "))
          << name << "." << field << ": a struct type missing from HEARTH_WIRE_PARTS";
    auto it = doc.structs.find(name);
    if (decl.fields.empty()) {
      EXPECT_EQ(it, doc.structs.end()) << name << " has no fields but a table";
      EXPECT_NE(doc.section7_intro.find("`" + name + "`"), std::string::npos)
          << "section 7 does not say that " << name << " has no fields";
      continue;
    }
    if (it == doc.structs.end()) {
      ADD_FAILURE() << name << " has no table in section 7";
      continue;
    }
    for (const auto& [field, f] : decl.fields) {
      auto d = it->second.fields.find(field);
      if (d == it->second.fields.end())
        ADD_FAILURE() << name << "." << field << " (" << f.type << ") is missing from its table at "
                      << it->second.where;
      else
        EXPECT_EQ(d->second.type, f.type) << name << "." << field << " at " << d->second.where;
    }
  }
}

TEST(ProtocolDoc, EveryDocumentedFieldIsDeclared) {
  document doc = read_document(protocol_path());
  std::map<std::string, declared_struct> all = declared_all();
  for (const auto& [name, s] : doc.structs) {
    auto it = all.find(name);
    if (it == all.end()) {
      ADD_FAILURE() << s.where << ": " << name << " is no struct of schema/messages.h";
      continue;
    }
    for (const auto& [field, f] : s.fields)
      EXPECT_TRUE(it->second.fields.contains(field))
          << f.where << ": " << name << "." << field << " is not in its fields()";
  }
}

TEST(ProtocolDoc, EveryMessageHasItsCommandCode) {
  document doc = read_document(protocol_path());
  for (const auto& [name, decl] : declared_all()) {
    if (decl.code < 0) {
      if (doc.structs.contains(name)) {
        EXPECT_EQ(doc.structs[name].code, -1) << name << " is a part, not a message";
      }
      continue;
    }
    SCOPED_TRACE(name);
    if (doc.structs.contains(name)) {
      EXPECT_EQ(doc.structs[name].code, decl.code) << "its table at " << doc.structs[name].where;
    }
    auto row = doc.commands.find(decl.code);
    if (row == doc.commands.end()) {
      ADD_FAILURE() << "section 6 has no row for code " << decl.code;
      continue;
    }
    EXPECT_EQ(row->second[1], command_name(command(decl.code)));
    EXPECT_NE(row->second[3].find("`" + name + "`"), std::string::npos)
        << "section 6 row " << row->second[0] << " names another body: " << row->second[3];
  }
  for (const auto& [code, cells] : doc.commands)
    EXPECT_TRUE(command_from_byte(uint8_t(code)).has_value()) << "section 6 lists " << cells[0];
}

// Section 8 has a row for every error_code (a code added to the enum says when it is sent) and
// none for a code the enum does not have.
TEST(ProtocolDoc, EveryErrorCodeHasItsRowInSection8) {
  document doc = read_document(protocol_path());
  std::set<std::string> declared;
  for (size_t i = 0;; ++i) {
    std::string_view name = error_code_name(error_code(i));
    if (name == "unknown") break;
    declared.insert(std::string(name));
    EXPECT_TRUE(doc.error_codes.contains(std::string(name))) << name << " has no row in section 8";
  }
  for (const std::string& name : doc.error_codes)
    EXPECT_TRUE(declared.contains(name)) << "section 8 lists " << name << ", no error_code";
}

}  // namespace
}  // namespace hearth::wire
