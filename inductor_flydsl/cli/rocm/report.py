"""The tables and the Markdown report of ``inductor-flydsl validate-rocm``."""

from __future__ import annotations

from typing import Any

GROUPED_COLUMNS = ["layer", "G x T x N x K", "routing", "FlyDSL ms", "best config", "ATen ms",
                   "Triton ms", "speedup vs best"]


def grouped_table_rows(speed: dict[str, Any]) -> list[list[str]]:
    return [[r["layer"], "x".join(map(str, r["shape"])), r["routing"], _ms(r["flydsl_ms"]),
             _config_name(r["flydsl_config"]), _ms(r["aten_ms"]), _ms(r["triton_ms"]),
             "-" if r["speedup"] is None else f"{r['speedup']:.3f}"] for r in speed["rows"]]


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _config_name(config: dict[str, int] | None) -> str:
    if not config:
        return "-"
    return (f"{config['tile_m']}x{config['tile_n']}x{config['tile_k']} "
            f"w{config['waves_m']}x{config['waves_n']} s{config['stages']} g{config['group_m']}")


def speed_table_rows(speed: dict[str, Any]) -> list[list[str]]:
    return [["x".join(map(str, r["shape"])), _ms(r["flydsl_ms"]), _config_name(r["flydsl_config"]),
             _ms(r["aten_ms"]), _ms(r["triton_ms"]),
             "-" if r["speedup"] is None else f"{r['speedup']:.3f}"] for r in speed["rows"]]




MX_COLUMNS = ["layer", "format", "M x N x K", "FlyDSL ms", "best config", "ATen ms",
              "speedup vs ATen"]



def mx_table_rows(speed: dict[str, Any]) -> list[list[str]]:
    return [[r["layer"], r["format"], "x".join(map(str, r["shape"])), _ms(r.get("flydsl_ms")),
             _config_name(r.get("flydsl_config")), _ms(r.get("aten_ms")),
             "-" if r.get("speedup") is None else f"{r['speedup']:.2f}"]
            for r in speed["rows"]]


SPEED_COLUMNS = ["M x N x K", "FlyDSL ms", "best config", "ATen ms", "Triton ms",
                 "speedup vs best"]


def markdown_report(report: dict[str, Any]) -> str:
    pre = report["preflight"]
    lines = ["# FlyDSL GEMM validation", "", f"- device: {pre['message']}",
             f"- mode: {'quick' if report['quick'] else 'full'}", ""]
    if report.get("numerics") is not None:
        n = report["numerics"]
        lines += ["## Numerics (float64 torch reference)", "",
                  f"{n['cases']} launches, {n['failed']} failed; torch's own low-precision "
                  f"result out of tolerance in {n['torch_out_of_tolerance']} cases.", ""]
        for r in n["failures"][:50]:
            lines.append(f"- FAIL {r['dtype']} {r['layout']} {r['op']} "
                         f"{'x'.join(map(str, r['shape']))} {_config_name(r['config'])}: "
                         f"{r['error']}")
        lines.append("")
    if report.get("speed") is not None:
        s = report["speed"]
        lines += ["## Speed, dense BF16 NT", "", "| " + " | ".join(SPEED_COLUMNS) + " |",
                  "|" + "---|" * len(SPEED_COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in speed_table_rows(s)]
        geo = s["geomean_speedup"]
        lines += ["", f"Geomean speedup over the faster of ATen and Triton: "
                  f"{'-' if geo is None else f'{geo:.3f}'} ({s['wins']} wins, {s['ties']} ties "
                  f"within 2 %, {s['losses']} losses)", ""]
    if report.get("grouped") is not None:
        g = report["grouped"]
        lines += ["## Grouped GEMM (mixture of experts)", "",
                  f"Numerics: {g['cases']} launches, {g['failed']} failed.", ""]
        lines += [f"- FAIL {r['dtype']} {r['layout']} {r['scenario']} "
                  f"{_config_name(r['config'])}: {r['error']}" for r in g["failures"][:50]]
        if g.get("speed"):
            lines += ["", "| " + " | ".join(GROUPED_COLUMNS) + " |",
                      "|" + "---|" * len(GROUPED_COLUMNS)]
            lines += ["| " + " | ".join(row) + " |" for row in grouped_table_rows(g["speed"])]
            geo = g["speed"]["geomean_speedup"]
            lines += ["", f"Geomean speedup over the faster of ATen and Triton: "
                      f"{'-' if geo is None else f'{geo:.3f}'}", ""]
    if report.get("mx") is not None:
        x = report["mx"]
        lines += ["## MX block-scaled GEMM (MXFP8 / MXFP4)", ""]
        if x.get("skipped"):
            lines += [f"Skipped: {x['skipped']}", ""]
        else:
            lines += [f"Numerics: {x['cases']} launches, {x['failed']} failed.", ""]
            lines += [f"- FAIL {r['dtype']} {r['op']} {'x'.join(map(str, r['shape']))} "
                      f"{_config_name(r['config'])}: {r['error']}" for r in x["failures"][:50]]
            if x.get("speed"):
                lines += ["", "| " + " | ".join(MX_COLUMNS) + " |", "|" + "---|" * len(MX_COLUMNS)]
                lines += ["| " + " | ".join(row) + " |" for row in mx_table_rows(x["speed"])]
                geo = x["speed"]["geomean_speedup"]
                lines += ["", "Geomean speedup over ATen: " + ", ".join(
                    f"{fmt} {'-' if v is None else f'{v:.3f}'}" for fmt, v in geo.items()), ""]
    return "\n".join(lines)


