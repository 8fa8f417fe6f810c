// KernelBuilder::divisor/divmod (the grouped sweep's per-step division by a multiply-high):
// the IR they emit, built on constants and folded by MLIR's canonicalizer (each arith and math
// op folds by its own semantics), gives n / d and n % d as C++ computes them, over divisors
// where the magic number's float64 estimate is closest to being off (large d, d just above a
// power of two) and numerators up to the 2^31 the kernels promise.
#include "compiler/pipeline/Registration.h"
#include "kernels/common/KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

using namespace flashbob;

namespace {

// (n / d, n % d) from the emitted IR, folded to constants.
std::vector<std::pair<int64_t, int64_t>> divmodFolded(mlir::MLIRContext &ctx, uint32_t d,
                                                     const std::vector<uint32_t> &numerators) {
  compiler::KernelSpec spec;
  kernels::KernelBuilder kb(&ctx, spec);
  auto i32 = kb.b.getI32Type();
  std::vector<mlir::Type> results(2 * numerators.size(), i32);
  auto fn = mlir::func::FuncOp::create(kb.b, "divmod", kb.b.getFunctionType({}, results));
  kb.b.setInsertionPointToStart(fn.addEntryBlock());
  auto constant = [&](uint32_t v) {
    return mlir::arith::ConstantIntOp::create(kb.b, i32, static_cast<int64_t>(v)).getResult();
  };
  kernels::KernelBuilder::Divisor divisor = kb.divisor(constant(d));
  std::vector<mlir::Value> values;
  for (uint32_t n : numerators) {
    auto [q, r] = kb.divmod(constant(n), divisor);
    values.push_back(q);
    values.push_back(r);
  }
  mlir::func::ReturnOp::create(kb.b, values);
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::createCanonicalizerPass());
  REQUIRE(mlir::succeeded(pm.run(*kb.module)));
  std::vector<std::pair<int64_t, int64_t>> out;
  auto ret = llvm::cast<mlir::func::ReturnOp>(fn.getBody().front().getTerminator());
  auto folded = [&](mlir::Value v) -> int64_t {
    auto c = v.getDefiningOp<mlir::arith::ConstantIntOp>();
    REQUIRE(c); // every op folded: the value is a constant
    return static_cast<int64_t>(static_cast<uint32_t>(c.value()));
  };
  for (size_t i = 0; i < numerators.size(); ++i)
    out.emplace_back(folded(ret.getOperand(2 * i)), folded(ret.getOperand(2 * i + 1)));
  return out;
}

} // namespace

TEST_CASE("the sweep's divisor divides like C++ for every divisor and numerator below 2^31",
          "[kernels]") {
  mlir::DialectRegistry registry;
  compiler::registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 63, 64, 65, 255, 256, 257, 1000, 4095, 4097,
                                    (1u << 16) + 1, (1u << 20) - 1, (1u << 30) + 1,
                                    (1u << 31) - 1};
  std::mt19937 rng(7);
  for (int i = 0; i < 40; ++i)
    divisors.push_back(1 + rng() % ((1u << 31) - 1));
  for (uint32_t d : divisors) {
    std::vector<uint32_t> numerators = {0, 1, d - 1, d, d + 1, 2 * d - 1, (1u << 31) - 1,
                                        (1u << 31) - d, (1u << 31) - 1 - ((1u << 31) - 1) % d};
    for (int i = 0; i < 40; ++i)
      numerators.push_back(rng() % (1u << 31));
    for (uint32_t &n : numerators)
      n %= 1u << 31;
    auto got = divmodFolded(ctx, d, numerators);
    for (size_t i = 0; i < numerators.size(); ++i) {
      INFO("n = " << numerators[i] << ", d = " << d);
      CHECK(got[i].first == numerators[i] / d);
      CHECK(got[i].second == numerators[i] % d);
    }
  }
}
