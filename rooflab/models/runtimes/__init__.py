"""Real runtimes on the measured roofline, one engine per pair of modules, each serving both
`rooflab place MODEL --runtime ENGINE` (a graph's per-node times placed) and the runtime check of
`rooflab llm CONFIG --runtime ENGINE` (an LLM timed beside rooflab's op-by-op prediction):

  placement.py     what both engines share: a profile's nodes mapped to ops and placed on the roofs
  ort_graph.py     onnxruntime: a graph's per-node times (`place MODEL.onnx --runtime onnxruntime`)
  ort_llm.py       onnxruntime: an exported LLM's prefill and decode against the prediction
  torch_module.py  torch: an nn.Module's per-operator times (`rooflab.place_torch`)
  torch_llm.py     torch: transformers' model of a config.json against the prediction
"""
