#!/usr/bin/env bash
# Trains, once, the sweeps whose run tables the tests read, and writes those tables to
# datasets/ (see datasets/README.md for each). The tests then fit, design and recommend on the
# shipped tables instead of training the same specs again on every CI run; one end-to-end
# 'sweep run' per executor stays in the suite, on a 2-3-run spec.
#
#     bash scripts/make_test_tables.sh [WORKDIR]      # about 20 minutes on 2 cores
#     SKIP_DONE=1 bash scripts/make_test_tables.sh     # only the tables not shipped yet
#
# Training is deterministic on the CPU build of torch (2.13.0): a second run writes the same
# losses.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"

sweep() {  # sweep SPEC TABLE [curves]: train SPEC under $work, write its table to TABLE
  local name
  name=$(basename "$1" .toml)
  archfit sweep run "$1" --out "$work/$name"
  archfit sweep collect "$1" --out "$work/$name" -o "$2"
  [ "${3:-}" = curves ] || rm -f "${2%.parquet}.curves.parquet"  # most read final losses only
}

# 1. The MoE granularity sweep (27 runs, Krajewski et al. 2024's setting).
[ -n "${SKIP_DONE:-}" ] && [ -f datasets/moe_granularity_cpu.parquet ] || \
  sweep sweeps/moe-granularity-cpu.toml datasets/moe_granularity_cpu.parquet

# 2. The tuning sweep that 'archfit tune' writes for 1e7 from three proxies (63 runs).
rm -f "$work/tune-cpu.toml" "$work/candidates.toml"
archfit tune --params 1e7 --sizes 2e4,3.5e4,6e4 --tokens-per-param 5 \
  --rates 1e-3,1.41e-3,2e-3,2.83e-3,4e-3,5.66e-3,8e-3 --batch-sizes 1,2,4 \
  -o "$work/tune-cpu.toml" --json > /dev/null
[ -n "${SKIP_DONE:-}" ] && [ -f datasets/tune_cpu.parquet ] || \
  sweep "$work/tune-cpu.toml" datasets/tune_cpu.parquet

# 3. The six candidates at 2.4e5 (depths 1-8, 3e5 tokens) that the designed-batch test weighs
#    against every random batch of three; the runs before them are the demo sweep's at 3e4 to
#    1.2e5 (datasets/demo_sweep.parquet).
if [ -z "${SKIP_DONE:-}" ] || [ ! -f datasets/design_candidates_cpu.parquet ]; then
  python scripts/design_candidates_spec.py "$work/candidates.toml"
  sweep "$work/candidates.toml" datasets/design_candidates_cpu.parquet
fi
# 4. The per-layer plans (9 runs: uniform, no MLP in the first layer, none in the last; 3
#    seeds), with their loss curves, which 'archfit trade' reads for the time to a loss.
[ -n "${SKIP_DONE:-}" ] && [ -f datasets/layer_variants_cpu.parquet ] || \
  sweep sweeps/layer-variants.toml datasets/layer_variants_cpu.parquet curves
echo "wrote datasets/moe_granularity_cpu.parquet, tune_cpu.parquet, design_candidates_cpu.parquet,"
echo "  layer_variants_cpu.parquet (and its .curves.parquet)"
