#include "engine/import/hf-format.h"

#include <cstring>
#include <stdexcept>

namespace hearth::hf {

void fail(const std::string& what) {
  throw std::runtime_error(what);
}

std::vector<tensor_rule> tensor_rules(const model_dims& d) {
  const model_family& a = *d.family;
  const int64_t q = d.n_head * d.head_dim, kv = d.n_head_kv * d.head_dim;
  std::vector<tensor_rule> r;
  auto add = [&](std::string hf, std::string gguf, tensor_kind kind, std::vector<int64_t> shape,
                 bool required, int64_t groups = 0) {
    r.push_back({std::move(hf), std::move(gguf), kind, a.permute_qk ? groups : 0, std::move(shape),
                 required});
  };
  // In the order HF checkpoints list them, which the converter writes them in.
  add("model.embed_tokens.weight", "token_embd.weight", tensor_kind::matrix, {d.n_vocab, d.n_embd},
      true);
  for (int64_t il = 0; il < d.n_layer; ++il) {
    const std::string h = "model.layers." + std::to_string(il) + ".";
    const std::string g = "blk." + std::to_string(il) + ".";
    add(h + "input_layernorm.weight", g + "attn_norm.weight", tensor_kind::norm, {d.n_embd}, true);
    if (a.fused) {
      add(h + "self_attn.qkv_proj.weight", g + "attn_qkv.weight", tensor_kind::matrix,
          {q + 2 * kv, d.n_embd}, true);
    } else {
      add(h + "self_attn.q_proj.weight", g + "attn_q.weight", tensor_kind::matrix, {q, d.n_embd},
          true, d.n_head);
      add(h + "self_attn.k_proj.weight", g + "attn_k.weight", tensor_kind::matrix, {kv, d.n_embd},
          true, d.n_head_kv);
      add(h + "self_attn.v_proj.weight", g + "attn_v.weight", tensor_kind::matrix, {kv, d.n_embd},
          true);
      add(h + "self_attn.q_proj.bias", g + "attn_q.bias", tensor_kind::bias, {q}, a.qkv_bias,
          d.n_head);
      add(h + "self_attn.k_proj.bias", g + "attn_k.bias", tensor_kind::bias, {kv}, a.qkv_bias,
          d.n_head_kv);
      add(h + "self_attn.v_proj.bias", g + "attn_v.bias", tensor_kind::bias, {kv}, a.qkv_bias);
    }
    add(h + "self_attn.o_proj.weight", g + "attn_output.weight", tensor_kind::matrix, {d.n_embd, q},
        true);
    if (a.qk_norm) {
      add(h + "self_attn.q_norm.weight", g + "attn_q_norm.weight", tensor_kind::norm, {d.head_dim},
          true);
      add(h + "self_attn.k_norm.weight", g + "attn_k_norm.weight", tensor_kind::norm, {d.head_dim},
          true);
    }
    if (a.post_norms) {
      add(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight",
          tensor_kind::norm, {d.n_embd}, true);
      add(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", tensor_kind::norm,
          {d.n_embd}, true);
      add(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", tensor_kind::norm,
          {d.n_embd}, true);
    } else {
      add(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", tensor_kind::norm,
          {d.n_embd}, true);
    }
    if (a.moe != moe_style::none) {
      const bool qwen = a.moe == moe_style::qwen;
      const std::string moe = h + (qwen ? "mlp." : "block_sparse_moe.");
      add(moe + "gate.weight", g + "ffn_gate_inp.weight", tensor_kind::matrix,
          {d.n_expert, d.n_embd}, true);
      const struct {
        const char *qwen_name, *mixtral_name, *gguf;
        bool down;
      } parts[] = {{"gate_proj", "w1", "ffn_gate_exps.weight", false},
                   {"up_proj", "w3", "ffn_up_exps.weight", false},
                   {"down_proj", "w2", "ffn_down_exps.weight", true}};
      for (int64_t e = 0; e < d.n_expert; ++e) {
        for (const auto& part : parts) {
          add(moe + "experts." + std::to_string(e) + "." +
                  (qwen ? part.qwen_name : part.mixtral_name) + ".weight",
              g + part.gguf, tensor_kind::matrix,
              part.down ? std::vector<int64_t>{d.n_embd, d.n_ff_exp}
                        : std::vector<int64_t>{d.n_ff_exp, d.n_embd},
              true);
          r.back().expert = e;
          r.back().n_expert = d.n_expert;
        }
      }
      continue;
    }
    if (a.fused) {
      add(h + "mlp.gate_up_proj.weight", g + "ffn_up.weight", tensor_kind::matrix,
          {2 * d.n_ff, d.n_embd}, true);
    } else {
      add(h + "mlp.gate_proj.weight", g + "ffn_gate.weight", tensor_kind::matrix,
          {d.n_ff, d.n_embd}, true);
      add(h + "mlp.up_proj.weight", g + "ffn_up.weight", tensor_kind::matrix, {d.n_ff, d.n_embd},
          true);
    }
    add(h + "mlp.down_proj.weight", g + "ffn_down.weight", tensor_kind::matrix, {d.n_embd, d.n_ff},
        true);
  }
  add("model.norm.weight", "output_norm.weight", tensor_kind::norm, {d.n_embd}, true);
  if (!d.tied) {
    add("lm_head.weight", "output.weight", tensor_kind::matrix, {d.n_vocab, d.n_embd}, true);
  }
  return r;
}

// Adjacent-pair rope (llama as GGUF stores it) wants each head's rows interleaved: GGUF row
// 2b + a of a head holds HF row a * half + b (convert_hf_to_gguf.py LlamaModel.permute). Returns,
// for every output row, the input row it comes from.
std::vector<int64_t> rope_row_sources(int64_t rows, int64_t groups, bool to_gguf) {
  std::vector<int64_t> src(static_cast<size_t>(rows));
  const int64_t per = rows / groups, half = per / 2;
  for (int64_t h = 0; h < groups; ++h) {
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t b = 0; b < half; ++b) {
        const int64_t gguf_row = h * per + 2 * b + a, hf_row = h * per + a * half + b;
        if (to_gguf) {
          src[size_t(gguf_row)] = hf_row;
        } else {
          src[size_t(hf_row)] = gguf_row;
        }
      }
    }
  }
  return src;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

int64_t elem_size(tensor_type t) {
  return t == tensor_type::f32 ? 4 : 2;  // only f32/f16/bf16 reach here
}

float to_f32(tensor_type t, const uint8_t* p) {
  uint16_t h;
  switch (t) {
    case tensor_type::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case tensor_type::f16:
      std::memcpy(&h, p, 2);
      return fp16_to_fp32(h);
    default:
      std::memcpy(&h, p, 2);
      return bf16_to_fp32(h);
  }
}

void from_f32(tensor_type t, float f, uint8_t* p) {
  if (t == tensor_type::f32) {
    std::memcpy(p, &f, 4);
  } else {
    const uint16_t h = t == tensor_type::f16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
    std::memcpy(p, &h, 2);
  }
}

}  // namespace hearth::hf
