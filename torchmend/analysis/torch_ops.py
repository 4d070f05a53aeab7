"""Tables of torch functions and methods: what they return, what they take, what is safe where.

Shared by the fixes; the names are those of `torch.*`, `torch.nn.functional.*` and Tensor methods (last part only).
"""

from __future__ import annotations

import re

import libcst as cst

# --- torch.where: what is safe to compute on the path not taken, what is plain Python ------------------

# Calls whose result is finite for finite inputs and that cannot raise or change state: computing them on
# the path not taken is harmless. Names of torch.* / torch.nn.functional.* functions and of Tensor methods.
WHERE_HARMLESS = frozenset(
    """
    abs absolute neg negative positive relu relu6 leaky_relu gelu silu sigmoid tanh hardtanh hardsigmoid hardswish
    elu selu celu softplus mish logsigmoid softsign tanhshrink hardshrink softshrink threshold
    clamp clamp_min clamp_max clip minimum maximum fmin fmax min max amin amax mean sum cumsum add sub subtract
    mul multiply where lerp square sign sgn round floor ceil trunc frac masked_fill zeros_like ones_like full_like
    empty_like detach clone contiguous float double half bfloat16 to type_as view view_as reshape reshape_as
    flatten unflatten unsqueeze squeeze transpose permute t mT expand expand_as repeat broadcast_to flip roll
    softmax log_softmax normalize matmul mm bmm linear cat stack chunk split narrow select index_select gather
    tril triu diagonal sin cos erf logical_and logical_or logical_not logical_xor eq ne gt lt ge le isnan isinf
    isfinite any all nan_to_num
""".split()
)

# Calls that return a boolean tensor: fine as a torch.where condition as they are.
BOOLEAN_RESULT = frozenset(
    """
    any all isnan isinf isfinite isposinf isneginf isreal isclose signbit logical_and logical_or logical_not
    logical_xor eq ne gt lt ge le greater less greater_equal less_equal not_equal bool
""".split()
)

# Calls known to give inf/nan (and so nan gradients through torch.where) or to raise on some inputs.
INF_NAN_OR_RAISE = frozenset(
    """
    log log2 log10 log1p sqrt rsqrt reciprocal exp exp2 expm1 pow float_power div divide true_divide floor_divide
    fmod remainder acos asin atanh acosh arccos arcsin arctanh arccosh logit erfinv lgamma digamma polygamma tan
    std var norm cosine_similarity
""".split()
)

RANDOM = frozenset(
    """
    rand randn randint rand_like randn_like randint_like randperm bernoulli multinomial normal dropout
    dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
""".split()
)

TORCH_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.Tensor")

# Values that are plain Python, never tensors: tests on them are no business of torch.where.
PYTHON_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "training", "requires_grad", "is_cuda", "is_leaf"})

PYTHON_METHODS = frozenset(
    {
        "size",
        "dim",
        "numel",
        "nelement",
        "is_floating_point",
        "is_contiguous",
        "get_device",
        "element_size",
        "startswith",
        "endswith",
        "get",
        "keys",
        "items",
        "values",
    }
)

PYTHON_BUILTINS = frozenset(
    {"len", "isinstance", "issubclass", "hasattr", "callable", "getattr", "type", "id", "all", "any", "int", "str"}
)

HARMLESS_BUILTINS = frozenset({"abs", "min", "max", "round", "len"})

# --- what a Python number inside compiled code may not become ------------------------------------------

# Calls whose arguments are sizes, dims or counts: a tensor there is a data-dependent graph break.
FACTORIES = {
    "zeros",
    "ones",
    "empty",
    "rand",
    "randn",
    "randint",
    "arange",
    "range",
    "linspace",
    "logspace",
    "eye",
    "randperm",
    "full",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
}

FILL_VALUE_POSITION = {"full": 1, "new_full": 1}  # full(size, fill_value): the fill value may be a tensor

