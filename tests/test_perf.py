"""Shapes for the hardware: the step-time model calibrated on real CPU runs, the modelled GPU
speed and decode latency, and recommend's objectives checked against a brute-force search."""

from __future__ import annotations

import json
import math

import pytest
from scipy.stats import spearmanr

from archfit.train import perf
from archfit.shapes import Shape

H = 200.0  # GPU-hours of the time-objective tests
TIMINGS = 3  # of each shape in the CPU throughput sweep; the fastest counts


@pytest.mark.slow
@pytest.mark.timing
def test_throughput_model_on_a_cpu_iso_param_sweep(cli, repo, tmp_path):
    """Ten shapes of one size, depth 1 to 32, trained and timed on this CPU, each TIMINGS times
    (the fastest is the shape's speed, as benchmarks time; with two, CI on 2026-11-24 measured
    one shape 16% off the model in both, where it is within 7% here, idle or with the other
    core busy): tokens/s falls with depth, and the step model, two-fold (every other shape
    fitted predicts the rest, and the other way round: each shape predicted once, which CI on
    2026-12-02 needed where one fold's five errors had a median of 10.2%), is within 10%
    (median) and 25% (worst), its verdict saying which."""
    import polars as pl

    spec = repo / "sweeps" / "throughput-cpu.toml"
    tables = []
    for k in range(1, TIMINGS + 1):
        out, table = tmp_path / f"runs{k}", tmp_path / f"tp{k}.parquet"
        assert cli("sweep", "run", spec, "--out", out).exit_code == 0
        assert cli("sweep", "collect", spec, "--out", out, "-o", table).exit_code == 0
        tables.append(pl.read_parquet(table))
    both = pl.concat(tables)
    best = both.sort("tokens_per_s", descending=True).unique("run_id", keep="first")
    best.write_parquet(tmp_path / "tp.parquet")
    table = tmp_path / "tp.parquet"
    r = cli("throughput", table, "--json", "--out", tmp_path / "steps.json")
    assert r.exit_code == 0, r.output
    m = json.loads(r.output)
    runs = sorted(m["runs"], key=lambda x: x["n_layer"])
    depths = [x["n_layer"] for x in runs]
    tps = [x["measured"] for x in runs]
    spread = both.group_by("run_id").agg((pl.col("tokens_per_s").max()
                                          / pl.col("tokens_per_s").min() - 1).alias("d"))
    print("\ndepth:  " + "  ".join(f"{d:>6}" for d in depths))
    print("tok/s:  " + "  ".join(f"{t:>6.0f}" for t in tps))
    print(f"the {TIMINGS} timings of a shape differ by up to {spread['d'].max():.1%}")
    print(f"held-out errors (two-fold, {m['heldout']['predicted']} shapes): "
          + ", ".join(f"{e:+.1%}" for e in m["heldout"]["errors"]))
    assert depths[0] == 1 and depths[-1] == 32 and len(runs) == 10
    assert spearmanr(depths, tps).statistic <= -0.9
    assert tps[-1] < 0.5 * tps[0]
    # a 4-coefficient model at d_model 30-130 misses each shape's own kernel speed: 16% off
    # for one shape of five on two 2-core machines on 2026-12-01/02 (depth 12 above depth 8 on
    # one, depth 16 above 12 on the other, in the best of 3 timings); typical shapes are within
    # 10%, and the model's own verdict owns up to the worst (weak beyond STEP_INFORMATIVE)
    assert m["heldout"]["median_abs_rel_error"] <= 0.10
    assert m["heldout"]["max_abs_rel_error"] <= perf.STEP_WEAK
    assert m["trust"]["verdict"] == ("informative" if m["heldout"]["max_abs_rel_error"]
                                     <= perf.STEP_INFORMATIVE else "weak")
    # the saved model answers for the same runs (archfit throughput --perf, or first)
    for args in (("throughput", table, "--perf", tmp_path / "steps.json", "--json"),
                 ("throughput", tmp_path / "steps.json", table, "--json")):
        again = json.loads(cli(*args).output)
        assert [x["predicted"] for x in again["runs"]] == pytest.approx(
            [x["predicted"] for x in m["runs"]])


