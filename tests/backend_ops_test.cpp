// Every op of a device backend against the CPU backend (the reference, ../shared/STYLE.md 12):
// the same random inputs on both, compared by NMSE over many shapes and every weight type the
// backend supports, with a sentinel row after each output to catch writes past its end. Prints
// a table (op, type, shape, NMSE, pass). Weights get random values quantized as llama-quantize
// does (engine/convert/quantize.h), and the types the synthetic models of the test data hold (Q4_0,
// Q4_K, Q5_K, Q6_K) real blocks from those files. The backend under test comes from a factory:
// this file is built once per backend (tests/device-backend.h).
// Matrix products are checked against the exact product instead (harness::compare_exact: the
// CPU's own rounding of the activations is larger than a GPU's error on a single output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/io/gguf.h"
#include "engine/io/type-traits.h"
#include "tests/device-backend.h"
#include "tests/testdata.h"

#include "backends/registry.h"
#include "engine/convert/quantize.h"

namespace hearth {
namespace {

// The backend under test: a factory and, when it cannot run here, why.
struct backend_factory {
  std::string name;
  std::function<std::string()> unavailable;  // "" when usable
  std::function<std::unique_ptr<backend>()> make;
};

// The backend's module through the device registry, on its best device.
backend_factory factory_under_test() {
  constexpr gpu::backend_kind kind = testing::device_backend_kind;
  return {gpu::backend_kind_name(kind), [] { return gpu::device_registry().why_no_device(kind); },
          testing::best_device_backend};
}

constexpr uint8_t k_sentinel = 0xA5;

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Rows of floats in a stored type (the CPU kernels' conversions, so both backends see the
// same bytes).
std::vector<uint8_t> to_type(tensor_type t, const std::vector<float>& v, int64_t cols) {
  const int64_t rows = int64_t(v.size()) / cols;
  const int64_t rb = tensor_type_row_bytes(t, cols);
  std::vector<uint8_t> out(size_t(rb * rows));
  if (t == tensor_type::f32) {
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  if (can_quantize(t) && t != tensor_type::f16 && t != tensor_type::bf16) {
    quantize_rows(t, v.data(), out.data(), rows, cols);
    return out;
  }
  const from_float_fn from_float = tensor_type_traits_of(t).from_float;
  for (int64_t r = 0; r < rows; ++r) from_float(v.data() + r * cols, out.data() + r * rb, cols);
  return out;
}

// The same tensor on the reference and on the backend under test.
struct tensor_pair {
  tensor ref, dut;
  int64_t rows = 0;  // rows compared (outputs carry one more: the sentinel row)
  const std::vector<uint8_t>* bytes = nullptr;  // a weight's bytes as both backends got them
};

class harness {
 public:
  harness(backend& ref, backend& dut) : ref_(ref), dut_(dut) {}
  ~harness() {
    for (tensor_pair& p : owned_) {
      ref_.free(p.ref);
      dut_.free(p.dut);
    }
  }

  tensor_pair input(tensor_type type, int64_t ne0, int64_t ne1, const void* bytes) {
    tensor_pair p{ref_.alloc(type, ne0, ne1, "in"), dut_.alloc(type, ne0, ne1, "in"), ne1};
    ref_.upload(p.ref, bytes, size_t(p.ref.n_bytes()));
    dut_.upload(p.dut, bytes, size_t(p.dut.n_bytes()));
    owned_.push_back(p);
    return p;
  }
  tensor_pair input_f32(int64_t ne0, int64_t ne1, const std::vector<float>& v) {
    return input(tensor_type::f32, ne0, ne1, v.data());
  }
  tensor_pair input_i32(const std::vector<int32_t>& v) {
    return input(tensor_type::i32, int64_t(v.size()), 1, v.data());
  }
  // An output of `ne1` rows plus a sentinel row, all filled with sentinel bytes; `initial`
  // (when given) replaces the first ne1 rows on both backends.
  tensor_pair output(tensor_type type, int64_t ne0, int64_t ne1, const void* initial = nullptr) {
    tensor_pair p{ref_.alloc(type, ne0, ne1 + 1, "out"), dut_.alloc(type, ne0, ne1 + 1, "out"),
                  ne1};
    std::vector<uint8_t> fill(size_t(p.ref.n_bytes()), k_sentinel);
    if (initial) std::memcpy(fill.data(), initial, size_t(p.ref.row_bytes() * ne1));
    ref_.upload(p.ref, fill.data(), fill.size());
    dut_.upload(p.dut, fill.data(), fill.size());
    owned_.push_back(p);
    p.ref = tensor_rows(p.ref, ne1);
    p.dut = tensor_rows(p.dut, ne1);
    return p;
  }
  // A weight as a model file provides it.
  tensor_pair weight(tensor_type type, int64_t ne0, int64_t ne1, const std::vector<float>& v) {
    return weight_bytes(type, ne0, ne1, to_type(type, v, ne0));
  }
  // ne2 > 1: that many matrices of ne1 rows stacked (the experts of mul_mat_id).
  tensor_pair weight_bytes(tensor_type type, int64_t ne0, int64_t ne1, std::vector<uint8_t> data,
                           int64_t ne2 = 1) {
    auto g = std::make_unique<gguf_tensor>();
    auto bytes = std::make_unique<std::vector<uint8_t>>(std::move(data));
    g->name = "w";
    g->type = type;
    g->n_dims = ne2 > 1 ? 3 : 2;
    g->ne[0] = ne0;
    g->ne[1] = ne1;
    g->ne[2] = ne2;
    g->n_bytes = bytes->size();
    g->data = bytes->data();
    tensor_pair p{ref_.weight(*g), dut_.weight(*g), ne1 * ne2, bytes.get()};
    weight_files_.push_back(std::move(g));
    weight_bytes_.push_back(std::move(bytes));
    return p;
  }

  // Downloads both outputs (with the sentinel row), checks the sentinel and the NMSE, prints a
  // row of the table.
  void compare(const tensor_pair& out, const std::string& op, const std::string& type,
               const std::string& shape, double max_nmse) {
    const std::vector<float> x = download(ref_, out.ref, out.rows, nullptr);
    bool sentinel_ok = true;
    const std::vector<float> y = download(dut_, out.dut, out.rows, &sentinel_ok);
    report(nmse(y, x), sentinel_ok, op, type, shape, max_nmse, "");
  }

  // The same against values computed exactly on the host (double precision, from the bytes both
  // backends got), for ops whose CPU kernels round on purpose: the CPU's matrix products quantize
  // the activations (Q8_K for the K-quants), an error that swamps the backend's own where the
  // output is one value near zero. The CPU's NMSE against the exact values is printed beside.
  void compare_exact(const tensor_pair& out, const std::vector<double>& exact,
                     const std::string& op, const std::string& type, const std::string& shape,
                     double max_nmse) {
    const std::vector<float> x = download(ref_, out.ref, out.rows, nullptr);
    bool sentinel_ok = true;
    const std::vector<float> y = download(dut_, out.dut, out.rows, &sentinel_ok);
    const double cpu_nmse = nmse(x, exact);
    char cpu[48];
    std::snprintf(cpu, sizeof cpu, " (cpu %.3e)", cpu_nmse);
    // A backend no further from the exact product than twice the CPU passes too: where the few
    // outputs lie near zero (real blocks keep their zero-mean values), the activations' rounding
    // alone, which the CPU and Vulkan share, can pass max_nmse.
    report(nmse(y, exact), sentinel_ok, op, type, shape, std::max(max_nmse, 2 * cpu_nmse), cpu);
  }

  // The backend under test's output rows as floats; fails the test if it wrote past them.
  std::vector<float> dut_output(const tensor_pair& out) {
    bool sentinel_ok = true;
    std::vector<float> y = download(dut_, out.dut, out.rows, &sentinel_ok);
    EXPECT_TRUE(sentinel_ok) << "wrote past its output";
    return y;
  }

  // A weight's values as the backends see them, row after row.
  static std::vector<float> dequantized(const tensor_pair& w, int64_t ne0) {
    const std::vector<uint8_t>& bytes = *w.bytes;
    std::vector<float> v(size_t(ne0 * w.rows));
    const int64_t rb = tensor_type_row_bytes(w.ref.type, ne0);
    for (int64_t r = 0; r < w.rows; ++r) {
      const uint8_t* row = bytes.data() + r * rb;
      if (w.ref.type == tensor_type::f32) {
        std::memcpy(v.data() + r * ne0, row, size_t(ne0) * 4);
      } else {
        tensor_type_traits_of(w.ref.type).to_float(row, v.data() + r * ne0, ne0);
      }
    }
    return v;
  }

 private:
  // The first `rows` rows of an output as floats; checks the sentinel row after them when
  // `sentinel_ok` is given.
  static std::vector<float> download(backend& b, const tensor& out, int64_t rows,
                                     bool* sentinel_ok) {
    const tensor full = tensor_rows(out, rows + 1);
    const size_t bytes = size_t(full.n_bytes());
    const size_t body = size_t(out.row_bytes() * rows);
    std::vector<uint8_t> a(bytes);
    b.download(full, a.data(), bytes);
    if (sentinel_ok) {
      for (size_t i = body; i < bytes; ++i) *sentinel_ok = *sentinel_ok && a[i] == k_sentinel;
    }
    return as_floats(out.type, a.data(), size_t(out.ne[0] * rows));
  }

  template <class Want>
  static double nmse(const std::vector<float>& got, const std::vector<Want>& want) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err += (double(got[i]) - double(want[i])) * (double(got[i]) - double(want[i]));
      norm += double(want[i]) * double(want[i]);
    }
    return norm > 0 ? err / norm : err;
  }

  static void report(double nmse, bool sentinel_ok, const std::string& op, const std::string& type,
                     const std::string& shape, double max_nmse, const char* extra) {
    const bool pass = sentinel_ok && nmse <= max_nmse && std::isfinite(nmse);
    std::printf("%-10s %-5s %-44s %10.3e %s%s%s\n", op.c_str(), type.c_str(), shape.c_str(), nmse,
                pass ? "ok" : "FAIL", sentinel_ok ? "" : " (wrote past the output)", extra);
    EXPECT_TRUE(sentinel_ok) << op << " " << type << " " << shape << " wrote past its output";
    EXPECT_LE(nmse, max_nmse) << op << " " << type << " " << shape;
  }

  static std::vector<float> as_floats(tensor_type t, const uint8_t* p, size_t n) {
    std::vector<float> v(n);
    if (t == tensor_type::f32) {
      std::memcpy(v.data(), p, n * 4);
    } else if (t == tensor_type::i32) {  // ids: small integers, exact as floats
      for (size_t i = 0; i < n; ++i) {
        int32_t id;
        std::memcpy(&id, p + i * 4, 4);
        v[i] = float(id);
      }
    } else {
      tensor_type_traits_of(t).to_float(p, v.data(), int64_t(n));
    }
    return v;
  }

  backend& ref_;
  backend& dut_;
  std::vector<tensor_pair> owned_;
  std::vector<std::unique_ptr<gguf_tensor>> weight_files_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> weight_bytes_;
};

// Blocks of a weight-only type taken from a synthetic model of the test data (every tensor of
// that type in the file, concatenated): any run of whole blocks is a valid row of that type, so
// weights of any width and height are cut from it.
class real_blocks {
 public:
  // The file holding type `t`, or nullptr when `t` is not a weight-only type.
  static const char* file_for(tensor_type t) {
    switch (t) {
      case tensor_type::q4_0:
        return "models/synthetic/synthetic-llama-a.q4_0.gguf";
      case tensor_type::q4_k:
        return "models/synthetic/synthetic-llama-a.q4_k_m.gguf";
      case tensor_type::q5_k:
        return "models/synthetic/synthetic-llama-a.q5_k_m.gguf";
      case tensor_type::q6_k:
        return "models/synthetic/synthetic-llama-a.q6_k.gguf";
      default:
        return nullptr;
    }
  }

