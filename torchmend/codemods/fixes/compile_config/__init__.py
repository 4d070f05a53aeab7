"""Fixes that set a `torch._dynamo.config` switch right before the user's compile call, one codemod per module:
data_dependent_op.py (TM111) and for_backend.py (TM106) with the capture switches of capture.py (where the value
goes: flow.py), nested.py (`nested_graph_breaks`, a last resort). The lines themselves: codemods/dynamo_config.py."""
