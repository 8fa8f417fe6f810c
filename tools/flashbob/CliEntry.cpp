// flashbob_cli_main (api/flashbob.h): the command line inside libflashbob.so, so that the wheel's
// `flashbob` command runs with the library's own LLVM instead of a second copy.
#include "api/flashbob.h"
#include "tools/flashbob/Cli.h"

extern "C" int flashbob_cli_main(int argc, char **argv) {
  return flashbob::tool::cliMain(argc, argv);
}