  // All blocks of type `t` in its file; empty (and the test failed, naming why) when unreadable.
  static const std::vector<uint8_t>& of(tensor_type t) {
    static std::map<tensor_type, std::vector<uint8_t>> cache;
    auto it = cache.find(t);
    if (it != cache.end()) return it->second;
    std::vector<uint8_t>& pool = cache[t];
    const std::string path = testing::testdata_path(file_for(t));
    if (path.empty()) return pool;
    result<gguf_file> f = gguf_file::open(path);
    if (!f) {
      ADD_FAILURE() << f.message();
      return pool;
    }
    for (const gguf_tensor& g : f->tensors()) {
      if (g.type == t) pool.insert(pool.end(), g.data, g.data + g.n_bytes);
    }
    if (pool.empty()) ADD_FAILURE() << path << " has no tensor of type " << tensor_type_name(t);
    return pool;
  }

  // ne1 rows of ne0 values of type `t`: consecutive blocks from a random block of the pool on,
  // wrapping around at its end.
  static std::vector<uint8_t> cut(tensor_type t, int64_t ne0, int64_t ne1, std::mt19937& rng) {
    const std::vector<uint8_t>& pool = of(t);
    const int64_t block_bytes = tensor_type_row_bytes(t, block_elems(t));
    const int64_t n_blocks = int64_t(pool.size()) / block_bytes;
    std::vector<uint8_t> out(size_t(tensor_type_row_bytes(t, ne0) * ne1));
    if (n_blocks == 0) return out;
    int64_t b = int64_t(rng() % uint64_t(n_blocks));
    for (size_t o = 0; o < out.size(); o += size_t(block_bytes), b = (b + 1) % n_blocks) {
      std::memcpy(out.data() + o, pool.data() + b * block_bytes, size_t(block_bytes));
    }
    return out;
  }

  static int64_t block_elems(tensor_type t) {
    return tensor_type_layout_of(uint32_t(t))->block_elems;
  }
};

std::string shape_of(std::initializer_list<std::pair<const char*, int64_t>> dims) {
  std::string s;
  for (auto& [k, v] : dims) s += (s.empty() ? "" : " ") + std::string(k) + "=" + std::to_string(v);
  return s;
}

class BackendOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const backend_factory f = factory_under_test();
    const std::string why = f.unavailable();
    if (!why.empty()) testing::skip_all(f.name + " backend ops: " + why);
  }
  void SetUp() override {
    const backend_factory f = factory_under_test();
    ref_ = make_cpu_backend(2);
    dut_ = f.make();
    h_ = std::make_unique<harness>(*ref_, *dut_);
  }
  void TearDown() override {
    h_.reset();
    dut_.reset();
    ref_.reset();
  }
  // Weight types to test: every type the backend supports that the CPU can also write or that
  // the test data has real blocks of.
  std::vector<tensor_type> weight_types() const {
    std::vector<tensor_type> out;
    for (tensor_type t :
         {tensor_type::f32, tensor_type::f16, tensor_type::bf16, tensor_type::q8_0,
          tensor_type::q4_0, tensor_type::q4_1, tensor_type::q5_0, tensor_type::q5_1,
          tensor_type::q4_k, tensor_type::q5_k, tensor_type::q6_k}) {
      const bool writable = tensor_type_traits_of(t).from_float != nullptr;
      if (dut_->supports_weight_type(t) && (writable || real_blocks::file_for(t))) out.push_back(t);
    }
    return out;
  }

