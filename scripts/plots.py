#!/usr/bin/env python3
"""Renders the benchmarks' data files (docs/guide/data/*.csv) as SVG plots (docs/guide/img/).

No dependencies beyond Python 3's standard library: the SVG is written by hand. Every data file
has the header `bench,driver,roles,lease_ms,renew_ms,metric,value` (one measured value a row;
examples/src/stats.rs writes it). A plot whose data is missing is skipped with a note.

    python3 scripts/plots.py [--data DIR] [--out DIR]
"""

import argparse
import csv
import math
import os
import random
import sys
from collections import defaultdict

LABELS = {"host_bench": "in-memory broker", "many_roles": "Kafka"}
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
FONT = 'font-family="sans-serif"'


def read_rows(data_dir):
    rows = []
    for name in sorted(os.listdir(data_dir)):
        if not name.endswith(".csv"):
            continue
        with open(os.path.join(data_dir, name), newline="") as f:
            for row in csv.DictReader(f):
                row["roles"] = int(row["roles"])
                row["value"] = float(row["value"])
                rows.append(row)
    return rows


def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quantile(sorted_values, q):
    # Nearest rank, halves rounded up, as the benchmarks compute it (examples/src/stats.rs).
    i = math.floor((len(sorted_values) - 1) * q + 0.5)
    return sorted_values[min(i, len(sorted_values) - 1)]


def middle(sorted_values):
    n = len(sorted_values)
    return (sorted_values[(n - 1) // 2] + sorted_values[n // 2]) / 2


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


class Axis:
    """Maps values to pixels, linear or log10."""

    def __init__(self, lo, hi, p0, p1, log):
        self.log, self.p0, self.p1 = log, p0, p1
        if log:
            lo = max(lo, 1e-3)
            self.lo = 10 ** math.floor(math.log10(lo))
            self.hi = 10 ** math.ceil(math.log10(max(hi, lo * 10)))
        else:
            self.lo, self.hi = min(0.0, lo), hi if hi > lo else lo + 1
            step = nice_step((self.hi - self.lo) / 5)
            self.hi = math.ceil(self.hi / step) * step

    def __call__(self, v):
        if self.log:
            v = max(v, self.lo)
            t = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        return self.p0 + t * (self.p1 - self.p0)

    def ticks(self):
        if self.log:
            e0, e1 = round(math.log10(self.lo)), round(math.log10(self.hi))
            return [10.0 ** e for e in range(e0, e1 + 1)]
        step = nice_step((self.hi - self.lo) / 5)
        n = int(round((self.hi - self.lo) / step))
        return [self.lo + i * step for i in range(n + 1)]


def nice_step(raw):
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


class Svg:
    def __init__(self, width, height, title, note):
        self.w, self.h = width, height
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{width / 2}" y="20" text-anchor="middle" {FONT} font-size="15" '
            f'font-weight="bold">{esc(title)}</text>',
        ]
        if note:
            self.parts.append(
                f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle" {FONT} '
                f'font-size="11" fill="#555">{esc(note)}</text>'
            )

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, anchor="middle", size=12, colour="black", rotate=None):
        transform = f' transform="rotate({rotate} {x} {y})"' if rotate is not None else ""
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} font-size="{size}" '
            f'fill="{colour}"{transform}>{esc(s)}</text>'
        )

    def line(self, x0, y0, x1, y1, colour="black", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(
            f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{colour}" '
            f'stroke-width="{width}"{d}/>'
        )

    def save(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.parts + ["</svg>"]) + "\n")


def y_axis(svg, axis, x, label, top, bottom, right):
    for t in axis.ticks():
        y = axis(t)
        svg.line(x, y, right, y, colour="#e5e5e5")
        svg.text(x - 6, y + 4, fmt(t), anchor="end", size=11)
    svg.line(x, top, x, bottom)
    svg.text(16, (top + bottom) / 2, label, rotate=-90)


