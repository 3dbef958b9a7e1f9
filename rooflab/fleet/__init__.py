"""Many machines through an engine people already run (Ray first, Slurm second).

rooflab keeps its own part small: what runs on a node is the same `rooflab run` a user types
(node.py launches it), its result file is the same schema with a ``fleet`` block added (a node id
unique in the fleet, the SKU), and the fleet code only places the runs (ray.py, slurm.py),
collects the files (store.py) and compares them (baseline.py, diagnose.py, page.py).

  rooflab fleet run --engine ray --address HEAD:6379 -o fleet/     one run per alive node
  rooflab fleet baseline fleet/ --group-by sku -o baseline.json    median per ceiling per SKU
  rooflab fleet diagnose fleet/ --baseline baseline.json           flagged nodes; exit 1 if any

Napkin math for 1,000 nodes (the `probe` suite; measured figures on a 4-node cluster are in the
README's fleet section): a node's result is ~50 KB of JSON, so the caller holds ~50 MB of results
at most once each (written to disk as each arrives, then dropped), the object store sees one
~50 KB object per node, and the fleet directory holds 1,000 files plus the manifest.
"""