  // Widths to test for type t: `small` values are rounded up to the type's block (so the 256 of
  // the K-quants), `2048` stays; every width is a whole number of blocks.
  static std::vector<int64_t> widths(tensor_type t, std::initializer_list<int64_t> want) {
    const int64_t blk = real_blocks::block_elems(t);
    std::vector<int64_t> out;
    for (int64_t w : want) {
      const int64_t r = (w + blk - 1) / blk * blk;
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
    }
    return out;
  }

  // One rope case, on both backends and compared: n_tok rows of n_head heads of head_dim at
  // random positions below max_pos, rotated in place (the "output" is the input, with a sentinel
  // row), with random frequency factors when with_ff.
  void rope_case(const char* op, const rope_params& rp, int32_t n_head, int32_t head_dim,
                 int64_t n_tok, uint32_t max_pos, bool with_ff, const std::string& shape) {
    const int64_t row = int64_t(n_head) * head_dim;
    const std::vector<float> v = random_floats(rng_, size_t(row * n_tok));
    tensor_pair x = h_->output(tensor_type::f32, row, n_tok, v.data());
    std::vector<int32_t> pos;
    for (int64_t t = 0; t < n_tok; ++t) pos.push_back(int32_t(rng_() % max_pos));
    tensor_pair p = h_->input_i32(pos);
    tensor_pair ff =
        h_->input_f32(rp.n_dims / 2, 1, random_floats(rng_, size_t(rp.n_dims / 2), 1.0f, 8.0f));
    ref_->rope(x.ref, n_head, head_dim, p.ref, rp, with_ff ? &ff.ref : nullptr);
    dut_->rope(x.dut, n_head, head_dim, p.dut, rp, with_ff ? &ff.dut : nullptr);
    h_->compare(x, op, "f32", shape, 1e-6);
  }

  // A weight [ne1 rows of ne0] of type t: random values in [lo, hi) where the CPU can write t,
  // else real blocks of the test data.
  tensor_pair weight(tensor_type t, int64_t ne0, int64_t ne1, float lo = -1.0f, float hi = 1.0f) {
    if (real_blocks::file_for(t))
      return h_->weight_bytes(t, ne0, ne1, real_blocks::cut(t, ne0, ne1, rng_));
    return h_->weight(t, ne0, ne1, random_floats(rng_, size_t(ne0 * ne1), lo, hi));
  }
  // ne2 stacked matrices [ne1 rows of ne0] of type t, as weight(); the matrices of the experts in
  // `poisoned` are all 0xFF bytes (NaN scales or values in every type), so an op that reads one
  // into its output fails.
  tensor_pair experts(tensor_type t, int64_t ne0, int64_t ne1, int64_t ne2,
                      const std::vector<int32_t>& poisoned) {
    std::vector<uint8_t> bytes =
        real_blocks::file_for(t)
            ? real_blocks::cut(t, ne0, ne1 * ne2, rng_)
            : to_type(t, random_floats(rng_, size_t(ne0 * ne1 * ne2), -0.5f, 1.0f), ne0);
    const size_t matrix = size_t(tensor_type_row_bytes(t, ne0) * ne1);
    for (int32_t e : poisoned)
      std::fill_n(bytes.begin() + ptrdiff_t(matrix * size_t(e)), matrix, 0xFF);
    return h_->weight_bytes(t, ne0, ne1, std::move(bytes), ne2);
  }

  std::mt19937 rng_{1234};
  std::unique_ptr<backend> ref_, dut_;
  std::unique_ptr<harness> h_;
};

TEST_F(BackendOps, GetRows) {
  for (tensor_type t : weight_types()) {
    // Q4_0: 352 = 11 blocks of 18 bytes, so rows start at offsets that are not multiples of 4.
    for (int64_t cols : widths(t, {64, 352, 768})) {
      for (int64_t n : {1, 5}) {
        const int64_t rows = 7;
        tensor_pair table = weight(t, cols, rows);
        std::vector<int32_t> ids;
        for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(rng_() % rows));
        tensor_pair id = h_->input_i32(ids);
        tensor_pair out = h_->output(tensor_type::f32, cols, n);
        ref_->get_rows(table.ref, id.ref, out.ref);
        dut_->get_rows(table.dut, id.dut, out.dut);
        h_->compare(out, "get_rows", std::string(tensor_type_name(t)),
                    shape_of({{"cols", cols}, {"rows", rows}, {"n", n}}), 1e-12);
      }
    }
  }
}

TEST_F(BackendOps, MulMat) {
  for (tensor_type t : weight_types()) {
    // 100: float rows that end inside a 32-value chunk (others take whole chunks on Vulkan).
    for (int64_t n_in : widths(t, {64, 100, 352, 768, 2048})) {
      for (int64_t n_out : {1, 33, 130}) {
        for (int64_t n_tok : {1, 3, 8, 17, 70}) {
          for (bool with_bias : {false, true}) {
            if (with_bias && n_tok != 3 && n_tok != 17) continue;
            // Skewed ranges: outputs then stay away from zero, where one output's NMSE says
            // nothing (n_out = n_tok = 1). Real blocks keep their own values.
            tensor_pair w = weight(t, n_in, n_out, -0.5f, 1.0f);
            const std::vector<float> xv = random_floats(rng_, size_t(n_in * n_tok), -0.5f, 1.0f);
            const std::vector<float> bv = random_floats(rng_, size_t(n_out));
            tensor_pair x = h_->input_f32(n_in, n_tok, xv);
            tensor_pair b = h_->input_f32(n_out, 1, bv);
            tensor_pair out = h_->output(tensor_type::f32, n_out, n_tok);
            ref_->mul_mat(w.ref, x.ref, with_bias ? &b.ref : nullptr, out.ref);
            dut_->mul_mat(w.dut, x.dut, with_bias ? &b.dut : nullptr, out.dut);
            const std::vector<float> wv = harness::dequantized(w, n_in);
            std::vector<double> exact(size_t(n_out * n_tok));
            for (int64_t k = 0; k < n_tok; ++k) {
              for (int64_t o = 0; o < n_out; ++o) {
                double acc = with_bias ? bv[size_t(o)] : 0.0;
                for (int64_t i = 0; i < n_in; ++i)
                  acc += double(wv[size_t(o * n_in + i)]) * xv[size_t(k * n_in + i)];
                exact[size_t(k * n_out + o)] = acc;
              }
            }
            h_->compare_exact(
                out, exact, "mul_mat", std::string(tensor_type_name(t)),
                shape_of({{"in", n_in}, {"out", n_out}, {"tok", n_tok}, {"bias", with_bias}}),
                t == tensor_type::f32 ? 1e-9 : 5e-4);
          }
        }
      }
    }
  }
}

// Where the backend promises it (backend::batch_invariant: Vulkan on CPU devices), a token's
// product is the same bits whether it is alone or shares the call with others: counts on both
// sides of where a backend may change shaders (Vulkan on GPUs: 8 tokens, 4 for mul_mat_id), rows
// of several tiles and of a partial one, every weight type.
//
// product(first, n) runs the op on tokens first .. first + n - 1 and returns its output, rows of
// `per_token` values per token. Each of the first 3 tokens alone is compared, bit for bit, with
// the same token among each of `counts` (from token 0).
void expect_alone_as_together(const std::function<std::vector<float>(int64_t, int64_t)>& product,
                              size_t per_token, std::initializer_list<int64_t> counts,
                              const std::string& what) {
  constexpr int64_t k_alone = 3;
  std::vector<std::vector<float>> alone;
  for (int64_t i = 0; i < k_alone; ++i) alone.push_back(product(i, 1));
  for (int64_t n_tok : counts) {
    const std::vector<float> together = product(0, n_tok);
    for (int64_t i = 0; i < std::min(n_tok, k_alone); ++i) {
      for (size_t o = 0; o < per_token; ++o) {
        const float a = alone[size_t(i)][o], b = together[size_t(i) * per_token + o];
        if (std::memcmp(&a, &b, sizeof a) != 0) {
          ADD_FAILURE() << what << ": token " << i << " of " << n_tok << ", output " << o << ": "
                        << std::setprecision(9) << a << " alone, " << b << " together";
          break;
        }
      }
    }
  }
}

