"""vLLM offline serving with and without the plugin, on a ROCm GPU (MI350: gfx950).

For one small model (e.g. a 1B Llama; weights from a local directory: nothing is
downloaded), three runs, each in its own process with fresh vLLM and Inductor caches
(docs/vllm.md: a warm vLLM cache would skip Inductor, and so the plugin):

- ``off``:  the plugin off, GEMM backends ATEN,TRITON;
- ``cold``: the plugin on with an empty tuning DB, backends ATEN,TRITON,FLYDSL
  (Inductor benchmarks every GEMM, the plugin records);
- ``warm``: the plugin on with the DB the cold run wrote (served, nothing benchmarked).

Each run measures two workloads after one warm-up: decode-heavy (short prompts, long
outputs) and prefill-heavy (long prompts, a few output tokens): throughput (output and
total tokens/s, all prompts at once) and the latency of a single request (time to the
first token, time per output token after it). The table gives each figure per run and
the on/off ratios; then, per GEMM shape of the model, vLLM's own op against the winner
of its selection (on ROCm every linear layer calls ``vllm::rocm_unquantized_gemm``; with
the plugin on each static one is a selection with vLLM's op among its choices: the cold
run measured both), and the GEMMs FlyDSL won in the DB.

    inductor-flydsl vllm-serving --model /models/Llama-3.2-1B [--json out.json]

(``python -m inductor_flydsl vllm-serving`` alike; ``python scripts/vllm_serving.py`` in a
source checkout.)

``--allow-cpu`` runs it all on vLLM's CPU build (a check of the script itself, e.g. with
a tiny random Llama and ``--decode 16,32 --prefill 256,4 --gpu-memory-utilization 0.1``;
its figures say nothing about a GPU).

Exit codes: 0 measured; 2 bad input (an option, the model directory); 3 vLLM does not
import in this interpreter; 4 no ROCm GPU (checked before any model is loaded: on a CPU
machine the script stops here, after checking everything else); 5 a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..settings import ENV_DB, ENV_ENABLE

EXIT_BAD_INPUT, EXIT_NO_VLLM, EXIT_NO_GPU, EXIT_RUN_FAILED = 2, 3, 4, 5
RUNS = ("off", "cold", "warm")
WORKLOADS = ("decode", "prefill")  # token counts per prompt: --decode, --prefill
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


class Stop(Exception):
    """The script cannot go on: a message and its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0],
        epilog="Exit codes: 0 measured; 2 bad input; 3 vLLM does not import; 4 no ROCm GPU "
               "(stops before loading the model); 5 a run failed.")
    parser.add_argument("--model", required=True, type=Path,
                        help="local model directory (config.json and weights)")
    parser.add_argument("--num-prompts", type=int, default=64,
                        help="prompts per throughput measurement (default 64)")
    parser.add_argument("--latency-tokens", type=int, default=128,
                        help="output tokens of the single-request latency run (default 128)")
    parser.add_argument("--compile-sizes", default="1,2,4,8,16,32,64,128,256",
                        help="vLLM compile_sizes, comma-separated (default 1..256)")
    parser.add_argument("--runs", default=",".join(RUNS),
                        help=f"which runs, comma-separated, in order (default {','.join(RUNS)})")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the DB and each run's caches go (default: a temp dir)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--decode", default="128,512", metavar="IN,OUT",
                        help="decode-heavy prompt and output tokens (default 128,512)")
    parser.add_argument("--prefill", default="2048,8", metavar="IN,OUT",
                        help="prefill-heavy prompt and output tokens (default 2048,8)")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run without a ROCm GPU (vLLM's CPU build): only to check this "
                             "script end to end; its figures say nothing about a GPU")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--child", choices=RUNS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.num_prompts < 1 or args.latency_tokens < 2:
        parser.error("--num-prompts must be >= 1 and --latency-tokens >= 2")
    runs = [r for r in args.runs.split(",") if r]
    if not runs or any(r not in RUNS for r in runs):
        parser.error(f"--runs takes some of {', '.join(RUNS)}; got {args.runs!r}")
    if "warm" in runs and "cold" not in runs and args.work_dir is None:
        parser.error("--runs warm without cold needs --work-dir holding a cold run's DB")
    args.runs = runs
    args.workloads = {}
    for name in WORKLOADS:
        try:
            input_len, output_len = (int(v) for v in getattr(args, name).split(","))
        except ValueError:
            parser.error(f"--{name} takes IN,OUT token counts: {getattr(args, name)!r}")
        if input_len < 1 or output_len < 1:
            parser.error(f"--{name}: token counts must be >= 1")
        args.workloads[name] = (input_len, output_len)
    try:
        args.compile_sizes = sorted({int(s) for s in args.compile_sizes.split(",") if s})
    except ValueError:
        parser.error(f"--compile-sizes takes integers, comma-separated: {args.compile_sizes!r}")
    return args