SIZE_TAKING = {
    "view",
    "reshape",
    "expand",
    "repeat",
    "narrow",
    "split",
    "chunk",
    "unflatten",
    "topk",
    "kthvalue",
    "roll",
    "unsqueeze",
    "squeeze",
    "flatten",
    "transpose",
    "permute",
    "select",
    "movedim",
    "sum",
    "mean",
    "prod",
    "std",
    "var",
    "softmax",
    "log_softmax",
    "cumsum",
    "cumprod",
    "argmax",
    "argmin",
    "flip",
    "tril",
    "triu",
    "diagonal",
    "index_select",
    "gather",
    "scatter",
    "cat",
    "stack",
    "concat",
    "concatenate",
    "interpolate",
    "pad",
    "dropout",
    "one_hot",
    "norm",
    "repeat_interleave",
    "tile",
    "unfold",
    "multinomial",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
}

SIZE_KEYWORDS = {
    "size",
    "shape",
    "dim",
    "dims",
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "groups",
    "num_classes",
    "k",
    "diagonal",
    "chunks",
    "split_size",
    "split_size_or_sections",
    "sections",
    "steps",
    "start",
    "end",
    "step",
    "scale_factor",
    "p",
    "output_size",
    "repeats",
    "num_samples",
    "decimals",
}

# Tensor methods that give Python numbers or sizes, not tensors.
NUMBER_METHODS = {
    "size",
    "dim",
    "numel",
    "nelement",
    "item",
    "tolist",
    "stride",
    "element_size",
    "get_device",
    "is_contiguous",
    "is_floating_point",
    "ndimension",
    "__len__",
}

# Tensor methods and attributes that give a Python int or bool (`x.dim()`, `x.ndim`, `x.requires_grad`).
INT_METHODS = frozenset({"dim", "numel", "nelement", "ndimension", "element_size", "get_device"})
BOOL_METHODS = frozenset({"is_contiguous", "is_floating_point"})
INT_ATTRS = frozenset({"ndim"})
BOOL_ATTRS = frozenset({"training", "requires_grad", "is_cuda", "is_leaf"})

NOT_TENSOR_ATTRS = {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout"}

TENSOR_CONSTRUCTORS = {
    "torch.tensor",
    "torch.as_tensor",
    "torch.scalar_tensor",
    "torch.full",
    "torch.full_like",
    "torch.Tensor",
    "torch.zeros",
    "torch.ones",
    "torch.zeros_like",
    "torch.ones_like",
}

# Tensor methods whose result is on the receiver's device (`x.float()`): the receiver gives the device.
SAME_DEVICE_METHODS = {
    "float",
    "double",
    "half",
    "bfloat16",
    "detach",
    "contiguous",
    "clone",
    "view",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "permute",
    "t",
    "abs",
    "log_softmax",
    "softmax",
}

# Methods Python ints and floats lack and tensors have: a value they are called on (or that they return) is
# not a Python number. `max`/`min` with a dim return a namedtuple: not a number either.
TENSOR_METHODS = frozenset(
    """
    abs absolute acos add addcdiv addcmul amax amin any all argmax argmin asin atan bfloat16 bmm ceil clamp
    clamp_max clamp_min clip clone contiguous cos cosh cpu cuda cumprod cumsum detach diag div double exp
    expand expand_as expm1 flatten flip float floor fmod frac half log log10 log1p log2 logsumexp masked_fill
    matmul max maximum mean min minimum mm mul nan_to_num neg norm permute pow prod reciprocal relu remainder
    repeat reshape round rsqrt sigmoid sign sin sinh softmax log_softmax sqrt square squeeze std sub sum t tanh
    to transpose trunc type_as unsqueeze var view view_as where new_zeros new_ones new_full new_empty
""".split()
)

# Reading these on a name shows it holds a tensor (Python numbers have none of them).
TENSOR_EVIDENCE = TENSOR_METHODS | {
    "item",
    "tolist",
    "size",
    "dim",
    "numel",
    "shape",
    "device",
    "dtype",
    "ndim",
    "requires_grad",
    "grad",
    "data",
    "T",
}

TENSOR_ATTRS = frozenset({"T", "mT", "data", "grad", "weight", "bias"})

# Tensor methods whose operand may be a 0-dim tensor as well as a number.
OPERAND_METHODS = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "clamp",
        "clamp_min",
        "clamp_max",
        "maximum",
        "minimum",
        "fmod",
        "remainder",
        "add_",
        "sub_",
        "mul_",
        "div_",
        "pow_",
        "clamp_",
        "clamp_min_",
        "clamp_max_",
        "lerp",
        "lerp_",
    }
)

