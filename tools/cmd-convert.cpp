// hearth convert: a GGUF model -> a Hugging Face model directory (config.json, safetensors,
// tokenizer files), which `model::load` reads back as the same model (engine/convert/hf-export.h).
// The input may itself be a model directory (model::load reads both), to reshard or retype it.
// With --split-max-tensors it writes the GGUF model as a split GGUF model instead
// (engine/io/gguf-split.h), as the reference's gguf-split does: OUT is then the parts' prefix.
// With --chat-template FILE it writes a copy of the GGUF model whose tokenizer.chat_template is
// FILE's text (a test fixture: a random-weight model carrying a tool-calling template).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/convert/hf-export.h"
#include "engine/io/gguf-split.h"
#include "engine/io/gguf-writer.h"
#include "engine/model-file.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct convert_options {
  std::string model;
  std::string out;
  int shards = 1;
  std::string type;
  uint32_t split_max_tensors = 0;  // 0: write a Hugging Face directory
  std::string chat_template;       // a Jinja file: write a GGUF copy carrying it instead
};

// MODEL (a GGUF model, split or whole) as one GGUF file OUT whose tokenizer.chat_template is the
// text of o.chat_template; every other key and every tensor as they were.
int convert_chat_template(const convert_options& o) {
  std::ifstream in(o.chat_template, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + o.chat_template);
  std::ostringstream text;
  text << in.rdbuf();
  auto f = model_file::open(o.model, {.hparams = false});
  if (!f) throw std::runtime_error(f.message());
  if (f->hf_dir) throw std::runtime_error("--chat-template rewrites a GGUF model, not a folder");
  const gguf_file& src = f->gguf;
  gguf_writer w;
  w.copy_metadata_from(src);
  w.set_string("tokenizer.chat_template", text.str());
  for (const gguf_tensor& t : src.tensors()) {
    const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    // Copied from the mapping as the file is written: one tensor in memory at a time.
    w.add_tensor_lazy(t.name, t.type, ne, [&t](std::span<uint8_t> out) {
      std::memcpy(out.data(), t.data, out.size());
    });
  }
  auto r = w.write_file(o.out);
  if (!r) throw std::runtime_error(r.message());
  std::printf("%s\n", o.out.c_str());
  return 0;
}

// MODEL (a GGUF file, a split model's first part, or a folder of one) as OUT-00001-of-0000N.gguf...
int convert_split(const convert_options& o) {
  auto f = model_file::open(o.model, {.hparams = false});
  if (!f) throw std::runtime_error(f.message());
  if (f->hf_dir) throw std::runtime_error("--split-max-tensors splits a GGUF model, not a folder");
  auto r = gguf_split_write(f->gguf, o.out, o.split_max_tensors);
  if (!r) throw std::runtime_error(r.message());
  for (const auto& p : *r) std::printf("%s\n", p.c_str());
  std::fprintf(stderr, "wrote %zu parts, %zu tensors\n", r->size(), f->gguf.tensors().size());
  return 0;
}

int convert(const convert_options& o) {
  if (!o.chat_template.empty()) {
    if (o.split_max_tensors > 0) throw std::runtime_error("--chat-template writes one GGUF file");
    return convert_chat_template(o);
  }
  if (o.split_max_tensors > 0) return convert_split(o);
  hf_export_params p;
  p.n_shards = o.shards;
  if (!o.type.empty()) {
    const auto t = tensor_type_from_name(o.type);
    if (!t || (*t != tensor_type::f32 && *t != tensor_type::f16 && *t != tensor_type::bf16)) {
      throw std::runtime_error("--type must be f32, f16 or bf16, not '" + o.type + "'");
    }
    p.type = *t;
  }
  auto r = hf_export(o.model, o.out, p);
  if (!r) throw std::runtime_error(r.message());
  for (const auto& w : r->warnings) std::fprintf(stderr, "hearth: warning: %s\n", w.c_str());
  for (const auto& f : r->files) std::printf("%s/%s\n", o.out.c_str(), f.c_str());
  std::fprintf(stderr, "wrote %zu files, %.1f MiB of tensors\n", r->files.size(),
               double(r->tensor_bytes) / (1 << 20));
  return 0;
}

}  // namespace

action add_convert(CLI::App& app) {
  auto o = std::make_shared<convert_options>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Write a GGUF model as a Hugging Face model directory (config.json, safetensors)");
  cmd->add_option("model", o->model, "GGUF model file (or a model directory, to reshard or retype)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("out", o->out,
                  "Output directory (created; files in it are replaced), or with "
                  "--split-max-tensors the parts' prefix")
      ->required();
  cmd->add_option("--shards", o->shards, "Number of safetensors files (HF's sharded naming)")
      ->capture_default_str()
      ->check(CLI::Range(1, 99999));
  cmd->add_option("--type", o->type,
                  "Matrix type: f32, f16 or bf16 (default: each matrix's own type; quantized "
                  "ones become f32). Norms and biases are always f32");
  cmd->add_option("--split-max-tensors", o->split_max_tensors,
                  "Write a split GGUF model instead, as gguf-split does: OUT-00001-of-0000N.gguf "
                  "..., at most N tensors a part, the metadata in the first")
      ->check(CLI::Range(1u, 1u << 30));
  cmd->add_option("--chat-template", o->chat_template,
                  "Write a GGUF copy of the model (OUT a file) whose tokenizer.chat_template is "
                  "this Jinja file's text")
      ->check(CLI::ExistingFile);
  return [o] { return convert(*o); };
}

}  // namespace hearth::cli
