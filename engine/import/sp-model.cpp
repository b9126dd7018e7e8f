#include "engine/import/sp-model.h"

#include <sentencepiece_processor.h>

#include <string_view>

#include "engine/import/tokenizer-metadata.h"

namespace hearth {

struct sp_model::impl {
  sentencepiece::SentencePieceProcessor processor;
};

sp_model::sp_model(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
sp_model::sp_model(sp_model&&) noexcept = default;
sp_model& sp_model::operator=(sp_model&&) noexcept = default;
sp_model::~sp_model() = default;

result<sp_model> sp_model::load(const std::string& path) {
  auto p = std::make_unique<impl>();
  const auto status = p->processor.Load(path);
  if (!status.ok()) {
    return error{"loading SentencePiece model " + path + ": " + status.ToString()};
  }
  if (p->processor.GetPieceSize() <= 0) {
    return error{"loading SentencePiece model " + path + ": it has no pieces"};
  }
  return sp_model(std::move(p));
}

std::vector<int32_t> sp_model::encode(std::string_view text) const {
  std::vector<int> ids;
  // Encode fails only when no model is loaded, which load() rules out.
  if (!impl_->processor.Encode(text, &ids).ok()) return {};
  return {ids.begin(), ids.end()};
}

std::string sp_model::decode(std::span<const int32_t> ids) const {
  // The library rejects the whole call for one bad id; skip those instead, as the API promises.
  std::vector<int> valid;
  valid.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id >= 0 && id < n_tokens()) valid.push_back(id);
  }
  std::string text;
  if (!impl_->processor.Decode(valid, &text).ok()) return {};
  return text;
}

int32_t sp_model::n_tokens() const {
  return impl_->processor.GetPieceSize();
}

// ---- metadata -------------------------------------------------------------------------------

namespace {

// Just enough of the protobuf wire format to read sentencepiece_model.proto's ModelProto from
// the library's serialized copy (the installed library ships no generated header):
//   ModelProto      { repeated SentencePiece pieces = 1; TrainerSpec trainer_spec = 2;
//                     NormalizerSpec normalizer_spec = 3; }
//   SentencePiece   { string piece = 1; float score = 2; Type type = 3 [default NORMAL]; }
//   TrainerSpec     { ModelType model_type = 3 [default UNIGRAM]; }  (UNIGRAM 1, BPE 2, ...)
//   NormalizerSpec  { bool add_dummy_prefix = 3 [default true]; }
class proto_reader {
 public:
  explicit proto_reader(std::string_view bytes) : s_(bytes) {}

  bool done() const { return pos_ >= s_.size(); }

  // The next field's number and wire type; false on malformed input.
  bool next(uint32_t* field, uint32_t* wire) {
    uint64_t key = 0;
    if (!varint(&key)) return false;
    *field = uint32_t(key >> 3);
    *wire = uint32_t(key & 7);
    return true;
  }