def strip_plot(path, title, groups, unit, note, log=True, targets=()):
    """Distributions side by side: every sample as a dot, the median as a bar, p90 as a tick."""
    groups = [(name, sorted(v)) for name, v in groups if v]
    if not groups:
        return False
    width, height = max(170 * len(groups) + 120, 660), 420
    left, right, top, bottom = 70, width - 20, 45, height - 85
    allv = [v for _, vs in groups for v in vs] + [t for _, t in targets]
    axis = Axis(min(allv), max(allv), bottom, top, log)
    svg = Svg(width, height, title, note)
    y_axis(svg, axis, left, unit, top, bottom, right)
    slot = (right - left) / len(groups)
    rng = random.Random(1)
    for i, (name, vs) in enumerate(groups):
        cx = left + slot * (i + 0.5)
        colour = COLOURS[i % len(COLOURS)]
        for v in vs:
            x = cx + (rng.random() - 0.5) * slot * 0.45
            svg.add(
                f'<circle cx="{x:.1f}" cy="{axis(v):.1f}" r="3" fill="{colour}" '
                f'fill-opacity="0.55"/>'
            )
        med, p90 = quantile(vs, 0.5), quantile(vs, 0.9)
        svg.line(cx - slot * 0.32, axis(med), cx + slot * 0.32, axis(med), colour="black", width=2.5)
        svg.line(cx - slot * 0.18, axis(p90), cx + slot * 0.18, axis(p90), colour="black", width=1)
        svg.text(cx, bottom + 18, name, size=12)
        svg.text(cx, bottom + 34, f"median {fmt(med)}, p90 {fmt(p90)} (n={len(vs)})", size=11,
                 colour="#333")
    for label, t in targets:
        svg.line(left, axis(t), right, axis(t), colour="#888", dash="5,4")
        svg.text(right - 4, axis(t) - 4, label, anchor="end", size=10, colour="#666")
    svg.text((left + right) / 2, bottom + 52, "thick bar: median; thin bar: p90", size=10,
             colour="#555")
    svg.save(path)
    return True