TEST_F(BackendOps, MulMatGivesATokenTheSameBitsWhateverSharesIt) {
  if (!dut_->batch_invariant())
    GTEST_SKIP() << dut_->name() << " does not promise it on this device";
  constexpr int64_t k_most = 40, n_out = 70;  // a tile of 64 rows and part of another
  for (tensor_type t : weight_types()) {
    for (int64_t n_in : widths(t, {100, 352, 2048})) {
      tensor_pair w = weight(t, n_in, n_out, -0.5f, 1.0f);
      const std::vector<float> xv = random_floats(rng_, size_t(n_in * k_most), -0.5f, 1.0f);
      tensor_pair b = h_->input_f32(n_out, 1, random_floats(rng_, size_t(n_out)));
      auto product = [&](int64_t first, int64_t n_tok) {
        tensor_pair x = h_->input_f32(
            n_in, n_tok,
            std::vector<float>(xv.begin() + first * n_in, xv.begin() + (first + n_tok) * n_in));
        tensor_pair out = h_->output(tensor_type::f32, n_out, n_tok);
        dut_->mul_mat(w.dut, x.dut, &b.dut, out.dut);
        return h_->dut_output(out);
      };
      expect_alone_as_together(product, size_t(n_out), {2, 7, 9, k_most},
                               std::string(tensor_type_name(t)) + " n_in " + std::to_string(n_in));
    }
  }
}

TEST_F(BackendOps, MulMatIdGivesATokenTheSameBitsWhateverSharesIt) {
  if (!dut_->batch_invariant())
    GTEST_SKIP() << dut_->name() << " does not promise it on this device";
  constexpr int64_t k_most = 40, n_expert = 4, k = 2, n_out = 70;
  for (tensor_type t : weight_types()) {
    const int64_t n_in = widths(t, {352}).front();
    tensor_pair w = experts(t, n_in, n_out, n_expert, {});
    const std::vector<float> xv = random_floats(rng_, size_t(n_in * k_most), -0.5f, 1.0f);
    std::vector<int32_t> idv;
    for (int64_t i = 0; i < k_most; ++i) {
      std::vector<int32_t> pick = {0, 1, 2, 3};
      std::shuffle(pick.begin(), pick.end(), rng_);
      idv.insert(idv.end(), pick.begin(), pick.begin() + k);
    }
    auto product = [&](int64_t first, int64_t n_tok) {
      tensor_pair x = h_->input_f32(
          n_in, n_tok,
          std::vector<float>(xv.begin() + first * n_in, xv.begin() + (first + n_tok) * n_in));
      tensor_pair ids = h_->input(tensor_type::i32, k, n_tok, idv.data() + first * k);
      tensor_pair out = h_->output(tensor_type::f32, n_out, n_tok * k);
      dut_->mul_mat_id(w.dut, x.dut, ids.dut, out.dut);
      return h_->dut_output(out);
    };
    expect_alone_as_together(product, size_t(k * n_out), {2, 5, 9, k_most},
                             std::string(tensor_type_name(t)));
  }
}

#ifdef HEARTH_DEVICE_TEST_VULKAN
// Vulkan's products round the activations as the CPU does (to the weight's dot-product type), so
// they match the CPU's to float rounding (NMSE 1e-11 or less), not only the exact product to the
// activations' rounding (1e-7 and more): a mixture-of-experts router whose two best experts
// nearly tie must choose as the reference does.
TEST_F(BackendOps, MulMatRoundsActivationsAsTheCpu) {
  for (tensor_type t : weight_types()) {
    for (int64_t n_in : widths(t, {256, 2048})) {
      for (int64_t n_tok : {1, 17}) {
        const int64_t n_out = 33;
        tensor_pair w = weight(t, n_in, n_out, -0.5f, 1.0f);
        tensor_pair x =
            h_->input_f32(n_in, n_tok, random_floats(rng_, size_t(n_in * n_tok), -0.5f, 1.0f));
        tensor_pair out = h_->output(tensor_type::f32, n_out, n_tok);
        ref_->mul_mat(w.ref, x.ref, nullptr, out.ref);
        dut_->mul_mat(w.dut, x.dut, nullptr, out.dut);
        h_->compare(out, "mul_mat~cpu", std::string(tensor_type_name(t)),
                    shape_of({{"in", n_in}, {"out", n_out}, {"tok", n_tok}}), 1e-9);
      }
    }
  }
}
#endif

#ifdef HEARTH_DEVICE_TEST_VULKAN
// A weight larger than one buffer (vk::device::weight_part_bytes: 128 MiB on lavapipe and on some
// ARM GPUs) is held in row parts: its products and row lookups give the same bits as the weight in
// one buffer, and write nothing past their output. A second backend made while
// HEARTH_VULKAN_WEIGHT_PART_BYTES asks for parts of 3 × 2,048 F32 rows (per type and width: 3 to
// 256 rows a part), weights of 2.5 parts (the last one partial), every weight type, token counts on
// both sides of the GPU layouts' switch (8), with and without a bias; row lookups of ids in every
// part, the first and last rows too.
TEST_F(BackendOps, WeightsInRowPartsGiveTheSameBitsAsInOneBuffer) {
  const int64_t part_bytes = 3 * tensor_type_row_bytes(tensor_type::f32, 2048);
  ::setenv("HEARTH_VULKAN_WEIGHT_PART_BYTES", std::to_string(part_bytes).c_str(), 1);
  std::unique_ptr<backend> split = factory_under_test().make();
  ::unsetenv("HEARTH_VULKAN_WEIGHT_PART_BYTES");
  ASSERT_NE(split, nullptr);
  {
    harness h(*dut_, *split);  // "ref": the weight in one buffer; "dut": in parts
    for (tensor_type t : weight_types()) {
      for (int64_t n_in : widths(t, {64, 352, 2048})) {
        const int64_t rows_per_part = part_bytes / 16 * 16 / tensor_type_row_bytes(t, n_in);
        const int64_t n_out = rows_per_part * 5 / 2;
        const std::string type(tensor_type_name(t));
        const std::vector<uint8_t> bytes =
            real_blocks::file_for(t)
                ? real_blocks::cut(t, n_in, n_out, rng_)
                : to_type(t, random_floats(rng_, size_t(n_in * n_out), -0.5f, 1.0f), n_in);
        tensor_pair w = h.weight_bytes(t, n_in, n_out, bytes);
        for (int64_t n_tok : {1, 3, 8, 17, 70}) {
          const bool with_bias = n_tok == 3 || n_tok == 17;
          tensor_pair x = h.input_f32(n_in, n_tok, random_floats(rng_, size_t(n_in * n_tok)));
          tensor_pair b = h.input_f32(n_out, 1, random_floats(rng_, size_t(n_out)));
          tensor_pair out = h.output(tensor_type::f32, n_out, n_tok);
          dut_->mul_mat(w.ref, x.ref, with_bias ? &b.ref : nullptr, out.ref);
          split->mul_mat(w.dut, x.dut, with_bias ? &b.dut : nullptr, out.dut);
          h.compare(out, "mul_mat", type,
                    shape_of({{"in", n_in},
                              {"out", n_out},
                              {"part", rows_per_part},
                              {"tok", n_tok},
                              {"bias", with_bias}}),
                    0.0);
        }
        std::vector<int32_t> ids = {0, int32_t(n_out - 1), int32_t(rows_per_part - 1),
                                    int32_t(rows_per_part), int32_t(2 * rows_per_part)};
        for (int i = 0; i < 6; ++i) ids.push_back(int32_t(rng_() % uint64_t(n_out)));
        tensor_pair id = h.input_i32(ids);
        tensor_pair out = h.output(tensor_type::f32, n_in, int64_t(ids.size()));
        dut_->get_rows(w.ref, id.ref, out.ref);
        split->get_rows(w.dut, id.dut, out.dut);
        h.compare(out, "get_rows", type,
                  shape_of({{"cols", n_in},
                            {"rows", n_out},
                            {"part", rows_per_part},
                            {"n", int64_t(ids.size())}}),
                  0.0);
      }
    }
  }
}
#endif

