"""What every fix and lint need to know about a source, asked once and remembered per file: the floor codemods and
lint stand on side by side (neither imports the other). Beside the package's own names below, its modules hold the
parsed source and its context (source.py), the large-file window (window.py), the torch op tables (torch_ops.py,
optim_tables.py, dynamo_tables.py) and API spellings (torch_api.py), the is_compiling() gate (gating.py), loggers
(loggers.py), compile sites (entry.py), the optimizer locator (optimizers.py, custom_optimizers.py) and the dynamo
config lines and what dynamo reorders (dynamo_config.py).

- Value kinds (values.py): `Kind`, and `values(src)`, one memoised analysis per file: is this expression a
  tensor, a float, an int, a bool, None, or not known (`Values.kind`); likely a tensor in model code
  (`Values.maybe_tensor`); plain Python for sure (`Values.is_python`).
- Where a number must stay a Python number inside compiled code (uses.py: `python_use`, which answers a typed
  `PythonUse`: its `UseKind`, line and name, and its words in `.text`).
- What a call runs and which functions are compiled (calls.py: `callee`, the one def; `candidate_callees`, every
  def it may run, for an object of several possible classes; `compiled_functions`); what a module in a container
  runs (containers.py: `loop_element_callee`).
- Call binding (binding.py: `bind`): which argument each parameter receives, as Python binds them.
- Name helpers the fixes share (names.py: `reads`, `referents`, `binding_statement`, `class_named`, ...).
"""

from torchmend.analysis.binding import Binding, bind
from torchmend.analysis.calls import (
    Callee,
    callee,
    candidate_callees,
    compile_decorator,
    compile_site,
    compile_target,
    compiled_functions,
    functions_for,
    instance_class,
    instance_classes,
    is_compiled,
    module_forwards,
    self_attr_values,
)
from torchmend.analysis.names import (
    assigned_values,
    binding_statement,
    builtin_or_math,
    class_named,
    def_named,
    is_method,
    is_print,
    is_tensor_construction,
    is_torch,
    method_of,
    module_files,
    ordered_names,
    os_same,
    param_names,
    parameters,
    reads,
    referents,
    self_name,
)
from torchmend.analysis.uses import PythonUse, UseKind, python_use
from torchmend.analysis.values import NUMBERS, PYTHON_KINDS, Kind, Values, values

__all__ = [
    "Binding",
    "Callee",
    "Kind",
    "NUMBERS",
    "PYTHON_KINDS",
    "PythonUse",
    "UseKind",
    "Values",
    "assigned_values",
    "bind",
    "binding_statement",
    "builtin_or_math",
    "callee",
    "candidate_callees",
    "class_named",
    "compile_decorator",
    "compile_site",
    "compile_target",
    "compiled_functions",
    "def_named",
    "functions_for",
    "instance_class",
    "instance_classes",
    "is_compiled",
    "is_method",
    "is_print",
    "is_tensor_construction",
    "is_torch",
    "method_of",
    "module_forwards",
    "module_files",
    "ordered_names",
    "os_same",
    "param_names",
    "parameters",
    "python_use",
    "reads",
    "referents",
    "self_attr_values",
    "self_name",
    "values",
]
