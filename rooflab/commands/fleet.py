"""`rooflab fleet run | baseline | diagnose`: many machines. `run` starts one `rooflab run` per node of
a Ray (or Slurm) cluster, each holding its node alone, one result file per node (rooflab/fleet/
runner.py); `baseline` takes the median per ceiling over the nodes of each SKU; `diagnose` holds
each node against its SKU's baseline and exits 1 when any node fails."""

from __future__ import annotations

from pathlib import Path

from ..errors import RooflabError

HELP = "many machines: run on every node of a Ray or Slurm cluster, baseline, diagnose"


def add_parser(sub) -> None:
    f = sub.add_parser("fleet", help=HELP)
    fs = f.add_subparsers(dest="fleet_command", metavar="ACTION")  # its parsers one-line errors too

    r = fs.add_parser("run", help="one `rooflab run` per node, each holding its node alone; one result file per node")
    r.add_argument("--engine", default="ray", choices=("ray", "slurm"), help="ray (default) or slurm")
    r.add_argument("--address", default=None, help="Ray: the cluster's address HOST:PORT (default: RAY_ADDRESS, auto)")
    r.add_argument("--nodes", default=None, metavar="all|N", help="how many nodes (default all alive nodes)")
    r.add_argument("--suite", default=None, help="suite every node runs (default probe: seconds per node)")
    r.add_argument("--device", default=None, help="cpu (default) or cuda")
    r.add_argument("--quick", action="store_true", help="the suite's --quick budgets")
    r.add_argument("--threads", type=int, default=None, help="threads per node (default: all its cores)")
    r.add_argument("--budget", type=float, default=None, metavar="SECONDS", help="time budget per measurement")
    r.add_argument(
        "--timeout", type=float, default=None, metavar="SEC", help="a node's run is killed past this (default 3600)"
    )
    r.add_argument("-o", "--output", default=None, metavar="DIR", help="fleet directory to write")
    r.add_argument("--resume", default=None, metavar="DIR", help="run only the nodes of DIR without a good result")
    r.add_argument("--dry-run", action="store_true", help="slurm: print the batch script, run nothing")
    r.add_argument("--partition", default=None, help="slurm: the partition (-p)")
    r.add_argument("--time-limit", default=None, metavar="MINUTES", help="slurm: the job's time limit (-t)")

    b = fs.add_parser("baseline", help="per-SKU baseline: median per ceiling over the nodes, with count and spread")
    b.add_argument("dirs", nargs="+", metavar="DIR")
    b.add_argument("--group-by", default="sku", help="sku (the only grouping)")
    b.add_argument("-o", "--output", required=True, metavar="FILE")

    d = fs.add_parser("diagnose", help="compare each node to its SKU's baseline; exit 1 when any node fails")
    d.add_argument("dir", metavar="DIR")
    d.add_argument("--baseline", required=True, metavar="FILE")
    d.add_argument("--rules", default=None, metavar="FILE", help="rules JSON (default: 5 %% either way, z < -3.5)")
    d.add_argument("--format", default="table", choices=("table", "markdown", "json"))
    d.add_argument("--all", action="store_true", help="list every node and ceiling, not only the flagged")


def main(args) -> int:
    action = {"run": _run, "baseline": _baseline, "diagnose": _diagnose}.get(args.fleet_command)
    if action is None:
        raise RooflabError(
            "fleet needs an action", "rooflab fleet run | baseline | diagnose (see rooflab fleet --help)"
        )
    return action(args)


def _run(args) -> int:
    from ..fleet.runner import run_fleet

    options = {k: getattr(args, k) for k in ("suite", "device", "quick", "threads", "budget", "timeout", "nodes")}
    slurm_options = {"partition": args.partition, "time_limit": args.time_limit, "dry_run": args.dry_run}
    return run_fleet(args.output, resume=args.resume, engine=args.engine, address=args.address, options=options,
                     slurm_options=slurm_options)  # fmt: skip


def _baseline(args) -> int:
    from ..fleet.baseline import build
    from ..fleet.store import node_results
    from ..results import atomic_write_json

    nodes = []
    for d in args.dirs:
        nodes += node_results(d)
    data = build(nodes, args.group_by, [str(d) for d in args.dirs])
    out = Path(args.output)
    atomic_write_json(out, data)
    for key, g in data["skus"].items():
        print(f"{key}: {len(g['nodes'])} node(s), {len(g['ceilings'])} ceilings ({g['suite']} on {g['device']})")
    print(out)
    return 0


def _diagnose(args) -> int:
    from ..fleet import baseline
    from ..fleet.diagnose import diagnose, load_rules, render, undecidable
    from ..fleet.store import node_results

    base = baseline.load(args.baseline)
    rules = load_rules(args.rules, base)
    rows = diagnose(node_results(args.dir), base, rules)
    print(render(rows, args.format, args.all, undecidable(rows, base)))
    return 1 if any(r["failed"] for r in rows) else 0
