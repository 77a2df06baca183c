// The integer product of nets/int8.py and the elementwise work around it (nets/kernels.py says why).
//
// A weight of N outputs and K inputs (planes stacked as more outputs) is kept in blocks of 16 outputs, each block
// K/4 rows of 64 bytes: for four consecutive inputs, the 16 outputs' 4 weights side by side, [N/16][K/4][16][4].
// It is the layout both integer instructions of x86 read: AVX-512 VNNI's vpdpbusd multiplies 4 unsigned bytes of
// a row by 4 signed bytes of each of 16 outputs and adds the four products to each output's 32-bit sum, and
// AMX's tdpbusd does the same for 16 rows and 16 consecutive input quads of one block at once. Sums of integers
// have no order, so both give every output the same exact integer; (sum - HALF * sum_k w) as float times the
// output's scale is exact up to its one rounding (|sum| < 2^24), the same bits as oneDNN's int8 product.
#include <torch/extension.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

static constexpr int32_t HALF = 64;

// One row's scale and halves: the scalar loop, and the same operations 16 at a time where AVX-512 is (a maximum
// has no order; a division, a rounding to nearest even and the integer steps are exact per element).
static void quantize_row(const float* x, int64_t K, uint8_t* hi, uint8_t* lo, float* scale) {
  float top = 0.f;
  for (int64_t k = 0; k < K; ++k) top = std::max(top, std::fabs(x[k]));
  const float s = std::max(top, 1e-30f) / 8127.f;                        // LEVELS
  *scale = s;
  for (int64_t k = 0; k < K; ++k) {
    const int32_t shifted = static_cast<int32_t>(std::nearbyint(x[k] / s)) + HALF;   // q + HALF
    hi[k] = static_cast<uint8_t>((shifted >> 7) + HALF);
    lo[k] = static_cast<uint8_t>(shifted & 127);
  }
}

__attribute__((target("avx512f,avx512bw")))
static void quantize_row_avx512(const float* x, int64_t K, uint8_t* hi, uint8_t* lo, float* scale) {
  __m512 top = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) top = _mm512_max_ps(top, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  const float s = std::max(_mm512_reduce_max_ps(top), 1e-30f) / 8127.f;
  *scale = s;
  const __m512 divisor = _mm512_set1_ps(s);
  const __m512i half = _mm512_set1_epi32(HALF), low = _mm512_set1_epi32(127);
  for (int64_t k = 0; k < K; k += 16) {
    const __m512 q = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(x + k), divisor),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i shifted = _mm512_add_epi32(_mm512_cvtps_epi32(q), half);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + k),
                     _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_srai_epi32(shifted, 7), half)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + k), _mm512_cvtepi32_epi8(_mm512_and_si512(shifted, low)));
  }
}

std::vector<torch::Tensor> quantize_rows(torch::Tensor x) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  // x (M, K) float32 -> [X_hi + HALF; X_lo + HALF] as uint8 (2M, K), and s_x (M, 1): nets/int8.quantize_rows
  const int64_t M = x.size(0), K = x.size(1);
  auto rows = torch::empty({2 * M, K}, x.options().dtype(torch::kUInt8));
  auto scale = torch::empty({M, 1}, x.options());
  const float* X = x.data_ptr<float>();
  uint8_t* R = rows.data_ptr<uint8_t>();
  const bool wide = K % 16 == 0 && __builtin_cpu_supports("avx512bw");
  for (int64_t m = 0; m < M; ++m) {
    auto row = wide ? quantize_row_avx512 : quantize_row;
    row(X + m * K, K, R + m * K, R + (M + m) * K, scale.data_ptr<float>() + m);
  }
  return {rows, scale};
}

torch::Tensor combine(torch::Tensor p, torch::Tensor scale, int64_t planes) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  // p (2M, planes N): the halves' products with each plane, times s_w -> (M, N) = ((HI hi + lo) per plane,
  // HI W_hi + W_lo) times s_x: nets/int8.combine's sums in their order (x 128 is exact)
  const int64_t M = p.size(0) / 2, P = p.size(1), N = P / planes;
  auto out = torch::empty({M, N}, p.options());
  const float* A = p.data_ptr<float>();
  const float* S = scale.data_ptr<float>();
  float* Y = out.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) {
    const float* hi = A + m * P;
    const float* lo = A + (M + m) * P;
    float* y = Y + m * N;
    const float s = S[m];
    if (planes == 1) {
      for (int64_t n = 0; n < N; ++n) y[n] = (lo[n] + 128.f * hi[n]) * s;
    } else {
      for (int64_t n = 0; n < N; ++n)
        y[n] = ((lo[N + n] + 128.f * hi[N + n]) + 128.f * (lo[n] + 128.f * hi[n])) * s;
    }
  }
  return out;
}

