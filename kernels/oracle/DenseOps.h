// The dense reference's matrix helpers (defined in DenseReference.cpp), shared with the ring model
// (RingModel.cpp), which computes one (query shard, key shard) block at a time with them. Internal
// to the oracle: no argument checks, callers have checked the shapes.
#pragma once

#include "kernels/oracle/Oracle.h"

#include <string>
#include <vector>

namespace flashbob::oracle::detail {

// Every oracle error, the tiled model's too: std::invalid_argument("oracle: " + msg).
[[noreturn]] void fail(const std::string& msg);
// validateMatrix for a tensor of the values' side (V, dO, O, uV, tV): rows x p.valueDim().
void validateValues(const Matrix& m, const char* name, const Problem& p, Index rows,
                    const char* rowsName);
// For the models that take V as wide as Q and K only (the ring and score-modification models,
// as the API's ring steps): fails naming `model` when p.dv sets another width.
void requireOneWidth(const Problem& p, const char* model);

Matrix mulABt(const Matrix& A, const Matrix& B);                       // A B^T
Matrix mulAB(const Matrix& A, const Matrix& B);                        // A B
Matrix mulAtB(const Matrix& A, const Matrix& B);                       // A^T B
Matrix add(const Matrix& A, const Matrix& B, double beta = 1.0);       // A + beta B
void scaleInPlace(Matrix& A, double s);
Matrix hadamard(const Matrix& A, const Matrix& B);                     // A o B
std::vector<double> rowSum(const Matrix& A);

// 0, 1, ..., n - 1: the rows of a whole problem, where block rows are the problem's own.
std::vector<Index> allRows(Index n);

// Row r of Q is query qRows[r] of `p` and row c of K is key kRows[c]: the mask is `p`'s at those
// global positions, so a block of a larger problem (a ring shard) is masked as that problem is.
//
// The log-sum-exp over the visible keys of each row of the scores S (already scaled), -inf for a
// row that sees none of them.
std::vector<double> maskedLogSumExp(const Problem& p, const Matrix& S, const std::vector<Index>& qRows,
                                    const std::vector<Index>& kRows);
// P = exp(s Q K^T - L) on visible entries, 0 on masked ones (exp is never taken there, so a row
// with L = -inf gives 0, not NaN).
Matrix probabilities(const Problem& p, const Matrix& Q, const std::vector<Index>& qRows, const Matrix& K,
                     const std::vector<Index>& kRows, const std::vector<double>& L);

}  // namespace flashbob::oracle::detail