def check_model(path: Path) -> dict[str, Any]:
    """The model directory's config.json (vocab size and context length are used), or
    Stop naming what is missing."""
    config_file = path / "config.json"
    if not path.is_dir():
        raise Stop(f"--model {path}: no such directory (give a local model directory: "
                   "nothing can be downloaded)", EXIT_BAD_INPUT)
    if not config_file.is_file():
        raise Stop(f"--model {path}: no config.json there", EXIT_BAD_INPUT)
    try:
        config = json.loads(config_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise Stop(f"--model {path}: config.json does not read as JSON ({exc})",
                   EXIT_BAD_INPUT) from None
    if not any(p.name.endswith(WEIGHT_SUFFIXES) for p in path.iterdir()):
        raise Stop(f"--model {path}: no weight files ({', '.join(WEIGHT_SUFFIXES)})",
                   EXIT_BAD_INPUT)
    if not isinstance(config.get("vocab_size"), int):
        raise Stop(f"--model {path}: config.json has no integer vocab_size", EXIT_BAD_INPUT)
    return config


def check_vllm() -> str:
    try:
        import vllm
    except Exception as exc:
        raise Stop(f"vLLM does not import in this interpreter ({sys.executable}): "
                   f"{type(exc).__name__}: {exc}; install vLLM for ROCm and the plugin "
                   "(pip install inductor-flydsl: pip leaves vLLM's torch alone) in one "
                   "environment",
                   EXIT_NO_VLLM) from None
    return str(getattr(vllm, "__version__", "?"))


def check_rocm_gpu() -> str:
    import torch

    if torch.version.hip is None:
        raise Stop(f"this needs a ROCm GPU (MI350: gfx950; gfx942 works too), and torch "
                   f"{torch.__version__} is not a ROCm build: stopped before loading the "
                   "model", EXIT_NO_GPU)
    if not torch.cuda.is_available():
        raise Stop(f"this needs a ROCm GPU: torch {torch.__version__} (HIP "
                   f"{torch.version.hip}) sees none: stopped before loading the model",
                   EXIT_NO_GPU)
    props = torch.cuda.get_device_properties(0)
    return f"{props.name} ({getattr(props, 'gcnArchName', '?')})"


# ---- one run, in its own process -----------------------------------------------------------
def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """One run (``--child off|cold|warm``): build the engine, measure each workload."""
    import random

    check_vllm()
    try:  # checked just above: the child runs where vLLM imports
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
    except ImportError as exc:
        raise Stop(f"vLLM's LLM API does not import: {exc}", EXIT_NO_VLLM) from None

    config = check_model(args.model)
    longest = max(i + o for i, o in args.workloads.values())
    started = time.perf_counter()
    llm = LLM(model=str(args.model), skip_tokenizer_init=True, seed=0,
              max_model_len=longest, gpu_memory_utilization=args.gpu_memory_utilization,
              compilation_config={"compile_sizes": args.compile_sizes,
                                  "inductor_compile_config": {"max_autotune": True}})
    startup_s = time.perf_counter() - started
    vocab = int(config["vocab_size"])
    rng = random.Random(0)

    def prompts(count: int, length: int) -> list[TokensPrompt]:
        return [TokensPrompt(prompt_token_ids=[rng.randrange(10, vocab) for _ in range(length)])
                for _ in range(count)]

    def timed(batch: list[TokensPrompt], max_tokens: int) -> tuple[float, int]:
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0.0)
        begin = time.perf_counter()
        outputs = llm.generate(batch, params, use_tqdm=False)
        return time.perf_counter() - begin, sum(len(o.outputs[0].token_ids) for o in outputs)

    results: dict[str, Any] = {"run": args.child, "startup_s": round(startup_s, 1)}
    for name, (input_len, output_len) in args.workloads.items():
        timed(prompts(min(args.num_prompts, 8), input_len), 4)  # warm-up
        batch = prompts(args.num_prompts, input_len)
        seconds, generated = timed(batch, output_len)
        single = prompts(1, input_len)
        first = min(timed(single, 1)[0] for _ in range(3))
        whole, tokens = timed(single, args.latency_tokens)
        results[name] = {
            "output_tok_s": generated / seconds,
            "total_tok_s": (generated + input_len * len(batch)) / seconds,
            "ttft_ms": first * 1e3,
            "tpot_ms": (whole - first) / max(tokens - 1, 1) * 1e3,
        }
    results["plugin"] = _plugin_stats()
    return results


def _plugin_stats() -> dict[str, Any] | None:
    try:
        import inductor_flydsl
    except ImportError:
        return None
    if inductor_flydsl.active_settings() is None:
        return None
    stats = inductor_flydsl.stats().as_dict()
    return {k: stats[k] for k in ("hits", "dynamic_hits", "misses", "benchmarked", "recorded",
                                  "epilogue_fusions", "errors")}