torch::Tensor block_weight(torch::Tensor w) {
  // w (N, K) int8, N a multiple of 16 and K of 4 -> [N/16][K/4][16][4]
  const int64_t N = w.size(0), K = w.size(1);
  return w.view({N / 16, 16, K / 4, 4}).permute({0, 2, 1, 3}).contiguous();
}

static bool has_vnni() { return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"); }

static bool has_amx() {
  // the kernel lets a process use AMX's tile registers only when asked (Linux 5.16 and later)
  static const bool ok = [] {
    if (!__builtin_cpu_supports("amx-int8") || !__builtin_cpu_supports("amx-tile")) return false;
    constexpr long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  }();
  return ok;
}

std::vector<bool> capabilities() { return {has_vnni(), has_amx()}; }

// Each output's float from its integer sum: (sum - HALF sum_k w) times its scale.
__attribute__((target("avx512f,avx512bw")))
static inline void finish(__m512i sum, const int32_t* wsum, const float* scale, float* y) {
  const __m512i exact = _mm512_sub_epi32(sum, _mm512_mullo_epi32(_mm512_set1_epi32(HALF), _mm512_loadu_si512(wsum)));
  _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(exact), _mm512_loadu_ps(scale)));
}

// A row's two halves' sums for 16 outputs, as the row's float outputs: (lo + HI hi) s_w, times the row's s_x, in
// nets/int8.combine's operations and order (x 128 is exact).
__attribute__((target("avx512f,avx512bw")))
static inline void finish_row(__m512i hi, __m512i lo, const int32_t* wsum, const float* scale, float s_x, float* y) {
  const __m512i zero = _mm512_mullo_epi32(_mm512_set1_epi32(HALF), _mm512_loadu_si512(wsum));
  const __m512 s_w = _mm512_loadu_ps(scale);
  const __m512 p_hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(hi, zero)), s_w);
  const __m512 p_lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(lo, zero)), s_w);
  _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_add_ps(p_lo, _mm512_mul_ps(_mm512_set1_ps(128.f), p_hi)),
                                    _mm512_set1_ps(s_x)));
}

// VNNI: a block of 16 outputs for up to 8 rows at a time, its weights read once for all of them (from L1 after the
// first 8 rows).
__attribute__((target("avx512f,avx512bw,avx512vnni")))
static void product_vnni(const uint8_t* X, int64_t R, int64_t K, const int8_t* W, int64_t N, const float* scale,
                         const int32_t* wsum, float* Y) {
  const int64_t quads = K / 4;
  for (int64_t b = 0; b < N / 16; ++b) {
    const int8_t* block = W + b * quads * 64;
    for (int64_t r0 = 0; r0 < R; r0 += 8) {
      const int64_t rows = std::min<int64_t>(8, R - r0);
      __m512i acc[8];
      for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_si512();
      const uint8_t* x = X + r0 * K;
      for (int64_t q = 0; q < quads; ++q) {
        const __m512i w = _mm512_loadu_si512(block + q * 64);
        for (int i = 0; i < rows; ++i) {
          int32_t four;
          std::memcpy(&four, x + i * K + 4 * q, 4);
          acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(four), w);
        }
      }
      for (int i = 0; i < rows; ++i) finish(acc[i], wsum + 16 * b, scale + 16 * b, Y + (r0 + i) * N + 16 * b);
    }
  }
}

struct TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// AMX: tiles of 16 rows x 64 inputs (A), 16 input quads x 16 outputs (B, a block's 1 KB) and 16 x 16 sums (C);
// two of A and two of B give four of C, 32 rows x 32 outputs, per pass over K.
__attribute__((target("amx-tile")))
static void tile_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) { config.rows[t] = 16; config.colsb[t] = 64; }
  _tile_loadconfig(&config);
}

