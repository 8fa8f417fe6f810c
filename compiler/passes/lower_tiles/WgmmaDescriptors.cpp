// wgmma matrix descriptors (the field layout: WgmmaDescriptors.h).
#include "compiler/passes/lower_tiles/WgmmaDescriptors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {
int64_t swizzleMode(int64_t swizzleBytes) {
  switch (swizzleBytes) {
  case 128: return 1;
  case 64: return 2;
  default: return 3; // 32
  }
}
} // namespace

Value Descriptor::at(Emitter &e, Value byteOffset) const {
  // The start address field is address >> 4; offsets stay inside the 256 KiB window.
  Value units = arith::ShRUIOp::create(e.b, byteOffset, constant(e, 4));
  return arith::AddIOp::create(e.b, base, units);
}

Value Descriptor::constant(Emitter &e, int64_t v) {
  return arith::ConstantIntOp::create(e.b, v, 64);
}

Descriptor describe(Emitter &e, Value tile, const shared::Layout &l, bool kMajor) {
  const int64_t lbo = kMajor ? 16 : l.blockBytes(), sbo = 8 * l.swizzleBytes;
  const uint64_t fields = (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
                          (uint64_t(swizzleMode(l.swizzleBytes)) << 62);
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(e.b, tile);
  // The tile's address is a constant (or a select between double buffers): re-formed here,
  // a product's descriptors are not hoisted out of the loop (8 slices x 2 registers per
  // operand at d = 128; bob_q d = 128 spilled 332 bytes with them, 80 without).
  address = e.keepHere(arith::IndexCastOp::create(e.b, e.b.getI64Type(), address));
  Value start = arith::ShRUIOp::create(e.b, address, Descriptor::constant(e, 4));
  start = arith::AndIOp::create(e.b, start, Descriptor::constant(e, 0x3FFF));
  Value fieldsValue = arith::ConstantIntOp::create(e.b, static_cast<int64_t>(fields), 64);
  return {arith::OrIOp::create(e.b, start, fieldsValue)};
}

Value sliceOffset(Emitter &e, const shared::Layout &l, bool kMajor, int64_t k0, Value mn0) {
  Value i64mn0 = arith::IndexCastOp::create(e.b, e.b.getI64Type(), mn0);
  auto c = [&](int64_t v) { return Descriptor::constant(e, v); };
  if (kMajor) // rows are M/N: k0 picks the block and the bytes inside it; mn0 the row
    return arith::AddIOp::create(
        e.b, c((k0 / l.blockCols()) * l.blockBytes() + (k0 % l.blockCols()) * l.elemBytes),
        arith::MulIOp::create(e.b, i64mn0, c(l.swizzleBytes)));
  // rows are k: k0 picks the row; mn0 the column block
  return arith::AddIOp::create(
      e.b, c(k0 * l.swizzleBytes),
      arith::MulIOp::create(e.b, arith::DivUIOp::create(e.b, i64mn0, c(l.blockCols())),
                            c(l.blockBytes())));
}

bool startsFromZero(MmaOp op) {
  auto splat = op.getAcc().getDefiningOp<SplatOp>();
  return splat && splat.getValue().isZero();
}

} // namespace flashbob::bob::lowering