def child_env(run: str, work: Path, db: Path, cpu: bool = False) -> dict[str, str]:
    """A run's environment: its own vLLM and Inductor caches, the engine in this process
    (so the plugin's counters are the compiling process's), the plugin on or off. On CPU
    (``--allow-cpu``) AOTAutograd's cache is off: with it, vLLM's CPU compile path
    (``DYNAMO_TRACE_ONCE``) fails in torch 2.13 ("expected OutputCode")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_ENABLE)}
    caches = work / run
    shutil.rmtree(caches, ignore_errors=True)
    env.update({"VLLM_CACHE_ROOT": str(caches / "vllm"),
                "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    if cpu:
        env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    if run == "off":
        env.update({ENV_ENABLE: "0",
                    "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": "ATEN,TRITON"})
    else:
        env.update({ENV_ENABLE: "1", ENV_DB: str(db),
                    "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": "ATEN,TRITON,FLYDSL"})
    return env


def run_one(run: str, args: argparse.Namespace, work: Path, db: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "inductor_flydsl", "vllm-serving", "--child", run,
               "--model", str(args.model),
               "--num-prompts", str(args.num_prompts),
               "--latency-tokens", str(args.latency_tokens),
               "--compile-sizes", ",".join(map(str, args.compile_sizes)),
               "--gpu-memory-utilization", str(args.gpu_memory_utilization),
               "--decode", args.decode, "--prefill", args.prefill]
    print(f"== run {run} ...", flush=True)
    proc = subprocess.run(command, env=child_env(run, work, db, args.allow_cpu),
                          capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise Stop(f"run {run} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}",
               EXIT_RUN_FAILED)


# ---- the report ----------------------------------------------------------------------------
METRICS = (("output_tok_s", "output tok/s", True), ("total_tok_s", "total tok/s", True),
           ("ttft_ms", "TTFT ms", False), ("tpot_ms", "TPOT ms", False))


def table(results: dict[str, dict[str, Any]]) -> str:
    """Each workload's figures per run, and each plugin run against ``off`` (> 1: better:
    tokens/s on / off, latency off / on)."""
    runs = list(results)
    ratios = [r for r in runs if r != "off" and "off" in results]
    head = ["workload", "metric", *runs, *(f"{r}/off" for r in ratios)]
    rows = [head]
    for name in WORKLOADS:
        for key, label, higher in METRICS:
            values = [results[r][name][key] for r in runs]
            row = [name, label, *(f"{v:.1f}" for v in values)]
            base = results["off"][name][key] if ratios else None
            for r in ratios:
                value = results[r][name][key]
                ratio = value / base if higher else base / value
                row.append(f"{ratio:.3f}x")
            rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     for row in rows)


def flydsl_winners(db: Path) -> list[dict[str, Any]]:
    """The DB's winners that are FlyDSL kernels (``inductor-flydsl db list``)."""
    if not db.exists():
        return []
    proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "db", "list", "--db",
                           str(db), "--json", "--limit", "100000"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"note: db list failed: {proc.stderr[-500:]}", file=sys.stderr)
        return []
    return [row for row in json.loads(proc.stdout) if row.get("backend") == "flydsl"]


def vllm_op_rows(db: Path) -> list[dict[str, Any]]:
    """Per GEMM shape measured with vLLM's op among the choices: vLLM's time, the winner,
    and vLLM / winner (``inductor-flydsl report``'s table of them)."""
    if not db.exists():
        return []
    from ..db.open import open_db
    from ..report import build_report

    try:
        frame = build_report(open_db(db, writable=False), str(db)).vllm_ops
    except Exception as exc:  # the figures above stand without it
        print(f"note: reading vLLM's op times from {db} failed: {exc}", file=sys.stderr)
        return []
    return frame.to_dict("records")


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    if args.child:
        print("RESULT " + json.dumps(run_child(args)), flush=True)
        return 0
    try:
        config = check_model(args.model)
        print(f"model: {args.model} ({', '.join(config.get('architectures') or ['?'])}, "
              f"vocab {config['vocab_size']})")
        print(f"vLLM {check_vllm()} imports")
        if args.allow_cpu:
            print("no GPU asked for (--allow-cpu): these figures say nothing about a GPU")
        else:
            print(f"GPU: {check_rocm_gpu()}")
        work = args.work_dir or Path(tempfile.mkdtemp(prefix="vllm_serving_"))
        work.mkdir(parents=True, exist_ok=True)
        db = work / "tuning.db"
        if "cold" in args.runs:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        results = {run: run_one(run, args, work, db) for run in args.runs}
    except Stop as stop:
        print(f"vllm_serving: {stop}", file=sys.stderr)
        return stop.code
    print(table(results))
    for run, result in results.items():
        print(f"{run}: startup (load, compile, warm-up) {result['startup_s']} s; "
              f"plugin {result['plugin'] or 'off'}")
    shapes = vllm_op_rows(db)
    print(f"vLLM's op against the winner, per GEMM shape ({len(shapes)}):")
    for row in shapes:
        print(f"  {row['problem']}: vLLM {row['vllm_ms']:.4f} ms, winner "
              f"{row['winner_backend']} {row['winner']} {row['winner_ms']:.4f} ms, "
              f"vllm/winner {row['vllm_over_winner']:.3f}x")
    winners = flydsl_winners(db)
    print(f"GEMMs FlyDSL won ({len(winners)}, DB {db}):")
    for row in winners:
        print(f"  {row['summary']}: {row['winner']} {row['time_ms']:.4f} ms")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "vllm_ops": shapes,
                                         "flydsl_winners": winners}, indent=1))
    return 0
