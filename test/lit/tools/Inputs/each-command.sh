# Runs `flashbob COMMAND ARGS...` for run, tune and bench in turn, without a CUDA driver, and
# prints one line per command: "COMMAND: its output [exit CODE]". A command that printed more
# than one line breaks its line, so a --match-full-lines check also asserts "one line".
for command in run tune bench; do
  out=$(FLASHBOB_CUDA_DRIVER=/nonexistent/libcuda.so.1 flashbob "$command" "$@" 2>&1)
  echo "$command: $out [exit $?]"
done
