"""Real runtimes on the measured roofline, one module per engine, each serving both
`rooflab place MODEL --runtime ENGINE` (the engine's own per-node times placed) and the runtime
check of `rooflab llm CONFIG --runtime ENGINE` (an LLM timed beside rooflab's op-by-op prediction):

  ort.py         onnxruntime: sessions, profiles and timed steps, for both uses
  ort_nodes.py   onnxruntime's optimized graph and profile mapped back to the model's nodes and ops
  pytorch.py     torch: an nn.Module's per-operator times (`rooflab.place_torch`) and transformers'
                 model of a config.json, for both uses
  placement.py   what `place --runtime` shares between engines: nodes placed on the roofs, outputs
  llm_check.py   what the LLM checks share: the runtime's prediction, call overhead, summary lines
"""
