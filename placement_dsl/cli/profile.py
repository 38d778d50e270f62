"""``placement-dsl profile``: measured module times of a PyTorch model, as the CSV ``import --costs`` reads."""
from __future__ import annotations

import argparse
from typing import Any

from ..cluster import ACCELERATOR
from ..files import check_writable
from .arguments import common, number
from .common import EPILOG, EXIT_OK
from .workloads import emit


def cmd_profile(args: argparse.Namespace) -> int:
    """``profile``: build the model on the device, time its modules, write the CSV, print a table."""
    from .. import profile  # the profiler and the simulator, loaded by this command only

    out = check_writable(args.out)
    module, margs, kwargs = profile.build(args.model, batch=args.batch, seq=args.seq, device=args.device,
                                          seed=args.seed)
    rows = profile.profile_module(module, margs, kwargs, depth=args.depth, device=args.device, repeat=args.repeat,
                                  warmup=args.warmup, threads=args.threads)
    note = (f"placement-dsl profile {args.model} --device {args.device}{f' --batch {args.batch}' if args.batch else ''}"
            f"{f' --seq {args.seq}' if args.seq else ''}: fastest of {args.repeat} runs, {args.threads} thread(s); "
            "B and W are each their own backward pass, so B + W >= backward_ms")
    profile.write_profile(rows, out, args.kind, note)
    payload = {"out": str(out), "device": args.device, "kind": args.kind, "modules": [
        {"module": r.module, "forward_ms": r.forward_ms, "backward_ms": r.backward_ms,
         "input_grad_ms": r.input_grad_ms, "weight_grad_ms": r.weight_grad_ms, "calls": r.calls} for r in rows]}
    lines = [f"wrote {out}: {len(rows)} modules timed on {args.device} (kind {args.kind!r})",
             f"{'module':<24} {'forward':>9} {'backward':>9} {'B':>9} {'W':>9}  ms"]
    lines += [f"{r.module:<24} {r.forward_ms:>9.4f} {r.backward_ms:>9.4f} {r.input_grad_ms:>9.4f} "
              f"{r.weight_grad_ms:>9.4f}" for r in rows]
    emit(args, payload, "\n".join(lines))
    return EXIT_OK


def add_profile_parser(sub: Any) -> None:
    """Register ``profile`` on the subparsers ``sub``."""
    pr = sub.add_parser("profile", help="time a PyTorch model's modules (forward, backward, B, W) for import --costs",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_argument("model", help="MODULE:FACTORY or path/to/file.py:FACTORY: a function returning (module, args), "
                                  "called on --device with the options it takes among batch and seq")
    pr.add_argument("--out", required=True, metavar="COSTS.csv", help="CSV to write (op,kind,ms and the backward "
                                                                      "columns; read by 'import --costs')")
    pr.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to run the model (default: cpu)")
    pr.add_argument("--kind", default=ACCELERATOR,
                    help="device kind the times are for in the workload (default: accelerator, the kind pipeline "
                         "stages run on; on a CPU pipeline the ranks play the accelerators)")
    pr.add_argument("--batch", type=number(int, 1, "--batch"),
                    help="batch size: the micro-batch (default: the factory's own, as import builds it)")
    pr.add_argument("--seq", type=number(int, 1, "--seq"), help="sequence length, for factories that take seq")
    pr.add_argument("--depth", type=number(int, 1, "--depth"), metavar="D",
                    help="time the modules at most D dotted parts deep that call no other such module (default: the "
                         "innermost modules called); match the workload's --boundaries module:D")
    pr.add_argument("--repeat", type=number(int, 1, "--repeat", high=10_000), default=10, metavar="N",
                    help="timed runs per module call; the fastest is kept (default: 10)")
    pr.add_argument("--warmup", type=number(int, 0, "--warmup", high=10_000), default=2, metavar="N",
                    help="untimed runs before them (default: 2)")
    pr.add_argument("--threads", type=number(int, 1, "--threads", high=4096), default=1, metavar="N",
                    help="torch intra-op threads (default: 1, one per pipeline rank)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the model's weights and example inputs (default: 0)")
    common(pr, "print the measured times as a JSON object")
    pr.set_defaults(func=cmd_profile)