TEST_F(BackendOps, RmsNorm) {
  for (int64_t cols : {1, 7, 511, 4096}) {
    for (int64_t n : {1, 5}) {
      for (bool with_weight : {false, true}) {
        tensor_pair x = h_->input_f32(cols, n, random_floats(rng_, size_t(cols * n)));
        tensor_pair w = h_->input_f32(cols, 1, random_floats(rng_, size_t(cols)));
        tensor_pair out = h_->output(tensor_type::f32, cols, n);
        tensor none;
        ref_->rms_norm(x.ref, with_weight ? w.ref : none, 1e-6f, out.ref);
        dut_->rms_norm(x.dut, with_weight ? w.dut : none, 1e-6f, out.dut);
        h_->compare(out, "rms_norm", "f32",
                    shape_of({{"cols", cols}, {"n", n}, {"weight", with_weight}}), 1e-10);
      }
    }
  }
}

TEST_F(BackendOps, Rope) {
  for (bool neox : {false, true}) {
    for (int32_t head_dim : {64, 128}) {
      for (int32_t n_dims : {head_dim, head_dim / 2}) {
        for (int32_t n_head : {1, 4}) {
          for (int64_t n_tok : {1, 9}) {
            for (bool with_ff : {false, true}) {
              rope_params rp;
              rp.n_dims = n_dims;
              rp.freq_base = 10000.0f;
              rp.freq_scale = with_ff ? 1.0f : 0.5f;
              rp.neox = neox;
              rope_case("rope", rp, n_head, head_dim, n_tok, 5000, with_ff,
                        shape_of({{"neox", neox},
                                  {"hd", head_dim},
                                  {"dims", n_dims},
                                  {"heads", n_head},
                                  {"tok", n_tok},
                                  {"ff", with_ff}}));
            }
          }
        }
      }
    }
  }
}

// YaRN (rope_params ext_factor/attn_factor/betas, engine/backend.h): the ramp between the
// correction dimensions and the magnitude scale, on both layouts, with partial rotation, with
// frequency factors, and a half mix (ext_factor 0.5) and a non-default magnitude.
TEST_F(BackendOps, RopeYarn) {
  for (bool neox : {false, true}) {
    for (int32_t n_dims : {128, 64}) {
      for (float ext_factor : {1.0f, 0.5f}) {
        for (bool with_ff : {false, true}) {
          rope_params rp;
          rp.n_dims = n_dims;
          rp.freq_base = 1000000.0f;
          rp.freq_scale = 0.25f;
          rp.neox = neox;
          rp.ext_factor = ext_factor;
          rp.attn_factor = ext_factor == 1.0f ? 1.0f : 0.75f;
          rp.n_ctx_orig = 32768;
          rope_case("rope_yarn", rp, 4, 128, 7, 100000, with_ff,
                    shape_of({{"neox", neox},
                              {"dims", n_dims},
                              {"ext", int64_t(ext_factor * 100)},
                              {"ff", with_ff}}));
        }
      }
    }
  }
}

TEST_F(BackendOps, KvStore) {
  for (tensor_type t : {tensor_type::f16, tensor_type::f32}) {
    for (int64_t cols : {64, 258}) {
      for (int64_t n_tok : {1, 6}) {
        const int64_t n_cells = 16;
        const std::vector<uint8_t> initial =
            to_type(t, random_floats(rng_, size_t(cols * n_cells)), cols);
        tensor_pair cache = h_->output(t, cols, n_cells, initial.data());
        tensor_pair src =
            h_->input_f32(cols, n_tok, random_floats(rng_, size_t(cols * n_tok), -3, 3));
        std::vector<int32_t> cells;
        for (int64_t i = 0; i < n_tok; ++i) cells.push_back(int32_t((i * 5 + 3) % n_cells));
        tensor_pair c = h_->input_i32(cells);
        ref_->kv_store(src.ref, c.ref, cache.ref);
        dut_->kv_store(src.dut, c.dut, cache.dut);
        h_->compare(cache, "kv_store", std::string(tensor_type_name(t)),
                    shape_of({{"cols", cols}, {"tok", n_tok}, {"cells", n_cells}}), 0);
      }
    }
  }
}

TEST_F(BackendOps, Attention) {
  for (tensor_type t : {tensor_type::f16, tensor_type::f32}) {
    for (auto [n_head, n_head_kv] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{4, 1}}) {
      for (int32_t head_dim : {64, 128}) {
        // 40 tokens: device backends may take a prompt path (CUDA's tiled one) above a few.
        for (int64_t n_tok : {1, 7, 40}) {
          for (int32_t window : {0, 5}) {
            for (float softcap : {0.0f, 2.0f}) {
              const int32_t n_cells = 37;
              attention_params p;
              p.n_head = n_head;
              p.n_head_kv = n_head_kv;
              p.head_dim_k = p.head_dim_v = head_dim;
              p.scale = 1.0f / std::sqrt(float(head_dim));
              p.softcap = softcap;
              p.window = window;
              const int64_t kv_row = int64_t(n_head_kv) * head_dim;
              // Caches with a few more cells than are scanned, so cells beyond n_cells exist.
              const int64_t cache_cells = n_cells + 3;
              tensor_pair k = h_->input(
                  t, kv_row, cache_cells,
                  to_type(t, random_floats(rng_, size_t(kv_row * cache_cells), -2, 2), kv_row)
                      .data());
              tensor_pair v = h_->input(
                  t, kv_row, cache_cells,
                  to_type(t, random_floats(rng_, size_t(kv_row * cache_cells)), kv_row).data());
              std::vector<int32_t> cseq, cpos, tseq, tpos;
              for (int64_t c = 0; c < cache_cells; ++c) {
                cseq.push_back(int32_t(rng_() % 3) - 1);  // -1 empty, sequences 0 and 1
                cpos.push_back(int32_t(rng_() % 40));
              }
              for (int64_t i = 0; i < n_tok; ++i) {
                tseq.push_back(int32_t(rng_() % 2));
                tpos.push_back(20 + int32_t(rng_() % 25));
              }
              tensor_pair cs = h_->input_i32(cseq), cp = h_->input_i32(cpos);
              tensor_pair ts = h_->input_i32(tseq), tp = h_->input_i32(tpos);
              const int64_t q_row = int64_t(n_head) * head_dim;
              tensor_pair q =
                  h_->input_f32(q_row, n_tok, random_floats(rng_, size_t(q_row * n_tok), -2, 2));
              tensor_pair out = h_->output(tensor_type::f32, q_row, n_tok);
              ref_->attention(q.ref, k.ref, v.ref, ts.ref, tp.ref, cs.ref, cp.ref, n_cells, p,
                              out.ref);
              dut_->attention(q.dut, k.dut, v.dut, ts.dut, tp.dut, cs.dut, cp.dut, n_cells, p,
                              out.dut);
              h_->compare(out, "attention", std::string(tensor_type_name(t)),
                          shape_of({{"head", n_head},
                                    {"kv", n_head_kv},
                                    {"hd", head_dim},
                                    {"tok", n_tok},
                                    {"win", window},
                                    {"cap", int64_t(softcap)}}),
                          t == tensor_type::f16 ? 1e-5 : 1e-9);
            }
          }
        }
      }
    }
  }
}

