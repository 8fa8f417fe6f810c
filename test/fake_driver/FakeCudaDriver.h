/* What the fake CUDA driver (libfake_cuda.so, FakeCudaDriver.cpp) records of each launch (and
 * how often each entry point was called), and
 * the functions a test that loaded it finds with dlsym (the library is loaded RTLD_LOCAL by
 * the runtime: dlopen the same path again, RTLD_NOLOAD, to get its handle). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* What cuTensorMapEncodeTiled was given for one map, as a launch reads it back from the map. */
typedef struct fake_cuda_tensor_map {
  unsigned long long address; /* the tensor's */
  unsigned long long rows;    /* the sequence length bounding it (dimension 1) */
  unsigned long long cols;    /* its width (dimension 0): columns past it read as zeros */
  unsigned box[2];            /* columns, rows */
  unsigned swizzle;           /* a CUtensorMapSwizzle */
} fake_cuda_tensor_map;

typedef struct fake_cuda_launch_record {
  char entry[128];      /* the kernel's name, as cuModuleGetFunction got it */
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes; /* dynamic shared memory */
  unsigned params;      /* the kernel's parameter count, each read from kernelParams */
  unsigned tensorMaps;  /* how many of them were tensor maps passed by value */
  unsigned scalarCount; /* 4-byte parameters (the kernels' f32 scalars), the first 4 kept: */
  unsigned scalars[4];  /* their bits, in order */
  fake_cuda_tensor_map maps[16]; /* the tensor maps, in order, the first 16 kept */
  unsigned wordCount;   /* 8-byte parameters (the memrefs' pointers, offsets, sizes and */
  unsigned long long words[256]; /* strides), the first 256 kept, in order */
} fake_cuda_launch_record;

typedef int (*fake_cuda_launch_count_fn)(void);
typedef int (*fake_cuda_launch_fn)(int index, fake_cuda_launch_record *record);
typedef void (*fake_cuda_reset_fn)(void);
/* The calls of entry point `entry` (e.g. "cuMemcpy2DAsync") since the last reset. */
typedef int (*fake_cuda_call_count_fn)(const char *entry);

#ifdef __cplusplus
}
#endif
