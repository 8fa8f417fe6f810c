# Sourced by the GPU machine's wheel scripts (wheel-tests.sh, jax-tests.sh), with PY set to the
# interpreter: installs dist/flashbob-*.whl with pip, without network, into the empty directory
# $SITE, then leaves no FLASHBOB_* or LD_LIBRARY_PATH set and only $SITE on PYTHONPATH, as a
# user who installed the wheel has it.
SITE=${SITE:-/tmp/flashbob-wheel}
wheels=(dist/flashbob-*.whl)
((${#wheels[@]} == 1)) && [ -f "${wheels[0]}" ] || { echo "need one dist/flashbob-*.whl, found: ${wheels[*]}"; exit 2; }
pip=("$PY" -m pip)
"${pip[@]}" --version >/dev/null 2>&1 || pip=(python3 -m pip)
echo "installing ${wheels[0]} with $("${pip[@]}" --version)"
rm -rf "$SITE"
"${pip[@]}" install --quiet --no-index --no-deps --target "$SITE" "${wheels[0]}"
for var in $(compgen -e); do
  [[ $var == FLASHBOB_* || $var == LD_LIBRARY_PATH ]] && unset "$var"
done
export PYTHONPATH=$SITE