# torch.* callables that return Python values, not tensors.
TORCH_NON_TENSOR = re.compile(
    r"^torch\.((cuda|backends|distributed|compiler|_dynamo|jit|fx)\.|(is_|get_|set_)"
    r"|(numel|result_type|promote_types|can_cast|typename|manual_seed|initial_seed|seed"
    r"|compile|device|dtype|Size|finfo|iinfo)$)"
)

MODULE_CLASSES = {
    "torch.nn.Module",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.LightningModule",
}

# augmented operator -> (in-place tensor method, binary operator for the out-of-place form)
AUGMENTED_IN_PLACE: dict[type, tuple[str, type]] = {
    cst.AddAssign: ("add_", cst.Add),
    cst.SubtractAssign: ("sub_", cst.Subtract),
    cst.MultiplyAssign: ("mul_", cst.Multiply),
    cst.DivideAssign: ("div_", cst.Divide),
    cst.FloorDivideAssign: ("floor_divide_", cst.FloorDivide),
    cst.ModuloAssign: ("remainder_", cst.Modulo),
    cst.PowerAssign: ("pow_", cst.Power),
    cst.BitAndAssign: ("bitwise_and_", cst.BitAnd),
    cst.BitOrAssign: ("bitwise_or_", cst.BitOr),
    cst.BitXorAssign: ("bitwise_xor_", cst.BitXor),
    cst.LeftShiftAssign: ("bitwise_left_shift_", cst.LeftShift),
    cst.RightShiftAssign: ("bitwise_right_shift_", cst.RightShift),
}

# Calls whose arguments must be Python ints (sizes, dims, counts): a tensor there is a data-dependent break.
INT_ARGUMENT_CALLS = {
    "view",
    "reshape",
    "expand",
    "repeat",
    "repeat_interleave",
    "narrow",
    "split",
    "chunk",
    "unflatten",
    "permute",
    "transpose",
    "flatten",
    "select",
    "roll",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    "unfold",
    "tile",
    "movedim",
    "squeeze",
    "unsqueeze",
    "size",
    "topk",
    "kthvalue",
    "index_select",
    "gather",
    "scatter",
    "sum",
    "mean",
    "prod",
    "max",
    "min",
    "argmax",
    "argmin",
    "softmax",
    "log_softmax",
    "cumsum",
    "cumprod",
    "std",
    "var",
    "all",
    "any",
    "logsumexp",
    "diagonal",
    "tril",
    "triu",
    "zeros",
    "ones",
    "empty",
    "full",
    "arange",
    "linspace",
    "logspace",
    "randn",
    "rand",
    "randint",
    "randperm",
    "eye",
    "pad",
    "interpolate",
    "one_hot",
}

INT_KEYWORDS = {
    "dim",
    "dims",
    "size",
    "shape",
    "k",
    "diagonal",
    "num_classes",
    "padding",
    "pad",
    "stride",
    "kernel_size",
    "groups",
    "chunks",
    "sections",
    "split_size_or_sections",
    "steps",
    "dtype",
    "device",
    "start_dim",
    "end_dim",
    "shifts",
}

LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}

# Calls that need a Python number (or turn a tensor into one, with a host sync).
NEEDS_NUMBER = {
    "builtins.float",
    "builtins.int",
    "builtins.bool",
    "builtins.round",
    "builtins.range",
    "builtins.max",
    "builtins.min",
}
