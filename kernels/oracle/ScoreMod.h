// Float64 oracle for attention with score modifications (docs/bob-math.md, "Score
// modifications"): softcap, ALiBi, a relative-position bias table, a dense additive bias,
// sinks and an explicit mask, with the forward, first backward (and the modifications'
// parameter gradients), BoB (and the parameters' gradients of BoB's scalar F) and the forward's
// JVP. dense:: materializes every N x M matrix, one head at a time; tiled:: runs the kernels'
// two-pass schedule with the modification's per-tile changes (tested against dense::).
//
// The modified scores of query head h of batch b, for a visible pair (i, j):
//
//     T    = s q_i . k_j                                   (the plain scores)
//     S_ij = cap(T) + B[b][h][i][j] + table[h][bucket(r)] + alibi_h(r)
//     r    = j - (i + M - N)                               (key minus the query's own key,
//                                                           bottom-right aligned as the mask)
//     cap(T) = c tanh(T / c)  (softcap > 0)   or  T  (softcap = 0: no cap)
//     alibi_h(r) = -slope_h |r|  (Symmetric)  or  slope_h r  (Linear, the causal form)
//
// The cap applies to the plain scores and the biases are added after it (Gemma caps q k^T; a
// bias added before the cap would be capped too, which no model we know does). A pair is
// visible when the Problem's own mask (causal, window) and the explicit mask both allow it.
// With sinks, row i's softmax normalizer gains exp(z_h): L_i = log(sum_j exp S_ij + exp z_h),
// the sink has no value row, so the row's probabilities sum to 1 - exp(z_h - L_i).
//
// The unmodified API in Oracle.h is untouched; with an empty ScoreMod these functions compute
// the same math (the tests check it), not necessarily bit for bit. V is as wide as Q and K here:
// a Problem with another dv is refused.
#pragma once

#include "kernels/oracle/Oracle.h"

#include <vector>