// One pass over K: A's rows 0-15 and 16-31 (row stride K) against W's blocks b and b + two; the sums stored as
// [rows 0-15 x block b, rows 0-15 x block b + 1, rows 16-31 x block b, rows 16-31 x block b + 1].
__attribute__((target("amx-tile,amx-int8")))
static void tile_pass(const uint8_t* A, int64_t K, const int8_t* W, int64_t b, bool two, int32_t sums[4][16][16]) {
  const int64_t quads = K / 4;
  _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
  for (int64_t k = 0; k < K; k += 64) {
    _tile_loadd(0, A + k, K);
    _tile_loadd(1, A + 16 * K + k, K);
    _tile_loadd(2, W + (b * quads + k / 4) * 64, 64);
    _tile_loadd(3, W + ((b + two) * quads + k / 4) * 64, 64);
    _tile_dpbusd(4, 0, 2); _tile_dpbusd(5, 0, 3); _tile_dpbusd(6, 1, 2); _tile_dpbusd(7, 1, 3);
  }
  _tile_stored(4, sums[0], 64); _tile_stored(5, sums[1], 64);
  _tile_stored(6, sums[2], 64); _tile_stored(7, sums[3], 64);
}

// Rows come padded to 32.
__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw")))
static void product_amx(const uint8_t* X, int64_t R, int64_t K, const int8_t* W, int64_t N, const float* scale,
                        const int32_t* wsum, float* Y) {
  tile_config();
  alignas(64) int32_t sums[4][16][16];
  for (int64_t b = 0; b < N / 16; b += 2) {
    const bool two = b + 1 < N / 16;
    for (int64_t r0 = 0; r0 < R; r0 += 32) {
      tile_pass(X + r0 * K, K, W, b, two, sums);
      for (int t = 0; t < 4; ++t) {
        const int64_t block = b + (t & 1), first = r0 + 16 * (t >> 1);
        if (block >= N / 16) continue;
        for (int i = 0; i < 16 && first + i < R; ++i)
          finish(_mm512_load_si512(sums[t][i]), wsum + 16 * block, scale + 16 * block,
                 Y + (first + i) * N + 16 * block);
      }
    }
  }
  _tile_release();
}

// AMX for one weight plane, each row's halves summed as they come out: the rows in groups of 16, a group's 16 high
// halves then its 16 low halves (32 rows of A), so a pass gives each of 16 rows both halves' sums for 32 outputs.
__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw")))
static void rows_amx(const uint8_t* X, int64_t M, int64_t K, const int8_t* W, int64_t N, const float* scale,
                     const int32_t* wsum, const float* s_x, float* Y) {
  tile_config();
  alignas(64) int32_t sums[4][16][16];
  for (int64_t b = 0; b < N / 16; b += 2) {
    const bool two = b + 1 < N / 16;
    for (int64_t m0 = 0; m0 < M; m0 += 16) {
      tile_pass(X + 2 * m0 * K, K, W, b, two, sums);                        // 16 high halves, then 16 low
      for (int half = 0; half < 1 + two; ++half) {
        const int64_t block = b + half;
        for (int i = 0; i < 16 && m0 + i < M; ++i)
          finish_row(_mm512_load_si512(sums[half][i]), _mm512_load_si512(sums[2 + half][i]), wsum + 16 * block,
                     scale + 16 * block, s_x[m0 + i], Y + (m0 + i) * N + 16 * block);
      }
    }
  }
  _tile_release();
}

// VNNI for one weight plane: 4 rows' halves at a time.
__attribute__((target("avx512f,avx512bw,avx512vnni")))
static void rows_vnni(const uint8_t* X, int64_t M, int64_t K, const int8_t* W, int64_t N, const float* scale,
                      const int32_t* wsum, const float* s_x, float* Y) {
  const int64_t quads = K / 4;
  for (int64_t b = 0; b < N / 16; ++b) {
    const int8_t* block = W + b * quads * 64;
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const int64_t rows = std::min<int64_t>(4, M - m0);
      __m512i hi[4], lo[4];
      for (int i = 0; i < 4; ++i) hi[i] = lo[i] = _mm512_setzero_si512();
      for (int64_t q = 0; q < quads; ++q) {
        const __m512i w = _mm512_loadu_si512(block + q * 64);
        for (int i = 0; i < rows; ++i) {
          int32_t four;
          std::memcpy(&four, X + (m0 + i) * K + 4 * q, 4);
          hi[i] = _mm512_dpbusd_epi32(hi[i], _mm512_set1_epi32(four), w);
          std::memcpy(&four, X + (M + m0 + i) * K + 4 * q, 4);
          lo[i] = _mm512_dpbusd_epi32(lo[i], _mm512_set1_epi32(four), w);
        }
      }
      for (int i = 0; i < rows; ++i)
        finish_row(hi[i], lo[i], wsum + 16 * b, scale + 16 * b, s_x[m0 + i], Y + (m0 + i) * N + 16 * b);
    }
  }
}

