"""Run a Python program with every `torch.compile` call set to one ablation rung.

`traceview ablate` starts each rung as

    python [interpreter options] .../traceview/workflow/ablate/bootstrap.py TARGET ARGS...
    (or: python -m traceview.workflow.ablate.bootstrap TARGET ARGS...)

where TARGET is `script.py`, `-m module` or `-c code`. The rung comes from the environment
variable TRACEVIEW_ABLATE (JSON, see `rung_env` in traceview/workflow/ablate/__init__.py):

    {"backend": "aot_eager" | null, "mode": "max-autotune" | null, "set_mode": bool,
     "dynamic": true | false | null, "set_dynamic": bool, "disable": bool,
     "record": "/path/calls.json"}

`backend` null keeps the program's own backend (the `as-written` rung); `disable` makes
torch.compile return the function unchanged (the `no-compile` rung). The program itself is
not edited: when it imports torch, `torch.compile` and `torch._dynamo.optimize` are replaced
by wrappers that rewrite their arguments and record what the program asked for (into
`record`), then the program runs with `runpy` under its own `sys.argv`, as `python script.py`
would run it. torch is not imported before the program imports it, so environment variables
the program sets before `import torch` still take effect. `nn.Module.compile` calls
`torch.compile` and is covered by it.

Only the standard library here (and torch, once the program imports it): this file runs in
the user's interpreter, which need not have traceview's dependencies.
"""

from __future__ import annotations

import os
import sys

# Run as a file, this directory is sys.path[0]: drop it before importing anything else, so that
# traceview's own module names (trace.py, ...) never shadow the standard library's or the
# program's. `main` puts the program's directory there instead.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import importlib.abc
import importlib.machinery
import json
import runpy
import types
from typing import Any

ENV = "TRACEVIEW_ABLATE"
INDUCTOR_NAMES = (None, "inductor")


def _backend_name(backend: Any) -> str | None:
    if backend is None or isinstance(backend, str):
        return backend
    name = getattr(backend, "compiler_name", None)  # torch's own wrappers
    if isinstance(name, str):
        return name
    return getattr(backend, "__qualname__", None) or getattr(backend, "__name__", None) or type(backend).__name__