namespace flashbob::oracle {

enum class AlibiForm {
  Symmetric,  // -slope |r|: encoder / bidirectional ALiBi
  Linear,     // slope r (r <= 0 where causal): the causal form; differs from Symmetric only
              // right of the diagonal
};

// T5's relative-position buckets (t5 `_relative_position_bucket`, relative_position = r):
// exact buckets for small |r|, logarithmic ones up to maxDistance, the last bucket beyond.
struct Bucketing {
  Index buckets = 32;
  Index maxDistance = 128;
  bool bidirectional = true;  // separate buckets for keys right of the query (r > 0)
};
Index relativeBucket(const Bucketing& bucketing, Index r);

// Every field is optional: empty vectors / tensors and softcap = 0 mean "not applied".
struct ScoreMod {
  double softcap = 0.0;              // c > 0, or 0 for none
  std::vector<double> alibiSlopes;   // one per query head, or empty
  AlibiForm alibiForm = AlibiForm::Symmetric;
  HeadTensor bias;                   // (batch or 1, heads or 1, N, M); empty (no data) for none
  std::vector<double> table;         // heads x bucketing.buckets, row-major; empty for none
  Bucketing bucketing;
  std::vector<double> sinks;         // one logit per query head (-inf allowed), or empty
  HeadTensor mask;                   // like bias, nonzero = visible; empty for none
};

// Gradients with respect to the ScoreMod's parameters, shaped like them (empty where the
// ScoreMod has none; softcap 0 when there is no cap). The bias's gradient is summed over the
// dimensions the bias broadcasts.
struct ScoreModGrads {
  double softcap = 0.0;
  std::vector<double> alibiSlopes;
  HeadTensor bias;
  std::vector<double> table;
  std::vector<double> sinks;
};

struct ModBackwardResult {
  BatchedBackwardResult x;  // dQ, dK, dV (summed over a key/value head's group), D
  ScoreModGrads params;     // gradient of <dO, O> with respect to the parameters
};

// BoB differentiates F = <uQ,dQ> + <uK,dK> + <uV,dV> + <uParams, dParams>: the last term,
// the cotangents of the first backward's parameter gradients, only when uParams is given
// (shaped like ScoreModGrads of the same ScoreMod). With it, c and b are the row scalars the
// schedule uses, which then include the sink's terms (docs/bob-math.md).
struct ModBobResult {
  BatchedBobResult x;       // gQ, gK, gV, gdO, c, b
  ScoreModGrads params;     // gradient of F with respect to the parameters
};

// Throws std::invalid_argument ("oracle: ...") when a field's shape does not fit a problem of
// `batch` batches and `heads` query heads, or softcap is negative or not finite.
void validate(const ScoreMod& mod, const Problem& head, Index batch, Index heads);
// Cotangents (or tangents) of the parameters must have the shapes of `mod`'s parameters (a
// softcap entry only with a cap); `name` is the argument's, for the message.
void validateCotangents(const ScoreModGrads& uParams, const ScoreMod& mod, const char* name = "uParams");

namespace dense {

// Shapes as in dense::forwardBatched: the key side may have fewer heads (GQA).
BatchedForwardResult forwardMod(const Problem& head, const ScoreMod& mod, const HeadTensor& Q,
                                const HeadTensor& K, const HeadTensor& V);
ModBackwardResult backwardMod(const Problem& head, const ScoreMod& mod, const HeadTensor& Q,
                              const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO);
ModBobResult bobMod(const Problem& head, const ScoreMod& mod, const HeadTensor& Q,
                    const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO,
                    const HeadTensor& uQ, const HeadTensor& uK, const HeadTensor& uV,
                    const ScoreModGrads* uParams = nullptr);
// The forward's JVP along tangents (tQ, tK, tV) and, if given, tangents of the parameters
// (shaped like them; none: the parameters held fixed), by the chain rule through T, the
// modification and the softmax.
HeadTensor forwardJvpMod(const Problem& head, const ScoreMod& mod, const HeadTensor& Q,
                         const HeadTensor& K, const HeadTensor& V, const HeadTensor& tQ,
                         const HeadTensor& tK, const HeadTensor& tV,
                         const ScoreModGrads* tParams = nullptr);

}  // namespace dense

// The two-pass schedule with the modification (docs/bob-math.md, "The schedule, per tile"),
// the counterpart of tiled:: in Oracle.h: online-softmax forward starting from the sink,
// key-major backward (parameter gradients reduced from dS tiles), BoB pass 1 query-major with
// the redefined X1..X4, pass 2 key-major (F's parameter gradients reduced from its tiles).
// Takes the saved state of the previous steps; stats counts the tiles every pass computed.
namespace tiled {

BatchedForwardResult forwardMod(const Problem& head, const Tiling& t, const ScoreMod& mod,
                                const HeadTensor& Q, const HeadTensor& K, const HeadTensor& V,
                                TileStats* stats = nullptr);
ModBackwardResult backwardMod(const Problem& head, const Tiling& t, const ScoreMod& mod,
                              const HeadTensor& Q, const HeadTensor& K, const HeadTensor& V,
                              const HeadTensor& dO, const BatchedForwardResult& fwd,
                              TileStats* stats = nullptr);
// Reads fwd.O, fwd.L, bwd.x.D and, with X2Source::FromDQ, bwd.x.dQ.
ModBobResult bobMod(const Problem& head, const Tiling& t, const ScoreMod& mod, const HeadTensor& Q,
                    const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO,
                    const HeadTensor& uQ, const HeadTensor& uK, const HeadTensor& uV,
                    const BatchedForwardResult& fwd, const ModBackwardResult& bwd,
                    X2Source x2 = X2Source::FromDQ, const ScoreModGrads* uParams = nullptr,
                    TileStats* stats = nullptr);

}  // namespace tiled
}  // namespace flashbob::oracle
