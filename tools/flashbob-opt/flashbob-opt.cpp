// flashbob-opt: mlir-opt with the bob dialect and passes, for lit tests and for reading IR.
//   flashbob-opt kernel.mlir --bob-allocate-shared --bob-lower-kernel ...
#include "compiler/pipeline/Registration.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  flashbob::compiler::registerDialects(registry);
  flashbob::compiler::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "FlashBoB optimizer driver\n", registry));
}
