"""Real model ops on the measured roofline, as a library (the commands live in rooflab/commands/):

measure.py      an op executed through its kind's variants by the one driver, warm and cold
place.py        an op's time against the roofs: which one explains it (compute, memory, latency)
result.py       what a placement writes into its result: ceilings used, notes, tables, summaries
suite.py        `rooflab run --suite models`: the catalog's networks op by op
userops.py      OPS.json, the user's own ops     onnx_import.py  an ONNX graph's nodes as ops
export.py       the catalog's networks as ONNX   export_quant.py  the same, quantized by onnxruntime
llm/            decoder LLMs from config.json: ops, prediction, grid, report, export, configs/
runtimes/       onnxruntime and torch: their own per-node times placed, and the LLM checks
"""