def line_plot(path, title, panels, xlabel, note):
    """Panels side by side; each: (ylabel, {series name: [(x, y), ...]}, ylog)."""
    panels = [p for p in panels if any(p[1].values())]
    if not panels:
        return False
    pw, height = 400, 400
    width = pw * len(panels) + 20
    svg = Svg(width, height, title, note)
    for k, (ylabel, series, ylog) in enumerate(panels):
        x0 = k * pw
        left, right, top, bottom = x0 + 75, x0 + pw - 15, 45, height - 80
        xs = [x for pts in series.values() for x, _ in pts]
        ys = [y for pts in series.values() for _, y in pts]
        xa = Axis(min(xs), max(xs), left, right, True)
        ya = Axis(min(ys), max(ys), bottom, top, ylog)
        for t in ya.ticks():
            svg.line(left, ya(t), right, ya(t), colour="#e5e5e5")
            svg.text(left - 6, ya(t) + 4, fmt(t), anchor="end", size=11)
        for t in xa.ticks():
            svg.line(xa(t), bottom, xa(t), bottom + 4)
            svg.text(xa(t), bottom + 17, fmt(t), size=11)
        svg.line(left, top, left, bottom)
        svg.line(left, bottom, right, bottom)
        svg.text(x0 + 18, (top + bottom) / 2, ylabel, rotate=-90)
        svg.text((left + right) / 2, bottom + 34, xlabel)
        for i, (name, pts) in enumerate(sorted(series.items())):
            colour = COLOURS[i % len(COLOURS)]
            pts = sorted(pts)
            # One line through the median of each x; every run as a dot.
            by_x = defaultdict(list)
            for x, y in pts:
                by_x[x].append(y)
            med = [(x, middle(sorted(v))) for x, v in sorted(by_x.items())]
            d = " ".join(f"{'M' if j == 0 else 'L'}{xa(x):.1f},{ya(y):.1f}" for j, (x, y) in enumerate(med))
            svg.add(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for x, y in pts:
                svg.add(f'<circle cx="{xa(x):.1f}" cy="{ya(y):.1f}" r="3.5" fill="{colour}"/>')
            svg.text(left + 10, top + 14 + 16 * i, "● " + name, anchor="start", size=11,
                     colour=colour)
    svg.save(path)
    return True


def values(rows, bench, metric, driver=None):
    return [r["value"] for r in rows if r["bench"] == bench and r["metric"] == metric
            and (driver is None or r["driver"] == driver)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(root, "docs/guide/data"))
    ap.add_argument("--out", default=os.path.join(root, "docs/guide/img"))
    args = ap.parse_args()
    rows = read_rows(args.data)
    os.makedirs(args.out, exist_ok=True)
    made, skipped = [], []

    def out(name):
        return os.path.join(args.out, name)

    def done(ok, name):
        (made if ok else skipped).append(name)

    # Failover and hand-over on Kafka, beside one coordinator round trip measured in the run.
    fb = [r for r in rows if r["bench"] == "failover_bench"]
    cond = ""
    if fb:
        cond = (f"Kafka 4.1, one broker on the same machine; lease {fb[0]['lease_ms']} ms, "
                f"renew {fb[0]['renew_ms']} ms; member processes (failover_bench)")
    done(strip_plot(
        out("failover.svg"),
        "Failover and hand-over on Kafka, beside one coordinator round trip",
        [("failover (SIGKILL)", values(rows, "failover_bench", "failover_overhead_ms")),
         ("hand-over (resign)", values(rows, "failover_bench", "handover_ms")),
         ("describe_leadership", values(rows, "failover_bench", "describe_ms"))],
        "milliseconds (log scale)", cond, log=True), "failover.svg")

    # A standby host's hand-over with and without the client's tail, alternated in one run.
    mh = [r for r in rows if r["bench"] == "many_roles_handover"]
    done(strip_plot(
        out("handover-tail.svg"),
        "Hand-over to a standby Host, tail reads on and off",
        [("tail reads on", values(rows, "many_roles_handover", "handover_ms", "host_tail_on")),
         ("tail reads off", values(rows, "many_roles_handover", "handover_ms", "host_tail_off"))],
        "resign start to the standby's election, ms (log scale)",
        f"Kafka 4.1, one broker; lease {mh[0]['lease_ms']} ms, renew {mh[0]['renew_ms']} ms; "
        f"alternating resigns (many_roles --handover)" if mh else "", log=True), "handover-tail.svg")

    # Many roles in one process: election time and renewal lag against N.
    def series(bench, metric):
        out = defaultdict(list)
        for r in rows:
            if r["bench"] == bench and r["metric"] == metric:
                out[f"{LABELS.get(bench, bench)}, {r['driver']}"].append((r["roles"], r["value"]))
        return out

    elected = {**series("host_bench", "elected_s"), **series("many_roles", "elected_s")}
    lag = {}
    for bench in ("host_bench", "many_roles"):
        for q in ("p99", "max"):
            for name, pts in series(bench, f"lag_{q}_ms").items():
                lag[f"{name} {q}"] = [(x, max(y, 0.5)) for x, y in pts]
    notes = []
    for bench, what in (("host_bench", "in-memory broker"), ("many_roles", "Kafka, one broker")):
        runs = [r for r in rows if r["bench"] == bench]
        if runs:
            notes.append(f"{bench}: {what}, lease {int(runs[0]['lease_ms']) // 1000} s, renew "
                         f"{int(runs[0]['renew_ms']) // 1000} s")
    note = "; ".join(notes) + ("; one Host, each dot one run" if notes else "")
    done(line_plot(
        out("many-roles.svg"), "One process, N roles: election time and renewal lag",
        [("all roles elected after, s", elected, True),
         ("renewal lag, ms", lag, True)],
        "roles (N)", note), "many-roles.svg")

    # A burst: the roles of a dead host, each elected how long after its lease deadline.
    late = values(rows, "host_bench_burst", "late_after_deadline_ms")
    burst = [r for r in rows if r["bench"] == "host_bench_burst"]
    done(strip_plot(
        out("burst.svg"), "A burst of failovers: election after the dead host's deadline",
        [(f"{burst[0]['roles'] // 2} roles moved" if burst else "", late)],
        "ms after the lease deadline", f"host_bench --burst: in-memory broker, {burst[0]['roles']} "
        f"roles on two hosts, one cut off; target: deadline + 250 ms" if burst else "",
        log=False, targets=[("deadline + 250 ms", 250.0)] if late and max(late) > 125 else []),
        "burst.svg")

    for name in made:
        print(f"plots: wrote {os.path.relpath(out(name), root)}")
    for name in skipped:
        print(f"plots: {name}: no data for it in {os.path.relpath(args.data, root)}, skipped",
              file=sys.stderr)


if __name__ == "__main__":
    main()
