"""What is placed on a roofline, as data: the op vocabulary (ops.py: kinds, shapes, FLOPs, bytes, the
conv shape) and the networks as op lists (catalog.py: ResNet-50, MobileNetV2, BERT, GPT-2). Below
both the kernel families (their model shapes come from here) and models/ (which measures and places
these ops)."""
