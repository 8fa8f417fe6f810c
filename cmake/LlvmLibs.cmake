# FlashBobLLVM and FlashBobMLIR: the LLVM and MLIR libraries our libraries link, chosen per
# final binary.
#
# Every binary links the shared libMLIR.so/libLLVM.so (fast links, small binaries), except a
# target with the property FLASHBOB_STATIC_LLVM set (libflashbob.so, api/CMakeLists.txt), which
# gets the static archives of just the components below: a self-contained library that a wheel
# carries alone (docs/toolchain.md, "libflashbob.so is self-contained"). The choice is a link
# item evaluated for the consuming binary, so our static libraries are compiled once, with the
# same commands either way.

# The MLIR libraries our code calls into (compiler/pipeline/Registration.cpp lists the dialects,
# interfaces and translations; Pipeline.cpp the passes); their MLIR dependencies follow.
set(FLASHBOB_MLIR_LIBS
  MLIRIR MLIRPass MLIRSupport MLIRAnalysis MLIRTransforms MLIRTransformUtils
  MLIRFunctionInterfaces MLIRSideEffectInterfaces MLIRBytecodeOpInterface
  MLIRAffineDialect MLIRArithDialect MLIRControlFlowDialect MLIRFuncDialect MLIRGPUDialect
  MLIRIndexDialect MLIRLLVMDialect MLIRMathDialect MLIRMemRefDialect MLIRNVGPUDialect
  MLIRNVVMDialect MLIRSCFDialect MLIRUBDialect MLIRVectorDialect
  MLIRGPUTransforms MLIRMemRefTransforms MLIRSCFTransforms
  MLIRAffineToStandard MLIRArithToLLVM MLIRControlFlowToLLVM MLIRFuncToLLVM
  MLIRGPUToNVVMTransforms MLIRIndexToLLVM MLIRMathToLLVM MLIRMemRefToLLVM MLIRNVGPUToNVVM
  MLIRNVVMToLLVM MLIRReconcileUnrealizedCasts MLIRSCFToControlFlow MLIRUBToLLVM
  MLIRVectorToLLVM MLIRVectorToSCF
  MLIRNVVMTarget MLIRTargetLLVMIRExport MLIRBuiltinToLLVMIRTranslation
  MLIRGPUToLLVMIRTranslation MLIRLLVMToLLVMIRTranslation MLIRNVVMToLLVMIRTranslation)

# LLVM: the NVPTX target only and the O3 pipeline (compiler/pipeline/PtxEmitter.cpp), then the
# components the MLIR libraries above name upstream (LLVM IR export, the NVVM target), which
# Debian's exported MLIR targets lost (see below). Their own dependencies follow.
llvm_map_components_to_libnames(FLASHBOB_LLVM_LIBS
  NVPTX Passes FrontendOpenMP FrontendOffloading Linker IRReader BitWriter)

# Debian's MLIR is built against the LLVM dylib, so each exported static MLIR library lists
# `LLVM` (libLLVM.so) as its dependency. For a static link that must be the LLVM archives: the
# MLIR targets (used by nothing else in this build) get FlashBobLlvmStatic in its place.
add_library(FlashBobLlvmStatic INTERFACE)
target_link_libraries(FlashBobLlvmStatic INTERFACE ${FLASHBOB_LLVM_LIBS})
foreach(lib IN LISTS MLIR_EXPORTED_TARGETS)
  if(NOT TARGET ${lib})
    continue()
  endif()
  get_target_property(type ${lib} TYPE)
  get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
  if(type STREQUAL "STATIC_LIBRARY" AND deps)
    list(TRANSFORM deps REPLACE "^LLVM$" FlashBobLlvmStatic)
    list(TRANSFORM deps REPLACE "^\\$<LINK_ONLY:LLVM>$" "$<LINK_ONLY:FlashBobLlvmStatic>")
    set_property(TARGET ${lib} PROPERTY INTERFACE_LINK_LIBRARIES "${deps}")
  endif()
endforeach()

# LLVMSupport names libz.so, libzstd.so and libz3.so. The compressors are reachable from code
# libflashbob.so keeps (the ELF object writer, profile data), so they are linked from their
# archives (libz.a: zlib1g-dev, libzstd.a: libzstd-dev); Z3 only serves the static analyzer's
# solver, which nothing here reaches, so it is dropped (-z defs would report it otherwise).
find_library(FLASHBOB_ZLIB_STATIC NAMES libz.a)
if(NOT FLASHBOB_ZLIB_STATIC OR NOT TARGET zstd::libzstd_static)
  message(FATAL_ERROR "libflashbob.so links zlib and zstd statically: apt-get install "
                      "zlib1g-dev libzstd-dev (found libz.a: ${FLASHBOB_ZLIB_STATIC})")
endif()
get_target_property(deps LLVMSupport INTERFACE_LINK_LIBRARIES)
list(FILTER deps EXCLUDE REGEX "libz3")
list(TRANSFORM deps REPLACE "^ZLIB::ZLIB$" "${FLASHBOB_ZLIB_STATIC}")
list(TRANSFORM deps REPLACE "^zstd::libzstd_shared$" zstd::libzstd_static)
set_property(TARGET LLVMSupport PROPERTY INTERFACE_LINK_LIBRARIES "${deps}")

# $<TARGET_PROPERTY:...> without a target name reads the binary being linked.
set(static "$<BOOL:$<TARGET_PROPERTY:FLASHBOB_STATIC_LLVM>>")
add_library(FlashBobLLVM INTERFACE)
target_link_libraries(FlashBobLLVM INTERFACE "$<IF:${static},FlashBobLlvmStatic,LLVM>")
add_library(FlashBobMLIR INTERFACE)
target_link_libraries(FlashBobMLIR INTERFACE "$<IF:${static},${FLASHBOB_MLIR_LIBS},MLIR>"
                                             FlashBobLLVM)
unset(static)
