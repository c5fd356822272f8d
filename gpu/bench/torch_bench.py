#!/usr/bin/env python3
"""torch eager forward+backward of PPO, GSPO, SAPO and DPO: the reference
timing for `rftpipe bench loss --device cuda` (issue 6).

Same shapes and default arguments as rftpipe's benchmark (PPO clip 0.2 /
dual clip 3 / token-mean; GSPO clip 3e-4/4e-4 / seq-mean-token-mean; SAPO tau
1 / 1.05 / token-mean; DPO beta 0.1), float32 tensors on the GPU, formulas
as Trinity-RFT's policy loss fns (spec/policy_losses.md). Each timing is the
median of --runs forward+backward passes (loss plus every metric, as
upstream computes them, then loss.backward()), timed with CUDA events after
--warmup passes; --compile also times the same step under torch.compile
(compiled once per fn and shape, during the warm-up). Also measures the
device-to-device copy bandwidth.

Usage (on the GPU machine):
  python3 gpu/bench/torch_bench.py [--compile] [--json out.jsonl | --json -]
`rftpipe bench loss --device cuda` runs this script (embedded) with
--compile --json - for its torch ratios; with --json - the table goes to
stderr and the JSON lines to stdout.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F


def masked_mean(x, m, dim=None):
    if dim is None:
        return (x * m).sum() / (m.sum() + 1e-8)
    return (x * m).sum(dim) / (m.sum(dim) + 1e-8)


def ppo(lp, old, adv, m, ref):
    d = torch.clamp(lp - old, -20.0, 20.0)
    r = torch.exp(d)
    l1 = -adv * r
    l2 = -adv * torch.clamp(r, 0.8, 1.2)
    c1 = torch.maximum(l1, l2)
    clipfrac = masked_mean(torch.gt(l2, l1).float(), m)
    l3 = -adv * 3.0
    c2 = torch.min(l3, c1)
    lower = masked_mean(torch.gt(c1, l3).float() * (adv < 0).float(), m)
    loss = masked_mean(torch.where(adv < 0, c2, c1), m)
    return loss, (clipfrac, lower, masked_mean(-d, m))


def gspo(lp, old, adv, m, ref):
    d = lp - old
    s = masked_mean(d, m, dim=-1)
    r = torch.exp(lp - lp.detach() + s.detach().unsqueeze(-1))
    l1 = -adv * r
    l2 = -adv * torch.clamp(r, 1 - 3e-4, 1 + 4e-4)
    loss = masked_mean(torch.maximum(l1, l2), m, dim=-1).mean()  # seq-mean-token-mean
    return loss, (masked_mean(torch.gt(l2, l1).float(), m), masked_mean(-d, m), (-s).mean())


def sapo(lp, old, adv, m, ref):
    d = lp - old
    r = torch.exp(d)
    tau = torch.where(adv > 0, torch.full_like(adv, 1.0), torch.full_like(adv, 1.05))
    gate = torch.sigmoid(tau * (r - 1)) * 4 / tau
    loss = masked_mean(-adv * gate.detach() * lp, m)
    return loss, (masked_mean(-d, m), masked_mean(gate, m), masked_mean(r, m), masked_mean((adv > 0).float(), m))


def dpo(lp, old, adv, m, ref):
    beta = 0.1
    c_pol, r_pol = (lp[0::2] * m[0::2]).sum(), (lp[1::2] * m[1::2]).sum()
    c_ref, r_ref = (ref[0::2] * m[0::2]).sum(), (ref[1::2] * m[1::2]).sum()
    cr, rr = c_pol - c_ref, r_pol - r_ref
    loss = -F.logsigmoid(beta * (cr - rr))
    return loss, (beta * cr, beta * rr, (cr > rr).float())


LOSSES = {"ppo": ppo, "gspo": gspo, "sapo": sapo, "dpo": dpo}


def inputs(rows, width, seed, dev):
    g = torch.Generator(device=dev).manual_seed(seed)
    lp = -torch.rand(rows, width, device=dev, generator=g) * 3
    old = lp + 0.1 * torch.randn(rows, width, device=dev, generator=g)
    ref = lp + 0.1 * torch.randn(rows, width, device=dev, generator=g)
    adv = torch.randn(rows, 1, device=dev, generator=g).expand(rows, width).contiguous()
    m = torch.ones(rows, width, device=dev)
    tail = torch.randint(0, width // 8 + 1, (rows,), device=dev, generator=g)
    m[torch.arange(width, device=dev).unsqueeze(0) >= (width - tail).unsqueeze(1)] = 0
    return lp, old, adv, m, ref


def time_ms(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth(nbytes=1 << 30):
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), 3, 20)
    return 2 * nbytes / ms / 1e6  # GB/s, bytes read + written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1024x4096,4096x8192")
    ap.add_argument("--fns", default="ppo,gspo,sapo,dpo")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help="also time the step under torch.compile")
    ap.add_argument("--json", help="also write one JSON object per line to this file (-: stdout, the table to stderr)")
    a = ap.parse_args()
    table = sys.stderr if a.json == "-" else sys.stdout
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    bw = copy_bandwidth()
    rows_out = []
    print(f"device: {name}; torch {torch.__version__}; device-to-device copy {bw:.0f} GB/s", file=table)
    print(f"{'fn':6} {'shape':>10} {'impl':>14} {'median_ms':>10} {'mtok/s':>10}", file=table)
    for shape in a.shapes.split(","):
        rows, width = (int(x) for x in shape.lower().split("x"))
        lp0, old, adv, m, ref = inputs(rows, width, 1, dev)
        for fn in a.fns.split(","):
            f = LOSSES[fn]

            impls = [("torch-eager", f)]
            if a.compile:
                impls.append(("torch-compile", torch.compile(f)))
            for impl, g in impls:

                def step():
                    lp = lp0.detach().requires_grad_(True)
                    loss, metrics = g(lp, old, adv, m, ref)
                    loss.backward()
                    return lp.grad, [x.detach() for x in metrics]

                ms = time_ms(step, a.warmup, a.runs)
                r = {"fn": fn, "shape": shape, "device": name, "impl": impl, "median_ms": ms,
                     "mtok_per_s": rows * width / ms / 1e3, "copy_gb_per_s": bw}
                rows_out.append(r)
                print(f"{fn:6} {shape:>10} {impl:>14} {ms:10.3f} {r['mtok_per_s']:10.0f}", file=table)
    if a.json == "-":
        for r in rows_out:
            print(json.dumps(r))
    elif a.json:
        with open(a.json, "w") as fh:
            for r in rows_out:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
