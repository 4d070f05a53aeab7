"""The outputs half of a run's numerics, child side: `install_output_hooks` watches what every callable that
`torch.compile` returns gives back, and records it in the run's NumericsCapture (profiler/numerics.py), call by
call, under `callable_name`. The evidence of a run without a loss (sampling, inference)."""

from __future__ import annotations

from typing import Any

from torchmend.profiler.numerics import NumericsCapture


def callable_name(target: Any) -> str:
    """How a verdict names a compiled callable: a module's class, a function's qualified name."""
    owner = getattr(target, "__self__", None)
    if owner is not None and getattr(target, "__name__", "") in ("_call_impl", "__call__"):  # module.compile()
        return type(owner).__name__
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__


def install_output_hooks(capture: NumericsCapture) -> None:
    """Fingerprint what each callable that `torch.compile` returns gives back, call by call.

    `torch.compile` is replaced by a function that returns the same object, watched: a compiled module
    (OptimizedModule) gets a forward hook, which runs in its `__call__` after the compiled forward has
    returned; a compiled function is wrapped by `call_compiled`, which calls it and then records its result.
    Dynamo sees the same thing as before: the wrapper carries the compiled function's attributes
    (`_torchdynamo_orig_callable`, ...); recording is skipped while dynamo traces (a compiled callable
    called inside another compiled function), and runs under torch._dynamo.disable otherwise; the
    wrapper's and the hook's own frames are marked for dynamo to skip, as torch's are. The decorator
    form `torch.compile(mode=...)` calls `torch.compile` again with the function, so it is watched too,
    and so is `module.compile()`, which compiles the module's `_call_impl` through `torch.compile`.

    With `capture.outputs_of` (class names), only the calls of those modules are recorded: compiled, or, where
    the script compiles their submodules instead, called eagerly (a forward hook on each such module that exists
    at the first compile call). A patched run that compiles other callables than the original is compared on
    the calls both make: the model's own.
    """
    import functools

    import torch

    original = torch.compile
    record = torch._dynamo.disable(capture.record_output)
    is_compiling = torch.compiler.is_compiling
    hooked: dict[int, Any] = {}  # id(module) -> its hook's handle: the modules of capture.outputs_of, uncompiled
    scanned = False

    def called(module: Any, args: Any, result: Any) -> None:  # traced (not skipped) where dynamo inlines it: no-op
        if not is_compiling():
            record(type(module).__name__, result)

    def hook_models() -> None:
        """Hook the modules of the classes `outputs_of` names that exist at the first compile call: the model
        whose submodules the patched script compiles (compile placement) is built by then, and its calls are
        recorded as the original's compiled model's were, under its class's name."""
        import gc

        nonlocal scanned
        scanned = True
        for obj in gc.get_objects():
            if type(obj).__name__ in capture.outputs_of and isinstance(obj, torch.nn.Module):
                hooked.setdefault(id(obj), obj.register_forward_hook(called))

    def behind(compiled: Any) -> Any:
        """The module a compiled callable runs: an OptimizedModule's, or the owner of `module.compile()`'s method."""
        if isinstance(compiled, torch.nn.Module):
            return getattr(compiled, "_orig_mod", compiled)
        return getattr(getattr(compiled, "_torchdynamo_orig_callable", compiled), "__self__", None)

    def watch(compiled: Any, name: str) -> Any:
        if capture.outputs_of:
            if not scanned:
                hook_models()
            handle = hooked.pop(id(behind(compiled)), None)
            if handle is not None:  # compiled after all: recorded as a compiled callable, once
                handle.remove()
        if isinstance(compiled, torch.nn.Module):

            def hook(module: Any, args: Any, result: Any) -> None:
                if not is_compiling():
                    record(name, result)

            compiled.register_forward_hook(hook)
            return compiled
        if not callable(compiled):
            return compiled

        @functools.wraps(compiled)
        def call_compiled(*args: Any, **kwargs: Any) -> Any:
            result = compiled(*args, **kwargs)
            if not is_compiling():
                record(name, result)
            return result

        return call_compiled

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # the decorator form: the function comes back through torch.compile
            return original(**kwargs)
        return watch(original(model, **kwargs), callable_name(model))

    torch.compile = compile
    capture.watch = watch
    try:
        from torch._dynamo.eval_frame import skip_code

        nested = [c for c in watch.__code__.co_consts if isinstance(c, type(watch.__code__))]  # hook, call_compiled
        for code in [*nested, compile.__code__]:  # type: ignore[attr-defined]  # functools.wraps keeps __code__
            skip_code(code)
    except (ImportError, AttributeError):  # another torch: dynamo may compile the wrapper's frame
        pass