torch::Tensor product_rows(torch::Tensor rows, torch::Tensor s_x, torch::Tensor blocked, torch::Tensor scale,
                           torch::Tensor wsum, bool amx) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  // rows [X_hi; X_lo] (2M, K) uint8 and s_x (M, 1) (quantize_rows), a weight of one plane -> (M, N): product and
  // combine in one pass, the same bits
  const int64_t M = rows.size(0) / 2, K = rows.size(1), N = blocked.size(0) * 16;
  auto out = torch::empty({M, N}, scale.options());
  const uint8_t* X = rows.data_ptr<uint8_t>();
  if (amx) {                 // regrouped: each 16 rows' high halves, then their low halves; the last group padded
    thread_local std::vector<uint8_t> buffer;
    const int64_t groups = (M + 15) / 16;
    buffer.resize(groups * 32 * K);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t n = std::min<int64_t>(16, M - 16 * g);
      std::memcpy(buffer.data() + 32 * g * K, X + 16 * g * K, n * K);
      std::memcpy(buffer.data() + (32 * g + 16) * K, X + (M + 16 * g) * K, n * K);
    }
    rows_amx(buffer.data(), M, K, blocked.data_ptr<int8_t>(), N, scale.data_ptr<float>(), wsum.data_ptr<int32_t>(),
             s_x.data_ptr<float>(), out.data_ptr<float>());
  } else {
    rows_vnni(X, M, K, blocked.data_ptr<int8_t>(), N, scale.data_ptr<float>(), wsum.data_ptr<int32_t>(),
              s_x.data_ptr<float>(), out.data_ptr<float>());
  }
  return out;
}

torch::Tensor product(torch::Tensor rows, torch::Tensor blocked, torch::Tensor scale, torch::Tensor wsum, bool amx) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  // rows (R, K) uint8 (each value + HALF); blocked [N/16][K/4][16][4] int8; scale (N,) float; wsum (N,) int32
  // -> (R, N) float: (rows - HALF) W^T, each output times its scale. AMX needs K a multiple of 64.
  const int64_t R = rows.size(0), K = rows.size(1), N = blocked.size(0) * 16;
  auto out = torch::empty({R, N}, scale.options());
  if (amx) {
    const uint8_t* padded = rows.data_ptr<uint8_t>();
    if (R % 32) {             // the tiles read whole blocks of 32 rows: the rows past R are never written out
      thread_local std::vector<uint8_t> buffer;
      buffer.resize((R + 31) / 32 * 32 * K);
      std::memcpy(buffer.data(), padded, R * K);
      padded = buffer.data();
    }
    product_amx(padded, R, K, blocked.data_ptr<int8_t>(), N, scale.data_ptr<float>(),
                wsum.data_ptr<int32_t>(), out.data_ptr<float>());
  } else {
    product_vnni(rows.data_ptr<uint8_t>(), R, K, blocked.data_ptr<int8_t>(), N, scale.data_ptr<float>(),
                 wsum.data_ptr<int32_t>(), out.data_ptr<float>());
  }
  return out;
}

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor g, double eps) {
  pybind11::gil_scoped_release free;     // the work touches no Python object: other threads run meanwhile
  // x (M, C) float32, g (C,): x / sqrt(mean(x^2) + eps) * g, each row on its own (the mean summed c = 0, 1, ...)
  const int64_t M = x.size(0), C = x.size(1);
  auto out = torch::empty_like(x);
  const float* X = x.data_ptr<float>();
  const float* G = g.data_ptr<float>();
  float* Y = out.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = X + m * C;
    float lanes[16] = {0};                  // 16 running sums, added up in one order (as attention.cpp's dot)
    int64_t c = 0;
    for (; c + 16 <= C; c += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += xm[c + l] * xm[c + l];
    for (int l = 0; c + l < C; ++l) lanes[l] += xm[c + l] * xm[c + l];
    float sum = 0.f;
    for (int l = 0; l < 16; ++l) sum += lanes[l];
    const float r = 1.f / std::sqrt(sum / static_cast<float>(C) + static_cast<float>(eps));
    for (int64_t k = 0; k < C; ++k) Y[m * C + k] = xm[k] * r * G[k];
  }
  return out;
}