// Where the backend promises it, a token's attention is the same bits alone as beside other
// tokens (of its sequence and of another, at other positions), and whatever cells past those it
// sees are scanned: head sizes with a lane-layout variant on Vulkan's CPU devices (64, 128) and
// one without (32, the GPU layout), both cache types, a window and a soft-cap.
TEST_F(BackendOps, AttentionGivesATokenTheSameBitsWhateverSharesIt) {
  if (!dut_->batch_invariant())
    GTEST_SKIP() << dut_->name() << " does not promise it on this device";
  constexpr int64_t k_most = 24, n_cells = 61;
  for (tensor_type t : {tensor_type::f16, tensor_type::f32}) {
    for (int32_t head_dim : {32, 64, 128}) {
      for (auto [window, softcap] : {std::pair{0, 0.0f}, std::pair{6, 3.0f}}) {
        attention_params p;
        p.n_head = 8;
        p.n_head_kv = 2;
        p.head_dim_k = p.head_dim_v = head_dim;
        p.scale = 1.0f / std::sqrt(float(head_dim));
        p.softcap = softcap;
        p.window = window;
        const int64_t kv_row = int64_t(p.n_head_kv) * head_dim,
                      q_row = int64_t(p.n_head) * head_dim;
        tensor_pair k = h_->input(
            t, kv_row, n_cells,
            to_type(t, random_floats(rng_, size_t(kv_row * n_cells), -2, 2), kv_row).data());
        tensor_pair v =
            h_->input(t, kv_row, n_cells,
                      to_type(t, random_floats(rng_, size_t(kv_row * n_cells)), kv_row).data());
        // Sequence 0 fills cells 0-39 at positions 0-39, sequence 1 the rest at 0-20; the tokens
        // alternate between them at the positions of their last cells.
        std::vector<int32_t> cseq, cpos, tseq, tpos;
        for (int64_t c = 0; c < n_cells; ++c) {
          cseq.push_back(c < 40 ? 0 : 1);
          cpos.push_back(int32_t(c < 40 ? c : c - 40));
        }
        for (int64_t i = 0; i < k_most; ++i) {
          tseq.push_back(int32_t(i % 2));
          tpos.push_back(int32_t(i % 2 ? 20 - i / 2 : 39 - i / 2));
        }
        const std::vector<float> qv = random_floats(rng_, size_t(q_row * k_most), -2, 2);
        tensor_pair cs = h_->input_i32(cseq), cp = h_->input_i32(cpos);
        // Tokens first .. first + n_tok - 1, scanning the first `scanned` cells.
        auto attend = [&](int64_t first, int64_t n_tok, int32_t scanned) {
          tensor_pair q = h_->input_f32(
              q_row, n_tok,
              std::vector<float>(qv.begin() + first * q_row, qv.begin() + (first + n_tok) * q_row));
          tensor_pair ts = h_->input_i32(
              std::vector<int32_t>(tseq.begin() + first, tseq.begin() + first + n_tok));
          tensor_pair tp = h_->input_i32(
              std::vector<int32_t>(tpos.begin() + first, tpos.begin() + first + n_tok));
          tensor_pair out = h_->output(tensor_type::f32, q_row, n_tok);
          dut_->attention(q.dut, k.dut, v.dut, ts.dut, tp.dut, cs.dut, cp.dut, scanned, p, out.dut);
          return h_->dut_output(out);
        };
        const std::string what = std::string(tensor_type_name(t)) + " hd " +
                                 std::to_string(head_dim) + " window " + std::to_string(window);
        expect_alone_as_together(
            [&](int64_t first, int64_t n_tok) { return attend(first, n_tok, int32_t(n_cells)); },
            size_t(q_row), {2, 5, 9, k_most}, what);
        // Token 0 (sequence 0, position 39) sees cells 0-39: scanning them only, as when it was
        // the newest, gives the bits that scanning every cell does.
        const std::vector<float> newest = attend(0, 1, 40), all = attend(0, 1, int32_t(n_cells));
        EXPECT_EQ(0, std::memcmp(newest.data(), all.data(), newest.size() * sizeof(float))) << what;
      }
    }
  }
}

TEST_F(BackendOps, Elementwise) {
  for (const char* op : {"add", "swiglu", "geglu", "scale", "softcap"}) {
    for (int64_t n : {1, 1000, 70001}) {
      const float range = std::strcmp(op, "geglu") == 0 || std::strcmp(op, "softcap") == 0 ? 12 : 4;
      tensor_pair a = h_->input_f32(n, 1, random_floats(rng_, size_t(n), -range, range));
      tensor_pair b = h_->input_f32(n, 1, random_floats(rng_, size_t(n)));
      tensor_pair out = h_->output(tensor_type::f32, n, 1);
      for (auto [be, ta, tb, to] : {std::tuple{ref_.get(), &a.ref, &b.ref, &out.ref},
                                    std::tuple{dut_.get(), &a.dut, &b.dut, &out.dut}}) {
        if (std::strcmp(op, "add") == 0) be->add(*ta, *tb, *to);
        if (std::strcmp(op, "swiglu") == 0) be->swiglu(*ta, *tb, *to);
        if (std::strcmp(op, "geglu") == 0) be->geglu(*ta, *tb, *to);
        if (std::strcmp(op, "scale") == 0) be->scale(*ta, 0.37f, *to);
        if (std::strcmp(op, "softcap") == 0) be->softcap(*ta, 5.0f, *to);
      }
      h_->compare(out, op, "f32", shape_of({{"n", n}}), 1e-10);
    }
  }
}

TEST_F(BackendOps, MoeRoute) {
  for (int64_t n_expert : {8, 128}) {
    for (int64_t k : {1, 2, 8}) {
      for (int64_t n_tok : {1, 5, 70}) {
        for (bool normalize : {false, true}) {
          for (bool ties : {false, true}) {
            // Ties: logits on a coarse grid, so equal probabilities occur and the lower id must
            // come first on both backends.
            std::vector<float> lv = random_floats(rng_, size_t(n_expert * n_tok), -4, 4);
            if (ties)
              for (float& v : lv) v = std::round(v);
            tensor_pair logits = h_->input_f32(n_expert, n_tok, lv);
            tensor_pair ids = h_->output(tensor_type::i32, k, n_tok);
            tensor_pair wts = h_->output(tensor_type::f32, k, n_tok);
            ref_->moe_route(logits.ref, normalize, ids.ref, wts.ref);
            dut_->moe_route(logits.dut, normalize, ids.dut, wts.dut);
            const std::string shape = shape_of({{"experts", n_expert},
                                                {"k", k},
                                                {"tok", n_tok},
                                                {"norm", normalize},
                                                {"ties", ties}});
            h_->compare(ids, "moe_route", "i32", shape, 0);
            h_->compare(wts, "moe_route", "f32", shape, 1e-10);
          }
        }
      }
    }
  }
}

