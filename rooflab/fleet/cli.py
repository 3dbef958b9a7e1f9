"""Command line of `rooflab fleet run | baseline | diagnose` (and `rooflab publish`); hooked into
rooflab/cli.py with one call, the work lives in runner.py, baseline.py and diagnose.py."""

from __future__ import annotations


def add_parsers(sub) -> None:
    f = sub.add_parser("fleet", help="many machines: run on every node of a Ray or Slurm cluster, baseline, diagnose")
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

    p = sub.add_parser("publish", help="static site (opens offline) from a results tree: machines, fleets, charts")
    p.add_argument("results", metavar="RESULTS_DIR")
    p.add_argument("-o", "--output", required=True, metavar="SITE")


def fleet(args) -> int:
    cmd = getattr(args, "fleet_command", None)
    if cmd == "run":
        from .runner import run_fleet

        return run_fleet(args)
    if cmd == "baseline":
        from .baseline import baseline_command

        return baseline_command(args)
    if cmd == "diagnose":
        from .diagnose import diagnose_command

        return diagnose_command(args)
    from ..errors import RooflabError

    raise RooflabError("fleet needs an action", "rooflab fleet run | baseline | diagnose (see rooflab fleet --help)")