def _iso(L: int, d: int, **kw) -> Shape:
    return Shape(n_layer=L, d_model=d, n_head=d // 128, vocab_size=50257, n_ctx=2048, **kw)


def test_modelled_gpu_speed_is_below_its_assumed_efficiency_and_falls_with_depth():
    m = perf.modelled("h100")
    big = _iso(32, 4096)
    mfu = big.flops_per_token("kaplan_train") * m.tokens_per_s(big, 2 ** 19) / 989e12
    assert 0.3 < mfu < perf.MATMUL_EFFICIENCY
    family = [_iso(L, d) for L, d in ((8, 2560), (16, 1792), (32, 1280), (64, 896))]
    speeds = [m.tokens_per_s(s, 2 ** 19) for s in family]
    assert speeds == sorted(speeds, reverse=True)


def test_latency_reproduces_the_direction_of_bian_et_al():
    """Bian et al. 2025: at about 1B, 3072 x 12 is faster to serve at batch 1 than
    2048 x 24. archfit's model, for those two GPT shapes on an H100:"""
    deep = perf.decode_latency(_iso(24, 2048), "h100")
    wide = perf.decode_latency(_iso(12, 3072), "h100")
    print(f"\n2048 x 24: {deep['ms_per_token']:.2f} ms/token; 3072 x 12: "
          f"{wide['ms_per_token']:.2f} ms/token (batch 1, ctx 2048, H100, modelled)")
    assert wide["ms_per_token"] < deep["ms_per_token"]
    assert deep["bound"] == wide["bound"] == "memory"
    long_batch = perf.decode_latency(_iso(24, 2048), "h100", batch=64, context=8192)
    assert long_batch["kv_cache_bytes"] > long_batch["weight_bytes"]


@pytest.fixture(scope="module")
def levine_fit(tmp_path_factory):
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from conftest import _levine

    from archfit.laws.inference.fitting import fit

    path = tmp_path_factory.mktemp("fit") / "levine.json"
    fit(_levine(noise=0.002, seeds=2), law="levine", bootstrap=100).to_json(path)
    return path


def _brute_force(rec, gpu_hours):
    """Every candidate's predicted loss after gpu_hours on a modelled H100, computed here
    from the pieces (epoch2024's L(N, D) and the shape law's penalty)."""
    from archfit.laws import load_fit

    data = load_fit("epoch2024")
    model = perf.modelled("h100")
    best, best_loss = None, math.inf
    for s, pen in rec.candidates:
        D = model.tokens_per_s(s, 2 ** 19) * gpu_hours * 3600
        loss = data.law_obj.loss_at(data.params, s.params_total, D) + pen
        if loss < best_loss:
            best, best_loss = s, loss
    return best


def test_time_objective_differs_from_loss_and_is_the_brute_force_pick(cli, levine_fit):
    from archfit.recommending.objectives import OBJECTIVE_SPAN
    from archfit.recommending import recommend

    base = ["recommend", "--params", "3e8", "--fit", levine_fit, "--family", "gpt2", "--json"]
    loss = json.loads(cli(*base, "--objective", "loss").output)
    r = cli(*base, "--objective", "time", "--gpu-hours", H)
    assert r.exit_code == 0, r.output
    time_ = json.loads(r.output)
    assert (time_["chosen"]["n_layer"], time_["chosen"]["d_model"]) != (
        loss["n_layer"], loss["d_model"])
    rec = recommend(3e8, fit=str(levine_fit), depth_span=OBJECTIVE_SPAN, family="gpt2")
    bf = _brute_force(rec, H)
    assert (time_["chosen"]["n_layer"], time_["chosen"]["d_model"]) == (bf.n_layer, bf.d_model)
    assert time_["loss_optimal"]["n_layer"] == loss["n_layer"]
    assert "faster to train" in time_["tradeoff"]


def test_tokens_mode_reaches_the_loss_optimal_loss_in_the_fewest_gpu_hours(cli, levine_fit):
    r = cli("recommend", "--params", "3e8", "--fit", levine_fit, "--family", "gpt2", "--objective", "time",
            "--tokens", "6e9", "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)
    ref = c["loss_optimal"]["predicted_loss"]
    reach = [x for x in c["candidates"] if x["predicted_loss"] is not None
             and math.isfinite(x["gpu_hours"])]
    for x in reach:  # every one that reaches it does so at the reference loss
        assert x["predicted_loss"] == pytest.approx(ref, rel=1e-6)
    assert c["chosen"]["gpu_hours"] == min(x["gpu_hours"] for x in reach)
    assert c["chosen"]["gpu_hours"] <= c["loss_optimal"]["gpu_hours"]


def test_latency_objective_picks_the_best_shape_under_the_bound(cli, levine_fit):
    r = cli("recommend", "--params", "3e8", "--fit", levine_fit, "--family", "gpt2", "--objective", "latency",
            "--max-latency-ms", "1.0", "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)
    ok = [x for x in c["candidates"] if x["latency_ms"] <= 1.0]
    assert c["chosen"]["latency_ms"] <= 1.0
    assert c["chosen"]["shape_penalty"] == min(x["shape_penalty"] for x in ok)
    assert c["chosen"]["n_layer"] < c["loss_optimal"]["n_layer"]
    r = cli("recommend", "--params", "3e8", "--fit", levine_fit, "--family", "gpt2", "--objective", "latency",
            "--max-latency-ms", "0.01")
    assert r.exit_code == 2 and "no candidate decodes" in r.stderr


def test_pareto_figure_is_archfit_own_and_never_replaces_a_users_file(cli, levine_fit,
                                                                     tmp_path):
    png = tmp_path / "pareto.png"
    args = ["recommend", "--params", "3e8", "--fit", levine_fit, "--family", "gpt2", "--objective", "time",
            "--gpu-hours", H, "--pareto", png]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
    assert "faster to train than the loss-optimal" in r.output
    assert cli(*args).exit_code == 0  # archfit's own figure: replaced
    png.write_bytes(b"\x89PNG my holiday picture")
    r = cli(*args)
    assert r.exit_code == 2 and "--force" in r.stderr
    assert png.read_bytes() == b"\x89PNG my holiday picture"


@pytest.mark.parametrize("args,needle", [
    (["--objective", "time"], "needs --gpu-hours"),
    (["--objective", "time", "--gpu-hours", "1", "--tokens", "1e9"], "not both"),
    (["--objective", "latency"], "needs --max-latency-ms"),
    (["--objective", "time", "--gpu-hours", "10", "--gpu", "tpu9"], "unknown accelerator"),
    (["--objective", "time", "--gpu-hours", "10", "--perf", "nope.json"], "no such step"),
])
def test_objective_errors_say_what_to_give(cli, levine_fit, args, needle):
    r = cli("recommend", "--params", "3e8", "--fit", levine_fit, "--family", "gpt2", *args)
    assert r.exit_code == 2 and needle in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_published_law_trades_loss_at_kaplans_curvature(cli):
    # levine2020 prices depth with Kaplan et al.'s relative curvature, in nats at the data law's
    # loss: a law with a penalty can trade loss for speed without a fit of one's own
    r = cli("recommend", "--params", "1e9", "--family", "gpt2", "--objective", "time", "--gpu-hours", "100",
            "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    k = d["loss_model"]["curvature"]
    assert k == pytest.approx(0.03 / math.log(8) ** 2) and "Kaplan" in d["loss_model"]["source"]
    opt = 40.23  # Levine's optimal depth at 1e9 (ln d = 5.039 + 0.0555 L, N = 12 L d^2)
    for c in d["candidates"]:  # each penalty: k (ln L - ln L*)^2 of a loss of about 2.5 nats
        rel = k * math.log(c["n_layer"] / opt) ** 2
        assert c["shape_penalty"] == pytest.approx(rel * 2.5, rel=0.1, abs=1e-4), c
    assert "pick_rule" in d and "time" in d["pick_rule"]


def test_shape_reports_modelled_speed_and_latency(cli):
    r = cli("shape", "--layers", "24", "--width", "2048", "--heads", "16", "--gpu", "h100",
            "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)["perf"]
    assert p["training"]["kind"] == "modelled" and p["training"]["tokens_per_s"] > 0
    assert p["decode"]["kind"] == "modelled" and p["decode"]["ms_per_token"] > 0
    text = cli("shape", "--layers", "24", "--width", "2048", "--heads", "16", "--gpu",
               "h100").output
    assert "tokens/s per GPU" in text and "ms/token at batch 1" in text


def test_step_model_round_trip_and_refusals(tmp_path):
    m = perf.modelled("a100")
    p = tmp_path / "m.json"
    p.write_text(json.dumps(m.to_dict()))
    back = perf.load_step_model(str(p))
    s = _iso(12, 768)
    assert back.tokens_per_s(s, 4096) == m.tokens_per_s(s, 4096)
    p.write_text(json.dumps({"law": "levine"}))
    with pytest.raises(Exception, match="not an archfit step model"):
        perf.load_step_model(str(p))
    with pytest.raises(Exception, match="at least 5"):
        perf.fit_step_model([])


def test_latency_objective_at_1b_goes_wider_and_shallower(cli, levine_fit):
    """The 1B case: under a latency bound tighter than the loss-optimal shape's, the pick is
    shallower and wider (Bian et al.'s direction), at a stated loss cost."""
    base = ["recommend", "--params", "1.2e9", "--fit", levine_fit, "--family", "gpt2", "--json"]
    free = json.loads(cli(*base, "--objective", "latency", "--max-latency-ms", "1000").output)
    ref = free["loss_optimal"]
    bound = 0.85 * ref["latency_ms"]
    r = cli(*base, "--objective", "latency", "--max-latency-ms", bound)
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)["chosen"]
    print(f"\n1.2e9: loss-optimal {ref['n_layer']} x {ref['d_model']} "
          f"{ref['latency_ms']:.2f} ms/token; under {bound:.2f} ms: {c['n_layer']} x "
          f"{c['d_model']} {c['latency_ms']:.2f} ms/token (+{c['shape_penalty']:.4f} nats)")
    assert c["n_layer"] < ref["n_layer"] and c["d_model"] > ref["d_model"]
    assert c["latency_ms"] <= bound < ref["latency_ms"]


def test_the_planner_takes_its_efficiency_mfu_and_activation_share_from_a_measured_gpu_run(
        monkeypatch, cli, repo):
    """A bench_gpu.py run on an H200 whose compiled tokens/s is what the step model gives at a
    matmul efficiency of 0.55 (its other terms as assumed), whose peak memory holds 80% of the
    activations the estimate counts, and whose eager step takes 100 bytes a logit more: the
    planner reads back 0.55, 0.8 and 100 (the closed forms), the run's MFU for sweep plan's
    GPU-hours, and keeps the assumed 1 GiB overhead; a device with no run keeps the assumed
    figures and says so."""
    from archfit.train import memory, perf

    fields = dict(n_layer=12, d_model=768, n_head=12, d_ff=2048, vocab_size=32000, n_ctx=1024,
                  mlp="swiglu", position="rope", norm="rmsnorm", bias=False,
                  tied_embeddings=False)
    s = Shape(**fields)
    dev = perf.device("h200")
    tokens = 32 * 1024
    flops, nbytes, layers, one = perf.step_features(s, tokens, "bf16")
    t = (flops / (0.55 * dev.peak_flops) + nbytes / (perf.BANDWIDTH_EFFICIENCY * dev.bandwidth)
         + layers * perf.LAYER_OVERHEAD_S + perf.STEP_OVERHEAD_S)
    eager_t = t + 100 * 32000 * tokens / (perf.BANDWIDTH_EFFICIENCY * dev.bandwidth)
    peak = {}
    for compiled in (True, False):
        e = memory.estimate(s, 32, precision="bf16", overhead_gib=1.0, compiled=compiled)
        peak[compiled] = (e.total - 0.2 * e.activations) / memory.GIB
    run = {"device": "NVIDIA H200", "date": "2026-12-01", "rows": [
        {"model": "archfit", "compiled": True, "batch": 32, "tokens_per_s": tokens / t,
         "peak_memory_gib": peak[True], "fields": fields},
        {"model": "archfit", "compiled": False, "batch": 32, "tokens_per_s": tokens / eager_t,
         "peak_memory_gib": peak[False], "fields": fields},
        {"model": "hf", "compiled": True, "batch": 32, "tokens_per_s": 1.0, "fields": fields}]}
    monkeypatch.setattr(perf, "gpu_measured", lambda: (run,))
    cal = perf.calibration("h200")
    assert cal.matmul_efficiency == pytest.approx(0.55, rel=1e-9)
    assert cal.activation_share == pytest.approx({"compiled": 0.8, "eager": 0.8}, rel=1e-9)
    assert cal.eager_logit_bytes == pytest.approx(100, rel=1e-6)
    assert cal.overhead_gib == 1.0 and cal.rows == 2
    assert cal.mfu == pytest.approx(tokens / t * s.flops_per_token("kaplan_train") / 989e12)
    model = perf.modelled("h200")
    assert model.tokens_per_s(s, tokens) == pytest.approx(tokens / t, rel=1e-9)
    assert model.tokens_per_s(s, tokens, compiled=False) == pytest.approx(tokens / eager_t,
                                                                         rel=1e-9)
    assert "bench_gpu.py" in model.source
    assert perf.calibration("h100") is None and "assumed" in perf.modelled("h100").source
    r = cli("sweep", "plan", str(repo / "sweeps" / "levine-small.toml"), "--gpu", "h200", "--json")
    p = json.loads(r.output[r.output.index("{"):])
    assert p["mfu"] == pytest.approx(cal.mfu) and "bench_gpu.py" in p["mfu_source"]
    assert "1 GiB overhead" in p["memory_convention"]