TEST_F(BackendOps, MulMatId) {
  const int64_t n_expert = 6;
  for (tensor_type t : weight_types()) {
    for (int64_t n_in : widths(t, {100, 352})) {
      for (int64_t n_out : {33, 130}) {
        for (int64_t n_tok : {1, 3, 8, 17, 70}) {
          for (int64_t k : {1, 2, 4}) {
            for (bool shared_x : {true, false}) {
              // Experts 1 and 4 are never chosen, and their matrices are poison. Each token's k
              // ids are distinct, as the router's are, except with n_tok = 70 and k = 2: there
              // every token chooses expert 2 twice (the contract allows it), more rows than a
              // device may plan for one expert.
              const std::vector<int32_t> used = {0, 2, 3, 5};
              if (k > int64_t(used.size())) continue;
              const bool crowded = n_tok == 70 && k == 2;
              std::vector<int32_t> idv;
              for (int64_t i = 0; i < n_tok; ++i) {
                std::vector<int32_t> pick = used;
                std::shuffle(pick.begin(), pick.end(), rng_);
                if (crowded) pick = {2, 2};
                idv.insert(idv.end(), pick.begin(), pick.begin() + k);
              }
              tensor_pair w = experts(t, n_in, n_out, n_expert, {1, 4});
              const int64_t x_rows = shared_x ? n_tok : n_tok * k;
              const std::vector<float> xv = random_floats(rng_, size_t(n_in * x_rows), -0.5f, 1.0f);
              tensor_pair x = h_->input_f32(n_in, x_rows, xv);
              tensor_pair ids = h_->input(tensor_type::i32, k, n_tok, idv.data());
              tensor_pair out = h_->output(tensor_type::f32, n_out, n_tok * k);
              ref_->mul_mat_id(w.ref, x.ref, ids.ref, out.ref);
              dut_->mul_mat_id(w.dut, x.dut, ids.dut, out.dut);
              const std::vector<float> wv = harness::dequantized(w, n_in);
              std::vector<double> exact(size_t(n_out * n_tok * k));
              for (int64_t r = 0; r < n_tok * k; ++r) {
                const int64_t e = idv[size_t(r)], xr = shared_x ? r / k : r;
                for (int64_t o = 0; o < n_out; ++o) {
                  double acc = 0;
                  for (int64_t i = 0; i < n_in; ++i)
                    acc +=
                        double(wv[size_t((e * n_out + o) * n_in + i)]) * xv[size_t(xr * n_in + i)];
                  exact[size_t(r * n_out + o)] = acc;
                }
              }
              h_->compare_exact(out, exact, "mul_mat_id", std::string(tensor_type_name(t)),
                                shape_of({{"in", n_in},
                                          {"out", n_out},
                                          {"tok", n_tok},
                                          {"k", k},
                                          {"shared", shared_x}}),
                                t == tensor_type::f32 ? 1e-9 : 5e-4);
            }
          }
        }
      }
    }
  }
}

TEST_F(BackendOps, MoeCombine) {
  for (int64_t cols : {1, 7, 1000}) {
    for (int64_t k : {1, 2, 8}) {
      for (int64_t n_tok : {1, 5, 33}) {
        tensor_pair x =
            h_->input_f32(cols, n_tok * k, random_floats(rng_, size_t(cols * n_tok * k), -3, 3));
        tensor_pair wts = h_->input_f32(k, n_tok, random_floats(rng_, size_t(k * n_tok), 0, 1));
        tensor_pair out = h_->output(tensor_type::f32, cols, n_tok);
        ref_->moe_combine(x.ref, wts.ref, out.ref);
        dut_->moe_combine(x.dut, wts.dut, out.dut);
        h_->compare(out, "moe_combine", "f32", shape_of({{"cols", cols}, {"k", k}, {"tok", n_tok}}),
                    1e-12);
      }
    }
  }
}

// Several ops enqueued before one download: each must see the previous one's writes.
TEST_F(BackendOps, Chain) {
  const int64_t n_embd = 128, n_tok = 5, n_cells = 8;
  tensor_pair x = h_->input_f32(n_embd, n_tok, random_floats(rng_, size_t(n_embd * n_tok)));
  tensor_pair norm_w = h_->input_f32(n_embd, 1, random_floats(rng_, size_t(n_embd)));
  tensor_pair wq =
      h_->weight(tensor_type::f32, n_embd, n_embd, random_floats(rng_, size_t(n_embd * n_embd)));
  tensor_pair cur = h_->output(tensor_type::f32, n_embd, n_tok);
  tensor_pair q = h_->output(tensor_type::f32, n_embd, n_tok);
  tensor_pair kc = h_->output(tensor_type::f16, n_embd, n_cells);
  tensor_pair vc = h_->output(tensor_type::f16, n_embd, n_cells);
  tensor_pair att = h_->output(tensor_type::f32, n_embd, n_tok);
  tensor_pair out = h_->output(tensor_type::f32, n_embd, n_tok);
  std::vector<int32_t> pos = {0, 1, 2, 3, 4}, seq = {0, 0, 0, 0, 0}, cells = {0, 1, 2, 3, 4};
  std::vector<int32_t> cseq = {0, 0, 0, 0, 0, -1, -1, -1}, cpos = {0, 1, 2, 3, 4, 0, 0, 0};
  tensor_pair p = h_->input_i32(pos), s = h_->input_i32(seq), c = h_->input_i32(cells);
  tensor_pair cs = h_->input_i32(cseq), cp = h_->input_i32(cpos);
  rope_params rp;
  rp.n_dims = 32;
  attention_params ap;
  ap.n_head = ap.n_head_kv = 4;
  ap.head_dim_k = ap.head_dim_v = 32;
  ap.scale = 0.2f;
  for (auto [be, sel] : {std::pair{ref_.get(), 0}, std::pair{dut_.get(), 1}}) {
    auto pick = [sel](const tensor_pair& tp) -> const tensor& {
      return sel == 0 ? tp.ref : tp.dut;
    };
    be->rms_norm(pick(x), pick(norm_w), 1e-5f, pick(cur));
    be->mul_mat(pick(wq), pick(cur), nullptr, pick(q));
    be->rope(pick(q), 4, 32, pick(p), rp, nullptr);
    be->kv_store(pick(q), pick(c), pick(kc));
    be->kv_store(pick(cur), pick(c), pick(vc));
    be->attention(pick(q), pick(kc), pick(vc), pick(s), pick(p), pick(cs), pick(cp),
                  int32_t(n_cells), ap, pick(att));
    be->add(pick(att), pick(x), pick(out));
  }
  h_->compare(out, "chain", "f16", shape_of({{"embd", n_embd}, {"tok", n_tok}}), 1e-5);
}

// --- perf mode (HEARTH_BACKEND_OPS_PERF=1; skipped otherwise, so ctest never runs or times it):
// each op on the backend under test alone, at the shapes of TinyLlama (the issue 21 benchmark
// model), as the reference's `test-backend-ops perf`: a batch of the same op recorded, one
// synchronize, the wall time per op (and the process's CPU time per op: on a CPU device such as
// lavapipe it says how much of the machine the op took, which a shared machine's wall time does
// not), and for the matrix products the weight bytes read per second. Run one op group with
// --gtest_filter='*Perf*' and HEARTH_BACKEND_OPS_PERF=mul_mat (a prefix of the op's name).

double seconds_now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