  bool varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= s_.size()) return false;
      const uint8_t b = uint8_t(s_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) {
        *out = v;
        return true;
      }
    }
    return false;
  }

  bool bytes(std::string_view* out) {
    uint64_t n = 0;
    if (!varint(&n) || n > s_.size() - pos_) return false;
    *out = s_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return true;
  }

  bool skip(uint32_t wire) {
    uint64_t ignored = 0;
    std::string_view ignored_bytes;
    switch (wire) {
      case 0:
        return varint(&ignored);
      case 1:
        return advance(8);
      case 2:
        return bytes(&ignored_bytes);
      case 5:
        return advance(4);
      default:
        return false;  // groups (3, 4) are not used by sentencepiece_model.proto
    }
  }

 private:
  bool advance(size_t n) {
    if (n > s_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

struct sp_proto_facts {
  std::vector<int32_t> piece_types;  // sentencepiece's Type per piece (NORMAL = 1)
  uint64_t model_type = 1;           // UNIGRAM
  bool add_dummy_prefix = true;
};

// Reads the message's varint field `wanted` (the last occurrence wins, as in protobuf).
bool proto_varint_field(std::string_view message, uint32_t wanted, uint64_t* out) {
  proto_reader r(message);
  while (!r.done()) {
    uint32_t field = 0;
    uint32_t wire = 0;
    if (!r.next(&field, &wire)) return false;
    if (field == wanted && wire == 0) {
      if (!r.varint(out)) return false;
    } else if (!r.skip(wire)) {
      return false;
    }
  }
  return true;
}

result<sp_proto_facts> read_sp_proto(std::string_view model) {
  sp_proto_facts facts;
  proto_reader r(model);
  while (!r.done()) {
    uint32_t field = 0;
    uint32_t wire = 0;
    if (!r.next(&field, &wire)) return error{"malformed ModelProto"};
    if ((field == 1 || field == 2 || field == 3) && wire == 2) {
      std::string_view message;
      if (!r.bytes(&message)) return error{"malformed ModelProto"};
      if (field == 1) {
        uint64_t type = 1;
        if (!proto_varint_field(message, 3, &type)) return error{"malformed piece"};
        facts.piece_types.push_back(int32_t(type));
      } else if (field == 2) {
        if (!proto_varint_field(message, 3, &facts.model_type))
          return error{"malformed trainer_spec"};
      } else {
        uint64_t add = 1;
        if (!proto_varint_field(message, 3, &add)) return error{"malformed normalizer_spec"};
        facts.add_dummy_prefix = add != 0;
      }
    } else if (!r.skip(wire)) {
      return error{"malformed ModelProto"};
    }
  }
  return facts;
}

}  // namespace

result<std::vector<gguf_kv>> sp_model_metadata(const std::string& path) {
  auto model = sp_model::load(path);
  if (!model) return model.err();
  const sentencepiece::SentencePieceProcessor& p = model->impl_->processor;
  const std::string serialized = p.serialized_model_proto();
  auto facts = read_sp_proto(serialized);
  if (!facts) return error{"SentencePiece model " + path + ": " + facts.message()};
  const int n = p.GetPieceSize();
  if (facts->piece_types.size() != size_t(n)) {
    return error{"SentencePiece model " + path + ": the model lists " +
                 std::to_string(facts->piece_types.size()) + " pieces, the library " +
                 std::to_string(n)};
  }
  if (facts->model_type != 2) {
    static constexpr const char* k_names[] = {"?", "unigram", "bpe", "word", "char"};
    const std::string name =
        facts->model_type < 5 ? k_names[facts->model_type] : std::to_string(facts->model_type);
    return error{"SentencePiece model " + path + ": model type " + name +
                 " is not supported (only bpe)"};
  }

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(n);
  scores.reserve(n);
  types.reserve(n);
  for (int id = 0; id < n; ++id) {
    tokens.push_back(p.IdToPiece(id));
    scores.push_back(p.GetScore(id));
    // llama.cpp's converter asks the library in this order; user-defined pieces it takes from
    // added_tokens.json, which the model's own piece type stands in for here.
    gguf_token_type t = gguf_token_type::normal;
    if (p.IsUnknown(id)) {
      t = gguf_token_type::unknown;
    } else if (p.IsControl(id)) {
      t = gguf_token_type::control;
    } else if (p.IsUnused(id)) {
      t = gguf_token_type::unused;
    } else if (p.IsByte(id)) {
      t = gguf_token_type::byte;
    } else if (facts->piece_types[id] == 4) {
      t = gguf_token_type::user_defined;
    }
    types.push_back(int32_t(t));
  }

  const auto id_or_none = [n](int id) { return id >= 0 && id < n ? int32_t(id) : -1; };
  std::vector<gguf_kv> kv;
  kv.push_back({"tokenizer.ggml.model", gguf_string_value("llama")});
  kv.push_back({"tokenizer.ggml.pre", gguf_string_value("default")});
  kv.push_back({"tokenizer.ggml.tokens", gguf_string_array_value(std::move(tokens))});
  kv.push_back({"tokenizer.ggml.scores", gguf_f32_array_value(scores)});
  kv.push_back({"tokenizer.ggml.token_type", gguf_i32_array_value(types)});
  // An id the model disables (-1) is left out: the reader's default applies, as for a GGUF
  // converted from this model.
  const std::pair<const char*, int> ids[] = {{"tokenizer.ggml.bos_token_id", p.bos_id()},
                                             {"tokenizer.ggml.eos_token_id", p.eos_id()},
                                             {"tokenizer.ggml.unknown_token_id", p.unk_id()},
                                             {"tokenizer.ggml.padding_token_id", p.pad_id()}};
  for (const auto& [key, id] : ids) {
    if (id_or_none(id) >= 0) kv.push_back({key, gguf_u32_value(uint32_t(id))});
  }
  kv.push_back({"tokenizer.ggml.add_bos_token", gguf_bool_value(true)});
  kv.push_back({"tokenizer.ggml.add_eos_token", gguf_bool_value(false)});
  kv.push_back({"tokenizer.ggml.add_space_prefix", gguf_bool_value(facts->add_dummy_prefix)});
  return kv;
}

}  // namespace hearth