class _Rewriter:
    """Rewrites torch.compile / torch._dynamo.optimize arguments for the rung; records calls."""

    def __init__(self, rung: dict[str, Any]) -> None:
        self.rung = rung
        self.calls: list[dict[str, Any]] = []
        self.inside_compile = 0

    def record(self, api: str, asked: dict[str, Any], applied: dict[str, Any]) -> None:
        self.calls.append({"api": api, "asked": asked, "applied": applied})
        path = self.rung.get("record")
        if not path:
            return
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"pid": os.getpid(), "calls": self.calls[:200]}, f, indent=1, default=repr)
            os.replace(tmp, path)
        except OSError:
            pass

    def compile_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The torch.compile keyword arguments this rung runs with."""
        import torch

        rung = self.rung
        asked_backend = _backend_name(kwargs.get("backend"))
        out = dict(kwargs)
        if rung.get("disable"):
            out["disable"] = True
            return out
        backend = rung.get("backend")
        if backend is not None:
            out["backend"] = backend
            own_inductor = asked_backend in INDUCTOR_NAMES
            options = out.get("options") or {}
            if backend != "inductor" or not own_inductor:
                # mode and options are Inductor's (or the program's own backend's): dropped,
                # except the guard filter, which torch.compile takes from the options
                out.pop("mode", None)
                keep = {k: v for k, v in options.items() if k == "guard_filter_fn"}
                out["options"] = keep or None
                options = keep
            if backend == "inductor" and rung.get("set_mode"):
                mode = rung.get("mode") or "default"
                if options:  # torch.compile takes mode or options, not both: merge them
                    dynamic = out.get("dynamic")
                    out["options"] = {**options, **torch._inductor.list_mode_options(mode, dynamic)}
                    out.pop("mode", None)
                else:
                    out["mode"] = mode
        if rung.get("set_dynamic"):
            out["dynamic"] = rung.get("dynamic")
        return out


def _asked(kwargs: dict[str, Any]) -> dict[str, Any]:
    options = kwargs.get("options")
    return {
        "backend": _backend_name(kwargs.get("backend")),
        "mode": kwargs.get("mode"),
        "dynamic": kwargs.get("dynamic"),
        "fullgraph": bool(kwargs.get("fullgraph", False)),
        "options": sorted(options) if isinstance(options, dict) else None,
        "disable": bool(kwargs.get("disable", False)),
    }


def _patch_compile(torch: Any, rw: _Rewriter) -> None:
    original = torch.compile

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(...) used as a decorator factory
            return lambda m: compile(m, **kwargs)
        new = rw.compile_kwargs(kwargs)
        rw.record("torch.compile", _asked(kwargs), _asked(new))
        rw.inside_compile += 1
        try:
            return original(model, **new)
        finally:
            rw.inside_compile -= 1

    compile.__doc__ = original.__doc__
    compile.__wrapped__ = original  # type: ignore[attr-defined]
    torch.compile = compile


def _patch_optimize(dynamo: Any, rw: _Rewriter) -> None:
    original = dynamo.optimize

    def optimize(*args: Any, **kwargs: Any) -> Any:
        if rw.inside_compile:  # torch.compile calls it with arguments already rewritten
            return original(*args, **kwargs)
        if args:
            kwargs = {"backend": args[0], **kwargs}
            args = args[1:]
        asked = {
            "backend": _backend_name(kwargs.get("backend", "inductor")),
            "mode": None,
            "dynamic": kwargs.get("dynamic"),
            "fullgraph": bool(kwargs.get("nopython", False)),
            "disable": bool(kwargs.get("disable", False)),
        }
        rung = rw.rung
        if rung.get("disable"):
            kwargs["disable"] = True
        elif rung.get("backend") is not None:
            import torch

            backend = rung["backend"]
            if backend == "inductor" and rung.get("set_mode"):
                dynamic = rung.get("dynamic") if rung.get("set_dynamic") else kwargs.get("dynamic")
                backend = torch._TorchCompileInductorWrapper(rung.get("mode") or "default", None, dynamic)
            kwargs["backend"] = backend
        if rung.get("set_dynamic"):
            kwargs["dynamic"] = rung.get("dynamic")
        applied = {
            "backend": _backend_name(kwargs.get("backend", "inductor")),
            "mode": rung.get("mode") if rung.get("set_mode") and not rung.get("disable") else None,
            "dynamic": kwargs.get("dynamic"),
            "fullgraph": bool(kwargs.get("nopython", False)),
            "disable": bool(kwargs.get("disable", False)),
        }
        rw.record("torch._dynamo.optimize", asked, applied)
        return original(*args, **kwargs)

    optimize.__doc__ = original.__doc__
    dynamo.optimize = optimize


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `hook(module)` once a module named in `hooks` has been imported."""

    def __init__(self, hooks: dict[str, Any]) -> None:
        self.hooks = hooks

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.hooks:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        hook = self.hooks.pop(name)
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: Any) -> None:
            original_exec(module)
            hook(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install(rung: dict[str, Any]) -> None:
    """Patch torch.compile / torch._dynamo.optimize for `rung`, now or when torch is imported."""
    rw = _Rewriter(rung)

    def on_dynamo(dynamo: Any) -> None:
        _patch_optimize(dynamo, rw)

    def on_torch(torch: Any) -> None:
        _patch_compile(torch, rw)
        import torch._dynamo

    if "torch" in sys.modules:
        _patch_compile(sys.modules["torch"], rw)
        import torch._dynamo

        _patch_optimize(torch._dynamo, rw)
        return
    sys.meta_path.insert(0, _AfterImport({"torch": on_torch, "torch._dynamo": on_dynamo}))


USAGE = "usage: bootstrap.py (script.py | -m module | -c code) [args...]"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit(USAGE)
    install(json.loads(os.environ.get(ENV) or "{}"))
    if args[0] == "-m" and len(args) > 1:
        sys.argv = [args[1], *args[2:]]  # runpy sets argv[0] to the module's file
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c" and len(args) > 1:
        sys.argv = ["-c", *args[2:]]
        sys.path.insert(0, "")
        main_module = types.ModuleType("__main__")
        sys.modules["__main__"] = main_module
        exec(compile(args[1], "<string>", "exec"), main_module.__dict__)
    elif not args[0].startswith("-"):
        script = args[0]
        sys.argv = [script, *args[1:]]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(os.path.abspath(script), run_name="__main__")  # as python script.py: __file__ is absolute
    else:
        raise SystemExit(USAGE)


if __name__ == "__main__":
    main()