class BackendOpsPerf : public BackendOps {
 protected:
  void SetUp() override {
    const char* want = std::getenv("HEARTH_BACKEND_OPS_PERF");
    if (!want || !*want) GTEST_SKIP() << "set HEARTH_BACKEND_OPS_PERF=1 (or an op name) to time";
    filter_ = std::string(want) == "1" ? "" : want;
    BackendOps::SetUp();
    std::printf("%-10s %-5s %-40s %6s %12s %12s %9s\n", "op", "type", "shape", "runs", "us/run",
                "cpu us/run", "GB/s");
  }
  // Times `op` (one call records one op on the backend under test); `bytes` read per call (the
  // weight) or 0.
  void time(const std::string& name, const std::string& type, const std::string& shape,
            double bytes, const std::function<void()>& op) {
    if (!filter_.empty() && name.rfind(filter_, 0) != 0) return;
    op();  // warm-up: pipelines, scratch buffers
    dut_->synchronize();
    double t0 = seconds_now(CLOCK_MONOTONIC);
    op();
    dut_->synchronize();
    const double once = seconds_now(CLOCK_MONOTONIC) - t0;
    const int runs = int(std::clamp(0.5 / std::max(once, 1e-6), 2.0, 500.0));
    t0 = seconds_now(CLOCK_MONOTONIC);
    const double c0 = seconds_now(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < runs; ++i) op();
    dut_->synchronize();
    const double wall = (seconds_now(CLOCK_MONOTONIC) - t0) / runs;
    const double cpu = (seconds_now(CLOCK_PROCESS_CPUTIME_ID) - c0) / runs;
    char gbs[32] = "";
    if (bytes > 0) std::snprintf(gbs, sizeof gbs, "%9.2f", bytes / wall * 1e-9);
    std::printf("%-10s %-5s %-40s %6d %12.1f %12.1f %9s\n", name.c_str(), type.c_str(),
                shape.c_str(), runs, wall * 1e6, cpu * 1e6, gbs);
    std::fflush(stdout);
  }
  std::string filter_;
};

TEST_F(BackendOpsPerf, Perf) {
  const int64_t n_embd = 2048, n_ff = 5632, n_vocab = 32000, n_head = 32, n_head_kv = 4;
  const int64_t head_dim = 64;
  // Matrix products: the attention and feed-forward shapes, and the output (vocabulary) one.
  struct mm_case {
    tensor_type t;
    int64_t n_in, n_out;
  };
  std::vector<mm_case> mm;
  for (tensor_type t : {tensor_type::q4_k, tensor_type::q6_k, tensor_type::q8_0, tensor_type::q4_0,
                        tensor_type::f16, tensor_type::f32}) {
    if (!dut_->supports_weight_type(t)) continue;
    mm.push_back({t, n_embd, n_embd});
    mm.push_back({t, n_embd, n_ff});
  }
  mm.push_back({tensor_type::q6_k, n_embd, n_vocab});
  for (const mm_case& c : mm) {
    if (!filter_.empty() && std::string("mul_mat").rfind(filter_, 0) != 0) break;
    tensor_pair w = weight(c.t, c.n_in, c.n_out);
    for (int64_t n_tok : {1, 4, 8, 32, 128}) {
      tensor_pair x =
          h_->input_f32(c.n_in, n_tok, random_floats(rng_, size_t(c.n_in * n_tok), -0.5f, 1.0f));
      tensor_pair out = h_->output(tensor_type::f32, c.n_out, n_tok);
      time("mul_mat", std::string(tensor_type_name(c.t)),
           shape_of({{"in", c.n_in}, {"out", c.n_out}, {"tok", n_tok}}),
           double(tensor_type_row_bytes(c.t, c.n_in) * c.n_out),
           [&] { dut_->mul_mat(w.dut, x.dut, nullptr, out.dut); });
    }
  }
  for (int64_t n_tok : {1, 32}) {
    tensor_pair x = h_->input_f32(n_embd, n_tok, random_floats(rng_, size_t(n_embd * n_tok)));
    tensor_pair nw = h_->input_f32(n_embd, 1, random_floats(rng_, size_t(n_embd)));
    tensor_pair out = h_->output(tensor_type::f32, n_embd, n_tok);
    time("rms_norm", "f32", shape_of({{"cols", n_embd}, {"tok", n_tok}}), 0,
         [&] { dut_->rms_norm(x.dut, nw.dut, 1e-5f, out.dut); });
    std::vector<int32_t> pos;
    for (int64_t i = 0; i < n_tok; ++i) pos.push_back(int32_t(i));
    tensor_pair ps = h_->input_i32(pos);
    rope_params rp;
    rp.n_dims = int32_t(head_dim);
    time("rope", "f32", shape_of({{"head", n_head}, {"hd", head_dim}, {"tok", n_tok}}), 0,
         [&] { dut_->rope(x.dut, int32_t(n_head), int32_t(head_dim), ps.dut, rp, nullptr); });
    tensor_pair g = h_->input_f32(n_ff, n_tok, random_floats(rng_, size_t(n_ff * n_tok)));
    tensor_pair u = h_->input_f32(n_ff, n_tok, random_floats(rng_, size_t(n_ff * n_tok)));
    tensor_pair gu = h_->output(tensor_type::f32, n_ff, n_tok);
    time("swiglu", "f32", shape_of({{"n", n_ff}, {"tok", n_tok}}), 0,
         [&] { dut_->swiglu(g.dut, u.dut, gu.dut); });
    time("add", "f32", shape_of({{"n", n_embd}, {"tok", n_tok}}), 0,
         [&] { dut_->add(x.dut, x.dut, out.dut); });
    tensor_pair table = weight(tensor_type::q4_k, n_embd, 512);
    std::vector<int32_t> ids(size_t(n_tok), 7);
    tensor_pair id = h_->input_i32(ids);
    time("get_rows", "q4_K", shape_of({{"cols", n_embd}, {"tok", n_tok}}), 0,
         [&] { dut_->get_rows(table.dut, id.dut, out.dut); });
  }
  // Attention over a cache of one sequence: decoding (1 token) and a prompt (32), F16 cache.
  for (auto [n_tok, n_cells] :
       {std::pair<int64_t, int64_t>{1, 48}, {1, 512}, {32, 32}, {32, 512}}) {
    const int64_t kv_row = n_head_kv * head_dim, q_row = n_head * head_dim;
    tensor_pair k = h_->input(
        tensor_type::f16, kv_row, n_cells,
        to_type(tensor_type::f16, random_floats(rng_, size_t(kv_row * n_cells)), kv_row).data());
    tensor_pair v = h_->input(
        tensor_type::f16, kv_row, n_cells,
        to_type(tensor_type::f16, random_floats(rng_, size_t(kv_row * n_cells)), kv_row).data());
    std::vector<int32_t> cseq(size_t(n_cells), 0), cpos, tseq(size_t(n_tok), 0), tpos;
    for (int64_t c = 0; c < n_cells; ++c) cpos.push_back(int32_t(c));
    for (int64_t i = 0; i < n_tok; ++i) tpos.push_back(int32_t(n_cells - n_tok + i));
    tensor_pair cs = h_->input_i32(cseq), cp = h_->input_i32(cpos);
    tensor_pair ts = h_->input_i32(tseq), tp = h_->input_i32(tpos);
    tensor_pair q = h_->input_f32(q_row, n_tok, random_floats(rng_, size_t(q_row * n_tok)));
    tensor_pair out = h_->output(tensor_type::f32, q_row, n_tok);
    attention_params ap;
    ap.n_head = int32_t(n_head);
    ap.n_head_kv = int32_t(n_head_kv);
    ap.head_dim_k = ap.head_dim_v = int32_t(head_dim);
    ap.scale = 0.125f;
    time("attention", "f16",
         shape_of({{"head", n_head}, {"kv", n_head_kv}, {"tok", n_tok}, {"cells", n_cells}}), 0,
         [&] {
           dut_->attention(q.dut, k.dut, v.dut, ts.dut, tp.dut, cs.dut, cp.dut, int32_t(n_cells),
                           ap, out.dut);
         });
  }
}

}  // namespace
}  // namespace hearth
